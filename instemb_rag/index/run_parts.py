"""Alias kept for compatibility (issue 68 names round 2): what an index run's two embedding paths
share is index/run_shared.py ("parts" names only a composed model's components)."""

from .run_shared import EMBED_GROUP_CHUNKS, EmbeddedFile, FileTask, IndexReport, chunk_file, file_outcome

__all__ = ["EMBED_GROUP_CHUNKS", "EmbeddedFile", "FileTask", "IndexReport", "chunk_file", "file_outcome"]
