"""What `instemb-rag query` does, without typer: its request from the options' values
(``query_request``) and its answer printed (``show_answer``: a table, or JSON with --json).

Both paths call it: the typer command (query.py) and the lean client (entry.py), which answers a
warm query through the resident process without importing typer, pydantic or rich. So the two
build the same request and print the same bytes. Light: rich is imported where a table or a note
is printed.
"""

from __future__ import annotations

import json
from typing import Any

from ..index.filters import parse_filters
from ..knobs import INSTRUCTION_STRENGTH, KNOBS
from ..service.request import QueryRequest, declared_parameters
from .notes import say

__all__ = [
    "EXPLAINED",
    "EXPLAINED_EFFECT",
    "EXPLAINED_ONE_SPACE_HYBRID",
    "SHOWN_ONLY",
    "SPELLED_HERE",
    "query_request",
    "request_of_options",
    "show_answer",
    "used_weight",
]

# The request fields the command spells itself (its own names, help and checks); any other field
# declared in service/request.py gets its option from the declaration (query.py ``declared``).
SPELLED_HERE = ("query", "instruction", "k", "filter", "hybrid", "hybrid_weight", "explain")
# The command's parameters that only choose how the answer is printed.
SHOWN_ONLY = ("as_json",)


def query_request(
    text: str,
    instruction: str | None,
    k: int,
    index_dir,
    filters: list[str] | None,
    hybrid,
    hybrid_weight: float | None,
    explain: bool,
    model: str | None,
    device: str,
    declared: dict[str, Any],
) -> QueryRequest:
    """The command's request: its options' values (``hybrid`` a HybridMode or its value; the
    declared fields and knobs in ``declared``, as ``declared_parameters`` collects them). A --filter
    that is not KEY=VALUE raises BadInputError."""
    parsed = parse_filters(filters)  # the command line's KEY=VALUE syntax; the query is the service's to check
    return QueryRequest(
        text,
        instruction,
        k=k,
        filter=parsed or None,
        hybrid=getattr(hybrid, "value", hybrid),
        hybrid_weight=hybrid_weight,
        explain=explain,
        index_dir=str(index_dir),
        model=model,
        device=device,
        **declared,
    )


# ``query_request`` with each declared field and knob a parameter of its own, named as the typer
# command's are (what the lean client has parsed): the parameters a warm query answers by.
request_of_options = declared_parameters(lambda spec: None, spelled=SPELLED_HERE, knob_parameter=lambda knob: None)(
    query_request
)


def show_answer(answer, hybrid, explain: bool, as_json: bool, console=None, precision_report=None) -> None:
    """The hits as a table (or JSON with --json): the same output whichever process answered.
    ``answer`` a service ``Answer``; ``hybrid`` the --hybrid given (a HybridMode, its value or
    None); ``console`` the rich console of the table (None: stdout's)."""
    query, hits, explanations = answer.query, answer.hits, answer.explanations
    spaces = 2 if answer.query_knob is not None else 1
    explained = EXPLAINED_EFFECT if KNOBS.get(answer.query_knob) is INSTRUCTION_STRENGTH else EXPLAINED[spaces]
    if spaces == 1 and hybrid is not None:
        explained = EXPLAINED_ONE_SPACE_HYBRID
    knobs = query.knobs.given()
    if answer.notes:  # on stderr (with --json too), as the notes Python's warnings become
        from rich.console import Console

        for note in answer.notes:
            say(Console(stderr=True), "note", note)
    if as_json:
        document = answer.to_document()  # /v1/search's JSON
        if explanations is not None:
            document["explain"] = {"spaces": spaces, "score": explained}
        if precision_report is not None:  # int8: what runs (layers in int8 / kept float, load time)
            document["precision"] = precision_report
        print(json.dumps(document, indent=2))
        return
    from rich.console import Console

    from ..index.display import hits_table

    console = console or Console()
    title = f"{query.text!r}" + (f" — instruction: {query.instruction!r}" if query.instruction else "")
    for name, value in knobs.items():
        title += f" — {KNOBS[name].label} {value}"
    if hybrid is not None:
        title += f" — hybrid {getattr(hybrid, 'value', hybrid)}, full-text weight {used_weight(answer)}"
    if explanations is not None:
        say(console, "explain", explained, style="cyan")
    console.print(hits_table(hits, title, explanations))


# What --explain's columns mean, by the number of spaces the model ranks in.
EXPLAINED = {
    2: (
        "two spaces: weighted = LLM weight * LLM cos + (1 - LLM weight) * sentence encoder cos ranks the hits; the "
        "score is weighted / (sqrt 2 * |(LLM weight, 1 - LLM weight)|), the cosine of the unit query"
    ),
    1: (
        "this model has one space (not a two-space model): a hit's score is the cosine of query and chunk, so "
        "--explain has nothing to add to it; with --hybrid it shows the two scores each hit's score fuses"
    ),
}
EXPLAINED_ONE_SPACE_HYBRID = (
    "one space, hybrid: cosine = the dense side's score (query and chunk), bm25 = the full-text side's (0: no "
    "query word in the chunk); the score fuses the two by the hybrid rule at the full-text weight"
)
EXPLAINED_EFFECT = (
    "instruction effect: combined = plain (the sentence encoder's cosine, instruction pasted) + instruction "
    "(effective * the instruction's effect in the LLM's space against the chunk's LLM vector) ranks the hits; "
    "strength = --instruction-strength (the model's own when not given), effective = strength * the model's gain "
    "for this query and instruction; the score is combined / (sqrt 2 * |query|), the cosine of the unit query; "
    "strength 0 is plain search"
)


def used_weight(answer) -> float:
    """The full-text weight the search fused at (the default where none was given)."""
    return answer.hybrid[1]
