"""A sentence-encoder teacher: an installed one by name, or any local sentence-transformers folder.

A teacher runs without sentence-transformers where its folder allows (the query path imports
neither it nor scikit-learn); the library (the train extra) loads the folders that need it and
the teacher that fine-tuning trains.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..instructions import paste_instruction
from .errors import TeacherError, import_sentence_transformers
from .fingerprint import folder_fingerprint
from .registry import TEACHERS, install_command, installed_teacher_dir, teacher_choices

# How a teacher reads a query with its instruction: the instruction pasted in front. The rule is
# instructions.paste_instruction, which the encoder's sentence encoder reads too (older name).
teacher_text = paste_instruction


class Teacher:
    """A loaded sentence encoder with the identity the embedding cache keys on."""

    def __init__(self, model, name: str, folder: Path, fingerprint: str):
        self.model = model
        self.name = name
        self.folder = folder
        self.fingerprint = fingerprint
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (still there, deprecated).
        dimension_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension = dimension_of()
        if not dimension:
            raise TeacherError(f"{folder}: the model does not declare its embedding dimension (no Pooling module?).")
        self.dimension = int(dimension)

    def encode(self, texts: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """float32 embeddings of shape (len(texts), dimension), each of L2 norm 1."""
        if isinstance(texts, str):
            raise TypeError("Teacher.encode takes a list of texts, not one string: wrap it in a list.")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        embeddings = self.model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.asarray(embeddings, dtype=np.float32)

    def __repr__(self) -> str:
        return f"Teacher({self.name!r}, dimension={self.dimension}, fingerprint={self.fingerprint[:12]})"


def resolve_teacher_folder(name_or_path: str | Path) -> tuple[str, Path]:
    """(name, folder) of an installed teacher's name or of a local sentence-transformers folder."""
    text = str(name_or_path)
    if text in TEACHERS:
        folder = installed_teacher_dir(text)
        if folder is None:
            raise TeacherError(f"teacher {text!r} is not installed: run `{install_command(text)}`.")
        return text, folder
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise TeacherError(
            f"{text!r} is neither a teacher name ({teacher_choices()}) nor a sentence-transformers folder."
        )
    if not (folder / "modules.json").is_file():
        raise TeacherError(f"{folder} is not a sentence-transformers folder: it holds no modules.json.")
    if not any(folder.rglob("*.safetensors")):
        raise TeacherError(
            f"{folder} holds no .safetensors weights: instemb-rag loads safetensors only, never pickled "
            "pytorch_model.bin (convert it once with safetensors.torch.save_file)."
        )
    return folder.resolve().name, folder.resolve()


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_teacher(name_or_path: str | Path, device: str = "cpu", for_training: bool = False) -> Teacher:
    """Load a teacher: ``minilm`` / ``mpnet`` (installed) or a local sentence-transformers folder.

    It runs without sentence-transformers (transformers' own model class, the folder's pooling and
    normalisation: teachers/st_folder.py, the same vectors) unless the folder uses
    modules that reader does not run, or ``for_training`` asks for a ``SentenceTransformer`` to
    train (teachers/finetune.py): then the library loads it (the train extra)."""
    name, folder = resolve_teacher_folder(name_or_path)
    fingerprint = folder_fingerprint(folder)
    device = _resolve_device(device)
    model = None if for_training else _load_without_library(folder, device)
    if model is None:
        model = _load_with_library(folder, device)
    return Teacher(model, name, folder, fingerprint)


def _load_without_library(folder: Path, device: str):
    """The folder's modules run by transformers alone; None when it uses others (the library's job)."""
    from .st_folder import SentenceEncoderModel, UnsupportedSentenceFolder

    try:
        return SentenceEncoderModel.load(folder, device=device)
    except UnsupportedSentenceFolder:
        return None
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise TeacherError(f"cannot load the teacher in {folder}: {error}") from None


def _load_with_library(folder: Path, device: str):
    sentence_transformers = import_sentence_transformers()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the "Loading weights" bar; the trainer shows its own progress
    try:
        return sentence_transformers.SentenceTransformer(str(folder), device=device, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise TeacherError(f"cannot load the teacher in {folder}: {error}") from None
