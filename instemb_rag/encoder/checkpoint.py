"""Alias kept for compatibility (issue 68 names round 2): the LLM folder's format, its one reader
and one writer, are encoder/llm_folder.py ("checkpoint" names only a trainer's saved step). The old
names are kept here too: ``is_checkpoint`` (``is_llm_folder``), ``export_checkpoint``
(``export_llm_folder``), ``load_parts`` (``load_contents``), ``CheckpointParts``
(``LlmFolderContents``)."""

from . import llm_folder as _llm_folder
from .llm_folder import *  # noqa: F403 (the whole face of the new module, under its names)
from .llm_folder import LlmFolderContents, export_llm_folder, is_llm_folder, load_contents

CheckpointParts = LlmFolderContents  # alias kept for compatibility (issue 68 names round 2)
export_checkpoint = export_llm_folder  # alias kept for compatibility (issue 68 names round 2)
is_checkpoint = is_llm_folder  # alias kept for compatibility (issue 68 names round 2)
load_parts = load_contents  # alias kept for compatibility (issue 68 names round 2)

__all__ = [*_llm_folder.__all__, "CheckpointParts", "export_checkpoint", "is_checkpoint", "load_parts"]
