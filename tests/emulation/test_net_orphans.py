"""`innet net up` killed with SIGKILL leaves its switches, namespaces and interfaces behind;
`innet net down` finds them through the dead process's record and removes every one, saying
so in one line. The network is up over TLS (net up's default): the address table carries
p4runtime-sh's certificate options, `status` reads through them, and without them a switch
cannot be read.

The record lives in the test's own folder (INNET_STATE_DIR); the nodes have names of their
own (k1, g1, ...), so a network someone else runs is neither seen nor touched."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from innet.emulation.live import NetworkRecord
from innet.emulation.net import own_leftovers, remove_orphans, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
READY = "innet net: ready"
SLOW = 120.0
HOSTS = {f"g{i}": (f"10.0.0.{i + 2}", f"08:00:00:00:00:{i + 1:02x}") for i in range(3)}
TOPOLOGY = {
    "name": "orphans", "switches": {"k1": {}, "k2": {}, "k3": {}},
    "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac) in HOSTS.items()},
    "links": [["g0", "k1-p1"], ["g1", "k2-p2"], ["g2", "k3-p2"], ["k1-p2", "k2-p1"],
              ["k1-p3", "k3-p1"]],
    "aggregation": {"destination": "g0"}}


def innet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "innet.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def switches_of(run: Path) -> list[int]:
    """simple_switch_grpc processes logging into `run`."""
    found = []
    for pid in filter(str.isdecimal, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args[0].endswith(b"simple_switch_grpc") and any(
                a.startswith(f"{run}/logs/".encode()) for a in args):
            found.append(int(pid))
    return found


def namespaces_alive(record: dict[str, object]) -> list[str]:
    wanted = {ns for _, ns in record["footprint"]["namespaces"]}  # type: ignore[index]
    alive = set()
    for pid in filter(str.isdecimal, os.listdir("/proc")):
        try:
            alive.add(os.readlink(f"/proc/{pid}/ns/net"))
        except OSError:
            continue
    return sorted(wanted & alive)


def wait_for(path: Path, text: str, proc: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:
        got = path.read_text() if path.exists() else ""
        if text in got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"innet net up ended ({proc.returncode}) before {text!r}:\n{got}")
        time.sleep(0.5)
    pytest.fail(f"no {text!r} after {SLOW:g} s:\n{path.read_text()}")


def test_net_down_removes_what_a_killed_net_up_left(tmp_path: Path) -> None:
    topo_path = tmp_path / "topology.json"
    topo_path.write_text(json.dumps(TOPOLOGY))
    topo = load_topology(topo_path)
    state, run, log = tmp_path / "state", tmp_path / "run", tmp_path / "net-up.log"
    env = {**os.environ, "INNET_STATE_DIR": str(state)}
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 str(topo_path), "--no-cli", "--out", str(run)], stdout=f,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    record: dict[str, object] = {}
    try:
        text = wait_for(log, READY, proc)
        tls = run / "tls"
        assert f"--ssl --cacert {tls}/ca.pem --cert {tls}/controller.pem --private-key " \
               f"{tls}/controller.key" in text, text
        assert stat.S_IMODE(tls.stat().st_mode) == 0o700
        read = innet(env, "status", "--topology", str(topo_path), "--switch", "k2")
        assert read.returncode == 0 and "k2 (127.0.0.1:" in read.stdout, read
        plain = innet(env, "status", "--topology", str(topo_path), "--switch", "k2",
                      "--no-tls")
        assert plain.returncode == 1 and "cannot read" in plain.stdout, plain

        record = json.loads((state / "network.json").read_text())
        assert sorted(record["footprint"]["switch_pids"]) == sorted(  # type: ignore[index]
            switches_of(run))
        assert len(namespaces_alive(record)) == 3
        # a command left running on g1 keeps g1's namespace after its shell is gone
        left = innet(env, "net", "exec", "g1", "sh", "-c",
                     "setsid sleep 600 </dev/null >/dev/null 2>&1 &")
        assert left.returncode == 0, left
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert len(switches_of(run)) == 3 and own_leftovers(topo)
        # the nodes' shells end with their terminal; g1's namespace stays, held by the sleep
        deadline = time.monotonic() + 30
        while len(namespaces_alive(record)) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(namespaces_alive(record)) == 1
        # g0's and g2's veths go with their namespaces, freed by the kernel's netns cleanup
        # work at a moment of its choosing: what stays is the 5 switch-side interfaces that
        # link the switches to each other and to g1, whose namespace the sleep holds
        deadline = time.monotonic() + 30
        while len(own_leftovers(topo)) > 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(own_leftovers(topo)) == ["k1-eth2", "k1-eth3", "k2-eth1", "k2-eth2",
                                               "k3-eth1"]
        info = innet(env, "net", "info")
        assert info.stdout.startswith(  # not up, but its record is there to clean up with
            f"no network is up (the record of one whose `net up` died is there: pid "
            f"{proc.pid}, "), info

        down = innet(env, "net", "down")
        assert down.returncode == 0, down
        lines = down.stdout.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"found the switches of a network whose `net up` died (pid {proc.pid}): removed "
            "3 switches, 1 host namespace, 5 interfaces, 1 other process"), lines
        assert switches_of(run) == []
        assert own_leftovers(topo) == []
        assert namespaces_alive(record) == []
        assert not (state / "network.json").exists()
        assert innet(env, "net", "info").stdout.strip() == "no network is up"
        again = innet(env, "net", "down")
        assert again.returncode == 2 and "no network is up" in again.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if record:  # whatever the assertions left: the same removal, by the record
            remove_orphans(str(run), NetworkRecord.from_json(dict(record)).footprint, topo)
        else:
            remove_orphans(str(run), NetworkRecord(0, str(run), "", "", 0.0).footprint, topo)
