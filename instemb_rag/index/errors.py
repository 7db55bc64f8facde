"""Errors raised by the index package; each message names the file at fault and the fix."""

from ..errors import InstEmbError


class IndexFolderError(InstEmbError):
    """The index folder is missing, damaged, from another model, or from a newer version."""


class IndexBusyError(InstEmbError):
    """Another `instemb-rag index` run holds the index lock."""


class BadInputError(InstEmbError):
    """The documents or the query given cannot be used (empty folder, empty query, ...)."""


class RayWorkerError(InstEmbError):
    """A Ray worker or node failed during `index --ray` (exit code 6); the files committed
    before it stay in the index, and running the same command again embeds the rest."""
