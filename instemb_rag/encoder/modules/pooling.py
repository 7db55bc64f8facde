"""Pooling of decoder hidden states into one embedding (paper, appendix A.2).

Every position is derived from the attention mask: valid tokens form one contiguous run
(right or left padding), whose last L positions are the look-ahead slots and whose
position before them is the last input token. Nothing assumes a padding side.
"""

from __future__ import annotations

import torch

from ...choices import PoolingMode, values

POOLING_MODES = values(PoolingMode)


def last_valid_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last attended position of each row, for either padding side."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (attention_mask.long() * positions).max(dim=1).values


def anchor_positions(attention_mask: torch.Tensor, lookahead_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(last input token index [B], look-ahead indices [B, L]) computed from the mask."""
    last = last_valid_positions(attention_mask)
    offsets = torch.arange(lookahead_length, device=attention_mask.device)
    lookahead = last[:, None] - (lookahead_length - 1) + offsets[None, :]
    return last - lookahead_length, lookahead


class Pooling:
    """Stateless pooling; with L = 0 every mode reduces to InputLast."""

    def __init__(self, mode: str = "daap"):
        if mode not in POOLING_MODES:
            raise ValueError(f"Unknown pooling '{mode}'. Choose one of: {', '.join(POOLING_MODES)}")
        self.mode = mode

    def __call__(self, hidden: torch.Tensor, attention_mask: torch.Tensor, lookahead_length: int) -> torch.Tensor:
        input_last_idx, lookahead_idx = anchor_positions(attention_mask, lookahead_length)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        input_last = hidden[rows, input_last_idx]
        if lookahead_length == 0 or self.mode == "input_last":
            return input_last
        specials = hidden[rows[:, None], lookahead_idx]  # [B, L, d]
        if self.mode == "special_first":
            return specials[:, 0]
        if self.mode == "special_mean":
            return specials.mean(dim=1)
        if self.mode == "all_mean":
            return (input_last + specials.sum(dim=1)) / (lookahead_length + 1)
        return 0.5 * (input_last + specials.mean(dim=1))  # daap

    def get_config_dict(self) -> dict:
        return {"mode": self.mode}
