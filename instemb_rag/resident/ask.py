"""Where a query is answered: by the resident query process, else in this process. The one
fallback the command line (cli/query.py, cli/demo.py) and MCP (agents/mcp_server.py) share.

    asker = Asker(use_resident=resident_wanted(no_daemon), on_note=print)
    answer = asker.answer(QueryRequest(query="light tent", k=3, index_dir="/abs/.instemb"))

Through the resident process, the request travels as the HTTP schema reads it
(``QueryRequest.wire``) and the answer comes back as /v1/search's JSON; in this process, the index
is opened (once per Asker and folder) and the query service answers (service/answer.py). Either
way the caller gets a ``service.Answer``. An error in the query itself (a missing index, a bad
filter) is raised as it is; the resident process's is a ``ResidentAnswerError`` with the exit code
the in-process answer would have left with.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..service.answer import Answer
from ..service.request import QueryRequest
from .client import ResidentClient, ResidentUnavailable

__all__ = ["Asker", "resident_request"]

FALLBACK_NOTE = "; answering in this process (--no-daemon skips the resident process)."


class Asker:
    """Asks the resident process while it answers, else this process (from then on: a process
    that could not answer once is not asked again by this Asker)."""

    def __init__(
        self,
        use_resident: bool = True,
        on_note: Callable[[str], None] | None = None,
        open_index: Callable[[QueryRequest], Any] | None = None,
        keep_open: bool = False,
    ):
        self.use_resident = use_resident
        self.on_note = on_note or (lambda note: None)
        self.open_index = open_index or open_index_here
        self.keep_open = keep_open  # MCP: the index (and its model) stay loaded between calls
        self.opened: dict[tuple, Any] = {}

    def answer(self, request: QueryRequest) -> Answer:
        if self.use_resident:
            try:
                return answer_from_document(request, ResidentClient().search(resident_request(request)))
            except ResidentUnavailable as error:
                self.use_resident = False
                self.on_note(f"{str(error).rstrip('.')}{FALLBACK_NOTE}")
        return self.answer_here(request)

    def answer_here(self, request: QueryRequest) -> Answer:
        """Open the index in this process (or reuse it) and let the query service answer."""
        from ..service.answer import search

        key = (request.index_dir, request.model, request.device)
        index = self.opened.get(key) or self.open_index(request)
        if self.keep_open:
            self.opened[key] = index
        try:
            return search(request, index)
        finally:
            if not self.keep_open:
                index.close()

    def close(self) -> None:
        for index in self.opened.values():
            index.close()
        self.opened.clear()


def open_index_here(request: QueryRequest):
    """The request's index folder, opened with the model it records (or ``request.model``)."""
    from ..index import Index
    from ..index.manifest import model_label

    model = request.model
    return Index.open(request.index_dir, model=model and model_label(model), device=request.device, read_only=True)


def resident_request(request: QueryRequest) -> dict[str, Any]:
    """The resident process's request (resident/app.py ``ResidentSearchRequest``): the HTTP
    schema's fields, and which index, model and device, as that process (elsewhere) reads them."""
    return {
        "index_dir": str(Path(request.index_dir).resolve()),
        "model": absolute_if_path(request.model),
        "device": request.device,
        **request.wire(),
    }


def answer_from_document(request: QueryRequest, reply: dict) -> Answer:
    """The resident process's reply (/v1/search's JSON, the model's knob, the notes) as an Answer."""
    from ..index.hits import SearchHit
    from ..knobs import KNOBS
    from ..queries import Query, QueryKnobs

    document = reply["answer"]
    found = document["hits"]
    explanations = [hit.pop("explain") for hit in found] if request.explain else None
    hybrid = document.get("hybrid")
    # The query as the process checked it (its instruction normalised there, once).
    knobs = QueryKnobs(**{name: document[name] for name in KNOBS if document.get(name) is not None})
    return Answer(
        Query(document["query"], document["instruction"], knobs),
        [SearchHit(**hit) for hit in found],
        explanations,
        reply["query_knob"],
        reply["notes"],
        None if hybrid is None else (hybrid["mode"], hybrid["weight"]),
    )


def absolute_if_path(model: str | None) -> str | None:
    """--model as the resident process must read it: a folder relative to this shell's directory
    made absolute (the process runs elsewhere); a name is passed as given."""
    if model is None or not Path(model).expanduser().exists():
        return model
    return str(Path(model).expanduser().resolve())
