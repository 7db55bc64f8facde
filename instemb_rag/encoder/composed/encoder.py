"""TwoSpacesEncoder: an encoder made of parts, with a document side and a query side.

Documents: two halves, each L2-normalised, stored as ``[A; B] / sqrt(2)``:
    A  the LLM's own document embedding (a symmetric InstEmb encoder, frozen: ``documents_llm``)
    B  a sentence encoder's (all-MiniLM-L6-v2, or a fine-tuned copy: the document tower)
Queries: one LLM prefill of query + instruction + look-ahead tokens (``query_llm``: the documents'
LLM with a query-side adapter, or that LLM itself) gives the pooled state p, and from it
    a  the LLM half: the query LLM's embedding (DAAP, through its own head if any), normalised
    b  the tower half: the sentence encoder's vector of "instruction + query" (one pass of the
       small encoder) plus the tower head's correction head(p), normalised
    w  the LLM half's weight: the caller's ``llm_weight``, else the gate's reading of p, else the
       configured weight
stored as ``[w a; (1 - w) b]`` normalised (every embedding of the Encoder protocol is unit
length, so FAISS inner product and Qdrant cosine agree). The score of a document is then
``(w cos(a, A) + (1 - w) cos(b, B)) * mix_scale(w)``, a positive constant per query: it ranks as the
weighted sum. The weight lives on the query side only, so changing it never re-indexes. The document fingerprint covers the two document parts, never the weight or the
query side: another query side over the same documents searches an index as it is.

Untrained (no query LLM, head or gate) it is the fixed mix of the two spaces; the trainer
(training/two_spaces/) starts every query-side part at zero, so its step 0 is exactly that mix.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ...errors import InstEmbError
from ...instructions import Instructions
from ...instructions import per_item_instructions as _per_item_instructions
from ..combine import anchored, check_llm_weight, mix_scale, mixed_query, unit, weighted_rows
from ..modules.document_tower import DocumentTower
from ..modules.projection import Projection
from .config import (
    DOCUMENTS_LLM_DIR,
    QUERY_LLM_DIR,
    TOWER_DIR,
    TOWER_HEAD_DIR,
    PartsConfig,
    read_parts_config,
    write_parts_config,
)
from .documents import TwoSpaceParts
from .gate import WeightGate

__all__ = ["TwoSpacesEncoder", "check_llm_weight", "mix_scale"]  # the two from combine.py, as before


class TwoSpacesEncoder(TwoSpaceParts):
    """The Encoder protocol (encoder/protocol.py) over the parts above; see the module docstring."""

    takes_llm_weight = True  # encode_queries(..., llm_weight=) and explain (protocol.takes_llm_weight)

    def __init__(
        self,
        documents_llm,
        tower: DocumentTower,
        query_llm=None,
        tower_head: Projection | None = None,
        gate: WeightGate | None = None,
        llm_weight: float = 0.5,
        training_info: dict | None = None,
        documents_source: str | os.PathLike | None = None,
        query_source: str | os.PathLike | None = None,
    ):
        if documents_llm.document_tower is not None or query_llm is not None and query_llm.document_tower is not None:
            raise InstEmbError(
                "The LLM parts of a two-space encoder are symmetric InstEmb encoders (no document tower)."
            )
        self.documents_llm = documents_llm
        self.query_llm = query_llm if query_llm is not None else documents_llm
        self.tower = tower.anchored(False)
        if tower_head is not None and tower_head.dimension != tower.dimension:
            raise InstEmbError(
                f"The tower head maps into {tower_head.dimension} dimensions, the tower has {tower.dimension}."
            )
        if self.query_llm.dimension != documents_llm.dimension:
            raise InstEmbError("The query LLM's embeddings are not in the documents' LLM space (another width).")
        self.tower_head = tower_head
        self.gate = gate
        self.llm_weight = float(check_llm_weight(llm_weight))
        self.training_info = training_info or {}
        # The checkpoint folder the documents' LLM was loaded from: a save copies it byte for byte
        # (a loaded encoder has its LoRA merged; saving that would write every merged tensor).
        self.documents_source = Path(documents_source) if documents_source is not None else None
        self.query_source = Path(query_source) if query_source is not None and self.has_query_llm else None

    # ------------------------------------------------------------------ identity
    @property
    def fingerprint(self) -> str:
        """The document side's, with the query side's parts (the weight is a query-time knob: not in it)."""
        digest = hashlib.sha256(self.document_fingerprint.encode())
        digest.update(self.query_llm.fingerprint.encode() if self.has_query_llm else b"same")
        for name, module in (("head", self.tower_head), ("gate", self.gate)):
            if module is not None:
                for key, tensor in sorted(module.state_tensors().items()):
                    digest.update(f"{name}.{key}".encode())
                    digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:32]

    @property
    def label(self) -> str:
        return f"two spaces (LLM + {self.tower.reference})"

    # ------------------------------------------------------------------ the query side
    def query_tokens(self, query: str, instruction: str | None) -> int:
        """Tokens one query runs through: the LLM's prefill and the sentence encoder's pass."""
        from ...teachers.teacher import teacher_text

        return len(self.build_ids(query, instruction)) + self.tower.tokens(teacher_text(query, instruction))

    def eval(self) -> TwoSpacesEncoder:
        for module in (self.documents_llm, self.query_llm, self.tower_head, self.gate):
            if module is not None:
                module.eval()
        return self

    def to(self, device) -> TwoSpacesEncoder:
        """Every part on ``device``: both LLMs, the heads and the sentence encoder."""
        self.documents_llm.to(device)
        self.query_llm.to(device)
        for module in (self.tower_head, self.gate):
            if module is not None:
                module.to(device)
        self.tower.sentence_encoder.model.to(device)
        return self

    # ------------------------------------------------------------------ embedding
    @torch.inference_mode()
    def query_halves(
        self,
        queries: Sequence[str],
        instructions: Instructions = None,
        batch_size: int = 16,
        show_progress: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, w): each query's LLM half and tower half (normalised) and the gate's weight for it
        (the configured weight where there is no gate), from one prefill of the query LLM."""
        queries = list(queries)
        per_item = _per_item_instructions(instructions, len(queries))
        pooled, embedded = self.query_llm.encode_pooled(queries, per_item, batch_size, show_progress)
        anchors = torch.as_tensor(self.tower.anchor_vectors(queries, per_item), dtype=torch.float32)
        if not len(queries):
            empty = torch.full((0,), self.llm_weight)
            return unit(embedded).numpy(), unit(anchors).numpy(), empty.numpy()
        device = self.query_llm.device
        halves = self.route_halves(pooled.to(device), embedded.to(device), anchors.to(device))
        return tuple(half.float().cpu().numpy() for half in halves[:3])

    def route_halves(self, pooled: torch.Tensor, embedded: torch.Tensor, anchors: torch.Tensor):
        """(a, b, w, correction) of queries from the query LLM's pooled states [B, hidden], its
        embeddings [B, d] (the pooled states through its own head) and the sentence encoder's
        anchors [B, d_m]: the query route, at inference (``query_halves``) and in training
        (training/two_spaces/: differentiable, on the pooled states of the frozen-prefix cache)."""
        llm_half = unit(embedded.float())
        correction = self.tower_head(pooled) if self.tower_head is not None else None
        tower_half = unit(anchors.float()) if correction is None else anchored(anchors, correction)
        if self.gate is not None:
            weights = self.gate(pooled)
        else:
            weights = torch.full((len(pooled),), self.llm_weight, device=pooled.device)
        return llm_half, tower_half, weights, correction

    def encode_queries(
        self, queries: Sequence[str], instructions: Instructions = None, llm_weight: float | None = None, **kwargs
    ) -> np.ndarray:
        """``[w a; (1 - w) b]`` normalised, per query; ``llm_weight`` (0..1) fixes w for this call
        (None: the gate's per-query weight, else the configured one)."""
        llm_weight = check_llm_weight(llm_weight)
        llm_half, tower_half, weights = self.query_halves(
            queries, instructions, kwargs.get("batch_size", 16), kwargs.get("show_progress", False)
        )
        if llm_weight is not None:
            weights = np.full_like(weights, llm_weight)
        return mixed_query(llm_half, tower_half, weights)

    def explain(
        self, query: str, instruction: str | None, documents: Sequence[str], llm_weight: float | None = None
    ) -> list[dict]:
        """Per document: each space's cosine, the weight, their weighted sum (what ranks) and the
        score a search gives (that sum times ``mix_scale(w)``: the queries are unit length)."""
        llm_weight = check_llm_weight(llm_weight)
        llm_half, tower_half, weights = self.query_halves([query], [instruction])
        weight = float(weights[0]) if llm_weight is None else llm_weight
        llm_docs, tower_docs = self.document_halves(documents)
        return weighted_rows(llm_docs @ llm_half[0], tower_docs @ tower_half[0], weight)

    # ------------------------------------------------------------------ saving and loading
    def get_config(self) -> PartsConfig:
        return PartsConfig(
            document_tower=self.tower.get_config_dict(),
            query_llm=self.has_query_llm,
            tower_head=self.tower_head.get_config_dict() if self.tower_head is not None else None,
            gate=self.gate.get_config_dict() if self.gate is not None else None,
            llm_weight=self.llm_weight,
            training=self.training_info,
        )

    def save(self, folder: str | os.PathLike, save_query_llm=None, also=None) -> None:
        """Write the folder atomically: every part inside it (a folder-based sentence encoder copied
        in and recorded relative), so a copy of the folder is the whole encoder. ``save_query_llm``
        writes the query LLM's folder (the trainer: its trained tensors in its dtype); ``also``
        writes more files beside the parts (the trainer's state) inside the same swap."""
        from ..checkpoint import write_folder_atomically
        from ..st_files import write_sentence_transformers_files

        def fill(staging: Path) -> None:
            if self.documents_source is not None:
                shutil.copytree(self.documents_source, staging / DOCUMENTS_LLM_DIR, ignore=shutil.ignore_patterns(".*"))
            else:
                self.documents_llm.save(staging / DOCUMENTS_LLM_DIR)
            if self.has_query_llm and save_query_llm is None and self.query_source is not None:
                shutil.copytree(self.query_source, staging / QUERY_LLM_DIR, ignore=shutil.ignore_patterns(".*"))
            elif self.has_query_llm:
                (save_query_llm or self.query_llm.save)(staging / QUERY_LLM_DIR)
            if self.tower_head is not None:
                (staging / TOWER_HEAD_DIR).mkdir()
                self.tower_head.save(staging / TOWER_HEAD_DIR)
            if self.gate is not None:
                self.gate.save(staging)
            config = self.get_config()
            if not self.tower.is_named_teacher:
                shutil.copytree(self.tower.sentence_encoder.folder, staging / TOWER_DIR)
                config = config.model_copy(update={"document_tower": {**config.document_tower, "encoder": TOWER_DIR}})
            write_parts_config(staging, config)
            write_sentence_transformers_files(staging)
            if also is not None:
                also(staging)

        write_folder_atomically(Path(folder), fill)

    @classmethod
    def load(
        cls, folder: str | os.PathLike, load_llm, device: str = "auto", precision: str = "fp32", **settings
    ) -> TwoSpacesEncoder:
        """Load a two-space folder; ``load_llm(folder, device, precision=..., **settings)`` loads each
        LLM part (model.load_checkpoint: passed in, so this module never imports the encoder's);
        ``settings`` (pooling, lookahead_length, max_length) apply to both LLMs."""
        load_checkpoint = load_llm
        folder = Path(folder)
        config = read_parts_config(folder)
        documents_llm = load_checkpoint(folder / DOCUMENTS_LLM_DIR, device, precision=precision, **settings)
        query_llm = (
            load_checkpoint(folder / QUERY_LLM_DIR, device, precision=precision, **settings)
            if config.query_llm
            else None
        )
        where = f"{folder}/instemb_parts.json"
        tower = DocumentTower.from_config(config.document_tower, str(documents_llm.device), folder, where)
        target = (query_llm or documents_llm).device
        head = Projection.load(folder / TOWER_HEAD_DIR, config.tower_head).to(target) if config.tower_head else None
        gate = WeightGate.load(folder, config.gate).to(target) if config.gate else None
        # Saved again as loaded, the LLM folders are copied byte for byte (their LoRA unmerged), unless
        # other settings were asked for: then the encoder in memory is what a save must write.
        as_stored = all(value is None for value in settings.values()) and precision == "fp32"
        return cls(
            documents_llm,
            tower,
            query_llm,
            head,
            gate,
            config.llm_weight,
            config.training,
            folder / DOCUMENTS_LLM_DIR if as_stored else None,
            folder / QUERY_LLM_DIR if as_stored and config.query_llm else None,
        )

    def with_llm_weight(self, llm_weight: float) -> TwoSpacesEncoder:
        """This encoder (shared parts) with another configured weight and no gate: a new view."""
        return TwoSpacesEncoder(
            self.documents_llm,
            self.tower,
            self.query_llm if self.has_query_llm else None,
            self.tower_head,
            None,
            llm_weight,
            self.training_info,
            self.documents_source,
            self.query_source,
        )
