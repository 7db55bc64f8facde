"""Where instemb-rag keeps its caches (``instemb_home``) and finds the development data (``data_root``)."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "INSTEMB_HOME"
DATA_ROOT_ENV = "INSTEMB_DATA_ROOT"
# Older names, still read when INSTEMB_DATA_ROOT is unset.
LEGACY_DATA_ROOT_ENVS = ("INSTEMB_EVAL_DATA", "INSTEMB_SHARED_DATA")


def instemb_home() -> Path:
    """The cache root: ``$INSTEMB_HOME`` or ``~/.cache/instemb-rag``."""
    configured = os.environ.get(HOME_ENV)
    root = Path(configured).expanduser() if configured else Path.home() / ".cache" / "instemb-rag"
    root.mkdir(parents=True, exist_ok=True)
    return root


def default_data_root() -> Path:
    """``../shared/data`` beside the project checkout (the folder above the one holding instemb_rag/)."""
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def data_root() -> Path:
    """The folder holding the development data sets (scifact/, vaswani/, msmarco_qa/, ...).

    ``$INSTEMB_DATA_ROOT`` when set (``$INSTEMB_EVAL_DATA`` or ``$INSTEMB_SHARED_DATA``, the older
    names, otherwise), else ``../shared/data`` beside the project checkout. Not created: callers
    say what is missing.
    """
    for name in (DATA_ROOT_ENV, *LEGACY_DATA_ROOT_ENVS):
        configured = os.environ.get(name)
        if configured:
            return Path(configured).expanduser()
    return default_data_root()
