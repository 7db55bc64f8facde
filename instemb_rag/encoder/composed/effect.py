"""InstructionEffectEncoder (issue 56): a sentence encoder's plain score plus what the instruction
changes in the LLM's space.

Documents: the two-space layout as it is (documents.py): ``[D(d); M(d)] / sqrt(2)``, so an index
built by a two-space model over the same two parts needs no rebuild.

A query q under instruction i, from one LLM prefill of q with two instruction suffixes (the
template puts the instruction after the text: the shared-prefix path):

    effect  = D(q, i) - D(q, r)                the instruction's effect, r = REFERENCE_INSTRUCTION
    query   = [s * h(effect); M(i + q)]        normalised (every query of the Encoder protocol is)
    score   ~ cos_M(i + q, d) + s * < h(effect), D(d) >

``h`` and the per-query gain come from the effect map (effect_map.py: the identity at gain 1
untrained); ``s`` is the instruction strength (the user's knob, default from the folder's config)
times that gain. Without an instruction, or with a blank one, the query is ``[0; M(q)]``: exactly
the sentence encoder, so plain questions get plain search. The strength is a query-time knob,
in no fingerprint: changing it never re-indexes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InstEmbError
from ...instructions import Instructions
from ...instructions import per_item_instructions as _per_item_instructions
from ..combine import (
    MAX_INSTRUCTION_STRENGTH,
    check_instruction_strength,
    effect_half,
    effect_query,
    effect_rows,
    effect_scale,
    unit,
)
from ..modules.document_tower import DocumentTower
from .config import (
    DOCUMENTS_LLM_DIR,
    FORMAT_VERSION,
    PARTS_FILE,
    TOWER_DIR,
    read_raw_parts,
    validated,
    write_parts_config,
)
from .documents import TwoSpaceParts
from .effect_map import EffectMap

__all__ = [
    "DEFAULT_INSTRUCTION_STRENGTH",
    "REFERENCE_INSTRUCTION",
    "EffectConfig",
    "InstructionEffectEncoder",
    "check_instruction_strength",
    "effect_scale",
]  # check_instruction_strength and effect_scale: combine.py's, as before

# The fixed instruction whose query vector is subtracted: the effect of an instruction is
# D(q, i) - D(q, REFERENCE_INSTRUCTION).
REFERENCE_INSTRUCTION = "Find relevant passages."
DEFAULT_INSTRUCTION_STRENGTH = 1.5


class EffectConfig(BaseModel):
    """``instemb_parts.json`` of kind ``instruction_effect``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    kind: str = "instruction_effect"
    document_tower: dict  # the sentence encoder's entry (modules/document_tower.py)
    effect_map: dict | None = None  # EffectMap's config (None: the identity at gain 1)
    instruction_strength: float = Field(default=DEFAULT_INSTRUCTION_STRENGTH, ge=0.0, le=MAX_INSTRUCTION_STRENGTH)
    reference_instruction: str = REFERENCE_INSTRUCTION
    training: dict = Field(default_factory=dict)  # provenance only


class InstructionEffectEncoder(TwoSpaceParts):
    """The Encoder protocol over the shipped LLM, a sentence encoder and an effect map."""

    takes_instruction_strength = True  # encode_queries(..., instruction_strength=) and explain

    def __init__(
        self,
        llm,
        tower: DocumentTower,
        effect_map: EffectMap | None = None,
        instruction_strength: float = DEFAULT_INSTRUCTION_STRENGTH,
        reference_instruction: str = REFERENCE_INSTRUCTION,
        training_info: dict | None = None,
        documents_source: str | os.PathLike | None = None,
    ):
        if getattr(llm, "document_tower", None) is not None:
            raise InstEmbError("The LLM of an instruction-effect encoder is a symmetric InstEmb encoder.")
        if effect_map is not None and effect_map.dimension != llm.dimension:
            raise InstEmbError(f"The effect map reads {effect_map.dimension} dimensions, the LLM has {llm.dimension}.")
        self.documents_llm = self.query_llm = llm
        self.tower = tower.anchored(False)
        self.effect_map = effect_map
        self.instruction_strength = float(check_instruction_strength(instruction_strength))
        self.reference_instruction = reference_instruction
        self.training_info = training_info or {}
        # The checkpoint folder the LLM was loaded from: a save copies it byte for byte.
        self.documents_source = Path(documents_source) if documents_source is not None else None

    # ------------------------------------------------------------------ identity
    @property
    def fingerprint(self) -> str:
        """The document side's, with the reference instruction and the effect map (the strength is
        a query-time knob: not in it)."""
        digest = hashlib.sha256(self.document_fingerprint.encode())
        digest.update(b"instruction_effect/1")
        digest.update(self.reference_instruction.encode())
        if self.effect_map is not None:
            for key, tensor in sorted(self.effect_map.state_tensors().items()):
                digest.update(key.encode())
                digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:32]

    @property
    def label(self) -> str:
        return f"instruction effect (LLM + {self.tower.reference})"

    def query_tokens(self, query: str, instruction: str | None) -> int:
        """Tokens one query runs through: the LLM's prefill of the text with both instruction
        suffixes (the text once) and the sentence encoder's pass."""
        from ...teachers.teacher import teacher_text

        tower_tokens = self.tower.tokens(teacher_text(query, instruction))
        if not instruction:
            return tower_tokens
        under, reference = self.build_ids(query, instruction), self.build_ids(query, self.reference_instruction)
        shared = next((n for n, (a, b) in enumerate(zip(under, reference)) if a != b), min(len(under), len(reference)))
        return len(under) + len(reference) - shared + tower_tokens

    def eval(self) -> InstructionEffectEncoder:
        self.documents_llm.eval()
        if self.effect_map is not None:
            self.effect_map.eval()
        return self

    def to(self, device) -> InstructionEffectEncoder:
        """Every part on ``device``: the LLM, the effect map and the sentence encoder."""
        self.documents_llm.to(device)
        if self.effect_map is not None:
            self.effect_map.to(device)
        self.tower.sentence_encoder.model.to(device)
        return self

    # ------------------------------------------------------------------ queries
    def llm_pairs(self, queries: Sequence[str], instructions: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """[2, N, d]: the LLM's unit query vectors under each instruction and under the reference.
        One query: one prefill of its text, then the two suffixes (the shared-prefix path); more:
        one batched pass over the 2N inputs (sorted by length, so the pairs pad alike)."""
        from ..fast.shared_prefix import encode_instructions

        if len(queries) == 1:
            both = encode_instructions(self.query_llm, queries[0], [instructions[0], self.reference_instruction])
            return both[:, None, :]
        texts = list(queries) * 2
        per_item = list(instructions) + [self.reference_instruction] * len(queries)
        both = self.query_llm.encode_queries(texts, per_item, batch_size=batch_size)
        return both.reshape(2, len(queries), -1)

    @torch.inference_mode()
    def query_halves(
        self,
        queries: Sequence[str],
        instructions: Instructions = None,
        instruction_strength: float | None = None,
        batch_size: int = 16,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(effect half ``s h(effect)`` [N, d_llm], sentence-encoder half ``M(i + q)`` [N, d_m]
        (normalised), ``s`` [N]) per query; a query without an instruction has a zero effect half."""
        strength = check_instruction_strength(instruction_strength)
        strength = self.instruction_strength if strength is None else strength
        queries = list(queries)
        per_item = _per_item_instructions(instructions, len(queries))
        anchors = np.asarray(self.tower.anchor_vectors(queries, per_item), dtype=np.float32)
        tower_half = unit(anchors.reshape(len(queries), self.tower.dimension))
        effects = np.zeros((len(queries), self.llm_dimension), dtype=np.float32)
        strengths = np.zeros(len(queries), dtype=np.float32)
        rows = [n for n, instruction in enumerate(per_item) if instruction]
        if rows and strength > 0:
            pairs = self.llm_pairs([queries[n] for n in rows], [per_item[n] for n in rows], batch_size)
            effect, gain = self.route_effect(torch.as_tensor(pairs[0]), torch.as_tensor(pairs[1]), strength)
            strengths[rows] = strength * gain.float().cpu().numpy()
            effects[rows] = effect.float().cpu().numpy()
        return effects, tower_half, strengths

    def route_effect(self, under_instruction: torch.Tensor, under_reference: torch.Tensor, strength: float):
        """(``s gain h(effect)`` [N, d_llm], gain [N]) of unit LLM query vectors under the instruction
        and the reference: the query route's LLM half, at inference (``query_halves``) and in training (training/effect/: differentiable, on the map's device)."""
        if self.effect_map is None:
            mapped, gain = (under_instruction - under_reference).float(), torch.ones(len(under_instruction))
        else:
            device = next(self.effect_map.parameters()).device
            mapped, gain = self.effect_map(under_instruction.to(device), under_reference.to(device))
        return effect_half(mapped, gain, strength), gain

    def encode_queries(
        self,
        queries: Sequence[str],
        instructions: Instructions = None,
        instruction_strength: float | None = None,
        **kwargs,
    ) -> np.ndarray:
        """``[s h(effect); M(i + q)]`` normalised, per query; ``instruction_strength`` (0..10) sets
        s for this call (None: the model's default)."""
        effects, tower_half, _ = self.query_halves(
            queries, instructions, instruction_strength, kwargs.get("batch_size", 16)
        )
        return effect_query(effects, tower_half)

    def explain(
        self, query: str, instruction: str | None, documents: Sequence[str], instruction_strength: float | None = None
    ) -> list[dict]:
        """Per document: the plain score (the sentence encoder's cosine), the instruction's
        contribution ``s < h(effect), D(d) >``, the strength s, their sum (what ranks) and the
        score a search gives (that sum times ``effect_scale``: the queries are unit length)."""
        effects, tower_half, strengths = self.query_halves([query], [instruction], instruction_strength)
        llm_docs, tower_docs = self.document_halves(documents)
        scale = float(effect_scale(effects)[0])
        return effect_rows(tower_docs @ tower_half[0], llm_docs @ effects[0], float(strengths[0]), scale)

    def with_instruction_strength(self, instruction_strength: float) -> InstructionEffectEncoder:
        """This encoder (shared parts) with another default strength: a new view."""
        return InstructionEffectEncoder(
            self.documents_llm,
            self.tower,
            self.effect_map,
            instruction_strength,
            self.reference_instruction,
            self.training_info,
            self.documents_source,
        )

    # ------------------------------------------------------------------ saving and loading
    def get_config(self) -> EffectConfig:
        return EffectConfig(
            document_tower=self.tower.get_config_dict(),
            effect_map=self.effect_map.get_config_dict() if self.effect_map is not None else None,
            instruction_strength=self.instruction_strength,
            reference_instruction=self.reference_instruction,
            training=self.training_info,
        )

    def save(self, folder: str | os.PathLike, also=None) -> None:
        """Write the folder atomically, every part inside it (an installed sentence encoder is
        named and checked by fingerprint); ``also`` writes more files inside the same swap."""
        from ..checkpoint import write_folder_atomically
        from ..st_files import write_sentence_transformers_files

        def fill(staging: Path) -> None:
            if self.documents_source is not None:
                shutil.copytree(self.documents_source, staging / DOCUMENTS_LLM_DIR, ignore=shutil.ignore_patterns(".*"))
            else:
                self.documents_llm.save(staging / DOCUMENTS_LLM_DIR)
            if self.effect_map is not None:
                self.effect_map.save(staging)
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
    ) -> InstructionEffectEncoder:
        """Load an instruction-effect folder; ``load_llm`` loads the LLM part (as TwoSpacesEncoder.load)."""
        folder = Path(folder)
        config = validated(EffectConfig, read_raw_parts(folder), folder / PARTS_FILE)
        llm = load_llm(folder / DOCUMENTS_LLM_DIR, device, precision=precision, **settings)
        where = f"{folder}/{PARTS_FILE}"
        tower = DocumentTower.from_config(config.document_tower, str(llm.device), folder, where)
        effect_map = EffectMap.load(folder, config.effect_map).to(llm.device) if config.effect_map else None
        as_stored = all(value is None for value in settings.values()) and precision == "fp32"
        return cls(
            llm,
            tower,
            effect_map,
            config.instruction_strength,
            config.reference_instruction,
            config.training,
            folder / DOCUMENTS_LLM_DIR if as_stored else None,
        )
