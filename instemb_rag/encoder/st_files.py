"""The two files that make a model folder of this project load as a ``SentenceTransformer`` too.

    modules.json                        one module, saved in the folder's root: the class
                                        ``instemb_rag.interop.sentence_transformers.InstEmbModule``
    config_sentence_transformers.json   its query and document prompts (empty: no instruction
                                        unless the caller gives one), cosine similarity, and
                                        instemb-rag as a requirement sentence-transformers checks

Every save writes them beside the folder's own files (a symmetric LLM folder's
``llm_folder.save`` and ``export_llm_folder``, the composed folders of composed/). The class is named
as a string, never imported: it lives above encoder/ (interop/) and loads the folder through
``InstEmbEncoder.from_pretrained``, so the folder's own config stays the one truth and nothing
here changes a fingerprint or an embedding.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["MODULE_CLASS", "MODULES_FILE", "PROMPTS", "ST_CONFIG_FILE", "write_sentence_transformers_files"]

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
MODULE_CLASS = "instemb_rag.interop.sentence_transformers.InstEmbModule"
# encode_query / encode_document without a prompt pick these by name: no instruction.
PROMPTS = {"query": "", "document": ""}


def write_sentence_transformers_files(folder: str | os.PathLike) -> None:
    """Write ``modules.json`` and ``config_sentence_transformers.json`` into ``folder``."""
    folder = Path(folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_CLASS}]
    config = {
        "model_type": "SentenceTransformer",
        "prompts": PROMPTS,
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
        "requirements": {
            "instemb-rag": {
                "specifier": ">=0.1",
                "reason": f"the folder's module class ({MODULE_CLASS}) is part of instemb-rag",
            }
        },
    }
    (folder / MODULES_FILE).write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    (folder / ST_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
