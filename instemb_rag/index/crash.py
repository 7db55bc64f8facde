"""Test hook for the kill -9 tests: ``INSTEMB_CRASH_AT=name:N`` kills this process (SIGKILL)
the N-th time ``crash_point(name)`` is reached."""

from __future__ import annotations

import os

_CRASH_COUNTS: dict[str, int] = {}


def crash_point(name: str) -> None:
    wanted = os.environ.get("INSTEMB_CRASH_AT")
    if not wanted:
        return
    point, _, count = wanted.partition(":")
    if point != name:
        return
    _CRASH_COUNTS[name] = _CRASH_COUNTS.get(name, 0) + 1
    if _CRASH_COUNTS[name] >= int(count or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
