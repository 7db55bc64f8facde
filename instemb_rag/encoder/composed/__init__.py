"""An encoder made of parts: documents in two spaces side by side, queries from one LLM prefill.

config.py   instemb_parts.json (the parts, the mix weight) and its one reader; llm_checkpoint_of
            (the symmetric LLM checkpoint inside a two-space folder)
gate.py     WeightGate: the mix weight per query, read off the LLM's pooled state
encoder.py  TwoSpacesEncoder: the document side and the query side over the parts
"""

from __future__ import annotations

from .config import PARTS_FILE, is_composed, llm_checkpoint_of

__all__ = ["PARTS_FILE", "is_composed", "llm_checkpoint_of"]
