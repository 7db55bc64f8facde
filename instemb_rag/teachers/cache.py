"""Teacher embeddings cached on disk, keyed by the teacher's fingerprint and each text's sha256.

One folder per teacher fingerprint under ``cache_dir``: safetensors shards (the embeddings and
the sha256 of the text of every row) and ``index.json`` listing the shards with their sha256.
A call computes only the texts no shard holds and appends them as new shards, a shard every
``shard_rows`` texts, so a long run that is killed keeps what it finished. Each shard is written
atomically before the index names it: a kill between the two leaves an unnamed file that the
next append overwrites. A lock serialises processes filling the same cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..atomic import write_atomically, write_text_atomically
from .errors import TeacherCacheError

INDEX_NAME = "index.json"
FORMAT_VERSION = 1
SHARD_ROWS = 8192
DIGEST_BYTES = 32


def text_sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def teacher_cache_folder(teacher, cache_dir: str | Path) -> Path:
    """``cache_dir/<teacher name>-<first 16 hex digits of its fingerprint>``."""
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", teacher.name) or "teacher"
    return Path(cache_dir) / f"{label}-{teacher.fingerprint[:16]}"


def _damaged(folder: Path, what: str) -> TeacherCacheError:
    return TeacherCacheError(
        f"the teacher-embedding cache {folder} is damaged: {what}. Delete the folder {folder} and run "
        "again; its embeddings are computed anew."
    )


def _read_index(folder: Path, teacher) -> dict:
    path = folder / INDEX_NAME
    if not path.exists():
        return {
            "format": FORMAT_VERSION,
            "teacher": teacher.name,
            "fingerprint": teacher.fingerprint,
            "dimension": teacher.dimension,
            "shards": [],
        }
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        shards = [(str(shard["file"]), int(shard["rows"]), str(shard["sha256"])) for shard in index["shards"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise _damaged(folder, f"{INDEX_NAME} cannot be read ({error})") from None
    if index.get("fingerprint") != teacher.fingerprint or index.get("dimension") != teacher.dimension:
        raise _damaged(folder, f"{INDEX_NAME} belongs to another teacher ({index.get('fingerprint')})")
    index["shards"] = [{"file": file, "rows": rows, "sha256": sha256} for file, rows, sha256 in shards]
    return index


def _load_shard(folder: Path, shard: dict, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """(text digests (rows, 32) uint8, embeddings (rows, dimension) float32) of one checked shard."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path = folder / shard["file"]
    try:
        data = path.read_bytes()
    except OSError as error:
        raise _damaged(folder, f"{shard['file']} cannot be read ({error.strerror or error})") from None
    if hashlib.sha256(data).hexdigest() != shard["sha256"]:
        raise _damaged(folder, f"{shard['file']} does not match the sha256 {INDEX_NAME} records")
    try:
        tensors = load(data)
        digests, embeddings = tensors["text_sha256"], tensors["embeddings"]
    except (SafetensorError, KeyError, ValueError) as error:
        raise _damaged(folder, f"{shard['file']} is not a valid shard ({error})") from None
    rows = shard["rows"]
    if digests.shape != (rows, DIGEST_BYTES) or embeddings.shape != (rows, dimension):
        raise _damaged(folder, f"{shard['file']} holds shapes {digests.shape} and {embeddings.shape}")
    return digests, embeddings


def _load_rows(folder: Path, index: dict) -> dict[bytes, np.ndarray]:
    rows: dict[bytes, np.ndarray] = {}
    for shard in index["shards"]:
        digests, embeddings = _load_shard(folder, shard, index["dimension"])
        rows.update(zip((bytes(digest) for digest in digests), embeddings))
    return rows


def _append_shard(folder: Path, index: dict, digests: list[bytes], embeddings: np.ndarray) -> None:
    from safetensors.numpy import save

    name = f"shard-{len(index['shards']):05d}.safetensors"
    stacked = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), DIGEST_BYTES)
    data = save({"text_sha256": stacked, "embeddings": np.ascontiguousarray(embeddings, dtype=np.float32)})
    write_atomically(folder / name, lambda stream: stream.write(data))
    index["shards"].append({"file": name, "rows": len(digests), "sha256": hashlib.sha256(data).hexdigest()})
    write_text_atomically(folder / INDEX_NAME, json.dumps(index, indent=1) + "\n")


def _missing_texts(texts: Sequence[str], digests: list[bytes], known: dict) -> list[tuple[bytes, str]]:
    """The texts no shard holds, each once, in first-seen order."""
    missing: dict[bytes, str] = {}
    for digest, text in zip(digests, texts):
        if digest not in known and digest not in missing:
            missing[digest] = text
    return list(missing.items())


def cached_embeddings(
    teacher,
    texts: Sequence[str],
    cache_dir: str | Path,
    batch_size: int = 64,
    show_progress: bool = False,
    shard_rows: int = SHARD_ROWS,
) -> np.ndarray:
    """The teacher's float32 embeddings of ``texts`` (in order), computing only those not cached."""
    from filelock import FileLock

    texts = list(texts)
    digests = [text_sha256(text) for text in texts]
    folder = teacher_cache_folder(teacher, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        index = _read_index(folder, teacher)
        rows = _load_rows(folder, index)
        missing = _missing_texts(texts, digests, rows)
        for start in range(0, len(missing), shard_rows):
            chunk = missing[start : start + shard_rows]
            embeddings = teacher.encode([text for _, text in chunk], batch_size=batch_size, show_progress=show_progress)
            _append_shard(folder, index, [digest for digest, _ in chunk], embeddings)
            rows.update(zip((digest for digest, _ in chunk), embeddings))
    if not texts:
        return np.zeros((0, teacher.dimension), dtype=np.float32)
    return np.stack([rows[digest] for digest in digests]).astype(np.float32, copy=False)
