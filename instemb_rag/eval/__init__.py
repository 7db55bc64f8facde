"""Evaluation: loaders, metrics (ranx + FollowIR p-MRR), embedding cache, task runner, MTEB adapter."""

from .cache import EmbeddingCache
from .data import EvalDataError, load_beir, load_stance, load_sts
from .results import TaskResult, write_results_json
from .tasks import TASKS, evaluate

__all__ = [
    "TASKS",
    "EmbeddingCache",
    "EvalDataError",
    "TaskResult",
    "evaluate",
    "load_beir",
    "load_stance",
    "load_sts",
    "write_results_json",
]
