"""Errors raised by the index package; each message names the file at fault and the fix."""

from ..errors import BadInputError, InstEmbError

__all__ = ["BadInputError", "EncoderMismatchError", "IndexBusyError", "IndexFolderError", "RayWorkerError"]


class IndexFolderError(InstEmbError):
    """The index folder is missing, damaged, from another model, or from a newer version."""


class EncoderMismatchError(IndexFolderError):
    """The index's document vectors come from another document side than the encoder's (manifest.py
    ``check_encoder``); ``same_shape``: the same width and the same recorded parts, so what differs
    is finer (weights, precision) rather than the kind of model."""

    def __init__(self, message: str, same_shape: bool = False):
        super().__init__(message)
        self.same_shape = same_shape


class IndexBusyError(InstEmbError):
    """Another `instemb-rag index` run holds the index lock."""


class RayWorkerError(InstEmbError):
    """A Ray worker or node failed during `index --ray` (exit code 6); the files committed
    before it stay in the index, and running the same command again embeds the rest."""
