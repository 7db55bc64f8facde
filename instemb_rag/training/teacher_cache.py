"""Teacher targets, computed once per data set and cached on disk.

The teacher is the frozen initial model reading ``[x; y_1..y_L]``. Its targets never
change during training, so they are computed before the first step and the trainer holds
no teacher copy. Per record the cache stores:

    lookahead [L, d]  final-layer states (after the final norm) at positions |x|+1..|x|+L
    mask      [L]     False where the answer has fewer than L tokens
    anchor    [d]     the state at |x| (last input token), contrastive view 3

For the KL loss the teacher logits are recomputed from ``lookahead`` through the frozen,
tied LM head, which is cheaper than storing [L, vocab] per record.

Files: ``<key>.safetensors`` (the tensors plus a ``filled`` flag per record, so a longer
run only computes the records it has not seen) and ``<key>.json`` (what the key covers).
The key hashes the data file, the teacher weights, the template, L and max_length.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file, save_file

from ..hashing import file_sha256
from .records import TrainingRecord

CACHE_FORMAT = 1
SAVE_EVERY = 256  # records computed between two saves of the cache file


@dataclass
class TeacherTargets:
    lookahead: torch.Tensor  # [N, L, d] float32
    mask: torch.Tensor  # [N, L] bool
    anchor: torch.Tensor  # [N, d] float32

    def select(self, indices: Sequence[int], device: torch.device | str = "cpu") -> TeacherTargets:
        index = torch.as_tensor(list(indices), dtype=torch.long)
        return TeacherTargets(
            self.lookahead[index].to(device), self.mask[index].to(device), self.anchor[index].to(device)
        )


def input_ids_without_slots(encoder, record: TrainingRecord, lookahead_length: int) -> list[int]:
    """Ids of x (template + text + instruction), truncated exactly as the student's input is."""
    ids = encoder.build_ids(record.text, record.instruction, lookahead_length)
    return ids[: len(ids) - lookahead_length]


def content_words(answer: str) -> str:
    """The answer without stopwords (NLTK's English list, which LlamaIndex bundles), so its first
    L tokens carry content; an answer made only of stopwords ("No.") is kept whole."""
    from llama_index.core.utils import globals_helper

    stopwords = globals_helper.stopwords
    kept = [word for word in answer.split() if word.strip(".,;:!?\"'()[]").lower() not in stopwords]
    return " ".join(kept) if kept else answer


def teacher_input_ids(
    encoder, record: TrainingRecord, lookahead_length: int, strip_stopwords: bool = False
) -> tuple[list[int], int, int]:
    """``[x; first L tokens of y]``, |x| and how many answer tokens were appended."""
    x_ids = input_ids_without_slots(encoder, record, lookahead_length)
    answer = content_words(record.output) if strip_stopwords else record.output
    y_ids = encoder.tokenizer(answer, add_special_tokens=False).input_ids[:lookahead_length]
    return x_ids + y_ids, len(x_ids), len(y_ids)


def autocast_for(device: torch.device, bf16: bool):
    if device.type == "cuda" and bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return nullcontext()


@torch.no_grad()
def compute_teacher_targets(
    encoder,
    records: Sequence[TrainingRecord],
    lookahead_length: int,
    batch_size: int = 8,
    bf16: bool = True,
    strip_stopwords: bool = False,
) -> TeacherTargets:
    """Run the (frozen) encoder's backbone on ``[x; y[:L]]`` and gather the target states."""
    dim = encoder.hidden_size
    lookahead = torch.zeros(len(records), lookahead_length, dim)
    mask = torch.zeros(len(records), lookahead_length, dtype=torch.bool)
    anchor = torch.zeros(len(records), dim)
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        built = [teacher_input_ids(encoder, record, lookahead_length, strip_stopwords) for record in chunk]
        batch = encoder.collate([ids for ids, _, _ in built], padding_side="right")
        with autocast_for(encoder.device, bf16):
            hidden = encoder.states(batch).hidden.float().cpu()
        for row, (_, x_len, y_len) in enumerate(built):
            anchor[start + row] = hidden[row, x_len - 1]
            lookahead[start + row, :y_len] = hidden[row, x_len : x_len + y_len]
            mask[start + row, :y_len] = True
    return TeacherTargets(lookahead, mask, anchor)


def file_digest(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file (instemb_rag/hashing.py)."""
    return file_sha256(path)


def cache_key_fields(
    data_file: Path, encoder, teacher_identity: str, lookahead_length: int, strip_stopwords: bool = False
) -> dict:
    fields = {
        "format": CACHE_FORMAT,
        "data_sha256": file_digest(data_file),
        "teacher": teacher_identity,
        "template": encoder.template.get_config_dict(),
        "lookahead_length": lookahead_length,
        "max_length": encoder.max_length,
    }
    if strip_stopwords:  # absent otherwise, so caches of runs without the option stay valid
        fields["answer_targets"] = "content_words"
    return fields


class TeacherCache:
    """Teacher targets of one data file under one teacher, filled on demand and reused."""

    def __init__(self, folder: str | os.PathLike, key_fields: dict, size: int, lookahead_length: int, dim: int):
        self.folder = Path(folder)
        self.key_fields = key_fields
        self.key = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()[:24]
        self.path = self.folder / f"{self.key}.safetensors"
        self.targets, self.filled = self._load_or_empty(size, lookahead_length, dim)
        self.computed_last = 0  # how many records the last ensure() had to compute

    def _load_or_empty(self, size: int, lookahead_length: int, dim: int):
        if self.path.is_file():
            try:
                tensors = load_file(str(self.path))
                targets = TeacherTargets(tensors["lookahead"], tensors["mask"].bool(), tensors["anchor"])
                if targets.lookahead.shape == (size, lookahead_length, dim):
                    return targets, tensors["filled"].bool()
            except (OSError, KeyError, RuntimeError):
                pass  # unreadable or foreign file: rebuilt below and replaced atomically on save
        empty = TeacherTargets(
            torch.zeros(size, lookahead_length, dim),
            torch.zeros(size, lookahead_length, dtype=torch.bool),
            torch.zeros(size, dim),
        )
        return empty, torch.zeros(size, dtype=torch.bool)

    def ensure(
        self,
        encoder,
        records: Sequence[TrainingRecord],
        indices: Sequence[int],
        batch_size: int = 8,
        bf16: bool = True,
        show_progress: bool = False,
        strip_stopwords: bool = False,
    ) -> TeacherTargets:
        """Compute targets for the records in ``indices`` not yet cached; save; return all targets.

        Saves after every ``SAVE_EVERY`` records, so an interrupted run keeps what it computed.
        """
        missing = sorted({i for i in indices if not bool(self.filled[i])})
        self.computed_last = len(missing)
        lookahead_length = self.targets.lookahead.shape[1]
        with _progress(show_progress, len(missing)) as (bar, task):
            for start in range(0, len(missing), SAVE_EVERY):
                index = torch.as_tensor(missing[start : start + SAVE_EVERY])
                fresh = compute_teacher_targets(
                    encoder, [records[i] for i in index.tolist()], lookahead_length, batch_size, bf16, strip_stopwords
                )
                self.targets.lookahead[index] = fresh.lookahead
                self.targets.mask[index] = fresh.mask
                self.targets.anchor[index] = fresh.anchor
                self.filled[index] = True
                self._save()
                bar.advance(task, len(index))
        return self.targets

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.tmp")
        save_file(
            {
                "lookahead": self.targets.lookahead.contiguous(),
                "mask": self.targets.mask.to(torch.uint8),
                "anchor": self.targets.anchor.contiguous(),
                "filled": self.filled.to(torch.uint8),
            },
            str(staging),
        )
        os.replace(staging, self.path)
        (self.folder / f"{self.key}.json").write_text(json.dumps(self.key_fields, indent=2))


class _RecordsAt:
    """records[ids[j]] as item j, so a TeacherCache of only some records can index them densely."""

    def __init__(self, records: Sequence[TrainingRecord], ids: list[int]):
        self.records, self.ids = records, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row: int) -> TrainingRecord:
        return self.records[self.ids[row]]


@dataclass
class MappedTargets:
    """Targets stored for some records only; ``select`` takes record indices as TeacherTargets' does."""

    stored: TeacherTargets
    row_of: dict[int, int]

    def select(self, indices: Sequence[int], device: torch.device | str = "cpu") -> TeacherTargets:
        return self.stored.select([self.row_of[i] for i in indices], device)


class ShardTeacherCache:
    """The teacher targets of the records one rank runs (distributed training), one file a rank.

    A rank needs about (steps x records a step / ranks) records, not the whole file, so only
    those rows are stored: an 8B run's cache stays a few GB a rank instead of N x L x d floats.
    The key adds the record ids, so a run over other steps (or another world size) gets its own
    file, and the same run (a resumed one) reuses it."""

    def __init__(
        self, folder: str | os.PathLike, key_fields: dict, record_ids: Sequence[int], lookahead_length: int, dim: int
    ):
        self.record_ids = sorted(set(record_ids))
        ids_digest = hashlib.sha256(json.dumps(self.record_ids).encode()).hexdigest()[:16]
        self._cache = TeacherCache(
            folder, {**key_fields, "record_ids_sha256": ids_digest}, len(self.record_ids), lookahead_length, dim
        )
        self.path = self._cache.path
        self.targets = MappedTargets(self._cache.targets, {r: j for j, r in enumerate(self.record_ids)})

    @property
    def computed_last(self) -> int:
        return self._cache.computed_last

    def ensure(self, encoder, records: Sequence[TrainingRecord], indices: Sequence[int], **options) -> MappedTargets:
        missing = set(indices) - set(self.record_ids)
        if missing:
            raise ValueError(f"records {sorted(missing)[:3]} are not in this rank's shard")
        stored = self._cache.ensure(
            encoder, _RecordsAt(records, self.record_ids), range(len(self.record_ids)), **options
        )
        self.targets = MappedTargets(stored, self.targets.row_of)
        return self.targets


@contextmanager
def _progress(enabled: bool, total: int):
    """A rich progress bar over the records to compute: yields (bar, task)."""
    from ..progress import counting_progress

    with counting_progress("teacher targets", enabled=enabled and total > 0) as bar:
        yield bar, bar.add_task("teacher", total=total)
