"""The math of combining spaces, in one place: what the encoder's routes compute at inference,
what the losses rank by in training, and what a search's score is of it.

    unit(x)                      rows L2-normalised (numpy or torch, as given)
    two_spaces_document(A, B)        a document stored in two spaces: [A; B] / sqrt 2
    two_spaces_query(a, b, w)         a two-space query: [w a; (1 - w) b], normalised
    two_spaces_scale(w)                 what that query's search score is of w cos(a, A) + (1 - w) cos(b, B)
    two_spaces_scores(...)            that weighted sum over candidates (the two-space loss ranks by it)
    anchored(anchor, correction) the anchor plus the LLM's correction, normalised (two-tower
                                 anchored queries, the sentence-encoder vector of a two-space query)
    effect_vector(h, gain, s)      the instruction-effect query's LLM-space vector: s gain h(effect)
    effect_query(e, m)           the instruction-effect query: [s h(effect); M(i + q)], normalised
    effect_scale(e)              what that query's search score is of cos_M + < s h(effect), D(d) >
    effect_scores(...)           that sum over candidates (the effect loss ranks by it)
    side_by_side(A, B, w)        two spaces at a fixed weight: [sqrt(w) A; sqrt(1 - w) B], each
                                 normalised, so the cosine is w cos_A + (1 - w) cos_B (a blended
                                 projection head; eval's concat: references)
    check_llm_weight, check_instruction_strength   the query-time knobs' ranges (knobs.py's one
                                 rule, which the entries check once: the encoder's own guard)
    refuse_document_instruction  a sentence encoder reads no document instruction

Every vector of the Encoder protocol is unit length, so FAISS inner product and Qdrant cosine
agree; the scales say what a search's score is of the sum that ranks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InstEmbError
from ..knobs import (
    INSTRUCTION_STRENGTH,
    LLM_WEIGHT,
    MAX_INSTRUCTION_STRENGTH,
    check_instruction_strength,
    check_llm_weight,
)

__all__ = [
    "DEFAULT_INSTRUCTION_STRENGTH",
    "MAX_INSTRUCTION_STRENGTH",
    "REFERENCE_INSTRUCTION",
    "ROOT2",
    "anchored",
    "check_instruction_strength",
    "check_llm_weight",
    "document_halves",
    "effect_half",
    "effect_query",
    "effect_scale",
    "effect_scores",
    "effect_vector",
    "mix_scale",
    "refuse_document_instruction",
    "side_by_side",
    "split_document_halves",
    "split_two_spaces_document",
    "two_spaces_document",
    "two_spaces_query",
    "two_spaces_scale",
    "two_spaces_scores",
    "unit",
]

ROOT2 = math.sqrt(2.0)
DEFAULT_INSTRUCTION_STRENGTH = INSTRUCTION_STRENGTH.default  # the declaration's (knobs.py): one default
# The fixed instruction whose query vector is subtracted: the effect of an instruction is
# D(q, i) - D(q, REFERENCE_INSTRUCTION).
REFERENCE_INSTRUCTION = "Find relevant passages."
EPS = 1e-12


def unit(vectors: Any) -> Any:
    """Each row divided by its L2 norm (at least 1e-12); a numpy array or a torch tensor, as given."""
    if isinstance(vectors, np.ndarray):
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), EPS)
    import torch.nn.functional as F

    return F.normalize(vectors, dim=-1, eps=EPS)


# ---------------------------------------------------------------------------- documents
def two_spaces_document(llm: np.ndarray, sentence_encoder: np.ndarray) -> np.ndarray:
    """``[A; B] / sqrt(2)`` per document: A the LLM's vector, B the sentence encoder's, each unit."""
    return np.concatenate([llm, sentence_encoder], axis=1).astype(np.float32) / ROOT2


def split_two_spaces_document(vectors: np.ndarray, llm_dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) back from ``two_spaces_document``' vectors (an index's stored ones): the same unit
    vectors, to float32 rounding."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors[:, :llm_dimension] * ROOT2, vectors[:, llm_dimension:] * ROOT2


# ---------------------------------------------------------------------------- two spaces
def two_spaces_query(llm_vectors: np.ndarray, sentence_encoder_vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``[w a; (1 - w) b]`` normalised, per query: ``weights`` [N] is each query's LLM share."""
    weights = np.asarray(weights)[:, None]
    return unit(np.concatenate([weights * llm_vectors, (1.0 - weights) * sentence_encoder_vectors], axis=1)).astype(
        np.float32
    )


def two_spaces_scale(weight: float) -> float:
    """What the unit query's score is of the weighted sum at the LLM's share w: 1 / (sqrt 2 * |(w, 1 - w)|)."""
    return 1.0 / (ROOT2 * math.hypot(weight, 1.0 - weight))


def two_spaces_scores(llm, sentence_encoder, weights):
    """[B, C] ``w * cos(a, A) + (1 - w) * cos(b, B)``: each pair is (queries [B, d], candidates [C, d]),
    all normalised torch tensors; ``weights`` [B] is each query's LLM share. What a two-space index
    ranks by."""
    (llm_queries, llm_candidates), (sentence_encoder_queries, sentence_encoder_candidates) = llm, sentence_encoder
    weights = weights.float()[:, None]
    llm_scores = llm_queries.float() @ llm_candidates.float().T
    sentence_encoder_scores = sentence_encoder_queries.float() @ sentence_encoder_candidates.float().T
    return weights * llm_scores + (1.0 - weights) * sentence_encoder_scores


def weighted_rows(llm_scores, sentence_encoder_scores, weight: float) -> list[dict]:
    """A two-space query's explanation per document: each space's cosine, the weight (keyed by its
    knob's name, knobs.py), their weighted sum (what ranks) and the search's score (that sum times
    ``two_spaces_scale``)."""
    rows = []
    for a, b in zip(llm_scores, sentence_encoder_scores):
        weighted = weight * float(a) + (1 - weight) * float(b)
        rows.append(
            {
                "llm": float(a),
                "sentence_encoder": float(b),
                LLM_WEIGHT.name: weight,
                "weighted": weighted,  # what ranks
                "score": weighted * two_spaces_scale(weight),  # the search's score: a unit query
            }
        )
    return rows


# ---------------------------------------------------------------------------- anchor + correction
def anchored(anchors: Any, corrections: Any) -> Any:
    """The anchor (a sentence encoder's vector of "instruction + query") plus the LLM's correction,
    normalised: numpy arrays or torch tensors (float32 sums)."""
    if isinstance(anchors, np.ndarray):
        return unit(anchors + corrections)
    return unit(anchors.float() + corrections.float())


# ---------------------------------------------------------------------------- the instruction's effect
def effect_vector(mapped: Any, gain: Any, strength: float) -> Any:
    """``s * gain * h(effect)`` per query [N, d_llm]: the strength, the map's per-query gain [N]."""
    return (strength * gain)[:, None] * mapped


def effect_query(effect: np.ndarray, sentence_encoder_vectors: np.ndarray) -> np.ndarray:
    """``[s h(effect); M(i + q)]`` normalised, per query."""
    return unit(np.concatenate([effect, sentence_encoder_vectors], axis=1)).astype(np.float32)


def effect_scale(effect: np.ndarray) -> np.ndarray:
    """What a unit query's search score is of the combined score, per query:
    1 / (sqrt 2 * |[s h(effect); M(i + q)]|) (the sentence-encoder vector is unit length)."""
    return 1.0 / (ROOT2 * np.sqrt(1.0 + np.sum(effect.astype(np.float64) ** 2, axis=1)))


def effect_scores(effect, sentence_encoder_queries, llm_candidates, sentence_encoder_candidates):
    """[B, C] ``cos_M(i + q, d) + < s h(effect), D(d) >`` (torch): ``effect`` [B, d_llm] is each
    query's ``s h(effect)``, ``sentence_encoder_queries`` [B, d_m] its normalised M(i + q); candidates [C, .]
    are normalised document vectors of the two spaces."""
    return (
        sentence_encoder_queries.float() @ sentence_encoder_candidates.float().T
        + effect.float() @ llm_candidates.float().T
    )


def effect_rows(plain, contribution, strength: float, effective_strength: float, scale: float) -> list[dict]:
    """An instruction-effect query's explanation per document: the plain score, the instruction's
    contribution, the strength (the knob as given, or the model's own; keyed by the knob's name,
    knobs.py), the effective strength (the knob times the model's gain for this query: the scale the
    effect is added at; 0 without an instruction), their sum (what ranks) and the search's score
    (sum times scale)."""
    rows = []
    for p, c in zip(plain, contribution):
        combined = float(p) + float(c)
        rows.append(
            {
                "plain": float(p),
                "instruction": float(c),
                INSTRUCTION_STRENGTH.name: strength,
                "effective_strength": effective_strength,
                "combined": combined,  # what ranks
                "score": combined * scale,  # the search's score: a unit query
            }
        )
    return rows


# ---------------------------------------------------------------------------- a fixed weight
def side_by_side(first: Any, second: Any, weight: float) -> Any:
    """``[sqrt(w) unit(A); sqrt(1 - w) unit(B)]`` per row (numpy, or torch in B's dtype): the cosine
    of two such vectors is ``w cos_A + (1 - w) cos_B``."""
    if isinstance(first, np.ndarray):
        return np.concatenate([unit(first) * weight**0.5, unit(second) * (1.0 - weight) ** 0.5], axis=1)
    import torch

    own = unit(first.float()).to(second.dtype) * weight**0.5
    return torch.cat([own, unit(second) * (1.0 - weight) ** 0.5], dim=-1)


# ---------------------------------------------------------------------------- refusals
def refuse_document_instruction(instruction: str | None, embedded_by: str, arrangement: str = "") -> None:
    """A sentence encoder reads no instruction: a document instruction would be silently dropped.
    ``arrangement`` names the kind of encoder in the message (``two-tower``)."""
    if instruction is not None and instruction.strip():
        kind = f" ({arrangement})" if arrangement else ""
        raise InstEmbError(
            f"This encoder{kind} embeds documents with a sentence encoder ({embedded_by}) that reads no "
            f"instruction, so a document instruction ({instruction!r}) has no meaning. Put the "
            "instruction on the query (encode_queries / --instruction) instead."
        )


# Older names (issue 68 named a vector's two parts by their spaces, not "halves"; "mix" is two spaces).
document_halves = two_spaces_document  # alias kept for compatibility (issue 68 names round 2)
split_document_halves = split_two_spaces_document  # alias kept for compatibility (issue 68 names round 2)
effect_half = effect_vector  # alias kept for compatibility (issue 68 names round 2)
mix_scale = two_spaces_scale  # alias kept for compatibility (issue 68 names round 2)
