"""DocumentTower: the document side of a two-tower encoder, a small sentence encoder.

In two-tower mode documents never carry an instruction, so they need no LLM: a sentence encoder
(all-MiniLM-L6-v2 by default, the ``minilm`` teacher) embeds them once, at a tenth of the cost,
and the query tower (the InstEmb LLM with look-ahead tokens, DAAP and a projection head) embeds
each query under its instruction *into that space*. Plain search then keeps the sentence
encoder's quality, and the instruction lives where the LLM reads it.

A saved module, like ``Projection``: the ``document_tower`` entry of ``instemb_config.json``

    {"encoder": "minilm", "fingerprint": "<sha256 of its files>", "dimension": 384}

references the sentence encoder by name (an installed teacher, teachers/registry.py) or by a
folder path relative to the checkpoint, and by fingerprint: a checkpoint whose query tower was
trained into one document space refuses to load over another (an index of its documents would
be searched with queries aimed elsewhere). A folder tower (a fine-tuned copy) ships inside the
checkpoint as ``document_tower/``: save and export copy it there and record it so
(encoder/checkpoint.py, encoder/two_tower.py), so no absolute path reaches a config or a
fingerprint and a moved checkpoint loads as it was.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import CheckpointError, FingerprintMismatchError, InstEmbError

__all__ = ["AnchorTruncationWarning", "DocumentTower", "checked_config", "refuse_document_instruction"]


class AnchorTruncationWarning(UserWarning):
    """The instruction pasted in front of a query pushed the query's end out of the sentence
    encoder's window: the anchor then never reads it."""


CONFIG_KEYS = ("encoder", "fingerprint", "dimension")
OPTIONAL_KEYS = ("query_anchor",)


def checked_config(raw: dict, where: str) -> dict:
    """The ``document_tower`` config entry, checked: ``encoder``, ``fingerprint``, ``dimension``
    and, for an anchored query tower, ``query_anchor: true``."""
    if not isinstance(raw, dict) or not set(CONFIG_KEYS) <= set(raw) <= set(CONFIG_KEYS + OPTIONAL_KEYS):
        raise CheckpointError(
            f"{where}: document_tower must hold {list(CONFIG_KEYS)} (and optionally {list(OPTIONAL_KEYS)}); "
            f"found {raw!r}. The checkpoint is damaged."
        )
    if not isinstance(raw.get("query_anchor", False), bool):
        raise CheckpointError(f"{where}: document_tower.query_anchor must be true or false.")
    if not isinstance(raw["dimension"], int) or raw["dimension"] < 1:
        raise CheckpointError(f"{where}: document_tower.dimension must be a positive integer.")
    return dict(raw)


class DocumentTower:
    """A loaded sentence encoder that embeds documents (L2-normalised float32), with its identity."""

    def __init__(self, sentence_encoder, reference: str, query_anchor: bool = False):
        # sentence_encoder: a teachers.Teacher (name, folder, fingerprint, dimension, encode).
        self.sentence_encoder = sentence_encoder
        self.reference = reference  # as the config names it: a teacher name or a folder path
        # Anchored query tower: a query's embedding is the tower's own vector of "instruction +
        # query" plus the LLM's correction (the projection head's output), normalised. At a zero
        # head it is exactly the anchor a user could build with the sentence encoder alone; what
        # training adds is what only the LLM reads.
        self.query_anchor = bool(query_anchor)

    def anchored(self, query_anchor: bool = True) -> DocumentTower:
        """The same sentence encoder with queries anchored (or not): another encoder identity."""
        return DocumentTower(self.sentence_encoder, self.reference, query_anchor)

    def anchor_vectors(self, queries: Sequence[str], instructions: Sequence[str | None]) -> np.ndarray:
        """The tower's own vectors of each query with its instruction pasted in front.

        The sentence encoder cuts what runs past its window, so a long instruction pushes the end
        of the query out: that warns (AnchorTruncationWarning, once per call); the vectors are
        those of the pasted texts either way."""
        from ...teachers import teacher_text

        texts = [teacher_text(query, instruction) for query, instruction in zip(queries, instructions)]
        self.warn_if_instruction_cuts(texts, instructions)
        return self.encode(texts)

    def warn_if_instruction_cuts(self, texts: Sequence[str], instructions: Sequence[str | None]) -> None:
        """Warn once when an instruction + query text runs past the window (only texts with an
        instruction are counted: without one there is nothing to shorten)."""
        pasted = [text for text, instruction in zip(texts, instructions) if instruction]
        if not pasted:
            return
        limit = self.max_length
        lengths = [len(ids) for ids in self.tokenizer(pasted, add_special_tokens=True, verbose=False)["input_ids"]]
        cut = [length - limit for length in lengths if length > limit]
        if cut:
            warnings.warn(
                f"{len(cut)} of {len(texts)} queries run past the {limit}-token window of the document tower "
                f"({self.reference}) once their instruction is pasted in front: up to {max(cut)} tokens at the "
                "end of the query are cut from its anchor vector, so the anchor does not read them. Shorten "
                "the instruction.",
                AnchorTruncationWarning,
                stacklevel=3,
            )

    @property
    def fingerprint(self) -> str:
        return self.sentence_encoder.fingerprint

    @property
    def dimension(self) -> int:
        return self.sentence_encoder.dimension

    @property
    def max_length(self) -> int:
        """Tokens the sentence encoder reads of a document (the rest is cut, as its library does)."""
        return int(self.sentence_encoder.model.max_seq_length)

    @property
    def name(self) -> str:
        return self.sentence_encoder.name

    @property
    def is_named_teacher(self) -> bool:
        """Named as an installed teacher (``minilm``), not a folder of its own."""
        from ...teachers.registry import TEACHERS

        return self.reference in TEACHERS

    def anchored_queries(
        self, queries: Sequence[str], instructions: Sequence[str | None], corrections: np.ndarray
    ) -> np.ndarray:
        """An anchored query tower's embeddings: the anchor vectors plus the LLM's corrections, normalised."""
        from ..combine import anchored

        return anchored(self.anchor_vectors(queries, instructions), corrections)

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """Documents as a two-tower encoder embeds them: type-checked, with no instruction."""
        refuse_document_instruction(instruction)
        documents = list(documents)
        for position, text in enumerate(documents):
            if not isinstance(text, str):
                raise InstEmbError(f"Text #{position} is {type(text).__name__}, not a string.")
        return self.encode(
            documents, batch_size=kwargs.get("batch_size", 64), show_progress=kwargs.get("show_progress", False)
        )

    def get_config_dict(self) -> dict:
        config = {"encoder": self.reference, "fingerprint": self.fingerprint, "dimension": self.dimension}
        return {**config, "query_anchor": True} if self.query_anchor else config

    def to(self, device) -> DocumentTower:
        """The sentence encoder on ``device`` (its dtype stays its own)."""
        self.sentence_encoder.model.to(device)
        return self

    def encode(self, documents: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        return self.sentence_encoder.encode(list(documents), batch_size=batch_size, show_progress=show_progress)

    @property
    def tokenizer(self):
        """The sentence encoder's tokenizer (a transformers tokenizer): what counts a document's tokens."""
        return self.sentence_encoder.model.tokenizer

    def tokens(self, text: str) -> int:
        """How many tokens the sentence encoder's tokenizer makes of ``text`` (special tokens included)."""
        return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    @classmethod
    def load(cls, reference: str, device: str = "cpu", checkpoint_folder: Path | None = None) -> DocumentTower:
        """Load by teacher name (``minilm``) or sentence-transformers folder.

        A relative folder is read from inside the checkpoint (a fine-tuned tower ships there, as
        ``document_tower/``); a folder given to a command is referenced absolute while loaded
        (``recorded_reference``) and recorded as ``document_tower/`` once saved.
        """
        from ...teachers import load_teacher
        from ...teachers.registry import TEACHERS

        target: str | Path = reference
        if reference not in TEACHERS and checkpoint_folder is not None and not Path(reference).is_absolute():
            target = Path(checkpoint_folder) / reference
        return cls(load_teacher(target, device=device), reference)

    @staticmethod
    def recorded_reference(reference: str) -> str:
        """How a tower a user named is referenced while loaded: a teacher name as is, a folder
        absolute (a checkpoint copies the folder in and records it as ``document_tower/``)."""
        from ...teachers.registry import TEACHERS

        return reference if reference in TEACHERS else str(Path(reference).expanduser().resolve())

    @classmethod
    def from_config(
        cls, config: dict, device: str = "cpu", checkpoint_folder: Path | None = None, where: str = "checkpoint"
    ) -> DocumentTower:
        config = checked_config(config, where)
        tower = cls.load(config["encoder"], device=device, checkpoint_folder=checkpoint_folder).anchored(
            config.get("query_anchor", False)
        )
        if tower.fingerprint != config["fingerprint"]:
            raise FingerprintMismatchError(
                f"{where} was trained to embed queries into the space of document tower "
                f"'{config['encoder']}' with fingerprint {config['fingerprint'][:16]}, but the one found "
                f"({tower.sentence_encoder.folder}) has fingerprint {tower.fingerprint[:16]}. Reinstall it "
                f"(instemb-rag teachers install {config['encoder']}) or use a checkpoint trained on this one."
            )
        if tower.dimension != config["dimension"]:
            raise CheckpointError(f"{where}: document tower dimension {tower.dimension} != {config['dimension']}.")
        return tower


def refuse_document_instruction(instruction: str | None) -> None:
    """Two-tower documents are embedded by the sentence encoder, which reads no instruction."""
    from ..combine import refuse_document_instruction as refuse

    refuse(instruction, "its document tower", "two-tower")
