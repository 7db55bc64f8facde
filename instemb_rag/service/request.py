"""A query request, declared once: what every entry point of a search reads its fields from.

    request = QueryRequest(query="Which tent?", instruction="focus on weight", k=3, hybrid="rrf")
    query = request.checked_query()          # the one place the instruction is normalised and the knobs checked

``QueryRequest`` is the declaration. A field with ``declared(...)`` metadata is a field of every
door: the HTTP schema (serve/schemas.py ``SearchRequest``, and the resident process's request that
extends it) has it, and the command line (cli/query.py) and the MCP tool (agents/mcp_server.py)
get a parameter for each declared field they do not spell themselves (``declared_parameters``).
Adding a request field (e.g. a second-stage ranker's ``rerank``) is so one line here, plus what the
service does with it (answer.py ``finish``). The query-time knobs are declared in knobs.py and
travel as one mapping, ``knobs``.

Light (no numpy, torch, pydantic or typer): the command line builds a request before it knows
which process answers it.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Literal

from ..knobs import KNOBS
from ..queries import Query, QueryKnobs

__all__ = [
    "DECLARED_HERE",
    "Declared",
    "DeclaredField",
    "QueryRequest",
    "declared",
    "declared_fields",
    "declared_parameters",
]

# The default of an entry's placeholder parameter: where its generated parameters go.
DECLARED_HERE: Any = None


@dataclass(frozen=True)
class Declared:
    """How one request field enters at each door."""

    help: str  # what it sets: the HTTP schema's description, and a generated option's help
    option: str | None = None  # its command-line flag (None: --<name>, "--x/--no-x" for a switch)
    wire: Any = None  # its type in the HTTP schema, where it is not the field's own
    low: float | None = None  # the least value a generated option takes
    high: float | None = None  # the largest
    required: bool = False  # the HTTP schema refuses a request without it


def declared(default: Any, help: str, **door: Any) -> Any:
    """A request field every door takes: ``default``, what it does (``help``) and ``Declared``'s
    per-door details."""
    return field(default=default, metadata={"declared": Declared(help, **door)})


@dataclass(frozen=True)
class QueryRequest:
    """One search: which index, what to find under which instruction and knobs, and how."""

    query: str | None = declared(None, "What to search for.", required=True, wire=str)
    instruction: str | None = declared(None, "How to judge relevance; null, '' or whitespace = none.")
    k: int = declared(5, "Number of hits (1 to --max-k).", low=1)
    filter: dict | None = declared(
        None,
        'Metadata filter, e.g. {"source": "tents/*.md"} (glob); every key must hold.',
        wire=dict[str, str] | None,
    )
    hybrid: str | None = declared(
        None,
        "Fuse the dense ranking with the index's full-text (bm25) ranking of the query and the "
        "instruction's content words: rrf (reciprocal ranks) or z (standardised scores); null = dense only.",
        wire=Literal["rrf", "z"] | None,
    )
    hybrid_weight: float | None = declared(
        None, "With hybrid: the full-text side's share, 0..1 (null = the default, 0.5).", low=0.0, high=1.0
    )
    explain: bool = declared(
        False,
        "Add each hit's `explain`: a two-space model's cosine in each space (llm, sentence encoder), the "
        "weight, their weighted sum (what ranks) and the score; an instruction-effect model's plain score "
        "(the sentence encoder's cosine), the instruction's contribution, the strength, their sum (combined: "
        "what ranks) and the score; a one-space model's single cosine. "
        "As `instemb-rag query --explain --json`.",
    )
    rerank: bool | None = declared(
        None,
        "Re-order the top hits with the model's reader, which reads the instruction, the query and each hit "
        "together (null: on when the model has one; true: refused for a model without one).",
    )
    rerank_top: int | None = declared(
        None, "With the reader: how many of the first stage's top hits it reads (null: the model's own, 10).", low=1
    )
    # The query-time knobs (knobs.py declares them; each door takes one parameter per knob).
    knobs: Mapping[str, float | None] = field(default_factory=dict)
    # Which index and which model: the command line, the resident process and MCP name a folder;
    # serve, Index.search and a retriever hold an open index.
    index_dir: str | None = None
    model: str | None = None  # --model (None: the one the index records)
    device: str = "auto"
    # The query already embedded (a caller's cache, the server's batcher): no knob then.
    query_vector: Any = None

    def checked_query(self) -> Query:
        """The query as it enters: its text not blank, its instruction normalised (the one place a
        search normalises it), its knobs declared and in range (queries.py ``Query.checked``)."""
        return Query.checked(self.query, self.instruction, knobs=QueryKnobs.checked(dict(self.knobs)))

    def with_query(self, query: Query) -> QueryRequest:
        """This request for a ``Query`` checked where it entered (its text, instruction and knobs)."""
        return replace(self, query=query.text, instruction=query.instruction, knobs=query.knobs)

    def wire(self) -> dict[str, Any]:
        """The request as the HTTP schema (and the resident process's request) reads it."""
        found = {spec.name: getattr(self, spec.name) for spec in declared_fields()}
        return {**found, **QueryKnobs.checked(dict(self.knobs)).given()}

    def options(self) -> dict[str, Any]:
        """The declared fields other than the query's own (its text and instruction): how to search."""
        return {spec.name: getattr(self, spec.name) for spec in declared_fields() if spec.name not in QUERY_OWN}


QUERY_OWN = ("query", "instruction")


@dataclass(frozen=True)
class DeclaredField:
    """A declared field as a door reads it: name, type, default and ``Declared``."""

    name: str
    annotation: Any
    default: Any
    door: Declared

    @property
    def wire_annotation(self) -> Any:
        return self.annotation if self.door.wire is None else self.door.wire

    @property
    def option(self) -> str:
        """Its command-line flag: declared, or --<name> (a switch: --<name>/--no-<name>)."""
        if self.door.option is not None:
            return self.door.option
        flag = "--" + self.name.replace("_", "-")
        return f"{flag}/--no-{flag[2:]}" if self.annotation in (bool, bool | None) else flag


def declared_fields(request: type = QueryRequest) -> list[DeclaredField]:
    """``request``'s declared fields, in declaration order."""
    hints = typing.get_type_hints(request)
    return [
        DeclaredField(item.name, hints[item.name], None if item.default is MISSING else item.default, spec)
        for item in fields(request)
        if (spec := item.metadata.get("declared")) is not None
    ]


def declared_parameters(
    parameter: Callable[[DeclaredField], Any],
    spelled: Iterable[str] = (),
    request: type = QueryRequest,
    knob_parameter: Callable[[Any], Any] | None = None,
    placeholder: str = "declared",
    wire: bool = False,
) -> Callable:
    """A decorator for an entry point (a command, a tool): its ``placeholder`` parameter becomes one
    parameter per declared field it does not spell itself (``spelled``), of default
    ``parameter(field)``, and (with ``knob_parameter``) one per query-time knob; the entry is called
    with their values collected in ``placeholder`` (knobs under "knobs"), each typed as the field
    (``wire``: as the HTTP schema types it). What typer and the MCP SDK read is the signature, so a
    field declared in ``QueryRequest`` reaches both without an edit."""
    spelled = set(spelled)
    chosen = [spec for spec in declared_fields(request) if spec.name not in spelled]

    def decorate(entry: Callable) -> Callable:
        signature = inspect.signature(entry, eval_str=True)
        parameters = list(signature.parameters.values())
        at = next((n for n, item in enumerate(parameters) if item.name == placeholder), None)
        if at is None:
            raise TypeError(f"{entry.__name__} has no {placeholder!r} parameter for the declared request fields.")
        made = [
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=parameter(spec),
                annotation=spec.wire_annotation if wire else spec.annotation,
            )
            for spec in chosen
        ]
        knobs = list(KNOBS.values()) if knob_parameter is not None else []
        made += [
            inspect.Parameter(
                knob.name, inspect.Parameter.KEYWORD_ONLY, default=knob_parameter(knob), annotation=float | None
            )
            for knob in knobs
        ]
        kind = parameters[at].kind
        made = [item.replace(kind=kind) for item in made]

        @functools.wraps(entry)
        def with_declared(*args: Any, **values: Any) -> Any:
            given = {spec.name: values.pop(spec.name) for spec in chosen if spec.name in values}
            given_knobs = {knob.name: values.pop(knob.name) for knob in knobs if knob.name in values}
            if knobs:
                given["knobs"] = given_knobs
            return entry(*args, **values, **{placeholder: given})

        with_declared.__signature__ = signature.replace(parameters=parameters[:at] + made + parameters[at + 1 :])
        with_declared.__annotations__ = {
            **{item.name: item.annotation for item in with_declared.__signature__.parameters.values()},
            "return": signature.return_annotation,
        }
        return with_declared

    return decorate
