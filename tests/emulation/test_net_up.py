"""`innet net up`: bt15 stays up, is explored and changed live from other shells, refuses a
second network, and leaves nothing behind on SIGTERM; the interactive CLI driven through tmux.

Each test keeps the machine's one-network record in its own folder (INNET_STATE_DIR), so a
network someone runs by hand is neither seen nor touched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
BT15 = str(ROOT / "topologies" / "bt15.json")
WORKLOAD = str(ROOT / "examples" / "workload-bt15.json")
READY = "innet net: ready"
SLOW = 180.0  # bringing 15 BMv2 switches up on a busy two-core machine


def innet(env: dict[str, str], *args: str, timeout: float = 120.0
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "innet.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    state = tmp_path / "state"
    yield {**os.environ, "INNET_STATE_DIR": str(state)}
    assert own_leftovers(load_topology(BT15)) == []


def wait_for(path: Path, text: str, proc: subprocess.Popen[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = path.read_text() if path.exists() else ""
        if text in got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"innet net up ended ({proc.returncode}) before {text!r}:\n{got}")
        time.sleep(0.5)
    pytest.fail(f"no {text!r} after {timeout:g} s:\n{path.read_text()}")


def switch_status(env: dict[str, str], switch: str) -> str:
    done = innet(env, "status", "--topology", BT15, "--switch", switch)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_network_that_stays_up(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    log = tmp_path / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 BT15, "--workload", WORKLOAD, "-k", "4", "--no-cli", "--out",
                                 str(out)], stdout=f, stderr=subprocess.STDOUT, text=True,
                                env=env, cwd=ROOT)
    try:
        text = wait_for(log, READY, proc, SLOW)
        assert "s4      127.0.0.1:50054" in text and "simple_switch_CLI --thrift-port 9093" in text
        assert "blue s4, s5, s6, s7" in text
        # a ping between two hosts at the two ends of the tree (h1 under s8, h16 under s15:
        # through s4, s2, s1, s3, s7), from another shell
        ping = innet(env, "net", "exec", "h1", "ping", "-c", "1", "-W", "5", "10.0.0.18")
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping
        # a table and a counter of s4, read through innet: s4 aggregates under k = 4, and the
        # ping crossed it both ways
        s4 = switch_status(env, "s4")
        assert "aggregate job 1" in s4 and "track job 1" not in s4, s4
        assert "out pkts" in s4, s4
        # k = 2 live, through the network's own controller: s4 turns red, s2 blue
        moved = innet(env, "deploy", "--topology", BT15, "--workload", WORKLOAD, "-k", "2")
        assert moved.returncode == 0, moved.stderr
        assert "through the network that is up" in moved.stdout and "blue s2, s3" in moved.stdout
        s4, s2 = switch_status(env, "s4"), switch_status(env, "s2")
        assert "track job 1" in s4 and "aggregate job 1" not in s4, s4
        assert "aggregate job 1" in s2, s2
        # a second network is refused in one line naming the first, which stays intact
        second = innet(env, "net", "up", "--topology", BT15, "--no-cli", "--out",
                       str(tmp_path / "second"))
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {proc.pid}" in lines[0] and str(out) in lines[0], lines
        assert not (tmp_path / "second").exists()
        again = innet(env, "net", "exec", "h16", "ping", "-c", "1", "-W", "5", "10.0.0.3")
        assert again.returncode == 0, again
        assert proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
    assert "stopped; everything it started is gone" in log.read_text()
    assert not (tmp_path / "state" / "network.json").exists()
    assert not (out / "control" / "control.sock").exists()
    assert innet(env, "net", "info").stdout.strip() == "no network is up"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_interactive_cli_answers_mininet_and_innet_commands(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    session = f"innet-test-{os.getpid()}"
    cmd = (f"cd {ROOT} && INNET_STATE_DIR={env['INNET_STATE_DIR']} {sys.executable} -m "
           f"innet.cli net up --topology {BT15} --workload {WORKLOAD} -k 4 --out "
           f"{tmp_path / 'run'}; echo NET-UP-ENDED $?; sleep 60")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "220", "-y", "60", cmd],
                   check=True)

    def pane() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-400", "-t", session],
                              capture_output=True, text=True, check=True).stdout

    def answer(keys: str, expect: str, timeout: float) -> str:
        before = pane().count("innet> ")
        subprocess.run(["tmux", "send-keys", "-t", session, keys, "Enter"], check=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = pane()
            if expect in text and text.count("innet> ") > before:
                return text
            time.sleep(0.5)
        pytest.fail(f"no {expect!r} after {keys!r}:\n{pane()}")

    try:
        deadline = time.monotonic() + SLOW
        while "innet> " not in pane():
            assert time.monotonic() < deadline, pane()
            assert "NET-UP-ENDED" not in pane(), pane()
            time.sleep(0.5)
        answer("pingall", "Results: 0% dropped", 120)
        text = answer("plan", "blue s4, s5, s6, s7", 30)
        assert "tree: s1->h0" in text
        answer("counters s4 port_out", "port_out: [1]", 30)
        answer("deploy -k 2", "blue s2, s3", 60)
        subprocess.run(["tmux", "send-keys", "-t", session, "exit", "Enter"], check=True)
        deadline = time.monotonic() + 60
        while "NET-UP-ENDED" not in pane():
            assert time.monotonic() < deadline, pane()
            time.sleep(0.5)
        assert "NET-UP-ENDED 0" in pane(), pane()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        # the network must be gone even if the pane was killed mid-run
        deadline = time.monotonic() + 60
        while (Path(env["INNET_STATE_DIR"]) / "network.json").exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)


def test_your_own_program_stays_up_with_its_runtime_files(env: dict[str, str],
                                                          tmp_path: Path) -> None:
    """The tutorials-style example: its own P4 program, its runtime files; a ping crosses both
    switches on the user's forwarding rules, and status reads them back as the files say.
    Without TLS, as before it: plain P4Runtime, and net up says the switches are open."""
    example = ROOT / "examples" / "tutorial-basic"
    topo = str(example / "line-topo" / "topology.json")
    log = tmp_path / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 topo, "--program", str(example / "basic.p4"), "--no-cli",
                                 "--no-tls", "--out", str(tmp_path / "run")], stdout=f,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        text = wait_for(log, READY, proc, SLOW)
        assert "your program" in text and "runtime files of s1, s2" in text
        assert "the switches are open (no TLS" in text and "--ssl" not in text
        assert not (tmp_path / "run" / "tls").exists()
        ping = innet(env, "net", "exec", "h1", "ping", "-c", "1", "-W", "5", "10.0.2.2")
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping
        status = innet(env, "status", "--topology", topo, "--program",
                       str(example / "basic.p4"))
        assert status.returncode == 0, status.stderr
        assert status.stdout.count("as its runtime file says") == 2, status.stdout
        refused = innet(env, "deploy", "--topology", topo, "--program",
                        str(example / "basic.p4"))
        assert refused.returncode == 2 and "a network is up on this topology" in refused.stderr
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
    assert own_leftovers(load_topology(topo)) == []
