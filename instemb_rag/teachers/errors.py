"""Errors of the teachers package; each message names the folder or part at fault and the fix."""

from __future__ import annotations

from ..errors import InstEmbError, ModelNotFoundError

TRAIN_EXTRA_HINT = "pip install 'instemb-rag[train]'"


class TeacherError(ModelNotFoundError):
    """A teacher cannot be installed or loaded (exit code 5, like any model that cannot be had)."""


class TeacherCacheError(InstEmbError):
    """The teacher-embedding cache on disk is damaged or belongs to another teacher."""


def import_sentence_transformers():
    """The sentence_transformers module, or a TeacherError naming the extra that brings it."""
    try:
        import sentence_transformers
    except ImportError as error:
        raise TeacherError(
            f"sentence-transformers is not installed ({error}): teachers need the train extra, {TRAIN_EXTRA_HINT}"
        ) from None
    return sentence_transformers
