"""Several (pooling, look-ahead length) variants of one encoder from a single forward pass.

The pooling and inference-L ablations differ only in how final-layer states are pooled. Under
causal attention the states at ``x`` and at the first ``l`` look-ahead slots do not depend on
the slots after them, so one pass with the full ``L`` holds every variant with ``l <= L``:
pooling with ``l`` look-ahead tokens is pooling the same states under a mask that ends at slot
``l``. :class:`SharedForward` runs that pass once per (text, instruction) and keeps every
variant's vector; :meth:`SharedForward.view` returns an ``Encoder`` (encoder/protocol.py), what
``evaluate`` needs, so an ablation over nine variants costs one embedding pass instead of nine.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..encoder.modules.pooling import Pooling
from ..encoder.protocol import ForwardEncoder
from ..instructions import per_item_instructions

Variant = tuple[str, int]  # (pooling mode, look-ahead length at inference)


def truncate_lookahead_mask(attention_mask: torch.Tensor, full_length: int, keep: int) -> torch.Tensor:
    """The mask of the same rows with only the first ``keep`` of ``full_length`` look-ahead slots.

    The pooled positions are derived from the mask's last valid position, so hiding the trailing
    slots makes pooling see a sequence that ends at slot ``keep`` (either padding side).
    """
    if keep == full_length:
        return attention_mask
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (attention_mask.long() * positions).max(dim=1).values
    new_last = last - (full_length - keep)
    return attention_mask * (positions[None, :] <= new_last[:, None])


class SharedForward:
    """One encoder, many pooled variants, one forward pass per distinct (text, instruction)."""

    def __init__(self, encoder: ForwardEncoder, variants: Sequence[Variant]):
        self.encoder = encoder
        self.variants = list(dict.fromkeys(variants))
        self.full_length = encoder.lookahead_length
        too_long = [v for v in self.variants if not 0 <= v[1] <= self.full_length]
        if too_long:
            raise ValueError(
                f"variants {too_long} ask for more look-ahead tokens than the encoder's {self.full_length}"
            )
        self._memo: dict[tuple[str, str | None], np.ndarray] = {}  # -> [variants, d], normalised

    def view(self, pooling: str, lookahead_length: int) -> VariantView:
        variant = (pooling, lookahead_length)
        if variant not in self.variants:
            raise KeyError(f"{variant} is not one of this SharedForward's variants {self.variants}")
        return VariantView(self, self.variants.index(variant))

    def vectors(self, texts: Sequence[str], instructions: Sequence[str | None], batch_size: int) -> np.ndarray:
        """[N, variants, d] for the inputs, computing only pairs not seen before."""
        keys = list(zip(texts, instructions))
        missing = list(dict.fromkeys(key for key in keys if key not in self._memo))
        if missing:
            self._compute(missing, batch_size)
        return (
            np.stack([self._memo[key] for key in keys])
            if keys
            else np.zeros((0, len(self.variants), self.encoder.dimension), dtype=np.float32)
        )

    @torch.inference_mode()
    def _compute(self, keys: list[tuple[str, str | None]], batch_size: int) -> None:
        encoder = self.encoder
        id_lists = [encoder.build_ids(text, instruction, self.full_length) for text, instruction in keys]
        order = sorted(range(len(keys)), key=lambda i: -len(id_lists[i]))  # less padding per batch
        poolers = [Pooling(mode) for mode, _ in self.variants]
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            states = encoder.states(encoder.collate([id_lists[i] for i in chunk]))
            hidden, mask = states.hidden.float(), states.attention_mask
            pooled = torch.stack(
                [
                    encoder.project(pooler(hidden, truncate_lookahead_mask(mask, self.full_length, length), length))
                    for pooler, (_, length) in zip(poolers, self.variants)
                ],
                dim=1,
            )
            pooled = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
            for row, index in enumerate(chunk):
                self._memo[keys[index]] = pooled[row]

    def fingerprint_of(self, index: int) -> str:
        """The fingerprint a stand-alone encoder with this variant's settings would have."""
        mode, length = self.variants[index]
        return self.encoder.with_options(pooling=mode, lookahead_length=length).fingerprint


class VariantView:
    """One variant of a :class:`SharedForward`, usable wherever ``evaluate`` takes an encoder."""

    def __init__(self, shared: SharedForward, index: int):
        self.shared = shared
        self.index = index
        mode, length = shared.variants[index]
        self.pooling = Pooling(mode)
        self.lookahead_length = length
        self.backbone = shared.encoder.backbone
        self.training_info = shared.encoder.training_info
        self.fingerprint = shared.fingerprint_of(index)

    @property
    def dimension(self) -> int:
        return self.shared.encoder.dimension

    @property
    def document_fingerprint(self) -> str:
        return self.fingerprint  # documents and queries: the same variant

    def encode(self, texts: Sequence[str], instructions=None, batch_size: int = 16, **_ignored) -> np.ndarray:
        texts = list(texts)
        per_item = per_item_instructions(instructions, len(texts))
        return np.ascontiguousarray(self.shared.vectors(texts, per_item, batch_size)[:, self.index])

    def encode_queries(self, queries: Sequence[str], instructions=None, **kwargs) -> np.ndarray:
        return self.encode(queries, instructions, **kwargs)

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        return self.encode(documents, instruction, **kwargs)
