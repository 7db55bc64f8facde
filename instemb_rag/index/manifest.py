"""The index manifest: which encoder and store produced an index folder.

Written atomically (temp file + os.replace) so a kill never leaves half a manifest. Opening
an index checks it first, so a query with another model or a newer format fails with a
message that says what to do instead of returning meaningless neighbours.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..atomic import write_text_atomically
from .errors import IndexFolderError

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "Manifest",
    "check_encoder",
    "manifest_path",
    "model_label",
    "read_manifest",
    "write_manifest",
]

FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    encoder_fingerprint: str
    encoder_reference: str  # the --model path (or "default"); for messages only
    template: dict
    dimension: int
    store: str  # "faiss" | "qdrant"
    store_options: dict = {}
    chunk_size: int
    chunk_overlap: int
    document_instruction: str | None = None

    def encoder_model(self, override: str | None = None) -> str | None:
        """The encoder this index names, as ``InstEmbEncoder.from_pretrained`` takes it: ``override``
        (a --model the caller gave) when given, else the recorded --model path, or None for the
        shipped default (recorded as "default"). The one rule for the index's encoder: search,
        ``query``, ``serve`` and the LlamaIndex retriever all ask here."""
        if override:
            return override
        return None if self.encoder_reference == "default" else self.encoder_reference


def manifest_path(index_dir: Path) -> Path:
    return Path(index_dir) / MANIFEST_FILE


def write_manifest(index_dir: Path, manifest: Manifest) -> None:
    write_text_atomically(manifest_path(index_dir), json.dumps(manifest.model_dump(), indent=2) + "\n")


def read_manifest(index_dir: Path) -> Manifest | None:
    """The manifest of index_dir, None when the folder holds no index yet."""
    path = manifest_path(index_dir)
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise IndexFolderError(
            f"{path} is not readable JSON ({error}). Re-create the index with "
            f"`instemb-rag index PATH --index-dir {index_dir} --rebuild`."
        ) from error
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise IndexFolderError(
            f"{path} has index format version {version}, but this instemb-rag reads up to version "
            f"{FORMAT_VERSION}. Upgrade instemb-rag (pip install -U instemb-rag) or rebuild the index "
            "with this version (--rebuild)."
        )
    try:
        return Manifest.model_validate(raw)
    except ValidationError as error:
        raise IndexFolderError(
            f"{path} is not a valid instemb-rag manifest: {error.errors()[0]['loc']} "
            f"{error.errors()[0]['msg']}. Rebuild the index with --rebuild."
        ) from error


def model_label(model: str | None) -> str:
    """What a manifest records as the model of an index (``encoder_reference``): the --model
    path, resolved, or "default" for the shipped default."""
    return str(Path(model).resolve()) if model else "default"


def check_encoder(manifest: Manifest, fingerprint: str, dimension: int, index_dir: Path, model_label: str) -> None:
    """Refuse to mix embeddings from two encoders in one index."""
    if manifest.dimension != dimension or manifest.encoder_fingerprint != fingerprint:
        raise IndexFolderError(
            f"The index in {index_dir} was built with encoder {manifest.encoder_reference} "
            f"(fingerprint {manifest.encoder_fingerprint}, {manifest.dimension}-d), but the encoder "
            f"in use ({model_label}) has fingerprint {fingerprint} ({dimension}-d). Pass the same "
            f"--model the index was built with, or re-index with --rebuild to use this model."
        )
