"""The query service: one request answered over an open index, the same way for every entry point.

    answer = search(QueryRequest(query="Which tent?", instruction="focus on weight", k=3), index)
    answer.hits, answer.explanations, answer.notes, answer.to_document()

The way of a query, once: the request's query checked (``QueryRequest.checked_query``: the
instruction normalised, the knobs in range), the knobs the model takes (``require_knobs``: the one
refusal), the query embedded (``embed``: the encoder, or the server's batcher handed in), the
index's store ranked (``index.rank``: dense or hybrid, over the catalog when the store lags), and
``finish``: what is done to the hits after the store's search (``--explain``'s rows; the place for
a second-stage ranker).

The command line (in-process, or through the resident process: resident/ask.py), the resident
process and ``serve`` (serve/state.py ``ServerState.answer``), MCP (agents/mcp_server.py),
``Index.search`` / ``Index.explain`` and ``IndexRetriever`` (the LlamaIndex retriever's) call it.
The index is handed in (index/search.py's ``Index`` is what it reads: ``SearchableIndex``); this
room never imports index/, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import BadInputError
from ..queries import (
    EmptyQueryError,
    KnobRefusedError,  # noqa: F401 (its home before issue 68; service/__init__ hands it out)
    Query,
    QueryKnobs,
    refused_knob,
)
from .request import QueryRequest

__all__ = ["Answer", "Embed", "SearchableIndex", "chosen_reader", "explain_hits", "finish", "require_knobs", "search"]

HYBRID_NEEDS_TEXT = (
    "Hybrid search needs the query text: it reads the query's text (its words go to the full-text index), "
    "not a vector alone."
)
# What embeds a checked query: (its vector, notices for the user). The server's hands the query to
# its batcher (serve/state.py); the default is the index's encoder.
Embed = Callable[[Query], "tuple[Any, list[str]]"]


class SearchableIndex(Protocol):
    """What the service reads of an open index (index/search.py ``Index``)."""

    encoder: Any
    placement_note: str | None
    fallback_reason: str | None

    @property
    def query_knob(self) -> str | None: ...

    def hybrid_settings(self, hybrid: str | None, weight: float | None) -> tuple[str | None, float]: ...

    def rank(self, vector, text, instruction, k, filter, hybrid, weight) -> list: ...

    def stored_documents(self, hits: list) -> Any: ...

    def reader(self) -> Any: ...  # the model's reader (reader/reranker.py Reranker), or None


@dataclass
class Answer:
    """A search's answer: the query as checked, the hits best first, each hit's explanation (with
    ``explain``), the model's query-time knob, and the notices for the user."""

    query: Query | None
    hits: list
    explanations: list[dict] | None = None
    query_knob: str | None = None
    notes: list[str] = field(default_factory=list)
    hybrid: tuple[str, float] | None = None  # (mode, full-text weight used)

    def to_document(self) -> dict:
        """/v1/search's answer, ``instemb-rag query --json``'s hits: the same JSON from every door."""
        query = self.query or Query("")
        document = {"query": query.text, "instruction": query.instruction, "hits": [hit.to_dict() for hit in self.hits]}
        for hit, explained in zip(document["hits"], self.explanations or []):
            hit["explain"] = explained
        if self.hybrid is not None:
            document["hybrid"] = {"mode": self.hybrid[0], "weight": self.hybrid[1]}
        document.update(query.knobs.given())
        return document


def search(request: QueryRequest, index: SearchableIndex, embed: Embed | None = None, who: str = "the index") -> Answer:
    """``request`` answered over ``index``: its hits (and explanations), best first. ``who`` embeds
    a query given as text (what a refusal of knobs beside a query vector names)."""
    if request.k < 1:
        raise BadInputError(f"k must be at least 1, got {request.k}.")
    hybrid, weight = index.hybrid_settings(request.hybrid, request.hybrid_weight)
    query = entered_query(request, hybrid, who)
    notes: list[str] = []
    if request.query_vector is not None:
        vector = request.query_vector
    else:
        vector, notes = (embed or encoder_embed(index.encoder))(require_knobs(query, index))
    text, instruction = (None, None) if query is None else (query.text, query.instruction)
    reader = chosen_reader(request, query, index)
    depth = request.k if reader is None else max(request.k, read_depth(request, reader))
    hits = index.rank(vector, text, instruction, depth, request.filter, hybrid, weight)
    hits, explanations, reader_notes = finish(hits, request, query, index, reader)
    notes += reader_notes
    notes += [note for note in (index.placement_note, index.fallback_reason) if note]
    return Answer(query, hits, explanations, index.query_knob, notes, None if hybrid is None else (hybrid, weight))


def entered_query(request: QueryRequest, hybrid: str | None, who: str = "the index") -> Query | None:
    """The request's query, checked once (None: a query vector alone, searched densely)."""
    if request.query is None and request.query_vector is not None:
        if hybrid is not None:
            raise BadInputError(HYBRID_NEEDS_TEXT)
        refuse_knobs_of_an_embedded_query(request.knobs, who)
        return None
    try:
        query = request.checked_query()
    except EmptyQueryError as error:
        raise BadInputError(str(error)) from None
    if request.query_vector is not None:
        refuse_knobs_of_an_embedded_query(query.knobs, who)
    return query


def refuse_knobs_of_an_embedded_query(knobs, who: str) -> None:
    for knob in QueryKnobs.checked(dict(knobs)):
        raise BadInputError(
            f"{knob} applies when {who} embeds the query text; this query comes embedded already: "
            f"embed it with encoder.encode_queries(..., {knob}=...) instead."
        )


def encoder_embed(encoder: Any) -> Embed:
    """The default embedding: the index's encoder, one prefill."""

    def embed(query: Query) -> tuple[Any, list[str]]:
        if encoder is None:
            raise BadInputError(
                "This index was opened without an encoder: pass the query's vector, or open it with one."
            )
        return encoder.encode_queries([query.text], query.instruction, **query.knobs.given())[0], []

    return embed


def require_knobs(query: Query, index: SearchableIndex) -> Query:
    """The query, if the index's model takes each knob it gives; else refused, saying what the model
    is (queries.py ``refused_knob``: the one wording, ``QueryKnobs.require``'s too)."""
    knob = query.knobs.refused_by(index.encoder)
    if knob is None:
        return query
    raise refused_knob(knob, index.encoder, "the model of this index", has=index.query_knob)


def chosen_reader(request: QueryRequest, query: Query | None, index: SearchableIndex):
    """The model's reader (reader/reranker.py) when this request is to be re-read, else None: asked
    for (``rerank`` true) and missing is refused; not asked for, it is used where the model has one."""
    if request.rerank is False:
        return None
    reader = index.reader() if query is not None else None
    if reader is None and (request.rerank or request.rerank_top is not None):
        why = "a query given as a vector has no text to read" if query is None else "the index's model has no reader"
        raise BadInputError(f"rerank: {why}; search without it (--no-rerank), or use a model folder with a reader.")
    return reader


def read_depth(request: QueryRequest, reader) -> int:
    return request.rerank_top if request.rerank_top is not None else reader.top


def finish(
    hits: list, request: QueryRequest, query: Query | None, index: SearchableIndex, reader=None
) -> tuple[list, list | None, list[str]]:
    """What is done to the store's hits before they are answered: the reader's second stage over
    the top hits (their fused scores, best first; the rest keep the first stage's, never above a
    re-read hit's), then ``explain``'s rows, with the reader's part beside the first stage's."""
    read, notes = [], []
    if reader is not None and hits:
        hits, read, notes = reread(hits, query, reader, read_depth(request, reader))
    hits = hits[: request.k]
    explanations = explain_hits(query, hits, index) if request.explain else None
    if explanations is not None and read:
        for row, parts in zip(explanations, read):
            if parts is not None:
                row.update(parts)
    return hits, explanations, notes


def reread(hits: list, query: Query, reader, depth: int) -> tuple[list, list, list[str]]:
    """The top ``depth`` hits re-scored by the reader and re-ordered; per hit (in the new order) its
    explain parts (None below the depth), and a note when a hit was longer than the reader's window."""
    top, rest = hits[:depth], hits[depth:]
    first = [hit.score for hit in top]
    result = reader.scored(query.text, query.instruction, [hit.text for hit in top], first)
    parts = [
        {"first_stage": score, "reader": fused - score, "reader_logit": logit, "score": fused}
        for score, fused, logit in zip(first, result.fused, result.reader_logits)
    ]
    order = sorted(range(len(top)), key=lambda n: -result.fused[n])
    for n in order:
        top[n].score = result.fused[n]
    notes = []
    if result.cut:
        notes.append(
            f"the reader read the start of {result.cut} hit(s) longer than its window "
            f"({reader.model.config.max_length} tokens); the query and instruction were read whole."
        )
    return [top[n] for n in order] + rest, [parts[n] for n in order] + [None] * len(rest), notes


def explain_hits(query: Query | None, hits: list, index: SearchableIndex) -> list[dict]:
    """Per hit, what its dense score is made of. A model with a query-time knob: the encoder's
    ``explain`` over the hits' stored document vectors (``index.stored_documents``; encoder/combine.py's
    rows: each space's part, the knob it was taken at, what ranks and the ``score``). A model of one
    space, from the search itself (nothing computed twice): its ``cosine``, the hit's score; with
    hybrid search the two sides the score fuses, ``cosine`` and ``bm25``."""
    if not hits:
        return []
    if index.query_knob is not None:
        if query is None:
            raise BadInputError("explain reads the query's text and instruction: give them, not a vector alone.")
        documents = index.stored_documents(hits)
        return index.encoder.explain(query.text, query.instruction, documents, **query.knobs.given())
    return [
        {"cosine": hit.score}
        if hit.dense_score is None and hit.lexical_score is None
        else {"cosine": hit.dense_score, "bm25": hit.lexical_score}
        for hit in hits
    ]
