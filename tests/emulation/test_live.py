"""The control socket of a network that is up answers only root and the user who started it:
the socket is 0600 in a 0700 folder (another user's connect() fails there), and a peer that
gets through a looser layout is refused by its credentials (SO_PEERCRED) in one line, logged.
The record's folder named by the environment is used only when nobody else may write in it;
the record carries the network's footprint, and only processes checked to be that network's
are taken for it.
The other user is `nobody`, through setpriv (util-linux)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from innet.emulation import live
from innet.emulation.live import ControlServer, peer_refusal, state_dir_problem
from innet.emulation.net import Footprint, Removed, is_shell_of, is_switch_of
from innet.errors import InputError

NOBODY = 65534
CAN_SWITCH = os.geteuid() == 0 and shutil.which("setpriv") is not None
needs_setpriv = pytest.mark.skipif(not CAN_SWITCH, reason="needs root and setpriv")

# the client another user runs: the system's Python, which `nobody` may execute
CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": exc.__class__.__name__}))
    sys.exit(0)
s.sendall(json.dumps({"op": "exec", "host": "h1", "argv": ["id"]}).encode() + b"\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode(), end="")
"""


def as_nobody(sock: Path) -> str:
    done = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup",
                           "--clear-groups", "/usr/bin/python3", "-c", CLIENT, str(sock)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class Handler:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {"ok": True}


@pytest.fixture
def open_base() -> Iterator[Path]:
    """A folder `nobody` can walk through (pytest's own tmp folders are root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="innet-live-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_root_and_the_owner_may_send_requests_nobody_else() -> None:
    assert peer_refusal(0, 1000) is None
    assert peer_refusal(1000, 1000) is None
    assert peer_refusal(0, 0) is None
    why = peer_refusal(NOBODY, 1000)
    assert why is not None and f"uid {NOBODY}" in why and "uid 1000" in why
    assert "\n" not in why
    assert peer_refusal(1001, 0) is not None


def test_a_state_folder_writable_by_others_is_refused() -> None:
    folder = stat.S_IFDIR
    assert state_dir_problem(0, folder | 0o755, 1000) is None
    assert state_dir_problem(1000, folder | 0o700, 1000) is None
    assert "owned by uid 1001" in (state_dir_problem(1001, folder | 0o755, 1000) or "")
    assert "writable by others (mode 1777)" in (
        state_dir_problem(0, folder | 0o1777, 1000) or "")
    assert "writable by others" in (state_dir_problem(0, folder | 0o775, 0) or "")
    assert "not a folder" in (state_dir_problem(0, stat.S_IFREG | 0o644, 0) or "")


def test_the_environments_state_folder_is_checked(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv(live.STATE_ENV, str(state))
    monkeypatch.setattr(live, "STATE_DIR", state)
    assert live.running() is None
    os.chmod(state, 0o777)
    with pytest.raises(InputError, match="writable by others") as refused:
        live.running()
    assert "\n" not in str(refused.value)


def test_the_socket_is_owner_only_and_answers_its_owner(tmp_path: Path) -> None:
    handler = Handler()
    sock = tmp_path / "control" / "control.sock"
    server = ControlServer(sock, handler)
    try:
        assert stat.S_ISSOCK(sock.lstat().st_mode)
        assert mode(sock) == 0o600 and mode(sock.parent) == 0o700
        record = live.NetworkRecord(os.getpid(), str(tmp_path), "t.json", str(sock), 0.0)
        assert live.ask(record, {"op": "x"}, timeout=10) == {"ok": True}
        assert handler.requests == [{"op": "x"}]
    finally:
        server.close()
    assert not sock.exists()


@needs_setpriv
def test_another_user_cannot_reach_the_socket(open_base: Path) -> None:
    handler = Handler()
    sock = open_base / "control" / "control.sock"
    server = ControlServer(sock, handler)
    try:
        assert json.loads(as_nobody(sock)) == {"connect": "PermissionError"}
        assert handler.requests == []
    finally:
        server.close()


@needs_setpriv
def test_another_user_that_gets_through_is_refused_by_its_credentials(
        open_base: Path, caplog: pytest.LogCaptureFixture) -> None:
    handler = Handler()
    sock = open_base / "control" / "control.sock"
    server = ControlServer(sock, handler)
    try:
        os.chmod(sock.parent, 0o755)  # a looser layout than the server makes
        os.chmod(sock, 0o666)
        with caplog.at_level(logging.WARNING, logger="innet.net"):
            text = as_nobody(sock)
        lines = text.splitlines()
        assert len(lines) == 1, text
        answer = json.loads(lines[0])
        assert answer["exit"] == 2 and answer["error"].startswith(f"refused: uid {NOBODY} ")
        assert handler.requests == []
        assert any(f"uid {NOBODY}" in r.getMessage() for r in caplog.records)
    finally:
        server.close()


def test_the_record_round_trips_with_its_footprint(tmp_path: Path) -> None:
    fp = Footprint((11, 12), (("h1", 21), ("s1", 22)), (("h1", "net:[4026532000]"),),
                   ("s1-eth1",))
    record = live.NetworkRecord(os.getpid(), str(tmp_path), "t.json", "c.sock", 1.0,
                                str(tmp_path / "tls"), fp)
    with live.claimed(record, tmp_path / "state"):
        assert live.running(tmp_path / "state") == record
        later = live.with_footprint(record, Footprint((13,)))
        live.update(later, tmp_path / "state")
        assert live.running(tmp_path / "state") == later
    assert live.running(tmp_path / "state") is None
    # an older record, without the new fields, is still read
    old = {"pid": 1, "run_dir": "r", "topology": "t", "control": "c", "started": 0.0}
    assert live.NetworkRecord.from_json(old).footprint == Footprint()


def test_only_this_networks_processes_are_taken_for_its_own() -> None:
    switch = ["simple_switch_grpc", "--device-id", "0", "--log-file", "/runs/a/logs/s1",
              "--no-p4"]
    assert is_switch_of(switch, "/runs/a") and is_switch_of(switch, "/runs/a/")
    assert not is_switch_of(switch, "/runs/ab") and not is_switch_of(switch, "/runs/b")
    assert not is_switch_of(["sleep", "/runs/a/logs/s1"], "/runs/a")  # a reused pid
    assert not is_switch_of([], "/runs/a")  # gone
    shell = ["bash", "--norc", "--noediting", "-is", "mininet:h1"]
    assert is_shell_of(shell, "h1") and not is_shell_of(shell, "h10")
    assert not is_shell_of(["bash"], "h1")


def test_what_was_removed_is_said_in_one_line() -> None:
    line = live.dead_line(42, Removed(5, 1, 8, 0))
    assert line == ("found the switches of a network whose `net up` died (pid 42): removed "
                    "5 switches, 1 host namespace, 8 interfaces")
    assert "nothing of it was left" in live.dead_line(42, Removed())
