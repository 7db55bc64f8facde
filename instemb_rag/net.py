"""The one reachability probe for remote services (a Ray head, a Qdrant server): a plain TCP
connection with a timeout, so a wrong address fails in seconds instead of after a client's own
retries. Callers turn the reason into their own error, which says what to check."""

from __future__ import annotations

import socket


def unreachable_reason(host: str, port: int, timeout: float) -> str | None:
    """None when something accepts a TCP connection at ``host:port`` within ``timeout`` seconds,
    else why not (e.g. "Connection refused", "timed out")."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return error.strerror or str(error)
