"""Where the resident query process listens and how it is found: stdlib only (the client imports it).

Everything lives in one folder only its user may enter (``$INSTEMB_HOME/daemon``, mode 0700):

    query.sock      the Unix socket (mode 0600); another user cannot reach it
    endpoint.json   the running process's record: pid, socket (or loopback URL + token), version
    process.lock    held by the running process for its whole life: one process per folder
    start.lock      held by a client while it starts one, so two CLIs at once start one process
    daemon.log      what the process printed (read when it fails to start)

On a platform without Unix sockets the process listens on loopback TCP and writes a random token
into endpoint.json (mode 0600, in the 0700 folder): only the user who can read it can ask.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InstEmbError

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "IDLE_ENV",
    "NO_DAEMON_ENV",
    "THREADS_ENV",
    "TIMEOUT_ENV",
    "Endpoint",
    "Record",
    "ResidentUnavailable",
    "idle_seconds",
    "prepare_folder",
]

IDLE_ENV = "INSTEMB_DAEMON_IDLE"  # seconds the process waits for a query before it exits
NO_DAEMON_ENV = "INSTEMB_NO_DAEMON"  # 1: every query runs in its own process, as before
TIMEOUT_ENV = "INSTEMB_DAEMON_TIMEOUT"  # seconds a query waits for the process's answer
THREADS_ENV = "INSTEMB_DAEMON_THREADS"  # torch CPU threads of the process's forward passes
DEFAULT_IDLE_SECONDS = 600.0
# AF_UNIX paths are at most 108 bytes on Linux, 104 on macOS: a deeper $INSTEMB_HOME gets a short
# folder under the temporary directory instead, named by the user and a hash of that home.
MAX_SOCKET_PATH = 100
UNIX_SOCKETS = hasattr(socket, "AF_UNIX")


class ResidentUnavailable(InstEmbError):
    """The resident process cannot answer (not startable, died, not answering): the CLI answers
    in-process and prints this message once, as a note."""


def idle_seconds(value: str | float | None = None) -> float:
    """The idle time before the process exits: ``value`` (a CLI option), else $INSTEMB_DAEMON_IDLE,
    else 10 minutes. Seconds, or with a unit: 90s, 10m, 1h."""
    raw = value if value is not None else os.environ.get(IDLE_ENV)
    if raw is None or str(raw).strip() == "":
        return DEFAULT_IDLE_SECONDS
    text = str(raw).strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    number = text[:-1] if scale else text
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        source = "--idle-timeout" if value is not None else IDLE_ENV
        raise InstEmbError(f"{source}={raw!r}: give the idle time as seconds or with a unit, e.g. 600, 90s, 10m, 1h.")
    return seconds


def daemon_threads() -> int | None:
    """$INSTEMB_DAEMON_THREADS: torch CPU threads for the process's forward passes (None: torch's
    own, one per core)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InstEmbError(f"{THREADS_ENV}={raw!r}: give a number of threads, 1 or more (unset: one per core).")
    return int(raw)


@dataclass(frozen=True)
class Endpoint:
    """The resident process's folder and the files in it."""

    folder: Path

    @classmethod
    def default(cls) -> Endpoint:
        from ..paths import instemb_home

        folder = instemb_home() / "daemon"
        if len(str(folder / "query.sock")) > MAX_SOCKET_PATH:
            digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
            folder = Path(tempfile.gettempdir()) / f"instemb-{_uid()}-{digest}"
        return cls(folder)

    @property
    def socket_path(self) -> Path:
        return self.folder / "query.sock"

    @property
    def record_path(self) -> Path:
        return self.folder / "endpoint.json"

    @property
    def process_lock(self) -> Path:
        return self.folder / "process.lock"

    @property
    def start_lock(self) -> Path:
        return self.folder / "start.lock"

    @property
    def log_path(self) -> Path:
        return self.folder / "daemon.log"

    def read_record(self) -> Record | None:
        """The running process's record; None when there is none or it is unreadable (a process
        killed while writing it: the next start writes a new one)."""
        try:
            document = json.loads(self.record_path.read_text(encoding="utf-8"))
            return Record(**document)
        except (OSError, ValueError, TypeError):
            return None

    def write_record(self, record: Record) -> None:
        """Atomically, mode 0600 (it may hold the loopback token)."""
        temporary = self.record_path.with_suffix(f".{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(asdict(record), handle)
        os.replace(temporary, self.record_path)

    def remove_files_of(self, pid: int) -> None:
        """The socket and the record, if the record is ``pid``'s (a process cleans up after itself,
        never after a newer one)."""
        record = self.read_record()
        if record is not None and record.pid != pid:
            return
        for path in (self.record_path, self.socket_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


@dataclass
class Record:
    """What endpoint.json holds about the running process."""

    pid: int
    version: str
    code: str  # where the package is loaded from: a process of another install is replaced
    started: float
    idle_timeout: float
    socket: str | None = None  # a Unix socket path, or
    url: str | None = None  # a loopback URL with
    token: str | None = None  # the token every request must send


def prepare_folder(folder: Path) -> None:
    """Create the folder (0700) or check that only its owner can enter it: a folder another user
    owns or can enter would let them reach the socket or read the token."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if not hasattr(os, "getuid"):  # Windows: the folder is under the user's profile; ACLs guard it
        return
    if info.st_uid != os.getuid():
        raise ResidentUnavailable(
            f"{folder} belongs to user id {info.st_uid}, not to you ({os.getuid()}): the resident query "
            f"process needs a folder of your own. Set INSTEMB_HOME to a folder you own, or remove {folder}."
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)  # ours but open to others (created by hand): close it first


def check_socket_owner(path: Path) -> None:
    """A socket file someone else owns is never connected to (it could answer anything)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ResidentUnavailable(
            f"{path} belongs to user id {info.st_uid}, not to you: not connecting to it. Remove it, or set "
            "INSTEMB_HOME to a folder of your own."
        )
    if not stat.S_ISSOCK(info.st_mode):
        raise ResidentUnavailable(f"{path} is not a socket: remove it (the resident process makes its own).")


def code_location() -> str:
    """Where this package is loaded from: a process started from another install (an upgrade, a
    second checkout sharing $INSTEMB_HOME) is stopped and replaced rather than asked."""
    return str(Path(__file__).resolve().parents[1])


def _uid() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
