"""Warm from the first question: after `instemb-rag index`, the resident query process is started in
the background and asked once, so the query a user types next finds the model loaded and the index
open (the indexing process had the model loaded seconds before; the first query would otherwise
pay the whole cold start again).

``warm_in_background`` (what the index command calls) spawns ``python -m instemb_rag.resident.warm``
detached and returns at once: the command's own exit is not delayed. That helper starts the process
as a query would (``ResidentClient.start``: the start lock, so a query typed meanwhile waits for
this process rather than starting another) and asks it one search of the index as a plain
`instemb-rag query` would (the index's own model, device auto: the same held encoder and index),
then exits. What it prints goes to the process's log (daemon.log), where a failure is found; the
next query then starts the process itself, as it always did. Not with --no-daemon or
$INSTEMB_NO_DAEMON (resident_wanted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from .client import ResidentClient, resident_wanted
from .endpoint import Endpoint, ResidentUnavailable, prepare_folder

__all__ = ["WARM_QUERY", "warm_in_background", "warm_request"]

WARM_QUERY = "warm-up"  # a real search, so the first forward pass's own costs are paid here too


def warm_request(index_dir: Path) -> dict:
    """The search a plain `instemb-rag query TEXT --index-dir DIR` sends (cli/query.py), but its text:
    the same index, model (the index's own) and device, so the process holds what it will ask for."""
    return {"index_dir": str(Path(index_dir).resolve()), "model": None, "device": "auto", "query": WARM_QUERY, "k": 1}


def warm_in_background(index_dir: Path, no_daemon: bool = False) -> str | None:
    """Start the helper that warms the resident process for ``index_dir``; a line for the user,
    or None when the resident process is not wanted. Never raises: the index is built either way."""
    if not resident_wanted(no_daemon):
        return None
    endpoint = Endpoint.default()
    try:
        prepare_folder(endpoint.folder)
        log = os.open(endpoint.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except (OSError, ResidentUnavailable) as error:
        return f"the resident query process was not started ({error}); the first query starts it"
    try:
        subprocess.Popen(
            [sys.executable, "-m", "instemb_rag.resident.warm", str(Path(index_dir).resolve())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives the index command, untouched by its terminal's Ctrl-C
            close_fds=True,
            cwd=str(Path.home()) if Path.home().is_dir() else None,
        )
    except OSError as error:
        return f"the resident query process was not started ({error}); the first query starts it"
    finally:
        os.close(log)
    return (
        "the resident query process is loading this index in the background, so the next query answers warm "
        "(--no-daemon or INSTEMB_NO_DAEMON=1 skips it; `instemb-rag daemon stop` ends it)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instemb_rag.resident.warm", description=__doc__)
    parser.add_argument("index_dir", type=Path, help="the index folder to open in the resident process")
    options = parser.parse_args(argv)
    try:
        ResidentClient().search(warm_request(options.index_dir))
    except Exception as error:  # said in the log; the next query starts and asks the process itself
        print(f"instemb-rag daemon: warming {options.index_dir} failed: {error}", file=sys.stderr)
        return 1
    print(f"instemb-rag daemon: {options.index_dir} warm", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
