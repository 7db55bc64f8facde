"""`instemb-rag mcp --index-dir DIR`: an index as MCP tools, on stdio (the official MCP SDK).

    search(query, instruction, top_k, filter, hybrid, ..., knobs)
                                                the best chunks: source, position, score, snippet
                                                (the query service's answer: service/)
    list_indexed()                              the index: its folder, model, chunk count, files

An agent's config needs one line: ``{"command": "instemb-rag", "args": ["mcp", "--index-dir",
"/abs/path/.instemb"]}``. Queries run through the resident query process (the same answer as
`instemb-rag query --json`); where it cannot answer, this process answers itself, loading the model
once. Stdout is the protocol's: nothing else is printed there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SNIPPET_CHARS", "build_server"]

SNIPPET_CHARS = 400
MAX_TOP_K = 50


class IndexTools:
    """What the tools do, apart from the protocol: a search asked of the resident process, else of
    this process (resident/ask.py ``Asker``, the command line's fallback too)."""

    def __init__(self, index_dir: Path, model: str | None = None, use_resident: bool = True):
        from ..resident.ask import Asker

        self.index_dir = index_dir.resolve()
        self.model = model
        # Opened here only when the resident process cannot answer; then kept (the model stays loaded).
        self.asker = Asker(use_resident, keep_open=True)

    @property
    def use_resident(self) -> bool:
        return self.asker.use_resident

    def search(
        self,
        query: str,
        instruction: str | None,
        top_k: int,
        filter: dict[str, str] | None,
        options: dict[str, Any] | None = None,
    ) -> dict:
        """The best ``top_k`` chunks; ``options``: the other declared request fields (hybrid,
        explain, ...) and the query-time knobs (``knobs``), as the tool's parameters gave them."""
        from ..errors import InstEmbError
        from ..service.request import QueryRequest

        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k={top_k}: ask for between 1 and {MAX_TOP_K} hits.")
        options = {name: value for name, value in (options or {}).items() if value is not None}
        request = QueryRequest(
            query,
            instruction,
            k=top_k,
            filter=filter or None,
            index_dir=str(self.index_dir),
            model=self.model,
            **options,
        )
        try:
            answer = self.asker.answer(request)
        except InstEmbError as error:  # the resident process's answer errors included
            raise ValueError(str(error)) from None
        document = answer.to_document()
        document["hits"] = [shorten(hit) for hit in document["hits"]]
        return document

    def list_indexed(self) -> dict:
        from ..index.catalog import Catalog
        from ..index.search import require_manifest

        manifest = require_manifest(self.index_dir)
        catalog = Catalog.open(self.index_dir, read_only=True)
        try:
            sources, chunks = catalog.sources(), catalog.chunk_count()
        finally:
            catalog.close()
        return {
            "index_dir": str(self.index_dir),
            "model": manifest.encoder_reference,
            "store": manifest.store,
            "chunks": chunks,
            "files": sources,
        }


# The request fields the search tool spells itself (k as top_k, bounded for an agent); every other
# field declared in service/request.py, and each query-time knob, is a parameter of the tool.
SPELLED_BY_THE_TOOL = ("query", "instruction", "k", "filter")


def tool_parameter(spec) -> Any:
    """A declared request field as the tool's parameter: its default, described by its declaration."""
    from pydantic import Field

    return Field(spec.default, description=spec.door.help)


def knob_parameter(knob) -> Any:
    """A query-time knob as the tool's parameter (knobs.py's declaration: its range, its meaning)."""
    from pydantic import Field

    return Field(None, ge=knob.low, le=knob.high, description=f"{knob.help}; null = the model's own.")


def shorten(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit as an agent reads it: where it is, its score, and its text up to SNIPPET_CHARS."""
    text = " ".join(hit["text"].split())
    snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
    shortened = {"source": hit["source"], "position": hit["position"], "score": round(hit["score"], 6)}
    return {**shortened, "snippet": snippet, **({"explain": hit["explain"]} if "explain" in hit else {})}


def build_server(tools: IndexTools):
    """The MCP server with the two tools bound to ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from ..errors import InstEmbError
    from ..service.request import DECLARED_HERE, declared_parameters

    server = MCPServer(
        name="instemb-rag",
        instructions=f"Instruction-following search over the documents indexed in {tools.index_dir}. Give the "
        "question as `query` and say what makes a passage relevant in `instruction` (e.g. 'focus on side "
        "effects', 'evidence that refutes the claim').",
    )

    @server.tool()
    @declared_parameters(tool_parameter, spelled=SPELLED_BY_THE_TOOL, knob_parameter=knob_parameter, wire=True)
    def search(
        query: str,
        instruction: str | None = None,
        top_k: int = 5,
        filter: dict[str, str] | None = None,
        declared: dict[str, Any] = DECLARED_HERE,
    ) -> dict[str, Any]:
        """Search the indexed documents. `query`: what to find; `instruction`: how to judge relevance
        (which aspect, stance or kind of answer is wanted); `top_k`: hits (1-50); `filter`: metadata
        globs, e.g. {"source": "tents/*.md"}; `hybrid`: also rank by the words ("rrf" or "z"); the
        model's query-time knob, if it has one. Returns each hit's source file, position, score and snippet."""
        try:
            return tools.search(query, instruction, top_k, filter, declared)
        except (InstEmbError, ValueError) as error:  # the agent reads the message and can correct its call
            raise ToolError(str(error)) from None

    @server.tool()
    def list_indexed() -> dict[str, Any]:
        """What is indexed: the index folder, its model, the number of chunks and the files."""
        try:
            return tools.list_indexed()
        except InstEmbError as error:
            raise ToolError(str(error)) from None

    return server
