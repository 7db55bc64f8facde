"""Teacher targets, computed once per input and cached on disk.

The teacher is the frozen initial model reading ``[x; y_1..y_L]``. Its targets never
change during training, so they are computed before the first step and the trainer holds
no teacher copy. Per record the cache stores:

    lookahead [L, d]  final-layer states (after the final norm) at positions |x|+1..|x|+L
    mask      [L]     False where the answer has fewer than L tokens
    anchor    [d]     the state at |x| (last input token), contrastive view 3

For the KL loss the teacher logits are recomputed from ``lookahead`` through the frozen,
tied LM head, which is cheaper than storing [L, vocab] per record.

The key hashes the teacher (its weights' fingerprint), the template, L and max_length; inside
it, rows are keyed by input (text, instruction, answer), so another data file, a longer run or
a resumed one computes only the inputs it has not seen (``LlmTargetCache``). The SupCon
``teacher_input`` view (``anchor``) and the distillation targets come from the same pass.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file
from safetensors.torch import save as save_tensors

from ...atomic import write_atomically, write_text_atomically
from ...datasets.records import TrainingRecord
from ...encoder.llm_folder import is_llm_folder
from ...errors import InstEmbError
from ...hashing import file_sha256
from ..batch_order import BatchOrder
from ..common_args import RunConfig
from ..continuation import starting_point
from ..parallel import SINGLE_PROCESS, DistributedEnv, local_indices
from ..prefix_cache import read_shard_index
from ..student import input_ids_without_slots

CACHE_FORMAT = 2  # 2: rows keyed by input (1: by position in one data file)
SAVE_EVERY = 256  # inputs computed per shard (what an interruption can lose)


@dataclass
class LlmTargets:
    lookahead: torch.Tensor  # [N, L, d] float32
    mask: torch.Tensor  # [N, L] bool
    anchor: torch.Tensor  # [N, d] float32

    def select(self, indices: Sequence[int], device: torch.device | str = "cpu") -> LlmTargets:
        index = torch.as_tensor(list(indices), dtype=torch.long)
        return LlmTargets(self.lookahead[index].to(device), self.mask[index].to(device), self.anchor[index].to(device))


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
def compute_llm_targets(
    encoder,
    records: Sequence[TrainingRecord],
    lookahead_length: int,
    batch_size: int = 8,
    bf16: bool = True,
    strip_stopwords: bool = False,
) -> LlmTargets:
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
    return LlmTargets(lookahead, mask, anchor)


def file_digest(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file (instemb_rag/hashing.py)."""
    return file_sha256(path)


def cache_key_fields(encoder, teacher_identity: str, lookahead_length: int, strip_stopwords: bool = False) -> dict:
    """What shapes every target besides the input: the teacher's weights, the template, L and max_length."""
    fields = {
        "format": CACHE_FORMAT,
        "teacher": teacher_identity,
        "template": encoder.template.get_config_dict(),
        "lookahead_length": lookahead_length,
        "max_length": encoder.max_length,
    }
    if strip_stopwords:  # absent otherwise, so caches of runs without the option stay valid
        fields["answer_targets"] = "content_words"
    return fields


def target_key(record: TrainingRecord) -> str:
    """The input a record's targets are a function of: text, instruction and answer."""
    return hashlib.sha256(f"{record.text}\0{record.instruction or ''}\0{record.output}".encode()).hexdigest()[:32]


@dataclass
class MappedTargets:
    """Targets stored for some records only; ``select`` takes record indices as LlmTargets' does."""

    stored: LlmTargets
    row_of: dict[int, int]

    def select(self, indices: Sequence[int], device: torch.device | str = "cpu") -> LlmTargets:
        return self.stored.select([self.row_of[i] for i in indices], device)


class LlmTargetCache:
    """Teacher targets under one teacher (``key_fields``), one row per distinct input, filled on
    demand and reused by any run, on any data file, that reads the same inputs.

    ``<folder>/<key>.json`` says what the key covers; ``<folder>/<key>/index.json`` maps each
    input's ``target_key`` to [shard, row] of ``shard-NNNNN.safetensors`` (lookahead, mask,
    anchor). A shard is written whole (atomically) before the index names it, so an
    interrupted run keeps every shard it finished and appending never rewrites old rows."""

    def __init__(self, folder: str | os.PathLike, key_fields: dict, lookahead_length: int, dim: int):
        self.folder = Path(folder)
        self.key_fields = key_fields
        self.key = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()[:24]
        self.path = self.folder / self.key
        self.lookahead_length, self.dim = lookahead_length, dim
        self.index: dict[str, list[int]] = read_shard_index(self.path, "the targets are computed again")
        self.targets: MappedTargets | None = None  # the records of the last ensure()
        self.computed_last = 0  # how many inputs the last ensure() had to compute

    def ensure(
        self,
        encoder,
        records: Sequence[TrainingRecord],
        indices: Sequence[int],
        batch_size: int = 8,
        bf16: bool = True,
        show_progress: bool = False,
        strip_stopwords: bool = False,
    ) -> MappedTargets:
        """Compute the targets of the inputs of ``records[indices]`` not cached yet (each distinct
        input once), store them, and return the targets of those records."""
        wanted = sorted(set(indices))
        keys = {i: target_key(records[i]) for i in wanted}
        holder: dict[str, int] = {}  # a record index per input still to compute
        for i in wanted:
            if keys[i] not in self.index:
                holder.setdefault(keys[i], i)
        missing = list(holder.values())
        self.computed_last = len(missing)
        with _progress(show_progress, len(missing)) as (bar, task):
            for start in range(0, len(missing), SAVE_EVERY):
                chunk = missing[start : start + SAVE_EVERY]
                fresh = compute_llm_targets(
                    encoder, [records[i] for i in chunk], self.lookahead_length, batch_size, bf16, strip_stopwords
                )
                self._write_shard([keys[i] for i in chunk], fresh)
                bar.advance(task, len(chunk))
        self.targets = MappedTargets(self._read([keys[i] for i in wanted]), {i: row for row, i in enumerate(wanted)})
        return self.targets

    def _write_shard(self, keys: list[str], fresh: LlmTargets) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        shard = 1 + max((entry[0] for entry in self.index.values()), default=-1)
        tensors = {
            "lookahead": fresh.lookahead.contiguous(),
            "mask": fresh.mask.to(torch.uint8),
            "anchor": fresh.anchor.contiguous(),
        }
        payload = save_tensors(tensors)
        write_atomically(self.path / f"shard-{shard:05d}.safetensors", lambda stream: stream.write(payload))
        self.index.update({key: [shard, row] for row, key in enumerate(keys)})
        write_text_atomically(self.path / "index.json", json.dumps(self.index))
        write_text_atomically(self.folder / f"{self.key}.json", json.dumps(self.key_fields, indent=2))

    def _read(self, keys: list[str]) -> LlmTargets:
        """Dense targets of these inputs, in this order, read shard by shard."""
        out = LlmTargets(
            torch.zeros(len(keys), self.lookahead_length, self.dim),
            torch.zeros(len(keys), self.lookahead_length, dtype=torch.bool),
            torch.zeros(len(keys), self.dim),
        )
        rows_of_shard: dict[int, tuple[list[int], list[int]]] = {}
        for row, key in enumerate(keys):
            shard, position = self.index[key]
            rows, positions = rows_of_shard.setdefault(shard, ([], []))
            rows.append(row)
            positions.append(position)
        for shard, (rows, positions) in rows_of_shard.items():
            path = self.path / f"shard-{shard:05d}.safetensors"
            try:
                tensors = load_file(str(path))
            except Exception as exc:  # safetensors raises its own error types for a damaged file
                raise InstEmbError(f"{path} cannot be read ({exc}); delete {self.path} to compute it again.") from exc
            out.lookahead[rows] = tensors["lookahead"][positions].float()
            out.mask[rows] = tensors["mask"][positions].bool()
            out.anchor[rows] = tensors["anchor"][positions].float()
        return out


@contextmanager
def _progress(enabled: bool, total: int):
    """A rich progress bar over the records to compute: yields (bar, task)."""
    from ...progress import counting_progress

    with counting_progress("teacher targets", enabled=enabled and total > 0) as bar:
        yield bar, bar.add_task("teacher", total=total)


# ---------------------------------------------------------------------------- a run's teacher
def teacher_identity(config: RunConfig, encoder) -> str:
    """The teacher is the initial weights: the backbone, plus an LLM folder's files if we start from one."""
    reference = starting_point(config.model)
    identity = encoder.backbone.fingerprint
    if reference and is_llm_folder(reference):
        for path in sorted(Path(reference).rglob("*.safetensors")):
            if path.name != "lookahead.safetensors":
                identity += ":" + file_digest(path)[:16]
    return identity


def reads_frozen_llm(config: RunConfig) -> bool:
    """Whether any loss term reads the teacher: distillation, or SupCon's teacher_input view. A
    retrieval-only run (e.g. a fit diagnostic) then skips the teacher pass entirely."""
    t = config.training
    return t.distill_weight > 0 or (t.contrastive_weight > 0 and "teacher_input" in t.views)


def prepare_frozen_llm(
    config: RunConfig,
    encoder,
    records,
    order: BatchOrder,
    run_info: dict,
    env: DistributedEnv = SINGLE_PROCESS,
):
    """(cache, None) with every target the run will need computed up front, or, without the
    cache, (None, a frozen copy of the initial model) to run at every step.

    Under data parallelism each rank computes and caches the targets of its own slices only
    (one cache folder per rank and world size, as ranks write at once), so the teacher pass is
    split over the ranks too."""
    t = config.training
    length = encoder.lookahead.length
    if not reads_frozen_llm(config):
        run_info["teacher_cache"] = {
            "skipped": "no loss term reads the teacher (distill_weight 0, no teacher_input view)"
        }
        return None, None
    if not t.llm_target_cache:
        teacher = copy.deepcopy(encoder).eval()
        for param in teacher.parameters():
            param.requires_grad_(False)
        return None, teacher
    key_fields = cache_key_fields(encoder, teacher_identity(config, encoder), length, t.distill_content_words)
    if env.enabled:
        key_fields["rank_shard"] = f"{env.rank}/{env.world_size}"
    folder = t.llm_target_cache_dir or Path(t.output_dir) / "teacher_cache"
    needed = sorted(
        {i for step in range(t.max_steps) for batch in order.step(step) for i in local_indices(batch, env)[0]}
    )
    cache = LlmTargetCache(folder, key_fields, length, encoder.hidden_size)
    encoder.eval()
    started = time.perf_counter()
    cache.ensure(
        encoder,
        records,
        needed,
        batch_size=t.batch_size,
        bf16=t.bf16,
        show_progress=t.show_progress and env.is_main,
        strip_stopwords=t.distill_content_words,
    )
    run_info["teacher_cache"] = {
        "path": str(cache.path),
        "computed_records": cache.computed_last,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return cache, None
