__all__ = ["CheckpointError", "FingerprintMismatchError", "InstEmbError", "ModelNotFoundError"]
"""Exceptions whose messages tell the user what went wrong and what to do about it."""


class InstEmbError(Exception):
    """Base class: every message names the file or field at fault and the fix."""


class ModelNotFoundError(InstEmbError):
    pass


class CheckpointError(InstEmbError):
    pass


class FingerprintMismatchError(CheckpointError):
    pass
