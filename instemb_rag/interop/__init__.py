"""Other libraries' ways of loading a model of this project (docs/sentence-transformers.md).

    sentence_transformers.py  InstEmbModule: a model folder as one sentence-transformers module
                              (imports sentence-transformers; nothing else here does at import)
    export.py                 export_sentence_transformers: a separate copy of any model folder,
                              with the sentence-transformers files and a README

``load_sentence_transformer(folder)`` gives a ``SentenceTransformer`` built from the module class
itself, so no ``trust_remote_code`` is needed (``SentenceTransformer(folder,
trust_remote_code=True)`` gives the same model). The files a folder needs are written by every
save (encoder/st_files.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InstEmbError
from .export import export_sentence_transformers

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["export_sentence_transformers", "load_sentence_transformer", "saved_prompts"]


def saved_prompts(folder: str | os.PathLike | None) -> dict[str, Any]:
    """The prompts and default prompt name a folder's config_sentence_transformers.json holds (the
    defaults, no instruction, for a folder written before the file existed, or None: the default)."""
    from ..encoder.st_files import PROMPTS, ST_CONFIG_FILE

    path = Path(folder) / ST_CONFIG_FILE if folder is not None else None
    saved = json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}
    return {"prompts": saved.get("prompts", PROMPTS), "default_prompt_name": saved.get("default_prompt_name")}


def load_sentence_transformer(
    model: str | os.PathLike | None = None, device: str | None = None, **options: Any
) -> SentenceTransformer:
    """A ``SentenceTransformer`` over a model folder (an LLM folder or a composed folder; None: the
    shipped default), its module class passed in rather than imported by name, so
    sentence-transformers needs no ``trust_remote_code``. Also for folders written before the
    sentence-transformers files were. ``device``: sentence-transformers' (None: CUDA when present);
    ``options``: InstEmbEncoder.from_pretrained's precision, pooling, lookahead_length, max_length."""
    try:
        from sentence_transformers import SentenceTransformer

        from .sentence_transformers import InstEmbModule
    except ImportError as error:
        raise InstEmbError(
            f"sentence-transformers is not installed ({error}): pip install 'instemb-rag[train]' "
            "(sentence-transformers>=6,<7)."
        ) from None
    folder = None if model is None else str(model)
    module = InstEmbModule(folder, **options)
    return SentenceTransformer(modules=[module], device=device, similarity_fn_name="cosine", **saved_prompts(folder))
