"""A network that stays up (`innet net up`): the one-per-machine record, and its control socket.

Only one emulated network can run on a machine: two would share interface names (s1-eth1)
and the switches' ports. The running one leaves a record (pid, run folder, topology, control
socket) in `STATE_DIR`; a second `net up` reads it and is refused in one line naming the first,
which is left untouched. The record also says what the network is made of outside its process
(switch pids, its nodes' shells and namespaces, interfaces: `innet.emulation.net.Footprint`):
when the process died without cleaning up (SIGKILL), `net down` or the next `net up` finds
the record of a dead process and removes all of it (`clear_dead`) before going on.

The record's folder is /run/innet (root's). One named by $INNET_STATE_DIR is used only when it
is owned by root or by this user and nobody else may write in it: a record planted by another
user would name the processes `net down` kills and the socket requests go to.

Other shells reach the running network through its control socket (a Unix socket in the run
folder; one JSON object per line each way): `innet deploy` against the same topology asks the
network's own controller to move to the new intent instead of writing beside it (two writers
with one election id would fight), and `innet net exec HOST CMD` runs a command on a host.
What a request does is the handler's business (the front end hands it in); this module only
carries requests and answers. The socket is owner-only (0600, in a 0700 folder) and each
connection's peer is checked (SO_PEERCRED): only root and the user who started the network may
send requests; anyone else gets one refusal line, and the refusal is logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from innet.emulation.net import Footprint, Removed, remove_orphans
from innet.errors import InputError, NetworkError
from innet.topology import load_topology

STATE_ENV = "INNET_STATE_DIR"
STATE_DIR = Path(os.environ.get(STATE_ENV, "/run/innet"))
RECORD = "network.json"
MAX_MESSAGE = 1 << 20  # bytes of one request or answer
REFUSED_READ_TIMEOUT = 5.0  # seconds a refused peer gets to send its request

Handler = Callable[[dict[str, Any]], dict[str, Any]]
log = logging.getLogger("innet.net")


@dataclass(frozen=True)
class NetworkRecord:
    pid: int
    run_dir: str
    topology: str  # the topology file, resolved
    control: str  # the control socket's path
    started: float
    tls: str | None = None  # the folder of the switches' certificates; None: plain P4Runtime
    footprint: Footprint = field(default_factory=Footprint)  # filled in once it is up

    def describe(self) -> str:
        return f"pid {self.pid}, run folder {self.run_dir}, topology {self.topology}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> NetworkRecord:
        """TypeError or ValueError when it is not a record."""
        fp = data.pop("footprint", None) or {}
        footprint = Footprint(
            tuple(int(p) for p in fp.get("switch_pids", ())),
            tuple((str(n), int(p)) for n, p in fp.get("shells", ())),
            tuple((str(n), str(ns)) for n, ns in fp.get("namespaces", ())),
            tuple(str(i) for i in fp.get("interfaces", ())))
        return NetworkRecord(**data, footprint=footprint)


def state_dir_problem(uid: int, mode: int, euid: int) -> str | None:
    """Why a record folder with this owner and mode cannot be trusted, or None: it must be a
    folder owned by root or by us (`euid`), writable by nobody else."""
    if not stat.S_ISDIR(mode):
        return "is not a folder"
    if uid not in (0, euid):
        return f"is owned by uid {uid}, neither root nor this user (uid {euid})"
    if mode & 0o022:
        return f"is writable by others (mode {stat.S_IMODE(mode):04o})"
    return None


def _folder(given: Path | None) -> Path:
    """The record's folder: `given`, else STATE_DIR, checked when the environment named it."""
    if given is not None:
        return given
    named = os.environ.get(STATE_ENV)
    if named and Path(named) == STATE_DIR:
        try:
            st = STATE_DIR.stat()
        except FileNotFoundError:
            return STATE_DIR  # made owner-only by the first `net up`
        why = state_dir_problem(st.st_uid, st.st_mode, os.geteuid())
        if why:
            raise InputError(f"{STATE_DIR} ({STATE_ENV}) {why}: refusing to read or write "
                             "the network record there")
    return STATE_DIR


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> NetworkRecord | None:
    try:
        return NetworkRecord.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, AttributeError):
        path.unlink(missing_ok=True)  # half-written by a process that died: nobody owns it
        return None


def running(state_dir: Path | None = None) -> NetworkRecord | None:
    """The network that is up on this machine, if any. The record of a process that is gone
    is left for `clear_dead` (what it names may still run)."""
    record = _read(_folder(state_dir) / RECORD)
    if record is None or not _alive(record.pid):
        return None
    return record


def dead(state_dir: Path | None = None) -> NetworkRecord | None:
    """The record of a `net up` that died without cleaning up, if one is there."""
    record = _read(_folder(state_dir) / RECORD)
    return record if record is not None and not _alive(record.pid) else None


def clear_dead(state_dir: Path | None = None) -> str | None:
    """When the record is of a `net up` that died: remove every switch process, namespace and
    interface it names, then the record; one line saying what was removed. None when there
    is no such record."""
    path = _folder(state_dir) / RECORD
    record = _read(path)
    if record is None or _alive(record.pid):
        return None
    if os.geteuid() != 0:
        raise InputError(f"the network of {record.describe()} died without cleaning up; what "
                         "it left is root's to remove: run `sudo innet net down`")
    try:
        topology = load_topology(record.topology)
    except (InputError, OSError):
        topology = None  # the file is gone: the recorded interfaces still are known
    removed = remove_orphans(record.run_dir, record.footprint, topology)
    with contextlib.suppress(FileNotFoundError):
        if _read(path) == record:
            path.unlink()
    return dead_line(record.pid, removed)


def dead_line(pid: int, removed: Removed) -> str:
    if not removed:
        return f"removed the record of a network whose `net up` died (pid {pid}); nothing " \
               "of it was left"
    parts = [_count(removed.switches, "switch", "switches"),
             _count(removed.interfaces, "interface", "interfaces")]
    if removed.namespaces:
        parts.insert(1, _count(removed.namespaces, "host namespace", "host namespaces"))
    if removed.processes:
        parts.append(_count(removed.processes, "other process", "other processes"))
    return f"found the switches of a network whose `net up` died (pid {pid}): removed " \
           + ", ".join(parts)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def update(record: NetworkRecord, state_dir: Path | None = None) -> None:
    """Rewrite our record (once the network is up, with its footprint); atomically, so a
    reader never sees half of it."""
    folder = _folder(state_dir)
    path = folder / RECORD
    current = _read(path)
    if current is None or current.pid != record.pid:
        return  # not ours (any more)
    tmp = folder / f".{RECORD}.{record.pid}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(record.to_json(), f)
    os.replace(tmp, path)


def with_footprint(record: NetworkRecord, footprint: Footprint) -> NetworkRecord:
    return replace(record, footprint=footprint)


@contextlib.contextmanager
def claimed(record: NetworkRecord, state_dir: Path | None = None,
            report: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the machine's one network record while the body runs; InputError naming the
    running network when another holds it. A dead one's leftovers are removed first
    (`report` gets the line). The record goes on every way out."""
    folder = _folder(state_dir)
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = folder / RECORD
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            other = running(folder)
            if other is not None:
                raise InputError(f"a network is already up ({other.describe()}): stop it "
                                 f"with `innet net down` or kill {other.pid}") from None
            line = clear_dead(folder)
            if line and report:
                report(line)
            continue  # it was stale and is gone now
        with os.fdopen(fd, "w") as f:
            json.dump(record.to_json(), f)
        break
    else:  # pragma: no cover - a third process raced us twice
        raise InputError(f"could not claim {path}: another network is starting")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, TypeError):
            current = _read(path)
            if current is not None and current.pid == record.pid:
                path.unlink()


def peer_refusal(peer_uid: int, owner_uid: int) -> str | None:
    """Why a peer may not send requests, or None when it may: root, and the user who
    started the network."""
    if peer_uid in (0, owner_uid):
        return None
    return (f"refused: uid {peer_uid} may not drive this network (only root and uid "
            f"{owner_uid}, who started it)")


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED, set by the
    kernel at connect(): the peer cannot choose it)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    """Answers requests on a Unix socket, one thread per connection, until `close()`. A
    handler that raises InputError or NetworkError answers {"error": message, "exit": 2|3}.

    The socket is made 0600 in its folder, which is made 0700 (the folder is the socket's
    alone); a peer that is neither root nor `owner_uid` (default: this process's uid) is
    answered with one refusal and never reaches the handler."""

    def __init__(self, path: Path, handler: Handler, owner_uid: int | None = None) -> None:
        self.path = path
        self.handler = handler
        self.owner_uid = os.getuid() if owner_uid is None else owner_uid
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)  # before the socket exists: no moment it is reachable
        path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        os.chmod(path, 0o600)
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
            refusal = peer_refusal(peer_uid(conn), self.owner_uid)
            if refusal is not None:
                log.warning("control socket %s: %s", self.path, refusal)
                conn.settimeout(REFUSED_READ_TIMEOUT)
                with contextlib.suppress(OSError, ValueError):
                    _read_line(conn)  # its request, unread: the answer reaches a client
                with contextlib.suppress(OSError):  # that sends before it reads
                    conn.sendall(json.dumps({"error": refusal, "exit": 2}).encode() + b"\n")
                return
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
