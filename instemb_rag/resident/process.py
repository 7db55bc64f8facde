"""Run the resident query process: hold its folder, bind its socket, write its record, serve until
idle or stopped, and leave nothing behind but the log."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys
import time

from .endpoint import (
    UNIX_SOCKETS,
    Endpoint,
    Record,
    ResidentUnavailable,
    code_location,
    daemon_threads,
    prepare_folder,
)

__all__ = ["serve_resident"]

ALREADY_RUNNING = "instemb-rag daemon: another resident query process holds {folder}; this one exits."


def serve_resident(endpoint: Endpoint, idle_timeout: float, log_level: str = "info") -> int:
    from filelock import FileLock, Timeout

    prepare_folder(endpoint.folder)
    held = FileLock(str(endpoint.process_lock))
    try:
        held.acquire(timeout=0)
    except Timeout:
        print(ALREADY_RUNNING.format(folder=endpoint.folder), file=sys.stderr)
        return 0
    try:
        return _serve_holding_the_folder(endpoint, idle_timeout, log_level)
    finally:
        endpoint.remove_files_of(os.getpid())
        held.release()


def _serve_holding_the_folder(endpoint: Endpoint, idle_timeout: float, log_level: str) -> int:
    from .. import __version__
    from ..serve.notices import collect_notices
    from ..serve.server import run
    from .app import ResidentState, create_resident_app

    # uvicorn answers SIGTERM with a graceful shutdown, then raises the signal again under the
    # handler it found: a no-op one lets this function return, so the socket and record are removed.
    signal.signal(signal.SIGTERM, lambda *_: None)
    collect_notices()  # a shortened instruction is said to the user with the answer, not in this log
    token = None if UNIX_SOCKETS else secrets.token_urlsafe(32)
    sock, where = bind(endpoint)
    state = ResidentState(idle_timeout, token, daemon_threads())
    record = Record(os.getpid(), __version__, code_location(), time.time(), idle_timeout, token=token, **where)
    run(
        create_resident_app(state),
        sock,
        log_level=log_level,
        graceful_timeout=10.0,
        on_exit=lambda: [batcher.drain() for _, batcher in state.encoders.values()],
        # Written once the socket listens: a client waiting for the record can connect at once.
        announce=lambda _: (
            endpoint.write_record(record),
            print(
                f"instemb-rag daemon: listening on {where.get('socket') or where['url']}", file=sys.stderr, flush=True
            ),
        ),
    )
    return 0


def bind(endpoint: Endpoint) -> tuple[socket.socket, dict]:
    """A listening socket only this user can reach: a Unix socket (0600 in a 0700 folder), else
    loopback TCP on a free port (the token guards it)."""
    if not UNIX_SOCKETS:
        from ..serve.server import bind_socket, url_of

        sock = bind_socket("127.0.0.1", 0)
        return sock, {"url": url_of(sock)}
    path = endpoint.socket_path
    if path.exists() or path.is_symlink():  # a stale socket: this process holds the folder's lock
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the file is created 0600: no window where others could connect
    try:
        sock.bind(str(path))
    except OSError as error:
        sock.close()
        raise ResidentUnavailable(f"cannot listen on {path}: {error.strerror or error}") from None
    finally:
        os.umask(previous)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock, {"socket": str(path)}
