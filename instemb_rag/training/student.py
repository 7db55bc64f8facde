"""The student's forward passes inside the trainer's losses, behind one small interface.

``compute_losses`` asks a *student runner* for two things:

    forward(pairs)                       one pass over (text, instruction) pairs with the
                                         look-ahead slots: a ``StudentPass``
    input_last_with_dropout(records, p)  the |x| state of each record's input without the
                                         slots, under dropout (SupCon's second view)

``FullStudent`` (here) runs the whole model on token ids, the default. ``CachedStudent``
(cached_student.py) reads the frozen layers' states from the prefix cache and runs only the
trainable top K layers; both return the same tensors up to rounding (tests/training/test_cached_student.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from ..models.pooling import anchor_positions, last_valid_positions
from .records import TrainingRecord
from .teacher_cache import input_ids_without_slots


def needs_output_pass(config) -> bool:
    """Whether a loss reads the student's pass over the answers (the retrieval loss's documents,
    SupCon's student_output view)."""
    t = config.training
    return t.retrieval_weight > 0 or (t.contrastive_weight > 0 and "student_output" in t.views)


@dataclass
class StudentPass:
    """One student forward over (text, instruction) pairs with look-ahead slots, right-padded."""

    hidden: torch.Tensor  # [B, T, d]
    attention_mask: torch.Tensor  # [B, T]
    input_last: torch.Tensor  # [B] position of the last input token
    lookahead_idx: torch.Tensor  # [B, L]

    def at_input_last(self) -> torch.Tensor:
        rows = torch.arange(self.hidden.shape[0], device=self.hidden.device)
        return self.hidden[rows, self.input_last]

    def pooled(self, encoder) -> torch.Tensor:
        """The embedding search compares (the encoder's pooling, DAAP by default)."""
        return encoder.project(encoder.pooling(self.hidden, self.attention_mask, self.lookahead_idx.shape[1]))

    @classmethod
    def from_states(cls, hidden: torch.Tensor, attention_mask: torch.Tensor, lookahead_length: int) -> StudentPass:
        input_last, lookahead_idx = anchor_positions(attention_mask, lookahead_length)
        return cls(hidden, attention_mask, input_last, lookahead_idx)


def at_last_valid(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, d]: each row's state at its last real (unpadded) position."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[rows, last_valid_positions(attention_mask)]


class StudentRunner(Protocol):
    def forward(self, pairs: Sequence[tuple[str, str | None]]) -> StudentPass: ...

    def input_last_with_dropout(self, records: Sequence[TrainingRecord], dropout: float) -> torch.Tensor: ...


class FullStudent:
    """Every pass runs the whole model from the token ids (no cache)."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.length = encoder.lookahead.length

    def forward(self, pairs: Sequence[tuple[str, str | None]]) -> StudentPass:
        ids = [self.encoder.build_ids(text, instruction, self.length) for text, instruction in pairs]
        states = self.encoder.states(self.encoder.collate(ids, padding_side="right"))
        return StudentPass.from_states(states.hidden, states.attention_mask, self.length)

    def input_last_with_dropout(self, records: Sequence[TrainingRecord], dropout: float) -> torch.Tensor:
        """Dropout on the input embeddings (Llama has no dropout layers); the look-ahead slots are
        left out because a causal model's |x| state cannot see them anyway."""
        x_ids = [input_ids_without_slots(self.encoder, record, self.length) for record in records]
        states = self.encoder.states(self.encoder.collate(x_ids, padding_side="right"), embed_dropout=dropout)
        return at_last_valid(states.hidden, states.attention_mask)
