"""The trainer's student passes over the frozen-prefix cache (``model.frozen_prefix: true``).

When only the top K decoder layers (fully or through LoRA) and the final norm train, and the
look-ahead vectors are frozen, the states entering layer N - K are a fixed function of the input
(encoder/modules/layer_split.py). ``prepare_student`` computes them once per distinct input every loss
reads (query with its instruction, answer, flipped instruction, negative answers), stored by
training/prefix_cache.py; each step then runs only the top K layers (``CachedStudent``). Up to
the cache's dtype (float32: rounding; float16, the default: ~1e-2 on the states) every loss
and gradient equals the full pass's.

Where it cannot apply (config.validate refuses it): trainable look-ahead vectors (they shape
every state below, so nothing stays fixed) and LoRA on every layer (no frozen layer to cache).

One difference from the full pass, by construction: SupCon's dropout view
(``student_input_dropout``) cannot drop input embeddings that are never recomputed, so its
dropout acts on the cached states entering the first trainable layer instead.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from ...datasets.records import TrainingRecord
from ...encoder.modules.layer_split import run_top
from ...errors import InstEmbError
from ...paths import instemb_home
from ..batch_order import BatchOrder
from ..common_args import RunConfig
from ..parallel import DistributedEnv
from ..prefix_cache import PrefixCache
from ..student import StudentPass, at_last_valid, needs_output_pass


class CachedStudent:
    """Student passes that run the top K layers on cached states (see the module docstring)."""

    def __init__(self, encoder, cache: PrefixCache):
        self.encoder, self.cache = encoder, cache
        self.length = encoder.lookahead.length

    def _top(self, batch: dict[str, torch.Tensor], hidden: torch.Tensor) -> torch.Tensor:
        return run_top(self.encoder.model, hidden, batch["attention_mask"], batch["position_ids"], self.cache.split)

    def forward(self, pairs: Sequence[tuple[str, str | None]]) -> StudentPass:
        batch = self.cache.batch(pairs, self.encoder.device)
        hidden = self._top(batch, batch["hidden"])
        return StudentPass.from_states(hidden, batch["attention_mask"], self.length)

    def input_last_with_dropout(self, records: Sequence[TrainingRecord], dropout: float) -> torch.Tensor:
        """The |x| state without the look-ahead slots (the cached [x; s] rows cut before the slots),
        with dropout on the states entering the first trainable layer."""
        pairs = [(r.text, r.instruction) for r in records]
        batch = self.cache.batch(pairs, self.encoder.device, trim=self.length)
        hidden = self._top(batch, F.dropout(batch["hidden"], p=dropout, training=True))
        return at_last_valid(hidden, batch["attention_mask"])


def student_inputs(records: Sequence[TrainingRecord], config: RunConfig) -> list[tuple[str, str | None]]:
    """Every (text, instruction) the losses run the student on for these records."""
    t = config.training
    outputs = needs_output_pass(config)
    pairs: list[tuple[str, str | None]] = []
    for record in records:
        pairs.append((record.text, record.instruction))
        if outputs:
            pairs.append((record.output, None))
        if t.retrieval_weight > 0:
            if record.negative_instruction:
                pairs.append((record.text, record.negative_instruction))
            pairs += [(text, None) for text in record.negative_outputs]
    return pairs


def prefix_cache_root(config: RunConfig) -> Path:
    """training.frozen_prefix_dir, else the cache home shared by every run (keys keep models apart)."""
    folder = config.training.frozen_prefix_dir
    return Path(folder) if folder else instemb_home() / "prefix_cache"


def prepare_student(
    config: RunConfig,
    encoder,
    records: Sequence[TrainingRecord],
    order: BatchOrder,
    run_info: dict,
    env: DistributedEnv,
    log=print,
) -> CachedStudent | None:
    """The cached student with the states of every input the run's steps read built (only those
    not cached yet: a resumed or longer run reuses the rest), or None when ``model.frozen_prefix`` is off."""
    m = config.model
    if not m.frozen_prefix:
        return None
    if env.enabled:
        raise InstEmbError(
            "model.frozen_prefix runs in one process: launch `instemb-rag train` without torchrun, "
            "or set model.frozen_prefix: false for data-parallel training."
        )
    cache = PrefixCache(
        prefix_cache_root(config), encoder, m.trainable_top_layers, getattr(torch, m.frozen_prefix_dtype)
    )
    cached_before = len(cache.index)
    if not cached_before and cache.describe_other_caches():
        log(
            f"prefix cache: the caches beside {cache.folder.name} under {cache.root} were built for another "
            "model, look-ahead, template, length or model.trainable_top_layers; building a new one"
        )
    started = time.perf_counter()
    t = config.training
    needed = sorted({i for step in range(t.max_steps) for batch in order.step(step) for i in batch})
    cache.build(student_inputs([records[i] for i in needed], config), batch_size=t.batch_size, log=log)
    run_info["prefix_cache"] = {
        "path": str(cache.folder),
        "split": cache.split,
        "inputs": len(cache.index),
        "computed_inputs": len(cache.index) - cached_before,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return CachedStudent(encoder, cache)
