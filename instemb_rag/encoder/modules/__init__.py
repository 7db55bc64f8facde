"""The encoder's saved modules: prompt template, look-ahead tokens and pooling."""

from .lookahead import LookAheadTokens
from .pooling import POOLING_MODES, Pooling
from .template import PromptTemplate

__all__ = ["LookAheadTokens", "POOLING_MODES", "Pooling", "PromptTemplate"]
