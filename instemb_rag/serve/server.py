"""Run the app with uvicorn on a socket bound here, so `--port 0` (any free port) works and
the address actually bound is printed before the first request can arrive."""

from __future__ import annotations

import socket
import sys
from typing import Callable

READY_PREFIX = "instemb-rag serve: listening on "


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; OSError (port in use, bad address) goes to the caller."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run(
    app,
    sock: socket.socket,
    log_level: str = "info",
    graceful_timeout: float = 30.0,
    on_exit: Callable[[], None] | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; then stop accepting, answer in-flight requests, shut down.

    ``on_exit`` runs as soon as the signal arrives (the batcher stops waiting for company, so
    requests already queued are answered at once rather than after their batching window).
    """
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app, log_level=log_level, timeout_graceful_shutdown=graceful_timeout, access_log=log_level == "debug"
    )
    server = Server(config)
    (announce or _print)(READY_PREFIX + url_of(sock))
    server.run(sockets=[sock])


def _print(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()
