"""The CLI's side of the resident query process: find it, start it, ask it, stop it.

No torch, transformers, faiss, numpy or HTTP library here (http.client): a query through a running process costs the client's
own start. Whatever goes wrong on the way (it cannot start, it died, it does not answer) is a
``ResidentUnavailable`` whose message the CLI prints once before answering in-process; an error in
the query itself (a missing index, a bad filter) is a ``ResidentAnswerError`` with the exit code the
in-process path would have left with.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import InstEmbError
from .endpoint import (
    NO_DAEMON_ENV,
    TIMEOUT_ENV,
    Endpoint,
    Record,
    ResidentUnavailable,
    check_socket_owner,
    code_location,
    prepare_folder,
)

__all__ = ["ResidentAnswerError", "ResidentClient", "ResidentUnavailable", "resident_wanted"]

START_TIMEOUT = 60.0  # seconds to wait for a new process to listen (its imports, on a busy machine)
PING_TIMEOUT = 3.0  # a live process answers its status at once, even while it runs a query
DEFAULT_QUERY_TIMEOUT = 300.0  # a first query loads the model: allow for a slow disk and a busy CPU


class ResidentAnswerError(InstEmbError):
    """The process answered the query with an error: print it and leave with ``exit_code``."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def resident_wanted(no_daemon: bool = False) -> bool:
    """Whether queries go through the resident process: not with --no-daemon or $INSTEMB_NO_DAEMON."""
    return not no_daemon and os.environ.get(NO_DAEMON_ENV, "").strip().lower() in ("", "0", "false", "no")


class ResidentClient:
    """Talks to the process of ``endpoint`` (default: the one under $INSTEMB_HOME)."""

    def __init__(self, endpoint: Endpoint | None = None, query_timeout: float | None = None):
        self.endpoint = endpoint or Endpoint.default()
        self.query_timeout = query_timeout or _env_seconds(TIMEOUT_ENV, DEFAULT_QUERY_TIMEOUT)

    # ------------------------------------------------------------------ asking
    def search(self, request: dict, start: bool = True, idle_timeout: float | None = None) -> dict:
        """The process's answer to a search request (resident/app.py's ResidentSearchRequest),
        starting the process first when none runs and ``start``."""
        record = self.running() or (self.start(idle_timeout) if start else None)
        if record is None:
            raise ResidentUnavailable("no resident query process runs")
        try:
            response = _request(record, "POST", "/v1/resident/search", self.query_timeout, request)
        except TimeoutError:
            raise ResidentUnavailable(
                f"the resident query process did not answer within {self.query_timeout:.0f} s ({TIMEOUT_ENV})"
            ) from None
        except (OSError, HTTPException) as error:
            raise ResidentUnavailable(f"the resident query process stopped answering ({error})") from None
        return _answer(response, self.endpoint)

    def status(self) -> dict | None:
        """The running process's status (pid, idle time, indexes and models held), or None."""
        record = self.running()
        return None if record is None else self._status(record)

    def running(self) -> Record | None:
        """The record of a live process of this install, or None (a process of another install is
        stopped: an upgrade must not be answered by the code it replaced)."""
        prepare_folder(self.endpoint.folder)  # ours alone, or refused: its record is trusted below
        check_socket_owner(self.endpoint.socket_path)
        record = self.endpoint.read_record()
        if record is not None and record.socket is not None and record.socket != str(self.endpoint.socket_path):
            record = None  # a record naming a socket elsewhere is not this folder's process
        if record is None or self._status(record) is None:
            return None
        if record.code != code_location():
            self.stop()
            return None
        return record

    def _status(self, record: Record) -> dict | None:
        try:
            response = _request(record, "GET", "/v1/resident/status", PING_TIMEOUT)
        except TimeoutError:
            raise ResidentUnavailable(
                f"the resident query process (pid {record.pid}) does not answer; `instemb-rag daemon stop` ends it"
            ) from None
        except (OSError, HTTPException):
            return None  # nothing listens: a stale record (the process was killed)
        if response.status != 200:
            return None
        status = response.json()
        return status if status.get("pid") == record.pid else None

    # ------------------------------------------------------------------ starting and stopping
    def start(self, idle_timeout: float | None = None) -> Record:
        """Start a process in the background and wait until it listens. Two clients at once: the
        second waits on the start lock and then finds the first one's process."""
        from filelock import FileLock, Timeout

        prepare_folder(self.endpoint.folder)
        try:
            with FileLock(str(self.endpoint.start_lock), timeout=START_TIMEOUT):
                return self.running() or self._spawn_and_wait(idle_timeout)
        except Timeout:
            raise ResidentUnavailable(
                f"another command has been starting the resident query process for {START_TIMEOUT:.0f} s"
            ) from None

    def _spawn_and_wait(self, idle_timeout: float | None) -> Record:
        command = [sys.executable, "-m", "instemb_rag.resident"]
        if idle_timeout is not None:
            command += ["--idle-timeout", str(idle_timeout)]
        descriptor = os.open(self.endpoint.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=descriptor,
                stderr=descriptor,
                start_new_session=True,  # not stopped by the terminal's Ctrl-C of the query that started it
                close_fds=True,
                cwd=str(Path.home()) if Path.home().is_dir() else None,
            )
        except OSError as error:
            raise ResidentUnavailable(f"cannot start the resident query process: {error}") from None
        finally:
            os.close(descriptor)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ResidentUnavailable(
                    f"the resident query process exited at start (code {process.returncode}): "
                    f"{self._last_log_line()} (log: {self.endpoint.log_path})"
                )
            record = self.endpoint.read_record()
            if record is not None and record.pid == process.pid and self._status(record) is not None:
                return record
            time.sleep(0.02)
        process.terminate()
        raise ResidentUnavailable(f"the resident query process did not listen within {START_TIMEOUT:.0f} s")

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the running process (it answers what it has in flight first); its pid, or None when
        none ran."""
        import signal

        prepare_folder(self.endpoint.folder)
        record = self.endpoint.read_record()
        if record is None:
            return None
        try:
            answering = self._status(record) is not None
        except ResidentUnavailable:  # hung: it is this folder's process, stop it all the same
            answering = True
        if not answering:  # a stale record: no process of this folder listens (never signal its pid)
            self.endpoint.remove_files_of(record.pid)
            return None
        try:
            os.kill(record.pid, signal.SIGTERM)
        except ProcessLookupError:
            self.endpoint.remove_files_of(record.pid)  # it died without cleaning up
            return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(record.pid):
            time.sleep(0.05)
        if _alive(record.pid):
            raise ResidentUnavailable(f"the resident query process (pid {record.pid}) did not stop in {timeout:.0f} s")
        return record.pid

    def _last_log_line(self) -> str:
        try:
            lines = self.endpoint.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"


@dataclass
class Response:
    status: int
    body: bytes

    def json(self):
        return json.loads(self.body)


class UnixConnection(HTTPConnection):
    """HTTP over a Unix socket, with the standard library: the client's start stays a few
    milliseconds (an HTTP library's import would cost more than a warm query's own work)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def _request(record: Record, method: str, path: str, timeout: float, body: dict | None = None) -> Response:
    """One request to the process of ``record`` (its Unix socket, or its loopback URL and token)."""
    if record.socket:
        connection: HTTPConnection = UnixConnection(record.socket, timeout)
    else:
        address = urlsplit(record.url)
        connection = HTTPConnection(address.hostname, address.port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if record.token:
        headers["Authorization"] = f"Bearer {record.token}"
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        answer = connection.getresponse()
        return Response(answer.status, answer.read())
    except TimeoutError:
        raise TimeoutError from None
    finally:
        connection.close()


def _answer(response, endpoint: Endpoint) -> dict:
    if response.status == 200:
        return response.json()
    try:
        error = response.json()["error"]
        message, exit_code = error["message"], int(error.get("exit_code", 1))
    except (ValueError, KeyError, TypeError):
        message, exit_code = response.body[:200].decode(errors="replace"), 1
    if response.status >= 500:  # the process failed, not the query: answer in-process
        raise ResidentUnavailable(f"the resident query process failed on this query (log: {endpoint.log_path})")
    raise ResidentAnswerError(message, exit_code)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a child of this process (tests start it so) that exited is a zombie until reaped
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        return reaped == 0
    except ChildProcessError:
        return True


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InstEmbError(f"{name}={raw!r}: give seconds, e.g. {name}=120.") from None
    if value <= 0:
        raise InstEmbError(f"{name}={raw!r}: give a positive number of seconds.")
    return value
