"""`instemb-rag daemon start | status | stop | run`: the resident query process that answers
`instemb-rag query` with the model and the index already loaded (instemb_rag/resident/)."""

from __future__ import annotations

import json
import time

import typer

from .common import fail, say

daemon_app = typer.Typer(
    help="The resident query process: `query` starts it on first use and it exits after an idle time "
    "(10 minutes; --idle-timeout or INSTEMB_DAEMON_IDLE). Show, start or stop it here.",
    no_args_is_help=True,
)

IDLE_HELP = (
    "How long it waits for a query before exiting: seconds, or 90s, 10m, 1h (default 10m, or INSTEMB_DAEMON_IDLE)."
)


@daemon_app.command("status")
def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts.")) -> None:
    """Whether it runs: its pid, idle time, and the indexes and models it holds."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..resident.client import ResidentClient

    client = ResidentClient()
    try:
        status = client.status()
    except InstEmbError as error:
        fail(error)
    if as_json:
        print(json.dumps({"running": status is not None, "socket": str(client.endpoint.socket_path), **(status or {})}))
        return
    console = Console()
    if status is None:
        console.print(f"not running (a query starts it; its folder: {client.endpoint.folder})")
        return
    uptime = time.time() - status["started"]
    console.print(
        f"running: pid {status['pid']}, up {uptime:.0f} s, idle {status['idle_for']:.0f} s of "
        f"{status['idle_timeout']:.0f} s, socket {client.endpoint.socket_path}"
    )
    for held in status["indexes"]:
        console.print(f"  index {held['index_dir']} ({held['store']}, model {held['model'] or 'the index own'})")
    for model in status["models"]:
        console.print(f"  model {model['model']} on {model['device']}")


@daemon_app.command("start")
def start_command(idle_timeout: str | None = typer.Option(None, "--idle-timeout", help=IDLE_HELP)) -> None:
    """Start it in the background now (a query would start it too)."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..resident.client import ResidentClient
    from ..resident.endpoint import idle_seconds

    client = ResidentClient()
    try:
        seconds = idle_seconds(idle_timeout)
        record = client.running()
        if record is not None:
            say(Console(stderr=True), "note", f"already running (pid {record.pid}); `daemon stop` first to restart it")
            return
        record = client.start(seconds)
    except InstEmbError as error:
        fail(error)
    Console().print(f"started: pid {record.pid}, exits after {seconds:.0f} s without a query")


@daemon_app.command("stop")
def stop_command() -> None:
    """Stop it (queries in flight are answered first)."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..resident.client import ResidentClient

    try:
        pid = ResidentClient().stop()
    except InstEmbError as error:
        fail(error)
    Console().print("not running" if pid is None else f"stopped (pid {pid})")


@daemon_app.command("run")
def run_command(
    idle_timeout: str | None = typer.Option(None, "--idle-timeout", help=IDLE_HELP),
    log_level: str = typer.Option("info", "--log-level", help="critical | error | warning | info | debug"),
) -> None:
    """Run it in the foreground (Ctrl-C stops it): for a service manager, or to watch its log."""
    from ..errors import InstEmbError
    from ..resident.endpoint import Endpoint, idle_seconds
    from ..resident.process import serve_resident

    try:
        code = serve_resident(Endpoint.default(), idle_seconds(idle_timeout), log_level)
    except InstEmbError as error:
        fail(error)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.add_typer(daemon_app, name="daemon")
