"""How the CUDA path cuts a call into forward passes: shape buckets for CUDA graphs, batches by tokens.

Only the CUDA path (fast/cuda_graphs.py) reads this; the CPU path keeps its batches of
``batch_size`` rows. Inputs are taken longest first, as the eager path takes them, then:

- a row no longer than the longest bucket length goes to a **graph bucket** (batch x length, both
  static): the rows that share the first row's bucket length, up to the largest bucket batch that
  fits ``batch_tokens``, padded to the smallest bucket that holds them (extra rows masked out);
- a longer row (documents), or any row with graphs off, goes to an **eager batch chosen by
  tokens**: rows are added while the padded batch stays within ``batch_tokens`` and its padding
  under ``max_padding`` of it.

CudaOptions come from the environment (``INSTEMB_CUDA_GRAPHS=0`` turns the graphs off,
``INSTEMB_CUDA_FAST=0`` the whole CUDA path, giving the eager loop every device ran before;
``INSTEMB_CUDA_BATCH_TOKENS``) and can be set per encoder (``set_cuda_options``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Sequence

__all__ = ["CudaOptions", "PlannedBatch", "cuda_options", "plan_batches", "set_cuda_options"]

GRAPH_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
GRAPH_LENGTHS = (32, 64, 128, 256)


@dataclass(frozen=True)
class CudaOptions:
    enabled: bool = True  # the CUDA path at all (False: the eager loop of batch_size rows)
    graphs: bool = True  # shape buckets through captured CUDA graphs
    batch_tokens: int = 32768  # padded tokens (rows x width) one forward may take
    max_padding: float = 0.10  # of an eager batch's tokens
    graph_batches: tuple[int, ...] = GRAPH_BATCHES
    graph_lengths: tuple[int, ...] = GRAPH_LENGTHS

    @classmethod
    def from_environment(cls) -> CudaOptions:
        tokens = os.environ.get("INSTEMB_CUDA_BATCH_TOKENS", "").strip()
        return cls(
            enabled=os.environ.get("INSTEMB_CUDA_FAST", "1") != "0",
            graphs=os.environ.get("INSTEMB_CUDA_GRAPHS", "1") != "0",
            batch_tokens=int(tokens) if tokens else cls.batch_tokens,
        )

    def bucket_length(self, width: int) -> int | None:
        """The shortest bucket length that holds ``width`` tokens (None: longer than every bucket)."""
        return next((length for length in self.graph_lengths if length >= width), None)

    def bucket_batch(self, rows: int) -> int:
        """The smallest bucket batch that holds ``rows`` rows."""
        return next(size for size in self.graph_batches if size >= rows)

    def largest_batch(self, length: int) -> int:
        """The largest bucket batch whose padded tokens fit ``batch_tokens`` at this length (at least the smallest)."""
        fitting = [size for size in self.graph_batches if size * length <= self.batch_tokens]
        return max(fitting) if fitting else min(self.graph_batches)


def cuda_options(encoder) -> CudaOptions:
    """The options of this encoder: set with ``set_cuda_options``, else the environment's."""
    options = encoder.__dict__.get("_cuda_options")
    return options if options is not None else CudaOptions.from_environment()


def set_cuda_options(encoder, **changes) -> CudaOptions:
    """Change this encoder's CUDA options (``graphs=False``, ``enabled=False``, ``batch_tokens=...``).

    Not part of the fingerprint: none of them changes what an embedding is."""
    options = replace(cuda_options(encoder), **changes)
    encoder.__dict__["_cuda_options"] = options
    return options


@dataclass(frozen=True)
class PlannedBatch:
    rows: tuple[int, ...]  # positions in the inputs, longest first
    width: int  # the longest row's tokens
    bucket: tuple[int, int] | None  # (batch, length) of a graph bucket; None: eager at ``width``


def plan_batches(lengths: Sequence[int], options: CudaOptions, graphs: bool) -> list[PlannedBatch]:
    """Every input in exactly one batch, longest first (ties in input order, as the eager sort)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    planned: list[PlannedBatch] = []
    start = 0
    while start < len(order):
        width = lengths[order[start]]
        length = options.bucket_length(width) if graphs else None
        stop = start + 1
        if length is not None:
            cap = options.largest_batch(length)
            while stop < len(order) and stop - start < cap and options.bucket_length(lengths[order[stop]]) == length:
                stop += 1
            bucket = (options.bucket_batch(stop - start), length)
        else:
            used = width
            while stop < len(order):
                rows = stop - start + 1
                padded = rows * width
                if (
                    padded > options.batch_tokens
                    or padded - (used + lengths[order[stop]]) > options.max_padding * padded
                ):
                    break
                used += lengths[order[stop]]
                stop += 1
            bucket = None
        planned.append(PlannedBatch(tuple(order[start:stop]), width, bucket))
        start = stop
    return planned
