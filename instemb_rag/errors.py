__all__ = ["BadInputError", "CheckpointError", "FingerprintMismatchError", "InstEmbError", "ModelNotFoundError"]
"""Exceptions whose messages tell the user what went wrong and what to do about it."""


class InstEmbError(Exception):
    """Base class: every message names the file or field at fault and the fix."""


class ModelNotFoundError(InstEmbError):
    pass


class CheckpointError(InstEmbError):
    pass


class FingerprintMismatchError(CheckpointError):
    pass


class BadInputError(InstEmbError):
    """The documents or the query given cannot be used (empty folder, empty query, ...). Here, below
    every layer, so that the query service (service/) and the index (index/errors.py, which hands it
    out) raise the one class."""
