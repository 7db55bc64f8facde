"""`instemb-rag mcp --index-dir DIR`: an index as MCP tools, on stdio (the official MCP SDK).

    search(query, instruction, top_k, filter)   the best chunks: source, position, score, snippet
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
    """What the tools do, apart from the protocol: ask the resident process, or this process."""

    def __init__(self, index_dir: Path, model: str | None = None, use_resident: bool = True):
        self.index_dir = index_dir.resolve()
        self.model = model
        self.use_resident = use_resident
        self._index = None  # opened here only when the resident process cannot answer

    def search(self, query: str, instruction: str | None, top_k: int, filter: dict[str, str] | None) -> dict:
        from ..errors import InstEmbError
        from ..queries import Query

        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k={top_k}: ask for between 1 and {MAX_TOP_K} hits.")
        checked = Query.checked(query, instruction, example='search(query="light tent", instruction="focus on weight")')
        hits = None
        if self.use_resident:
            hits = self._through_resident(checked, top_k, filter)
        if hits is None:
            try:
                hits = [hit.to_dict() for hit in self._open().search(checked, k=top_k, filter=filter)]
            except InstEmbError as error:
                raise ValueError(str(error)) from None
        return {"query": checked.text, "instruction": checked.instruction, "hits": [shorten(hit) for hit in hits]}

    def _through_resident(self, query, top_k: int, filter: dict[str, str] | None) -> list[dict] | None:
        from ..resident.client import ResidentAnswerError, ResidentClient, ResidentUnavailable

        request = {
            "index_dir": str(self.index_dir),
            "model": self.model,
            "query": query.text,
            "instruction": query.instruction,
            "k": top_k,
            "filter": filter or None,
        }
        try:
            return ResidentClient().search(request)["answer"]["hits"]
        except ResidentAnswerError as error:
            raise ValueError(str(error)) from None
        except ResidentUnavailable:
            self.use_resident = False  # answer here from now on (the model stays loaded in this process)
            return None

    def _open(self):
        if self._index is None:
            from ..index import Index

            self._index = Index.open(self.index_dir, model=self.model, read_only=True)
        return self._index

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


def shorten(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit as an agent reads it: where it is, its score, and its text up to SNIPPET_CHARS."""
    text = " ".join(hit["text"].split())
    snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
    return {"source": hit["source"], "position": hit["position"], "score": round(hit["score"], 6), "snippet": snippet}


def build_server(tools: IndexTools):
    """The MCP server with the two tools bound to ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from ..errors import InstEmbError

    server = MCPServer(
        name="instemb-rag",
        instructions=f"Instruction-following search over the documents indexed in {tools.index_dir}. Give the "
        "question as `query` and say what makes a passage relevant in `instruction` (e.g. 'focus on side "
        "effects', 'evidence that refutes the claim').",
    )

    @server.tool()
    def search(
        query: str, instruction: str | None = None, top_k: int = 5, filter: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Search the indexed documents. `query`: what to find; `instruction`: how to judge relevance
        (which aspect, stance or kind of answer is wanted); `top_k`: hits (1-50); `filter`: metadata
        globs, e.g. {"source": "tents/*.md"}. Returns each hit's source file, position, score and snippet."""
        try:
            return tools.search(query, instruction, top_k, filter)
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
