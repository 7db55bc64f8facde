"""Corpus embeddings cached per (document fingerprint, corpus hash, document instruction).

Layout: ``INSTEMB_HOME/eval_embeddings/<document fingerprint>/<corpus hash>.npy`` plus a ``.json`` beside it
recording what the matrix holds. Both are written to a temporary file and renamed into place, the
JSON last, so an interrupted run leaves no half-written entry that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import write_atomically, write_text_atomically
from ..encoder.protocol import Encoder
from ..paths import instemb_home

CACHE_FOLDER = "eval_embeddings"


def corpus_hash(doc_ids: Sequence[str], texts: Sequence[str], instruction: str | None = None) -> str:
    """Changes when any id, text, their order or the document instruction changes."""
    digest = hashlib.sha256()
    digest.update(json.dumps(instruction).encode())
    for doc_id, text in zip(doc_ids, texts, strict=True):
        digest.update(doc_id.encode())
        digest.update(b"\x00")
        digest.update(text.encode())
        digest.update(b"\x01")
    return digest.hexdigest()[:32]


class EmbeddingCache:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else instemb_home() / CACHE_FOLDER

    def paths(self, fingerprint: str, content_hash: str) -> tuple[Path, Path]:
        folder = self.root / fingerprint
        return folder / f"{content_hash}.npy", folder / f"{content_hash}.json"

    def load(self, fingerprint: str, content_hash: str, count: int, dimension: int) -> np.ndarray | None:
        """The cached matrix, or None when absent or not matching what the caller expects."""
        matrix_path, meta_path = self.paths(fingerprint, content_hash)
        if not (matrix_path.is_file() and meta_path.is_file()):
            return None
        try:
            meta = json.loads(meta_path.read_text())
            matrix = np.load(matrix_path, allow_pickle=False)
        except (OSError, ValueError):
            return None  # unreadable entry: recompute and overwrite rather than fail the evaluation
        if meta.get("shape") != [count, dimension] or matrix.shape != (count, dimension):
            return None
        return matrix

    def store(self, fingerprint: str, content_hash: str, matrix: np.ndarray, description: dict) -> Path:
        matrix_path, meta_path = self.paths(fingerprint, content_hash)
        matrix_path.parent.mkdir(parents=True, exist_ok=True)
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        write_atomically(matrix_path, lambda stream: np.save(stream, matrix, allow_pickle=False))
        meta = {"fingerprint": fingerprint, "corpus_hash": content_hash, "shape": list(matrix.shape), **description}
        write_text_atomically(meta_path, json.dumps(meta, indent=2))
        return matrix_path


def embed_corpus(
    encoder: Encoder,
    doc_ids: Sequence[str],
    texts: Sequence[str],
    instruction: str | None = None,
    cache: EmbeddingCache | None = None,
    batch_size: int = 16,
    show_progress: bool = False,
    corpus_name: str = "",
) -> tuple[np.ndarray, bool]:
    """Document embeddings in ``doc_ids`` order and whether they came from the cache.

    Pass ``cache=None`` to always embed (nothing is read or written).
    """
    if cache is None:
        return encoder.encode_documents(
            list(texts), instruction=instruction, batch_size=batch_size, show_progress=show_progress
        ), False
    content_hash = corpus_hash(doc_ids, texts, instruction)
    # Keyed on what embeds documents: two query LLMs over one document sentence encoder share the corpus.
    fingerprint = encoder.document_fingerprint
    cached = cache.load(fingerprint, content_hash, len(texts), encoder.dimension)
    if cached is not None:
        return cached, True
    matrix = encoder.encode_documents(
        list(texts), instruction=instruction, batch_size=batch_size, show_progress=show_progress
    )
    cache.store(
        fingerprint,
        content_hash,
        matrix,
        {"corpus": corpus_name, "documents": len(texts), "instruction": instruction},
    )
    return matrix, False
