"""`python -m instemb_rag.resident [--idle-timeout SECONDS]`: the resident query process itself
(what `instemb-rag query` and `instemb-rag daemon start` start in the background; `instemb-rag
daemon run` runs it in the foreground). Exits when another one already holds the folder."""

from __future__ import annotations

import argparse
import sys

from ..errors import InstEmbError
from .endpoint import Endpoint, idle_seconds
from .process import serve_resident


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instemb_rag.resident", description=__doc__)
    parser.add_argument("--idle-timeout", default=None, help="seconds (or 90s, 10m, 1h) without a query before exiting")
    parser.add_argument("--log-level", default="info", help="uvicorn's log level")
    options = parser.parse_args(argv)
    try:
        return serve_resident(Endpoint.default(), idle_seconds(options.idle_timeout), options.log_level)
    except InstEmbError as error:  # a bad setting, a folder of another user: said in the log
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
