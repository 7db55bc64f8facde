"""Request and response bodies of `instemb-rag serve` (pydantic models, shown in /docs).

`/v1/embeddings` follows OpenAI's embeddings schema, so an OpenAI client works unchanged;
`instruction`, `input_type`, (two-space models) `llm_weight` and (instruction-effect models)
`instruction_strength` are the additions. `/v1/search` answers with the same
JSON as `instemb-rag query --json`. Errors use OpenAI's shape: {"error": {message, type,
param, code}}.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..knobs import check_instruction_strength, check_llm_weight

__all__ = [
    "API_KEY_ENV",
    "BatchingStats",
    "EmbeddingObject",
    "EmbeddingRequest",
    "EmbeddingResponse",
    "ErrorBody",
    "ErrorResponse",
    "Health",
    "IndexInfo",
    "InstructionStrengthKnob",
    "LLMWeightKnob",
    "ModelCard",
    "ModelList",
    "SearchHitModel",
    "SearchRequest",
    "SearchResponse",
    "Usage",
    "decode_vector",
    "encode_vector",
]

# The variable that holds the API key: the server reads its key from it, a client its default.
API_KEY_ENV = "INSTEMB_API_KEY"

# ------------------------------------------------------------------ /v1/embeddings


# A query's knobs, checked here, where a request enters (knobs.py): a value out of range is a
# KnobError, answered with a 400 that names the field (errors.py); the routes take them as given.
LLMWeight = Annotated[float | None, AfterValidator(check_llm_weight)]
InstructionStrength = Annotated[float | None, AfterValidator(check_instruction_strength)]


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request, plus `instruction` and `input_type`."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "model": "instemb-default",
                    "input": ["Which tent should I buy?"],
                    "instruction": "focus on packed weight",
                    "input_type": "query",
                }
            ]
        },
    )

    # Token arrays (OpenAI's list[int] inputs) are accepted by the schema so that the answer can
    # say what is wrong (400) instead of a generic validation message.
    input: str | list[Any] = Field(..., description="A string, or a list of strings (at most --max-inputs).")
    model: str | None = Field(None, description="The served model's id (GET /v1/models); omitted = that model.")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes, base64-encoded."
    )
    dimensions: int | None = Field(None, description="Must equal the model's dimension if given (no truncation).")
    user: str | None = Field(None, description="Accepted for compatibility; unused.")
    instruction: str | list[str | None] | None = Field(
        None, description="One instruction for every input, or one per input (null, '' or whitespace = none)."
    )
    input_type: Literal["query", "document"] = Field(
        "query",
        description="query: each input under its own instruction (encode_queries); "
        "document: documents (encode_documents; a model whose documents a sentence encoder embeds takes no "
        "instruction for them: GET /v1/models, document_instruction).",
    )
    llm_weight: LLMWeight = Field(
        None,
        description="Queries of a two-space model (GET /v1/models gives llm_weight): the LLM space's share of "
        "the score, 0..1 (1: the LLM alone, 0: the sentence encoder alone); null = the model's own. Documents "
        "are stored with both halves, so any weight searches the same index.",
    )
    instruction_strength: InstructionStrength = Field(
        None,
        description="Queries of an instruction-effect model (GET /v1/models gives instruction_strength): how much "
        "the instruction moves the ranking, 0..10 (0: plain search by the sentence encoder, about 1-3: the "
        "instruction decides between passages on the same topic); null = the model's own. Nothing is re-indexed.",
    )


class EmbeddingObject(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    prompt_tokens: int = Field(
        ..., description="Tokens run through the model: text, instruction and look-ahead tokens."
    )
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingObject]
    model: str
    usage: Usage


# ------------------------------------------------------------------ /v1/search


class SearchRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "Which tent should I buy?",
                    "instruction": "focus on durability",
                    "k": 5,
                    "filter": {"source": "tents/*"},
                },
                {"query": "ridgeline tent weight", "instruction": "focus on packed weight", "k": 5, "hybrid": "rrf"},
            ]
        },
    )

    query: str = Field(..., description="What to search for.")
    instruction: str | None = Field(None, description="How to judge relevance; null, '' or whitespace = none.")
    k: int = Field(5, description="Number of hits (1 to --max-k).")
    filter: dict[str, str] | None = Field(
        None, description='Metadata filter, e.g. {"source": "tents/*.md"} (glob); every key must hold.'
    )
    hybrid: Literal["rrf", "z"] | None = Field(
        None,
        description="Fuse the dense ranking with the index's full-text (bm25) ranking of the query and the "
        "instruction's content words: rrf (reciprocal ranks) or z (standardised scores); null = dense only.",
    )
    hybrid_weight: float | None = Field(
        None, description="With hybrid: the full-text side's share, 0..1 (null = the default, 0.5)."
    )
    llm_weight: LLMWeight = Field(
        None,
        description="A two-space model's query: the LLM space's share of the dense score, 0..1 (null = the "
        "model's own); see /v1/embeddings.",
    )
    instruction_strength: InstructionStrength = Field(
        None,
        description="An instruction-effect model's query: how much the instruction moves the ranking, 0..10 "
        "(0: plain search; null = the model's own); see /v1/embeddings.",
    )
    explain: bool = Field(
        False,
        description="Add each hit's `explain`: a two-space model's cosine in each space (llm, tower), the "
        "weight, their weighted sum (what ranks) and the score; an instruction-effect model's plain score "
        "(the sentence encoder's cosine), the instruction's contribution, the strength, their sum (combined: "
        "what ranks) and the score; a one-space model's single cosine. "
        "As `instemb-rag query --explain --json`.",
    )


class SearchHitModel(BaseModel):
    score: float = Field(..., description="The fused score under hybrid search, else the cosine similarity.")
    source: str
    position: int
    text: str
    chunk_id: int
    extra: dict[str, Any]
    dense_rank: int | None = Field(None, description="Hybrid only: rank among the dense candidates (null: beyond).")
    lexical_rank: int | None = Field(
        None, description="Hybrid only: rank among the full-text candidates (null: beyond, or no word matched)."
    )
    explain: dict[str, float | None] | None = Field(None, description="Present when the request asked to explain.")


class HybridSettings(BaseModel):
    mode: Literal["rrf", "z"]
    weight: float


class SearchResponse(BaseModel):
    """Exactly what `instemb-rag query --json` prints."""

    query: str
    instruction: str | None
    hits: list[SearchHitModel]
    hybrid: HybridSettings | None = Field(None, description="Present when the request asked for hybrid search.")
    llm_weight: float | None = Field(None, description="Present when the request gave llm_weight.")
    instruction_strength: float | None = Field(None, description="Present when the request gave instruction_strength.")


# ------------------------------------------------------------------ models, health, errors


class LLMWeightKnob(BaseModel):
    default: float | None = Field(
        ...,
        description="The LLM space's share a query gets when a request gives no llm_weight (null: the "
        "model's gate sets one per query).",
    )


class InstructionStrengthKnob(BaseModel):
    default: float = Field(..., description="The strength a query gets when a request gives no instruction_strength.")
    maximum: float = Field(..., description="The largest strength taken (the least is 0: plain search).")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "instemb-rag"
    dimension: int
    fingerprint: str = Field(..., description="Identifies the weights, template, pooling and look-ahead length.")
    max_length: int = Field(
        ...,
        description="Tokens a document is read in at most (special tokens included): the window of what embeds "
        "documents, its most restrictive part (a sentence encoder's where one embeds them).",
    )
    document_token_limit: int | None = Field(
        None, description="Tokens of a document's own text that are read (the rest is cut): size chunks to it."
    )
    document_fingerprint: str | None = Field(
        None, description="Identifies what embeds documents (an index keys on it; a query-side change keeps it)."
    )
    document_model: str | None = Field(None, description="What embeds documents, in words.")
    document_instruction: bool | None = Field(
        None, description="Whether a document instruction is read (false: sent with documents, it is refused)."
    )
    query_max_length: int | None = Field(None, description="Tokens a query (with its instruction) is read in at most.")
    llm_weight: LLMWeightKnob | None = Field(
        None, description="A two-space model's knob (the LLM space's share of the score); null: the model has none."
    )
    instruction_strength: InstructionStrengthKnob | None = Field(
        None,
        description="An instruction-effect model's knob (how much the instruction moves the ranking); null: the "
        "model has none.",
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class BatchingStats(BaseModel):
    enabled: bool
    max_batch_size: int
    max_wait_ms: float
    max_queue: int
    queued_inputs: int
    forward_batches: int = Field(..., description="Batches run since start (one encoder call each).")
    inputs_embedded: int
    largest_batch: int


class IndexInfo(BaseModel):
    index_dir: str
    store: str
    chunks: int


class Health(BaseModel):
    status: Literal["ok", "shutting_down"]
    model: str
    dimension: int
    fingerprint: str
    in_flight: int = Field(..., description="Embedding and search requests being answered now.")
    index: IndexInfo | None
    batching: BatchingStats


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


# ------------------------------------------------------------------ vectors on the wire


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.tolist()


def decode_vector(encoded: str) -> np.ndarray:
    """The inverse of ``encode_vector(vector, "base64")``: little-endian float32 bytes, base64-encoded."""
    return np.frombuffer(base64.b64decode(encoded), dtype="<f4")
