"""Request and response bodies of `instemb-rag serve` (pydantic models, shown in /docs).

`/v1/embeddings` follows OpenAI's embeddings schema, so an OpenAI client works unchanged;
`instruction`, `input_type` and the model's query-time knob (knobs.py's declarations; GET
/v1/models lists the one the model takes) are the additions. `/v1/search` answers with the same
JSON as `instemb-rag query --json`. Errors use OpenAI's shape: {"error": {message, type,
param, code}}.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from ..knobs import KNOBS
from ..service.request import declared_fields

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
    "KnobCard",
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


def knob_fields(annotation: Any = None, describe: str = "{help}; null = the model's own.") -> dict[str, Any]:
    """One optional field per declared query-time knob (knobs.py), its help read from the declaration.
    A request's are checked here, where it enters: a value out of range is a KnobError, answered
    with a 400 that names the field (errors.py); the routes take them as given."""
    return {
        knob.name: (
            Annotated[float | None, AfterValidator(knob.check)] if annotation is None else annotation,
            Field(None, description=describe.format(help=knob.help, name=knob.name, meaning=knob.meaning)),
        )
        for knob in KNOBS.values()
    }


# The knobs of a request, of a search's answer (those given) and of a model card (those it takes).
RequestKnobs = create_model(
    "RequestKnobs",
    **knob_fields(describe="{help}; null = the model's own (GET /v1/models lists the knob the model takes)."),
)


class EmbeddingRequest(RequestKnobs):
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


def declared_search_fields() -> dict[str, Any]:
    """/v1/search's fields, each read from its declaration (service/request.py ``QueryRequest``):
    a field declared there is a field here (and of the resident process's request) without an edit."""
    return {
        spec.name: (
            spec.wire_annotation,
            Field(... if spec.door.required else spec.default, description=spec.door.help),
        )
        for spec in declared_fields()
    }


class SearchRequest(create_model("SearchRequestFields", __base__=RequestKnobs, **declared_search_fields())):
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


class SearchResponse(create_model("GivenKnobs", **knob_fields(float | None, "Present when the request gave {name}."))):
    """Exactly what `instemb-rag query --json` prints."""

    query: str
    instruction: str | None
    hits: list[SearchHitModel]
    hybrid: HybridSettings | None = Field(None, description="Present when the request asked for hybrid search.")


# ------------------------------------------------------------------ models, health, errors


class KnobCard(BaseModel):
    """A query-time knob the model takes (knobs.py's declaration, the folder's default)."""

    default: float | None = Field(
        ..., description="The value a query gets when a request gives none (null: the model sets one per query)."
    )
    minimum: float = Field(..., description="The least value taken.")
    maximum: float = Field(..., description="The largest value taken.")


LLMWeightKnob = InstructionStrengthKnob = KnobCard  # the older names


class ModelCard(create_model("CardKnobs", **knob_fields(KnobCard | None, "{help}; null: the model has none."))):
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
