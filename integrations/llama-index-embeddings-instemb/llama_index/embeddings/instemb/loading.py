"""Which encoder an InstEmbEmbedding wraps: loaded here, given loaded, or a server's; its settings.

One source per embedding (a model folder or the default, a loaded encoder, or ``base_url``);
settings are checked before any model loads; the settings recorded are the ones in use; and a
fingerprint recorded earlier (to_dict, pickling) must be the loaded encoder's.
"""

from __future__ import annotations

from typing import Any

from instemb_rag.choices import PoolingMode, Precision
from instemb_rag.errors import InstEmbError

ENCODER_SETTINGS = ("pooling", "lookahead_length", "max_length", "precision")


def load_encoder(
    model_path: str | None,
    encoder: Any,
    base_url: str | None,
    api_key: str | None,
    timeout: float,
    device: str,
    **asked: Any,
) -> tuple[Any, dict[str, Any]]:
    """(the encoder, the settings fields): RemoteEncoder for base_url (no settings), the given
    encoder (its own settings), or one loaded from model_path (None: the default model)."""
    _check_sources(model_path, encoder, base_url, asked)
    if base_url is not None:
        from instemb_rag.client.remote import RemoteEncoder

        return RemoteEncoder(base_url, api_key=api_key, timeout=timeout), asked
    if encoder is not None:
        return encoder, _settings_of_given_encoder(encoder, asked)
    from instemb_rag import InstEmbEncoder

    chosen = {name: value for name, value in asked.items() if value is not None}
    loaded = InstEmbEncoder.from_pretrained(model_path, device=device, **chosen)
    return loaded, loaded.settings.get_config_dict()


def _check_sources(model_path: str | None, encoder: Any, base_url: str | None, settings: dict[str, Any]) -> None:
    """One model source, known settings (checked before any model loads), and encoder settings
    only where this process loads the model."""
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
    """The fields of an embedding over a loaded encoder: its own settings (which must match any asked for)."""
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
    if expected is None or expected == actual:
        return
    source = f"the server at {base_url}" if base_url else (model_path or "the default model")
    raise InstEmbError(
        f"This embedding was saved for encoder {expected}, but {source} is encoder {actual}: "
        "its documents would be compared with queries from another model. Load the embedding with "
        "the model_path (and settings) it was made with, or re-index with this model."
    )
