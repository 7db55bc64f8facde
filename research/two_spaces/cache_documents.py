"""Embed every training passage once with the LLM document half (issue 50), cached on disk.

    python research/two_spaces/cache_documents.py runs/qtower/train-items.jsonl [MODEL] [CACHE_DIR]

MODEL is the symmetric InstEmb encoder whose document space is the LLM half (default: the shipped
LLM, the documents' LLM of a two-space default; a two-space folder: its documents' LLM); CACHE_DIR defaults to $INSTEMB_HOME/teacher_embeddings, the folder the query-tower
trainer reads. The cache (teachers/cache.py) keys each row on the encoder's fingerprint and the
text's sha256 and appends a shard every 512 passages, so a killed run resumes where it stopped:
run the same command again.
"""

from __future__ import annotations

import sys
import time

from instemb_rag.datasets.embedding_items import read_items
from instemb_rag.paths import instemb_home
from instemb_rag.teachers.cache import cached_embeddings


class DocumentSide:
    """An encoder's document embedding as the cache sees a teacher: name, fingerprint, encode."""

    def __init__(self, encoder, name: str):
        self.encoder, self.name = encoder, name
        self.fingerprint, self.dimension = encoder.document_fingerprint, encoder.dimension
        self.done, self.started = 0, time.perf_counter()

    def encode(self, texts, batch_size: int = 16, show_progress: bool = False):
        vectors = self.encoder.encode_documents(texts, batch_size=16)
        self.done += len(texts)
        rate = self.done / (time.perf_counter() - self.started)
        print(f"{self.done} passages embedded, {rate:.1f}/s", flush=True)
        return vectors


def main(items_file: str, model: str = "default", cache_dir: str | None = None) -> None:
    from instemb_rag.encoder import InstEmbEncoder, shipped_llm_folder
    from instemb_rag.encoder.composed import llm_folder_of

    # The LLM half: the shipped LLM (the documents' LLM of a two-space default), or a folder's own.
    encoder = InstEmbEncoder.from_pretrained(shipped_llm_folder() if model == "default" else llm_folder_of(model))
    passages = [item.text for item in read_items(items_file) if item.role == "passage"]
    side = DocumentSide(encoder, f"llm-{model.strip('/').split('/')[-1]}")
    folder = cache_dir or str(instemb_home() / "teacher_embeddings")
    vectors = cached_embeddings(side, passages, folder, shard_rows=512)
    print(f"{len(passages)} passages, {vectors.shape[1]} dimensions, cached under {folder}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
