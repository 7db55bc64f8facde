"""A memory of recent document embeddings: more negatives for the pooled retrieval loss at no
extra forward pass (cross-batch memory, Wang et al. 2020).

On a CPU the contrastive batch is small because every example costs a forward and a backward
pass, not because memory runs out, so gradient caching (which trades compute for memory) does not
help here. Keeping the pooled embeddings of the last ``size`` outputs, detached, gives each query
``size`` more documents to rank below its own for the price of a matrix product. They come from
slightly older weights; the retrieval loss uses them on the query side only, without gradient.

An entry is not a negative for a record whose output is the same text, or that belongs to the
same group (a claim's other evidence may sit in the memory when a group spans micro-batches):
the same false-negative rule as ``shared`` in the micro-batch.

The memory is part of the trainer state (``trainer_memory.safetensors``, texts in its metadata),
so a resumed run continues with the same negatives as an uninterrupted one.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ...errors import CheckpointError

MEMORY_FILE = "trainer_memory.safetensors"


class NegativeMemory:
    def __init__(self, size: int, dimension: int):
        if size <= 0:
            raise ValueError(f"a negative memory needs a positive size; got {size}")
        self.size, self.dimension = size, dimension
        self.vectors = torch.zeros(0, dimension)
        self.outputs: list[str] = []
        self.groups: list[str | None] = []

    def __len__(self) -> int:
        return len(self.outputs)

    def negatives(self, device) -> torch.Tensor | None:
        """[K, d] the remembered embeddings (no gradient), or None while empty."""
        return self.vectors.to(device) if len(self) else None

    def excluded(self, records, device) -> torch.Tensor:
        """[N, K] True where entry k is not a negative for record n: same output text or same group."""
        return torch.tensor(
            [
                [output == r.output or (group is not None and group == r.group) for output, group in self.entries()]
                for r in records
            ],
            dtype=torch.bool,
            device=device,
        ).reshape(len(records), len(self))

    def entries(self) -> list[tuple[str, str | None]]:
        return list(zip(self.outputs, self.groups))

    def push(self, vectors: torch.Tensor, records) -> None:
        """Remember one micro-batch's pooled outputs (the newest last), forgetting the oldest."""
        if vectors.shape != (len(records), self.dimension):
            raise ValueError(
                f"expected [{len(records)}, {self.dimension}] output embeddings; got {tuple(vectors.shape)}"
            )
        self.vectors = torch.cat([self.vectors, vectors.detach().float().cpu()])[-self.size :]
        self.outputs = (self.outputs + [r.output for r in records])[-self.size :]
        self.groups = (self.groups + [r.group for r in records])[-self.size :]

    def save(self, folder: Path) -> None:
        metadata = {"outputs": json.dumps(self.outputs), "groups": json.dumps(self.groups), "size": str(self.size)}
        save_file({"vectors": self.vectors.contiguous()}, str(folder / MEMORY_FILE), metadata=metadata)

    def load(self, folder: Path) -> None:
        """Restore what save() wrote; a checkpoint without it (memory switched on for the resume) is refused."""
        path = folder / MEMORY_FILE
        if not path.is_file():
            raise CheckpointError(
                f"Cannot resume from {folder}: it has no {MEMORY_FILE}, so it was trained without "
                "training.negative_memory. Resume with the option it was trained with, or start a new output_dir."
            )
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata()
            vectors = handle.get_tensor("vectors")
        if int(metadata["size"]) != self.size or vectors.shape[1:] != (self.dimension,):
            raise CheckpointError(
                f"Cannot resume from {folder}: its negative memory holds {metadata['size']} x {vectors.shape[1]} "
                f"embeddings, this run asks for {self.size} x {self.dimension}. Resume with the same "
                "training.negative_memory, or start a new output_dir."
            )
        self.vectors, self.outputs, self.groups = (
            vectors,
            json.loads(metadata["outputs"]),
            json.loads(metadata["groups"]),
        )
