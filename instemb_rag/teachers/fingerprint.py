"""A teacher's fingerprint: sha256 over the files that decide its embeddings.

Hashing mpnet's 438 MB of weights takes seconds, so the result is cached in a small JSON file
inside the folder, valid while every hashed file keeps its size and modification time. A folder
that cannot be written to is simply hashed on every load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..atomic import write_text_atomically
from ..hashing import file_sha256
from .registry import MANIFEST_NAME

FINGERPRINT_CACHE_NAME = ".instemb-fingerprint.json"
# Weights, configs, tokenizer files (vocab.txt, merges.txt, sentencepiece .model); not READMEs.
HASHED_SUFFIXES = {".safetensors", ".json", ".txt", ".model"}
NOT_HASHED = {MANIFEST_NAME, FINGERPRINT_CACHE_NAME}


def fingerprinted_files(folder: Path) -> list[Path]:
    """The files the fingerprint covers, sorted by relative path (hidden folders and files left out)."""
    files = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or relative.name in NOT_HASHED:
            continue
        if path.suffix in HASHED_SUFFIXES and path.is_file():
            files.append(path)
    return sorted(files, key=lambda path: path.relative_to(folder).as_posix())


def _file_stats(folder: Path, files: list[Path]) -> list[list]:
    stats = []
    for path in files:
        status = path.stat()
        stats.append([path.relative_to(folder).as_posix(), status.st_size, status.st_mtime_ns])
    return stats


def _read_cached(cache: Path, stats: list[list]) -> str | None:
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(cached, dict) and cached.get("files") == stats and isinstance(cached.get("fingerprint"), str):
        return cached["fingerprint"]
    return None


def folder_fingerprint(folder: Path) -> str:
    """Hex sha256 over (relative path, content sha256) of every fingerprinted file of ``folder``."""
    folder = Path(folder)
    files = fingerprinted_files(folder)
    stats = _file_stats(folder, files)
    cache = folder / FINGERPRINT_CACHE_NAME
    cached = _read_cached(cache, stats)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    for (relative, _size, _mtime), path in zip(stats, files):
        digest.update(f"{relative}\0{file_sha256(path)}\n".encode())
    fingerprint = digest.hexdigest()
    try:
        write_text_atomically(cache, json.dumps({"fingerprint": fingerprint, "files": stats}, indent=1))
    except OSError:
        pass  # a read-only folder: hashed again next time, nothing else lost
    return fingerprint
