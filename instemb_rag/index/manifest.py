"""The index manifest: which encoder and store produced an index folder.

Written atomically (temp file + os.replace) so a kill never leaves half a manifest. Opening
an index checks it first, so a query with another model or a newer format fails with a
message that says what to do instead of returning meaningless neighbours.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..atomic import write_text_atomically
from .errors import EncoderMismatchError, IndexFolderError

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "Manifest",
    "check_encoder",
    "describe_side",
    "manifest_path",
    "model_label",
    "read_manifest",
    "rebuild_command",
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
    # What embedded the stored vectors: the encoder's document side (encoder/sides.py), written for
    # every encoder, so an encoder whose query side differs from its documents' (two towers, two
    # spaces) searches its own index, and a new query side trained into the same document space
    # searches it as it is. None: an index written before document sides (issue 50), whose vectors
    # are decided by ``encoder_fingerprint``.
    document_fingerprint: str | None = None
    document_side: str | None = None  # its description (``document_side.description``), for messages

    @property
    def stored_vectors_fingerprint(self) -> str:
        """The fingerprint that decided the stored document vectors."""
        return self.document_fingerprint or self.encoder_fingerprint

    @property
    def documents_by(self) -> str | None:
        """What embedded the stored vectors, in words (None: not recorded)."""
        return self.document_side

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
        return Manifest.model_validate(_from_older_manifest(raw))
    except ValidationError as error:
        raise IndexFolderError(
            f"{path} is not a valid instemb-rag manifest: {error.errors()[0]['loc']} "
            f"{error.errors()[0]['msg']}. Rebuild the index with --rebuild."
        ) from error


# Two-tower indexes written before document sides (issue 50) named what embedded their documents
# under this key; it is read here only, as the document side's description (messages only).
_OLDER_DOCUMENTS_BY_KEY = "document_tower"


def _from_older_manifest(raw):
    """An older manifest's fields under today's names; anything else passes as it is."""
    if not isinstance(raw, dict) or _OLDER_DOCUMENTS_BY_KEY not in raw:
        return raw
    raw = dict(raw)
    older = raw.pop(_OLDER_DOCUMENTS_BY_KEY)
    if raw.get("document_side") is None:
        raw["document_side"] = older
    return raw


def model_label(model: str | None) -> str:
    """What a manifest records as the model of an index (``encoder_reference``): the --model
    path, resolved, or "default" for the shipped default."""
    return str(Path(model).resolve()) if model else "default"


def check_encoder(manifest: Manifest, encoder, index_dir: Path, model_label: str) -> None:
    """Refuse to mix document vectors of two encoders in one index, or to search it with queries
    aimed at another space.

    The index's document vectors must come from the encoder's document side
    (``encoder.document_fingerprint``, which is ``encoder.document_side.fingerprint`` for an encoder
    in this process and the server's for a remote one): the same symmetric encoder, the same
    document sentence encoder, or the same two document spaces. The query side may differ (any query side
    trained into that document space searches the index); an index whose documents another side
    embedded (another model, or an older version of the same one) must be rebuilt, and the message
    gives the command.
    """
    same_vectors = manifest.stored_vectors_fingerprint == encoder.document_fingerprint
    if manifest.dimension == encoder.dimension and same_vectors:
        return
    built_by = f"encoder {manifest.encoder_reference}"
    if manifest.documents_by:
        built_by += f" (documents embedded by {manifest.documents_by})"
    in_use = f"the encoder in use ({model_label}"
    side = getattr(encoder, "document_side", None)  # None: a remote encoder (its server's side)
    if side is not None:
        in_use += f"; documents embedded by {describe_side(side)}"
    advice = (
        f"Pass the same --model the index was built with, or rebuild the index for this model: "
        f"`{rebuild_command(index_dir, model_label)}`"
    )
    if manifest.encoder_reference == model_label:
        advice = (
            f"The index and the encoder in use both name {model_label}: unless another encoder was passed under "
            "that name, the index was built by an older instemb-rag (or an older copy of that model), whose "
            f"document side differs from today's. {advice}"
        )
    recorded, described = manifest.documents_by, describe_side(side) if side is not None else None
    same_shape = manifest.dimension == encoder.dimension and (not recorded or not described or recorded == described)
    raise EncoderMismatchError(
        f"The index in {index_dir} was built with {built_by}, whose document vectors have fingerprint "
        f"{manifest.stored_vectors_fingerprint} ({manifest.dimension}-d), but {in_use}) embeds documents "
        f"with fingerprint {encoder.document_fingerprint} ({encoder.dimension}-d): its queries would be "
        f"compared with vectors of another space. {advice}{_root_note(index_dir)}",
        same_shape,
    )


def describe_side(side) -> str:
    """What embeds documents, in words, with the kind of model it makes (``manifest.document_side``)."""
    if len(side.parts) > 1:
        return f"two spaces side by side ({side.description})"
    if not side.reads_instruction:
        return f"a sentence encoder, two-tower ({side.description})"
    return f"{side.description}, symmetric"


def rebuild_command(index_dir: Path, model_label: str) -> str:
    """The command that re-embeds an index folder with the model ``model_label`` names."""
    command = f"instemb-rag index PATH --index-dir {shlex.quote(str(index_dir))} --rebuild"
    if model_label != "default":
        command += f" --model {shlex.quote(model_label)}"
    return command


def _root_note(index_dir: Path) -> str:
    """Where the index's documents came from (the catalog's recorded folder), for the PATH of the
    rebuild command; "." when the catalog cannot say."""
    import sqlite3

    from .catalog import CATALOG_FILE

    path = Path(index_dir) / CATALOG_FILE
    if not path.is_file():
        return "."
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return "."
    return f" (PATH: the documents it indexed, under {row[0]})." if row else "."
