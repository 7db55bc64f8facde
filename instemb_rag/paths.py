"""Where instemb-rag keeps its caches (converted models, weight fingerprints, embeddings)."""

from __future__ import annotations

import os
from pathlib import Path


def instemb_home() -> Path:
    """The cache root: ``$INSTEMB_HOME`` or ``~/.cache/instemb-rag``."""
    configured = os.environ.get("INSTEMB_HOME")
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "instemb-rag"
    root.mkdir(parents=True, exist_ok=True)
    return root
