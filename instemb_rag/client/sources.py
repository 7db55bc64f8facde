"""Which encoder an application embeds with, opened once: a model folder (or the default) loaded
here, an encoder already loaded, or a running `instemb-rag serve` (a RemoteEncoder, no torch).

    encoder, settings = open_encoder("runs/my-model", device="cpu", max_length=256)
    encoder, settings = open_encoder(base_url="http://localhost:8000", api_key=key, fingerprint=saved)

One source per call; the settings (pooling, lookahead_length, max_length, precision) are checked
before any model loads, only where this process loads the model, and come back as the encoder
runs them; a fingerprint recorded earlier (a saved embedding) must be the opened encoder's.
"""

from __future__ import annotations

from typing import Any

from ..choices import PoolingMode, Precision
from ..errors import InstEmbError

__all__ = ["ENCODER_SETTINGS", "SERVER_FIELDS", "open_encoder", "open_encoder_of_fields", "recorded_model_advice"]

ENCODER_SETTINGS = ("pooling", "lookahead_length", "max_length", "precision")
SERVER_FIELDS = ("base_url", "api_key", "timeout")


def open_encoder_of_fields(model_path: Any, encoder: Any, device: str, fields: dict[str, Any]) -> tuple:
    """``open_encoder`` for a framework's embedding class built from keyword fields: the encoder
    settings, ``fingerprint`` and query-time knobs are taken out of ``fields`` (the knobs checked
    before any model loads, then against the model), the server's read. (the encoder, its settings,
    the knobs as the model takes them, whether it is a server's)."""
    from ..knobs import KNOBS
    from ..queries import QueryKnobs

    knobs = QueryKnobs.checked({name: fields.pop(name, None) for name in KNOBS})
    asked = {name: fields.pop(name, None) for name in (*ENCODER_SETTINGS, "fingerprint")}
    server = {name: fields[name] for name in SERVER_FIELDS if name in fields}
    model_path = None if model_path is None else str(model_path)
    loaded, settings = open_encoder(model_path, encoder, device=device, **server, **asked)
    remote = server.get("base_url") is not None
    try:
        return loaded, settings, knobs.require(loaded), remote
    except BaseException:
        if remote:
            loaded.close()
        raise


def recorded_model_advice(constructor: str, from_encoder: str) -> str:
    """What to pass, in a framework's terms, when an index folder's recorded model cannot be reopened
    (index/recorded.py): ``constructor`` called with the model folder and each encoder setting, or
    ``from_encoder`` called with the encoder that indexed it."""
    settings = ", ".join(f"{name}=..." for name in ENCODER_SETTINGS)
    return (
        f"Pass the model it was built with: {constructor}(model_path, {settings}) with the settings of the "
        f"encoder that indexed it, or {from_encoder}(that encoder)."
    )


def open_encoder(
    model_path: str | None = None,
    encoder: Any = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    device: str = "auto",
    fingerprint: str | None = None,
    **asked: Any,
) -> tuple[Any, dict[str, Any]]:
    """(the encoder, its settings): a RemoteEncoder for ``base_url`` (settings as asked: none), the
    given ``encoder`` (its own settings, which must be any asked for), or the model at ``model_path``
    (None: the default) loaded with the settings asked (None: the model's own)."""
    asked = {name: asked.get(name) for name in ENCODER_SETTINGS}
    _check_sources(model_path, encoder, base_url, asked)
    if base_url is not None:
        from .remote import RemoteEncoder

        opened, settings = RemoteEncoder(base_url, api_key=api_key, timeout=timeout), asked
    elif encoder is not None:
        opened, settings = encoder, _settings_of_given_encoder(encoder, asked)
    else:
        from ..encoder import load_model

        chosen = {name: value for name, value in asked.items() if value is not None}
        opened = load_model(model_path, device, **chosen)
        settings = opened.settings.get_config_dict()
    try:
        check_fingerprint(fingerprint, opened.fingerprint, model_path, base_url)
    except BaseException:
        if base_url is not None:
            opened.close()
        raise
    return opened, settings


def _check_sources(model_path: str | None, encoder: Any, base_url: str | None, settings: dict[str, Any]) -> None:
    if base_url is not None and (model_path is not None or encoder is not None):
        raise InstEmbError(
            "Give either base_url (embed through a running `instemb-rag serve`) or model_path/encoder "
            "(load the model here), not both."
        )
    for name, choices in (("pooling", PoolingMode), ("precision", Precision)):
        known = [choice.value for choice in choices]
        if settings[name] is not None and settings[name] not in known:
            raise InstEmbError(f"{name}={settings[name]!r} is not one of: {', '.join(known)}.")
    given = [name for name, value in settings.items() if value is not None]
    if base_url is not None and given:
        raise InstEmbError(
            f"{', '.join(given)} cannot be set with base_url: the server's model is loaded by "
            "`instemb-rag serve` (start it with the settings you want)."
        )


def _settings_of_given_encoder(encoder: Any, asked: dict[str, Any]) -> dict[str, Any]:
    actual = encoder.settings.get_config_dict()
    differing = [name for name in ENCODER_SETTINGS if asked[name] is not None and asked[name] != actual[name]]
    if differing:
        raise InstEmbError(
            f"The encoder runs with {', '.join(f'{n}={actual[n]!r}' for n in differing)}, not "
            f"{', '.join(f'{n}={asked[n]!r}' for n in differing)}: pass encoder.with_options(...) "
            "(or leave these settings out)."
        )
    return actual


def check_fingerprint(expected: str | None, actual: str, model_path: str | None, base_url: str | None) -> None:
    """A fingerprint recorded earlier must be the opened encoder's: documents embedded by one model
    are not compared with queries of another."""
    if expected is None or expected == actual:
        return
    source = f"the server at {base_url}" if base_url else (model_path or "the default model")
    raise InstEmbError(
        f"This embedding was saved for encoder {expected}, but {source} is encoder {actual}: "
        "its documents would be compared with queries from another model. Load the embedding with "
        "the model_path (and settings) it was made with, or re-index with this model."
    )
