"""`instemb-rag mcp --index-dir DIR`: serve an index to agents as MCP tools over stdio."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import fail, say

MCP_EXTRA_HINT = "install the mcp extra: `pip install 'instemb-rag[mcp]'`."


def mcp_command(
    index_dir: Path = typer.Option(Path(".instemb"), "--index-dir", help="The index folder to search."),
    model: str | None = typer.Option(None, "--model", "-m", help="Encoder; default: the one the index was built with."),
    no_daemon: bool = typer.Option(
        False,
        "--no-daemon",
        envvar="INSTEMB_NO_DAEMON",
        help="Answer in this process instead of through the resident query process; also INSTEMB_NO_DAEMON=1.",
    ),
) -> None:
    """Serve an index as MCP tools (search, list_indexed) on stdio, for agents."""
    from rich.console import Console

    from ..errors import InstEmbError

    console = Console(stderr=True)  # stdout carries the protocol
    try:
        from mcp.server.mcpserver import MCPServer  # noqa: F401
    except ImportError:
        say(console, "error", f"the MCP SDK is not installed: {MCP_EXTRA_HINT}", "red")
        raise typer.Exit(2) from None
    from ..agents.mcp_server import IndexTools, build_server
    from ..index.search import require_manifest
    from ..resident.client import resident_wanted

    try:
        require_manifest(index_dir)  # a wrong folder is told now, not at the agent's first call
    except InstEmbError as error:
        fail(error)
    model = str(Path(model).resolve()) if model and Path(model).exists() else model
    tools = IndexTools(index_dir, model, use_resident=resident_wanted(no_daemon))
    build_server(tools).run("stdio")


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
