"""SentenceEncoder: the sentence-encoder part of an encoder of parts (encoder/composed/).

A small sentence encoder (all-MiniLM-L6-v2 by default, the ``minilm`` teacher) that reads no
instruction: the document side of a two-tower encoder (queries by the InstEmb LLM into its
space), the second space of a two-space or instruction-effect encoder, and, with the
instruction pasted in front of a query, the anchor a query route starts from
(``anchor_vectors``).

Its config entry (the ``sentence_encoder`` part of ``instemb_parts.json``)

    {"encoder": "minilm", "fingerprint": "<sha256 of its files>", "dimension": 384}

references the sentence encoder by name (an installed teacher, teachers/registry.py) or by a
folder path relative to the model folder, and by fingerprint: a model whose query side was
trained into one space refuses to load over another (an index of its documents would be
searched with queries aimed elsewhere). A folder sentence encoder (a fine-tuned copy) ships inside the model
folder as ``SENTENCE_ENCODER_DIR``: a save copies it there and records it so, so no absolute path reaches
a config or a fingerprint and a moved folder loads as it was.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import CheckpointError, FingerprintMismatchError, InstEmbError
from ...instructions import paste_instruction

__all__ = ["SENTENCE_ENCODER_DIR", "AnchorTruncationWarning", "SentenceEncoder", "checked_config"]

# The folder a sentence encoder of its own (a fine-tuned copy) ships in, inside a model folder.
SENTENCE_ENCODER_DIR = "sentence_encoder"


class AnchorTruncationWarning(UserWarning):
    """An instruction pasted in front of a query did not fit the sentence encoder's window with the
    query: its part read the query whole and the instruction's end (``fitted_anchor_text``)."""

    cli_label = "note"  # the command line prints it as its other notes (cli/__init__.py)


@dataclass(frozen=True)
class Shortened:
    """What the sentence encoder's part left out of one instruction (``fitted_anchor_text``)."""

    words: int  # the instruction's words
    kept_words: int  # its last words the part read (0: none)
    query_cut: bool  # the query alone is longer than the window: its end was cut after all


CONFIG_KEYS = ("encoder", "fingerprint", "dimension")


def checked_config(raw: dict, where: str) -> dict:
    """The sentence encoder's config entry, checked: ``encoder``, ``fingerprint``, ``dimension``."""
    if not isinstance(raw, dict) or set(raw) != set(CONFIG_KEYS):
        raise CheckpointError(
            f"{where}: the sentence encoder's entry must hold {list(CONFIG_KEYS)}; found {raw!r}. The folder is damaged."
        )
    if not isinstance(raw["dimension"], int) or raw["dimension"] < 1:
        raise CheckpointError(f"{where}: the sentence encoder's dimension must be a positive integer.")
    return dict(raw)


def _model_folder(model_folder: Path | None, checkpoint_folder: Path | None) -> Path | None:
    """``model_folder``, or the old keyword ``checkpoint_folder`` (issue 68 names round 2) in its place."""
    if checkpoint_folder is None:
        return model_folder
    if model_folder is not None:
        raise TypeError("pass model_folder or its old name checkpoint_folder, not both")
    return checkpoint_folder


class SentenceEncoder:
    """A loaded sentence encoder that embeds documents (L2-normalised float32), with its identity."""

    def __init__(self, teacher, reference: str):
        # teacher: a teachers.Teacher (name, folder, fingerprint, dimension, encode).
        self.teacher = teacher
        self.reference = reference  # as the config names it: a teacher name or a folder path

    def anchor_vectors(self, queries: Sequence[str], instructions: Sequence[str | None]) -> np.ndarray:
        """The sentence encoder's own vectors of each query with its instruction pasted in front.

        The sentence encoder cuts what runs past its window, which would be the query's end: an
        instruction that does not fit with the query is shortened from its start instead
        (``fitted_anchor_text``), and that is said once per call (AnchorTruncationWarning). Texts that
        fit are read exactly as pasted."""
        fitted = [self.fitted_anchor_text(query, instruction) for query, instruction in zip(queries, instructions)]
        self.say_shortened(fitted, len(fitted))
        return self.encode([text for text, _ in fitted])

    def fitted_anchor_text(self, query: str, instruction: str | None) -> tuple[str, Shortened | None]:
        """``instruction + " " + query`` as the sentence encoder reads it, and what was left out.

        The query is kept whole; an instruction that does not fit beside it loses words from its
        start, down to the first whole sentence that fits (its last sentences, which say what is
        wanted, and the words next to the query stay). Without a whole sentence that fits, its last
        words that do; with no room at all (a query as long as the window), the query alone."""

        pasted = paste_instruction(query, instruction)
        if not instruction or self.tokens(pasted) <= self.max_length:
            return pasted, None
        starts = [match.start() for match in re.finditer(r"\S+", instruction)]
        sentence_starts = {
            start for n, start in enumerate(starts) if n and re.search(r"[.!?][\"')\]]*$", instruction[:start].rstrip())
        }

        def fits(first_word: int) -> bool:
            return self.tokens(paste_instruction(query, instruction[starts[first_word] :])) <= self.max_length

        low, high = 0, len(starts)  # the first kept word: the smallest index whose rest fits (len: none)
        while low < high:
            middle = (low + high) // 2
            if fits(middle):
                high = middle
            else:
                low = middle + 1
        first = next((n for n in range(low, len(starts)) if starts[n] in sentence_starts), low)
        kept = instruction[starts[first] :] if first < len(starts) else ""
        query_cut = not kept and self.tokens(query) > self.max_length
        shortened = Shortened(words=len(starts), kept_words=len(starts) - first, query_cut=query_cut)
        return (paste_instruction(query, kept) if kept else query), shortened

    def say_shortened(self, fitted: Sequence[tuple[str, Shortened | None]], total: int) -> None:
        """Once per call: that the sentence encoder did not read an instruction whole, and what it read."""
        shortened = [item for _, item in fitted if item is not None]
        if not shortened:
            return
        window = f"({self.max_length} tokens, about {self.max_length * 3 // 4} words)"
        if total > 1:
            message = (
                f"{len(shortened)} of {total} instructions, with their queries, are longer than the sentence encoder "
                f"({self.reference}) reads at once {window}: it read each query whole and as much of the end of its "
                "instruction as fits, from a sentence's start where one does (the LLM read them whole)."
            )
        elif shortened[0].query_cut:
            message = (
                f"the query alone is longer than the sentence encoder ({self.reference}) reads at once {window}: it "
                "read the query's start and none of the instruction (the LLM read both whole)."
            )
        else:
            kept = shortened[0].kept_words
            read = (
                f"the last {kept} of the instruction's {shortened[0].words} words"
                if kept
                else "none of the instruction"
            )
            message = (
                f"the instruction and the query are longer than the sentence encoder ({self.reference}) reads at once "
                f"{window}: it read the query whole and {read} (the LLM read all of it). A shorter instruction is "
                "read whole by both."
            )
        warnings.warn(message, AnchorTruncationWarning, stacklevel=4)

    @property
    def fingerprint(self) -> str:
        return self.teacher.fingerprint

    @property
    def dimension(self) -> int:
        return self.teacher.dimension

    @property
    def max_length(self) -> int:
        """Tokens the sentence encoder reads of a document (the rest is cut, as its library does)."""
        return int(self.teacher.model.max_seq_length)

    @property
    def name(self) -> str:
        return self.teacher.name

    @property
    def is_named_teacher(self) -> bool:
        """Named as an installed teacher (``minilm``), not a folder of its own."""
        from ...teachers.registry import TEACHERS

        return self.reference in TEACHERS

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """Documents as the sentence encoder embeds them: type-checked, with no instruction."""
        from ..combine import refuse_document_instruction

        refuse_document_instruction(instruction, self.reference)
        documents = list(documents)
        for position, text in enumerate(documents):
            if not isinstance(text, str):
                raise InstEmbError(f"Text #{position} is {type(text).__name__}, not a string.")
        return self.encode(
            documents, batch_size=kwargs.get("batch_size", 64), show_progress=kwargs.get("show_progress", False)
        )

    def get_config_dict(self) -> dict:
        return {"encoder": self.reference, "fingerprint": self.fingerprint, "dimension": self.dimension}

    def recorded_config(self) -> dict:
        """The entry a save records: a folder of its own as ``SENTENCE_ENCODER_DIR`` (the save copies it
        there), a named teacher as it is, so no absolute path reaches a config or a fingerprint."""
        config = self.get_config_dict()
        return config if self.is_named_teacher else {**config, "encoder": SENTENCE_ENCODER_DIR}

    def save(self, folder: str | Path) -> None:
        """A folder of its own is copied into ``folder / TOWER_DIR``; a named teacher is installed, not copied."""
        if not self.is_named_teacher:
            import shutil

            shutil.copytree(
                self.teacher.folder, Path(folder) / SENTENCE_ENCODER_DIR, ignore=shutil.ignore_patterns(".*")
            )

    def to(self, device) -> SentenceEncoder:
        """The sentence encoder on ``device`` (its dtype stays its own)."""
        self.teacher.model.to(device)
        return self

    def encode(self, documents: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        return self.teacher.encode(list(documents), batch_size=batch_size, show_progress=show_progress)

    @property
    def tokenizer(self):
        """The sentence encoder's tokenizer (a transformers tokenizer): what counts a document's tokens."""
        return self.teacher.model.tokenizer

    def tokens(self, text: str) -> int:
        """How many tokens the sentence encoder's tokenizer makes of ``text`` (special tokens included)."""
        # verbose=False: a text longer than the window is counted, not embedded (no "indexing errors" log).
        return len(self.tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])

    @classmethod
    def load(
        cls,
        reference: str,
        device: str = "cpu",
        model_folder: Path | None = None,
        *,
        checkpoint_folder: Path | None = None,
    ) -> SentenceEncoder:
        """Load by teacher name (``minilm``) or sentence-transformers folder.

        A relative folder is read from inside ``model_folder`` (a fine-tuned sentence encoder ships there, as
        ``sentence_encoder/``); a folder given to a command is referenced absolute while loaded
        (``recorded_reference``) and recorded as ``sentence_encoder/`` once saved. ``checkpoint_folder``
        is the old name of ``model_folder`` (issue 68 names round 2), still read.
        """
        from ...teachers import load_teacher
        from ...teachers.registry import TEACHERS

        model_folder = _model_folder(model_folder, checkpoint_folder)
        target: str | Path = reference
        if reference not in TEACHERS and model_folder is not None and not Path(reference).is_absolute():
            target = Path(model_folder) / reference
        return cls(load_teacher(target, device=device), reference)

    @staticmethod
    def recorded_reference(reference: str) -> str:
        """How a sentence encoder a user named is referenced while loaded: a teacher name as is, a folder
        absolute (a saved model folder copies the folder in and records it as ``sentence_encoder/``)."""
        from ...teachers.registry import TEACHERS

        return reference if reference in TEACHERS else str(Path(reference).expanduser().resolve())

    @classmethod
    def from_config(
        cls,
        config: dict,
        device: str = "cpu",
        model_folder: Path | None = None,
        where: str = "model folder",
        *,
        checkpoint_folder: Path | None = None,
    ) -> SentenceEncoder:
        """The sentence encoder a model folder's config entry names, checked against it (``checkpoint_folder``:
        the old name of ``model_folder``, still read)."""
        config = checked_config(config, where)
        model_folder = _model_folder(model_folder, checkpoint_folder)
        sentence_encoder = cls.load(config["encoder"], device=device, model_folder=model_folder)
        if sentence_encoder.fingerprint != config["fingerprint"]:
            raise FingerprintMismatchError(
                f"{where} was trained to embed queries into the space of document sentence encoder "
                f"'{config['encoder']}' with fingerprint {config['fingerprint'][:16]}, but the one found "
                f"({sentence_encoder.teacher.folder}) has fingerprint {sentence_encoder.fingerprint[:16]}. Reinstall it "
                f"(instemb-rag teachers install {config['encoder']}) or use a model trained on this one."
            )
        if sentence_encoder.dimension != config["dimension"]:
            raise CheckpointError(
                f"{where}: document sentence encoder dimension {sentence_encoder.dimension} != {config['dimension']}."
            )
        return sentence_encoder
