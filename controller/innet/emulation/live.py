"""A network that stays up (`innet net up`): the one-per-machine record, and its control socket.

Only one emulated network can run on a machine: two would share interface names (s1-eth1)
and the switches' ports. The running one leaves a record (pid, run folder, topology, control
socket) in `STATE_DIR`; a second `net up` reads it and is refused in one line naming the first,
which is left untouched. A record whose process is gone is stale and is replaced.

Other shells reach the running network through its control socket (a Unix socket in the run
folder; one JSON object per line each way): `innet deploy` against the same topology asks the
network's own controller to move to the new intent instead of writing beside it (two writers
with one election id would fight), and `innet net exec HOST CMD` runs a command on a host.
What a request does is the handler's business (the front end hands it in); this module only
carries requests and answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from innet.errors import InputError, NetworkError

STATE_DIR = Path(os.environ.get("INNET_STATE_DIR", "/run/innet"))
RECORD = "network.json"
MAX_MESSAGE = 1 << 20  # bytes of one request or answer

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class NetworkRecord:
    pid: int
    run_dir: str
    topology: str  # the topology file, resolved
    control: str  # the control socket's path
    started: float

    def describe(self) -> str:
        return f"pid {self.pid}, run folder {self.run_dir}, topology {self.topology}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(state_dir: Path | None = None) -> NetworkRecord | None:
    """The network that is up on this machine, if any (a stale record is removed)."""
    path = (state_dir or STATE_DIR) / RECORD
    try:
        data = json.loads(path.read_text())
        record = NetworkRecord(**data)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)  # half-written by a process that died: nobody owns it
        return None
    if not _alive(record.pid):
        path.unlink(missing_ok=True)
        return None
    return record


@contextlib.contextmanager
def claimed(record: NetworkRecord, state_dir: Path | None = None) -> Iterator[None]:
    """Hold the machine's one network record while the body runs; InputError naming the
    running network when another holds it. The record goes on every way out."""
    folder = state_dir or STATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RECORD
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            other = running(folder)
            if other is not None:
                raise InputError(f"a network is already up ({other.describe()}): stop it "
                                 f"with `innet net down` or kill {other.pid}") from None
            continue  # it was stale and is gone now
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(record), f)
        break
    else:  # pragma: no cover - a third process raced us twice
        raise InputError(f"could not claim {path}: another network is starting")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, TypeError):
            if NetworkRecord(**json.loads(path.read_text())).pid == record.pid:
                path.unlink()


class ControlServer:
    """Answers requests on a Unix socket, one thread per connection, until `close()`. A
    handler that raises InputError or NetworkError answers {"error": message, "exit": 2|3}."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(8)
        self._closed = threading.Event()
        self._lock = threading.Lock()  # one request at a time: they move one controller
        self._thread = threading.Thread(target=self._serve, name="innet-net-control",
                                        daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = json.loads(_read_line(conn))
                if not isinstance(request, dict):
                    raise InputError("a request is a JSON object")
                with self._lock:
                    answer = self.handler(request)
            except InputError as exc:
                answer = {"error": str(exc), "exit": 2}
            except NetworkError as exc:
                answer = {"error": str(exc), "exit": 3}
            except (ValueError, OSError) as exc:
                answer = {"error": f"bad request: {exc}", "exit": 2}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(answer).encode() + b"\n")

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self.path.unlink(missing_ok=True)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"message longer than {MAX_MESSAGE} bytes")
    return data


def ask(record: NetworkRecord, request: dict[str, Any], timeout: float = 120.0
        ) -> dict[str, Any]:
    """Send one request to the running network; its answer. NetworkError when it does not
    answer (it is stopping, or hung)."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(record.control)
            s.sendall(json.dumps(request).encode() + b"\n")
            data = _read_line(s)
        except OSError as exc:
            raise NetworkError(f"the network that is up ({record.describe()}) did not answer "
                               f"on {record.control}: {exc.strerror or exc}") from None
    if not data:
        left = max(0.0, deadline - time.monotonic())
        raise NetworkError(f"the network that is up ({record.describe()}) closed the request "
                           f"without an answer ({timeout - left:.0f} s)")
    answer = json.loads(data)
    assert isinstance(answer, dict)
    return answer
