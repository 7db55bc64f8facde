"""The shipped default model's own settings, read from its folder's JSON without loading it (no
torch): what a help text can say before any model is loaded."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SHIPPED_FOLDER", "shipped_knob", "shipped_knob_words"]

# The shipped default model's folder (encoder/model.py's SHIPPED_MODEL_FOLDER, which imports torch).
SHIPPED_FOLDER = Path(__file__).resolve().parent / "default_checkpoint"
PARTS_FILE = "instemb_parts.json"  # encoder/composed/config.py's PARTS_FILE


def shipped_knob(knob: str, folder: Path = SHIPPED_FOLDER) -> float | None:
    """The folder's own value of a query-time knob (named as knobs.py declares it): its
    query route's in instemb_parts.json (format 2, which the shipped default is in; older formats
    are read by encoder/composed/legacy.py alone); None when it names none or the file cannot be read."""
    try:
        config = json.loads((Path(folder) / PARTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    routes = config.get("routes") if isinstance(config, dict) else None
    query_route = routes.get("query") if isinstance(routes, dict) else None
    value = query_route.get(knob) if isinstance(query_route, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def shipped_knob_words(knob: str) -> str:
    """For a help text: "the model's own (the shipped default's: 1.0)", or "the model's own"."""
    value = shipped_knob(knob)
    return "the model's own" if value is None else f"the model's own (the shipped default's: {value})"
