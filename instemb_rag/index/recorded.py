"""The encoder an index folder records, for code that reopens the folder alone (the LlamaIndex
retriever's ``from_instemb_index`` without an embed model).

The manifest records the model (a path, "default", or the Python API's ``IndexOptions.model_label``)
and the fingerprint of the encoder that embedded the documents, not the settings it ran with. So
the recorded model is loaded with its own settings, and must be that encoder (the whole
fingerprint, queries included); otherwise the error says why and what to pass instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InstEmbError, ModelNotFoundError
from .manifest import read_manifest

__all__ = ["recorded_encoder", "reloadable_reference"]

ADVICE = "Pass the encoder it was built with (the same model and settings: pooling, lookahead_length, max_length, precision)."


def recorded_encoder(index_dir: str | Path, device: str = "auto", advice: str = ADVICE) -> Any:
    """The encoder ``index_dir`` records, loaded as ``Index.open`` would load it, or an error that
    says why it cannot be (``advice``: what the caller's user should pass instead). None: no index
    there (``Index.open`` says so)."""
    from ..encoder import load_model  # every model reference is resolved there ("default" too)

    index_dir = Path(index_dir)
    manifest = read_manifest(index_dir)
    if manifest is None:
        return None
    reference = manifest.encoder_reference
    try:
        encoder = load_model(reference, device=device)
    except ModelNotFoundError as error:
        raise InstEmbError(
            f"The index in {index_dir} records its model as {reference!r}, which cannot be loaded here "
            f"({error}). An index built through the Python API records IndexOptions.model_label there, "
            f"not a model folder. {advice}"
        ) from None
    if encoder.fingerprint != manifest.encoder_fingerprint:
        settings = ", ".join(f"{name}={value!r}" for name, value in encoder.settings.get_config_dict().items())
        raise InstEmbError(
            f"The index in {index_dir} was embedded by encoder {manifest.encoder_fingerprint}, but its recorded "
            f"model {reference!r}, loaded with its own settings ({settings}), is encoder {encoder.fingerprint}. "
            "The folder records the model, not the settings it ran with: an index built through the Python API "
            f"with other settings (or other weights under the same label) cannot be reopened from the folder alone. "
            f"{advice}"
        )
    return encoder


def reloadable_reference(index: Any) -> str | None:
    """Where an open index's encoder loads from again (None: the default model), e.g. for a
    serialised embedding model. The manifest records the --model path, resolved, or "default"; a
    label that is no folder here gives None (and loading the default then fails its fingerprint)."""
    reference = index.manifest.encoder_model()
    if reference is None or not Path(reference).exists():
        return None
    return reference
