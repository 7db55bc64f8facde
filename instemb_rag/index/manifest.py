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
    # Two-tower encoders (encoder/modules/document_tower.py): what embedded the stored vectors is the
    # document tower alone, so a new query tower trained into its space searches the index as it
    # is. None: a symmetric encoder (or an index written before two towers), whose document
    # vectors are decided by ``encoder_fingerprint``.
    document_fingerprint: str | None = None
    document_tower: str | None = None  # its name or folder, for messages

    @property
    def stored_vectors_fingerprint(self) -> str:
        """The fingerprint that decided the stored document vectors."""
        return self.document_fingerprint or self.encoder_fingerprint

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


def check_encoder(manifest: Manifest, encoder, index_dir: Path, model_label: str) -> None:
    """Refuse to mix document vectors of two encoders in one index, or to search it with queries
    aimed at another space.

    The index's document vectors must come from the encoder's document side
    (``encoder.document_fingerprint``): the same symmetric encoder, or the same document tower.
    In two-tower mode the query tower may differ (any query tower trained into that document
    space searches the index); an index built by another document tower, or by a symmetric
    encoder, must be rebuilt.
    """
    same_vectors = manifest.stored_vectors_fingerprint == encoder.document_fingerprint
    if manifest.dimension == encoder.dimension and same_vectors:
        return
    built_by = f"encoder {manifest.encoder_reference}"
    if manifest.document_tower:
        built_by += f" (documents by its document tower {manifest.document_tower})"
    in_use = f"the encoder in use ({model_label}"
    if getattr(encoder, "document_tower", None) is not None:
        in_use += f", two-tower: documents by {encoder.document_tower.reference}"
    rebuild = f"instemb-rag index PATH --index-dir {index_dir} --rebuild"
    if model_label != "default":
        rebuild += f" --model {model_label}"
    raise IndexFolderError(
        f"The index in {index_dir} was built with {built_by}, whose document vectors have fingerprint "
        f"{manifest.stored_vectors_fingerprint} ({manifest.dimension}-d), but {in_use}) embeds documents "
        f"with fingerprint {encoder.document_fingerprint} ({encoder.dimension}-d): its queries would be "
        f"compared with vectors of another space. Pass the same --model the index was built with, or "
        f"rebuild the index for this model: `{rebuild}`."
    )
