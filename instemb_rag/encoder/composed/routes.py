"""The routes of an encoder of parts: what runs a document, what runs a query, over which parts.

A route names the parts it reads (by their names in the model folder) and its settings; its
methods take the encoder (``enc.parts``) and do the combining with encoder/combine.py. A folder
records each route by its class path (``config()``; class_paths.py), so a new route is a
``Route`` subclass in a file of its own: its ``role`` (query or document), the fields that name parts
(``part_fields``), and the encoder class its query route makes (``arrangement``, a class path).

    document routes
      SentenceEncoderDocuments    the sentence encoder alone (two-tower); a document instruction is refused
      TwoSpacesDocuments   [A; B] / sqrt 2: the documents' LLM and the sentence encoder (two spaces,
                        the instruction's effect)
    query routes
      LLMQueries        the LLM (through its head, into the sentence encoder's space: two-tower)
      AnchoredQueries   the sentence encoder's vector of "instruction + query" plus the LLM's
                        correction, normalised (an anchored two-tower)
      TwoSpacesQueries      [w a; (1 - w) b] normalised: the LLM space's vector, the anchored sentence encoder's, the
                        weight (the caller's llm_weight, else the gate's, else the configured one)
      EffectQueries     [s h(effect); M(i + q)] normalised: the instruction's effect on the LLM's
                        query vector through the effect map, the sentence encoder's vector

The query route decides the whole encoder's fingerprint, each by the recipe it always had (an
index keys on it); the document route the document fingerprint. A query-time knob (llm_weight,
instruction_strength) is in neither. The ``route_*`` methods are what the trainers call, on the
cached pooled states or vectors, so training ranks by what ``encode_queries`` embeds.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import ClassVar, Sequence

import numpy as np
import torch

from ...errors import CheckpointError, InstEmbError
from ...instructions import Instructions, normalize_instruction, paste_instruction, per_item_instructions
from ...knobs import INSTRUCTION_STRENGTH, LLM_WEIGHT, Knob
from ..combine import (
    REFERENCE_INSTRUCTION,
    anchored,
    effect_query,
    effect_rows,
    effect_scale,
    effect_vector,
    refuse_document_instruction,
    split_two_spaces_document,
    two_spaces_document,
    two_spaces_query,
    unit,
    weighted_rows,
)
from ..sides import DocumentSide, llm_part, sentence_encoder_part
from .class_paths import class_path, resolve_class
from .config import TWO_TOWER_IDENTITY_KEY

__all__ = ["Route", "route_from_config"]

COMPOSED = "instemb_rag.encoder.composed"


@dataclass(frozen=True)
class Route:
    role: ClassVar[str]  # the side it embeds: "query" or "document"
    # The query-time knobs it takes (knobs.py's declarations); a query route holds the folder's own
    # value of each in its field of the knob's name, and its encode/explain take them by name.
    knobs: ClassVar[tuple[Knob, ...]] = ()
    # Its fields that name parts of the folder (the encoder checks they exist).
    part_fields: ClassVar[tuple[str, ...]] = ("llm", "sentence_encoder", "head", "gate", "effect_map")
    # The class path of the encoder class a query route makes (None: ComposedEncoder itself);
    # a path, not the class: the encoder classes import this module.
    arrangement: ClassVar[str | None] = None

    def config(self) -> dict:
        """The route as its folder records it: its class path and its fields."""
        return {"type": class_path(type(self)), **asdict(self)}

    def knob_default(self, name: str) -> float | None:
        """The value a query gets when it gives no ``name`` (the folder's own; None: set per query)."""
        return getattr(self, name)

    @classmethod
    def own_knobs(cls, values: dict) -> dict:
        """``values`` (knob name -> the folder's own value), if each is a knob this route declares:
        what a builder of its arrangement passes on by name (encoder/load.py); else a TypeError."""
        taken = [knob.name for knob in cls.knobs]
        stray = [name for name in values if name not in taken]
        if stray:
            raise TypeError(
                f"{', '.join(map(repr, stray))}: {cls.__name__} takes "
                f"{'the query-time knob ' + ', '.join(taken) if taken else 'no query-time knob'} (knobs.py)."
            )
        return dict(values)

    def part_names(self) -> list[str]:
        return [value for key, value in asdict(self).items() if key in self.part_fields and value is not None]

    def llm_identities(self, spec) -> tuple[dict, ...]:
        """More identity its LLM parts are fingerprinted with, from the folder's spec alone (an
        int8 LLM takes it while its weights are still float): none but a two-tower's."""
        return ()


# ---------------------------------------------------------------------------- documents
@dataclass(frozen=True)
class SentenceEncoderDocuments(Route):
    role: ClassVar[str] = "document"
    sentence_encoder: str = "sentence_encoder"

    def dimension(self, enc) -> int:
        return enc.parts[self.sentence_encoder].dimension

    def fingerprint(self, enc) -> str:
        return enc.parts[self.sentence_encoder].fingerprint

    def side(self, enc) -> DocumentSide:
        sentence_encoder = enc.parts[self.sentence_encoder]
        return DocumentSide((sentence_encoder_part(sentence_encoder),), sentence_encoder.fingerprint)

    def encode(self, enc, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        sentence_encoder = enc.parts[self.sentence_encoder]
        refuse_document_instruction(instruction, sentence_encoder.reference, "two-tower")
        return sentence_encoder.encode_documents(documents, None, **kwargs)


@dataclass(frozen=True)
class TwoSpacesDocuments(Route):
    role: ClassVar[str] = "document"
    llm: str = "documents_llm"
    sentence_encoder: str = "sentence_encoder"

    def dimension(self, enc) -> int:
        return enc.parts[self.llm].dimension + enc.parts[self.sentence_encoder].dimension

    def fingerprint(self, enc) -> str:
        """The two document parts only: every arrangement over them searches the same index."""
        digest = hashlib.sha256(b"two_spaces/1")
        digest.update(enc.parts[self.llm].fingerprint.encode())
        digest.update(enc.parts[self.sentence_encoder].fingerprint.encode())
        return digest.hexdigest()[:32]

    def side(self, enc) -> DocumentSide:
        return DocumentSide(
            (llm_part(enc.parts[self.llm]), sentence_encoder_part(enc.parts[self.sentence_encoder])),
            self.fingerprint(enc),
        )

    def by_space(self, enc, documents: Sequence[str] | np.ndarray, batch_size: int = 16, show_progress: bool = False):
        """(A, B): each document's LLM and sentence-encoder vectors, each normalised. ``documents``:
        texts, embedded here; or their vectors as ``encode`` made them (an index's stored ones,
        index/search.py's explain), split back into the two spaces' vectors without embedding anything."""
        if isinstance(documents, np.ndarray):
            if documents.ndim != 2 or documents.shape[1] != self.dimension(enc):
                raise InstEmbError(
                    f"Document vectors of shape {documents.shape} are not this encoder's "
                    f"({self.dimension(enc)}-d rows): give the documents' texts instead."
                )
            return split_two_spaces_document(documents, enc.parts[self.llm].dimension)
        documents = list(documents)
        llm = enc.parts[self.llm].encode_documents(documents, None, batch_size=batch_size, show_progress=show_progress)
        return llm, enc.parts[self.sentence_encoder].encode_documents(documents, None, batch_size=max(batch_size, 32))

    def encode(self, enc, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        self.side(enc).refuse_instruction(instruction)
        batch_size, show_progress = kwargs.get("batch_size", 16), kwargs.get("show_progress", False)
        return two_spaces_document(*self.by_space(enc, documents, batch_size, show_progress))

    halves = by_space  # alias kept for compatibility (issue 68 names round 2)


# ---------------------------------------------------------------------------- queries: two-tower
@dataclass(frozen=True)
class LLMQueries(Route):
    """Queries by the LLM alone, its head mapping into the sentence encoder's space."""

    role: ClassVar[str] = "query"
    arrangement: ClassVar[str] = f"{COMPOSED}.encoder.TwoTowerEncoder"
    anchor: ClassVar[bool] = False
    llm: str = "query_llm"
    sentence_encoder: str = "sentence_encoder"

    def identity(self, enc) -> dict:
        """What a two-tower fingerprint adds to its LLM's identity: the sentence encoder's entry."""
        return self.sentence_encoder_identity(enc.parts[self.sentence_encoder].recorded_config())

    def sentence_encoder_identity(self, entry: dict) -> dict:
        return {TWO_TOWER_IDENTITY_KEY: {**entry, "query_anchor": True} if self.anchor else dict(entry)}

    def llm_identities(self, spec) -> tuple[dict, ...]:
        return (self.sentence_encoder_identity(spec.parts[self.sentence_encoder].config or {}),)

    def fingerprint(self, enc) -> str:
        return enc.parts[self.llm].fingerprint_with_identity(self.identity(enc))

    def tokens(self, enc, query: str, instruction: str | None) -> int:
        return len(enc.parts[self.llm].build_ids(query, instruction))

    def encode(self, enc, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        return enc.parts[self.llm].encode(queries, instructions, **kwargs)

    def encode_instructions(self, enc, text: str, instructions: Sequence[str | None], batch_size: int) -> np.ndarray:
        from ..fast.shared_prefix import encode_instructions

        return encode_instructions(enc.parts[self.llm], text, instructions, batch_size=batch_size)


@dataclass(frozen=True)
class AnchoredQueries(LLMQueries):
    """The sentence encoder's vector of "instruction + query" plus the LLM's correction."""

    anchor: ClassVar[bool] = True

    def tokens(self, enc, query: str, instruction: str | None) -> int:

        return super().tokens(enc, query, instruction) + enc.parts[self.sentence_encoder].tokens(
            paste_instruction(query, instruction)
        )

    def encode(self, enc, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        queries = list(queries)
        correction = enc.parts[self.llm].encode_unnormalised(queries, instructions, **kwargs)
        anchors = enc.parts[self.sentence_encoder].anchor_vectors(
            queries, per_item_instructions(instructions, len(queries))
        )
        return anchored(anchors, correction)

    def encode_instructions(self, enc, text: str, instructions: Sequence[str | None], batch_size: int) -> np.ndarray:
        from ..fast.shared_prefix import encode_instructions

        correction = encode_instructions(
            enc.parts[self.llm], text, instructions, batch_size=batch_size, normalise=False
        )
        per_item = [normalize_instruction(instruction) for instruction in instructions]
        return anchored(enc.parts[self.sentence_encoder].anchor_vectors([text] * len(per_item), per_item), correction)

    def route_queries(self, enc, pooled: torch.Tensor, anchors: torch.Tensor):
        """(queries, corrections) from pooled states [B, hidden] and the anchors [B, d]: training's
        query route (training/two_tower/), differentiable."""
        corrections = enc.parts[self.llm].project(pooled)
        return anchored(anchors, corrections), corrections


# ---------------------------------------------------------------------------- queries: two spaces
@dataclass(frozen=True)
class TwoSpacesRoute(Route):
    """A query route over the documents' two spaces: its LLM and the sentence encoder."""

    role: ClassVar[str] = "query"
    llm: str = "documents_llm"
    sentence_encoder: str = "sentence_encoder"


@dataclass(frozen=True)
class TwoSpacesQueries(TwoSpacesRoute):
    arrangement: ClassVar[str] = f"{COMPOSED}.encoder.TwoSpacesEncoder"
    knobs: ClassVar[tuple[Knob, ...]] = (LLM_WEIGHT,)
    head: str | None = None
    gate: str | None = None
    llm_weight: float = LLM_WEIGHT.default

    def __post_init__(self):
        object.__setattr__(self, "llm_weight", float(LLM_WEIGHT.check(self.llm_weight)))

    def knob_default(self, name: str) -> float | None:
        return None if self.gate is not None else super().knob_default(name)  # a gate weighs each query

    def fingerprint(self, enc) -> str:
        """The document side's, with the query side's parts (the weight is a query-time knob: not in it)."""
        digest = hashlib.sha256(enc.document_fingerprint.encode())
        digest.update(enc.query_llm.fingerprint.encode() if enc.has_query_llm else b"same")
        for name, part in (("head", self.head), ("gate", self.gate)):
            if part is not None:
                for key, tensor in sorted(enc.parts[part].state_tensors().items()):
                    digest.update(f"{name}.{key}".encode())
                    digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:32]

    def tokens(self, enc, query: str, instruction: str | None) -> int:

        sentence_encoder = enc.parts[self.sentence_encoder].tokens(paste_instruction(query, instruction))
        return len(enc.parts[self.llm].build_ids(query, instruction)) + sentence_encoder

    @torch.inference_mode()
    def query_by_space(self, enc, queries, instructions=None, batch_size: int = 16, show_progress: bool = False):
        """(a, b, w): each query's LLM half and sentence encoder half (normalised) and its weight (the gate's,
        else the configured one), from one prefill of the query LLM."""
        queries = list(queries)
        per_item = per_item_instructions(instructions, len(queries))
        llm = enc.parts[self.llm]
        pooled, embedded = llm.encode_pooled(queries, per_item, batch_size, show_progress)
        anchors = torch.as_tensor(
            enc.parts[self.sentence_encoder].anchor_vectors(queries, per_item), dtype=torch.float32
        )
        if not len(queries):
            return unit(embedded).numpy(), unit(anchors).numpy(), torch.full((0,), self.llm_weight).numpy()
        device = llm.device
        by_space = self.route_by_space(enc, pooled.to(device), embedded.to(device), anchors.to(device))
        return tuple(vectors.float().cpu().numpy() for vectors in by_space[:3])

    def route_by_space(self, enc, pooled: torch.Tensor, embedded: torch.Tensor, anchors: torch.Tensor):
        """(a, b, w, correction) from the query LLM's pooled states [B, hidden], its embeddings [B, d]
        and the anchors [B, d_m]: at inference (``query_by_space``) and in training
        (training/two_spaces/: differentiable, on the pooled states of the frozen-prefix cache)."""
        llm_vectors = unit(embedded.float())
        correction = enc.parts[self.head](pooled) if self.head is not None else None
        sentence_encoder_vectors = unit(anchors.float()) if correction is None else anchored(anchors, correction)
        if self.gate is not None:
            weights = enc.parts[self.gate](pooled)
        else:
            weights = torch.full((len(pooled),), float(self.llm_weight), device=pooled.device)
        return llm_vectors, sentence_encoder_vectors, weights, correction

    def encode(self, enc, queries, instructions=None, llm_weight: float | None = None, **kwargs) -> np.ndarray:
        """``llm_weight`` as checked where it entered (ComposedEncoder.encode_queries); None: the model's own."""
        batch_size, show_progress = kwargs.get("batch_size", 16), kwargs.get("show_progress", False)
        llm_vectors, sentence_encoder_vectors, weights = self.query_by_space(
            enc, queries, instructions, batch_size, show_progress
        )
        if llm_weight is not None:
            weights = np.full_like(weights, llm_weight)
        return two_spaces_query(llm_vectors, sentence_encoder_vectors, weights)

    def explain(self, enc, query: str, instruction: str | None, documents, llm_weight: float | None = None):
        llm_vectors, sentence_encoder_vectors, weights = self.query_by_space(enc, [query], [instruction])
        weight = float(weights[0]) if llm_weight is None else llm_weight
        llm_docs, sentence_encoder_docs = enc.document_route.by_space(enc, documents)
        return weighted_rows(llm_docs @ llm_vectors[0], sentence_encoder_docs @ sentence_encoder_vectors[0], weight)

    query_halves = query_by_space  # alias kept for compatibility (issue 68 names round 2)
    route_halves = route_by_space  # alias kept for compatibility (issue 68 names round 2)


# ---------------------------------------------------------------------------- queries: the instruction's effect
@dataclass(frozen=True)
class EffectQueries(TwoSpacesRoute):
    arrangement: ClassVar[str] = f"{COMPOSED}.effect.InstructionEffectEncoder"
    knobs: ClassVar[tuple[Knob, ...]] = (INSTRUCTION_STRENGTH,)
    effect_map: str | None = None
    instruction_strength: float = INSTRUCTION_STRENGTH.default
    reference_instruction: str = REFERENCE_INSTRUCTION

    def __post_init__(self):
        object.__setattr__(self, "instruction_strength", float(INSTRUCTION_STRENGTH.check(self.instruction_strength)))

    def fingerprint(self, enc) -> str:
        """The document side's, with the reference instruction and the effect map (the strength is
        a query-time knob: not in it)."""
        digest = hashlib.sha256(enc.document_fingerprint.encode())
        digest.update(b"instruction_effect/1")
        digest.update(self.reference_instruction.encode())
        if enc.has_query_llm:  # a query LLM of its own (issue 61); absent: fingerprints as before
            digest.update(enc.query_llm.fingerprint.encode())
        if self.effect_map is not None:
            for key, tensor in sorted(enc.parts[self.effect_map].state_tensors().items()):
                digest.update(key.encode())
                digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:32]

    def tokens(self, enc, query: str, instruction: str | None) -> int:
        """The LLM's prefill of the text with both instruction suffixes (the text once) and the
        sentence encoder's pass."""

        sentence_encoder_tokens = enc.parts[self.sentence_encoder].tokens(paste_instruction(query, instruction))
        if not instruction:
            return sentence_encoder_tokens
        llm = enc.parts[self.llm]
        under, reference = llm.build_ids(query, instruction), llm.build_ids(query, self.reference_instruction)
        shared = next((n for n, (a, b) in enumerate(zip(under, reference)) if a != b), min(len(under), len(reference)))
        return len(under) + len(reference) - shared + sentence_encoder_tokens

    def llm_pairs(self, enc, queries: Sequence[str], instructions: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """[2, N, d]: the LLM's unit query vectors under each instruction and under the reference.
        One query: one prefill of its text, then the two suffixes (the shared-prefix path); more:
        one batched pass over the 2N inputs (sorted by length, so the pairs pad alike)."""
        from ..fast.shared_prefix import encode_instructions

        llm = enc.parts[self.llm]
        if len(queries) == 1:
            both = encode_instructions(llm, queries[0], [instructions[0], self.reference_instruction])
            return both[:, None, :]
        texts = list(queries) * 2
        per_item = list(instructions) + [self.reference_instruction] * len(queries)
        return llm.encode_queries(texts, per_item, batch_size=batch_size).reshape(2, len(queries), -1)

    @torch.inference_mode()
    def query_by_space(self, enc, queries, instructions=None, instruction_strength=None, batch_size: int = 16):
        """(effect vector ``s h(effect)`` [N, d_llm] in the LLM space, sentence-encoder vector ``M(i + q)`` [N, d_m]
        (normalised), ``s`` [N]); a query without an instruction has a zero effect vector.
        ``instruction_strength`` as checked where it entered; None: the model's own."""
        strength = self.instruction_strength if instruction_strength is None else instruction_strength
        queries = list(queries)
        per_item = per_item_instructions(instructions, len(queries))
        sentence_encoder = enc.parts[self.sentence_encoder]
        sentence_encoder_vectors = unit(
            np.asarray(sentence_encoder.anchor_vectors(queries, per_item), dtype=np.float32).reshape(
                len(queries), sentence_encoder.dimension
            )
        )
        effects = np.zeros((len(queries), enc.parts[self.llm].dimension), dtype=np.float32)
        strengths = np.zeros(len(queries), dtype=np.float32)
        rows = [n for n, instruction in enumerate(per_item) if instruction]
        if rows and strength > 0:
            pairs = self.llm_pairs(enc, [queries[n] for n in rows], [per_item[n] for n in rows], batch_size)
            effect, gain = self.route_effect(enc, torch.as_tensor(pairs[0]), torch.as_tensor(pairs[1]), strength)
            strengths[rows] = strength * gain.float().cpu().numpy()
            effects[rows] = effect.float().cpu().numpy()
        return effects, sentence_encoder_vectors, strengths

    def route_effect(
        self, enc, under_instruction: torch.Tensor, under_reference: torch.Tensor, strength: float | None = None
    ):
        """(``s gain h(effect)`` [N, d_llm], gain [N]) of unit LLM query vectors under the instruction
        and the reference: at inference (``query_by_space``) and in training (training/effect/: the
        strength None, the route's own, which the recipe's arguments set)."""
        if strength is None:
            strength = self.instruction_strength
        if self.effect_map is None:
            mapped, gain = (under_instruction - under_reference).float(), torch.ones(len(under_instruction))
        else:
            effect_map = enc.parts[self.effect_map]
            device = next(effect_map.parameters()).device
            mapped, gain = effect_map(under_instruction.to(device), under_reference.to(device))
        return effect_vector(mapped, gain, strength), gain

    def encode(self, enc, queries, instructions=None, instruction_strength=None, **kwargs) -> np.ndarray:
        effects, sentence_encoder_vectors, _ = self.query_by_space(
            enc, queries, instructions, instruction_strength, kwargs.get("batch_size", 16)
        )
        return effect_query(effects, sentence_encoder_vectors)

    def explain(self, enc, query: str, instruction: str | None, documents, instruction_strength=None):
        effects, sentence_encoder_vectors, effective = self.query_by_space(
            enc, [query], [instruction], instruction_strength
        )
        llm_docs, sentence_encoder_docs = enc.document_route.by_space(enc, documents)
        scale = float(effect_scale(effects)[0])
        knob = self.instruction_strength if instruction_strength is None else instruction_strength  # given, or own
        return effect_rows(
            sentence_encoder_docs @ sentence_encoder_vectors[0], llm_docs @ effects[0], knob, float(effective[0]), scale
        )

    query_halves = query_by_space  # alias kept for compatibility (issue 68 names round 2)


def route_from_config(side: str, raw: dict, where: str = "instemb_parts.json") -> Route:
    """The ``side`` (query or document) route a config entry describes: its class imported by its
    path (class_paths.py: instemb-rag's own classes only)."""
    route = resolve_class(raw.get("type"), where, f"{side} route")
    if not issubclass(route, Route) or getattr(route, "role", None) != side:
        raise CheckpointError(
            f"{where}: {raw.get('type')!r} is not a {side} route (a Route subclass whose role is {side!r}). "
            "The folder is damaged: copy the whole model folder again."
        )
    try:
        return route(**{key: value for key, value in raw.items() if key != "type"})
    except TypeError as error:
        raise CheckpointError(f"{where}: the {side} route {raw!r} is damaged ({error}).") from None
