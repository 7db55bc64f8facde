"""EncoderSettings: how an encoder turns its weights into embeddings, fixed at construction.

Settings are frozen so no caller can swap one and forget to restore it (the trainer used to
swap ``max_length`` around saving, the ablations ``pooling`` and ``lookahead_length``). A
different setting is a different encoder: ``encoder.with_options(...)`` returns one that
shares the weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InstEmbError
from .modules.pooling import Pooling
from .quantize import DEFAULT_PRECISION

__all__ = ["EncoderSettings"]


@dataclass(frozen=True)
class EncoderSettings:
    pooling: str = "daap"
    lookahead_length: int = 8  # look-ahead tokens used at inference (at most the trained number)
    max_length: int = 512  # tokens per input, look-ahead slots included
    precision: str = DEFAULT_PRECISION  # weights are quantized at construction, so never changed after

    def __post_init__(self) -> None:
        Pooling(self.pooling)  # refuses an unknown mode (ValueError, as it always has)
        if self.lookahead_length < 0:
            raise InstEmbError(f"lookahead_length must be 0 or more, not {self.lookahead_length}.")
        if self.max_length < 8:
            raise InstEmbError(f"max_length must be at least 8, not {self.max_length}.")

    def with_changes(self, **changes) -> EncoderSettings:
        """A copy with the given settings changed; ``None`` means keep the current value."""
        return replace(self, **{key: value for key, value in changes.items() if value is not None})

    def get_config_dict(self) -> dict:
        return {
            "pooling": self.pooling,
            "lookahead_length": self.lookahead_length,
            "max_length": self.max_length,
            "precision": self.precision,
        }
