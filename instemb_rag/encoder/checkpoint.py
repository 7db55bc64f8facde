"""Alias kept for compatibility (issue 68 names round 2): the LLM folder's format, its one reader
and one writer, are encoder/llm_folder.py ("checkpoint" names only a trainer's saved step). The old
names are kept here too: ``is_checkpoint`` (``is_llm_folder``), ``export_checkpoint``
(``export_llm_folder``), ``load_parts`` (``load_contents``), ``CheckpointParts``
(``LlmFolderContents``)."""

from .llm_folder import (
    ADAPTED_FILE,
    CONFIG_FILE,
    ENCODER_FILES,
    FORMAT_VERSION,
    LORA_DIR,
    NOT_IN_FINGERPRINT,
    EncoderConfig,
    LlmFolderContents,
    blended_projection,
    check_complete,
    export_llm_folder,
    is_llm_folder,
    load_contents,
    overlay_adapted,
    read_config,
    record_weight_files,
    save,
    trained_names,
    weight_files,
    write_folder_atomically,
)

CheckpointParts = LlmFolderContents  # alias kept for compatibility (issue 68 names round 2)
export_checkpoint = export_llm_folder  # alias kept for compatibility (issue 68 names round 2)
is_checkpoint = is_llm_folder  # alias kept for compatibility (issue 68 names round 2)
load_parts = load_contents  # alias kept for compatibility (issue 68 names round 2)

__all__ = [
    "ADAPTED_FILE",
    "CONFIG_FILE",
    "ENCODER_FILES",
    "FORMAT_VERSION",
    "LORA_DIR",
    "NOT_IN_FINGERPRINT",
    "CheckpointParts",
    "EncoderConfig",
    "LlmFolderContents",
    "blended_projection",
    "check_complete",
    "export_checkpoint",
    "export_llm_folder",
    "is_checkpoint",
    "is_llm_folder",
    "load_contents",
    "load_parts",
    "overlay_adapted",
    "read_config",
    "record_weight_files",
    "save",
    "trained_names",
    "weight_files",
    "write_folder_atomically",
]
