"""How `index --ray` fails: bounded worker restarts, and a Ray failure told in one line.

Ray Data restarts a dead encoder actor and retries its batch forever by default, so a worker
that dies on every batch (out of memory, a broken node) would never end the run. A few restarts
cover a node lost mid-run; after them the run stops, and the cause reaches the user as this
package's own error where a worker raised one (same exit code as the local path) or as
RayWorkerError (exit code 6): one line, never Ray's traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import re
import warnings
from collections.abc import Iterator

from ..errors import InstEmbError
from .errors import RayWorkerError

WORKER_RESTARTS = 3
WORKER_TASK_RETRIES = 3
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
# Ray 2.5x: a head started while ~/.ray/auth_token exists (a local runtime makes it) uses token
# authentication, and a driver joins only with the same mode; Ray reads RAY_AUTH_MODE at import,
# so it is the user's environment, not this program, that can set it.
RAY_AUTH_HINT = (
    "that RAY_AUTH_MODE here matches the cluster's: a head that uses token authentication (Ray 2.5x does "
    "when ~/.ray/auth_token exists as it starts) needs RAY_AUTH_MODE=token here and its token in "
    "~/.ray/auth_token or RAY_AUTH_TOKEN (`ray get-auth-token` on the head prints it); a head started with "
    "RAY_AUTH_MODE=disabled needs RAY_AUTH_MODE=disabled here too."
)


def no_opt_out_notice(record: logging.LogRecord) -> bool:
    """Logging filter: drops Ray's "token authentication is enabled ... to opt out" notice."""
    return "to opt out" not in record.getMessage()


def quiet_ray_data_console() -> None:
    """Ray Data prints each run's plan (INFO) and, when a run fails, the full stack trace (ERROR)
    on the console; the command draws its own progress and gives the cause in one line, and Ray
    Data's file log (``ray-data.log`` in the session's logs folder) still records everything."""
    import ray.data  # noqa: F401  (importing it configures the logger adjusted here)

    for handler in logging.getLogger("ray.data").handlers:
        if handler.name == "console":
            handler.setLevel(logging.CRITICAL)


@contextlib.contextmanager
def bounded_worker_retries() -> Iterator[dict]:
    """map_batches arguments that bound the encoder actors' restarts and batch retries.

    Ray 2.60 takes them only through ``**ray_remote_args``, which it deprecates (removal
    announced for 2.64) without a named replacement yet: nothing a user can act on, so that one
    warning is silenced here; a Ray whose map_batches names them gets them by name.
    """
    from ray.data import Dataset

    retries = {"max_restarts": WORKER_RESTARTS, "max_task_retries": WORKER_TASK_RETRIES}
    if all(name in inspect.signature(Dataset.map_batches).parameters for name in retries):
        yield retries
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        yield retries


REMOTE_ERROR_LINE = re.compile(r"^(instemb_rag[\w.]*)\.(\w+): (.+)$")
ANSI_CODES = re.compile(r"\x1b\[[0-9;]*m")


def worker_failure(error: Exception) -> InstEmbError:
    """What a Ray pipeline failure means to the user, in one line.

    An error this package raised inside a worker (a model folder missing on a node, another
    model's fingerprint) comes back as that error, so the exit code is the one the local path
    would give; anything else (a worker killed, out of memory, a node lost) is RayWorkerError.
    """
    raised = raised_in_worker(error)
    if raised is not None:
        cls, message = raised
        return cls(f"A Ray worker failed: {message}")
    summary = first_sentences(last_line(str(error))) or type(error).__name__
    never_started = " Encoder actors that never start on a joined cluster: check " + RAY_AUTH_HINT
    return RayWorkerError(
        f"A Ray worker failed: {summary}. The files committed before it are kept; run the same command "
        "again to embed the rest. Ray's logs on that node (/tmp/ray/session_latest/logs) say why it died."
        + (never_started if "never ran" in summary else "")
    )


def raised_in_worker(error: BaseException) -> tuple[type[InstEmbError], str] | None:
    """(class, message) of this package's error behind a Ray error, when a worker raised one.

    Ray hands it back either as the exception object (``cause`` / ``__cause__`` of a task error)
    or only as the remote traceback's text (an actor whose constructor raised).
    """
    seen: list[BaseException] = []
    while error is not None and all(error is not other for other in seen):
        seen.append(error)
        cause = getattr(error, "cause", None)
        error = cause if isinstance(cause, BaseException) else error.__cause__
    for candidate in reversed(seen):
        if isinstance(candidate, InstEmbError):
            cls = next(c for c in type(candidate).__mro__ if c.__module__.startswith("instemb_rag"))
            return cls, last_line(str(candidate))
    for line in reversed(ANSI_CODES.sub("", str(seen[0])).splitlines()):
        match = REMOTE_ERROR_LINE.match(line.strip())
        if match:
            cls = getattr(importlib.import_module(match.group(1)), match.group(2), None)
            if isinstance(cls, type) and issubclass(cls, InstEmbError):
                return cls, match.group(3)
    return None


def first_sentences(text: str, limit: int = 240) -> str:
    """Ray's messages run to a paragraph; its first sentences carry the cause (no final dot)."""
    kept = ""
    for sentence in re.split(r"(?<=\.) ", text):
        if kept and len(kept) + len(sentence) > limit:
            break
        kept = f"{kept} {sentence}" if kept else sentence
    return kept.rstrip(".")


def last_line(text: str) -> str:
    lines = [line.strip() for line in ANSI_CODES.sub("", text).splitlines() if line.strip()]
    return lines[-1] if lines else ""
