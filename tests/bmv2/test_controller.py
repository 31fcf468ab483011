"""`innet controller run` (a subprocess) keeping three BMv2 switches on loopback ports in their
intended state: a switch killed with -9 and started again blank, an entry deleted behind the
controller's back, a controller with a higher election id, and a standby taking over.

No Mininet and no namespaces: each simple_switch_grpc runs without ports, which is all the
control plane needs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from p4rt_helpers import eventually

from innet.bmv2.thrift import run_cli
from innet.p4rt import entities as en
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.encode import normalise
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, missing_tools, start_switch
from innet.topology import Topology, topology_from_dict

_missing = missing_tools("simple_switch_grpc", "simple_switch_CLI")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
    pytest.mark.usefixtures("no_p4runtime_threads_left"),
]

ROOT = Path(__file__).resolve().parents[2]
PIPE = load_pipeline()
NAMES = ("s1", "s2", "s3")
HOSTS = {f"h{i}": (f"10.0.0.{i}", f"08:00:00:00:00:{i:02x}") for i in (1, 2, 3, 4)}
EDGE = {"h1": ("s1", 1), "h2": ("s2", 1), "h3": ("s3", 1), "h4": ("s3", 2)}
INTERVAL = 1.0
SLOW = 30.0  # what a busy machine may take to get there: these tests check that, not speed


@dataclass
class Trio:
    run_dir: Path
    switches: dict[str, BMv2Switch]
    topo: Topology
    topo_path: Path
    workload_path: Path
    controllers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def address(self, name: str) -> SwitchAddress:
        return self.switches[name].address

    def intent(self, with_workload: bool = True) -> dict[str, set[en.Entry]]:
        wl = [it.load_workload(self.workload_path, self.topo)] if with_workload else []
        entries = it.derive(self.topo, wl, "soar", 2).entries()
        return {n: {normalise(PIPE.schema, e) for e in es} for n, es in entries.items()}

    def held(self, name: str) -> set[en.Entry] | None:
        """What the switch holds; None when it cannot be read or runs no program of ours."""
        try:
            with SwitchClient(self.address(name), PIPE.schema, writer=False) as c:
                if c.pipeline_cookie() != PIPE.cookie:
                    return None
                return set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES))
        except SwitchError:
            return None

    def controller(self, *extra: str, log: str) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "innet.cli", "controller", "run", "--topology",
                str(self.topo_path), "-k", "2", "--interval", str(INTERVAL), *extra]
        with (self.run_dir / log).open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        self.controllers.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.run_dir / name).read_text()

    def restart(self, name: str) -> float:
        """kill -9 the switch, start it again blank on the same ports; the time it started."""
        old = self.switches[name]
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait(5)
        t0 = time.monotonic()
        port = int(old.address.grpc.rsplit(":", 1)[1])
        self.switches[name] = start_switch(name, self.run_dir, grpc_port=port,
                                           thrift_port=old.address.thrift_port)
        return t0


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            return -9
    return int(proc.returncode)


@pytest.fixture(scope="module")
def trio_switches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trio]:
    run = tmp_path_factory.mktemp("bmv2ctl")
    switches: dict[str, BMv2Switch] = {}
    try:
        for n in NAMES:
            switches[n] = start_switch(n, run)
        data = {"name": "line3",
                "switches": {n: {"grpc": s.address.grpc, "thrift_port": s.address.thrift_port}
                             for n, s in switches.items()},
                "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac) in HOSTS.items()},
                "links": [[h, f"{s}-p{p}"] for h, (s, p) in EDGE.items()]
                + [["s1-p2", "s2-p2"], ["s2-p3", "s3-p3"]],
                "aggregation": {"destination": "h1"}}
        topo_path = run / "line3.json"
        topo_path.write_text(json.dumps(data))
        wl = run / "workload.json"
        wl.write_text(json.dumps({"job": 3, "workers": ["h2", "h3", "h4"]}))
        topo = topology_from_dict(data)
        trio = Trio(run, switches, topo, topo_path, wl)
        yield trio
    finally:
        for sw in switches.values():
            sw.stop()


@pytest.fixture
def trio(trio_switches: Trio) -> Iterator[Trio]:
    """The switches; every controller a test started is stopped after it."""
    yield trio_switches
    for proc in trio_switches.controllers:
        stop(proc, signal.SIGKILL)
    trio_switches.controllers.clear()


def test_a_switch_killed_and_restarted_blank_is_restored(trio: Trio) -> None:
    want = trio.intent()
    ctl = trio.controller("--workload", str(trio.workload_path), log="restart.log")
    assert eventually(lambda: all(trio.held(n) == want[n] for n in NAMES), SLOW), \
        trio.log("restart.log")
    lost: list[str] = []
    watching = threading.Event()

    def watch(name: str) -> None:
        with SwitchClient(trio.address(name), PIPE.schema, writer=False) as c:
            while not watching.is_set():
                got = set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES))
                if got != want[name]:
                    lost.append(f"{name}: {len(got)} entries instead of {len(want[name])}")
                time.sleep(0.02)

    watchers = [threading.Thread(target=watch, args=(n,)) for n in ("s1", "s3")]
    for w in watchers:
        w.start()
    try:
        t0 = trio.restart("s2")
        # how fast is benchmarks/recovery_bench.py's question; here: restored at all
        assert eventually(lambda: trio.held("s2") == want["s2"], SLOW), trio.log("restart.log")
        print(f"\ns2 restored {time.monotonic() - t0:.1f} s after its restart")
    finally:
        watching.set()
        for w in watchers:
            w.join()
    assert not lost, lost  # the other two never lost an entry
    assert stop(ctl) == 0
    text = trio.log("restart.log")
    assert "s2: stream lost" in text and "s2: program loaded again" in text
    assert "s1: stream lost" not in text and "controller: stopped on SIGTERM" in text


def _delete_one_route(trio: Trio, name: str) -> None:
    """Behind the controller's back: through BMv2's thrift CLI, not P4Runtime."""
    table = PIPE.schema.table(pg.T_ROUTES).name
    dump = run_cli(trio.address(name), [f"table_dump {table}"])
    handle = next(line.split()[-1] for line in dump.splitlines()
                  if line.startswith("Dumping entry"))
    run_cli(trio.address(name), [f"table_delete {table} {int(handle, 16)}"])


def test_an_entry_deleted_behind_its_back_is_restored(trio: Trio) -> None:
    want = trio.intent()
    ctl = trio.controller("--workload", str(trio.workload_path), log="drift.log")
    assert eventually(lambda: all(trio.held(n) == want[n] for n in NAMES), SLOW)
    # status --json next to the running controller: it reads, never takes over
    status = subprocess.run([sys.executable, "-m", "innet.cli", "status", "--topology",
                             str(trio.topo_path), "--json"], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    doc = json.loads(status.stdout)["switches"]
    for n in NAMES:
        assert (doc[n]["reachable"], doc[n]["pipeline"], doc[n]["entries"]) == \
            (True, PIPE.cookie, len([e for e in want[n] if not e.default]))
    time.sleep(0.3)
    _delete_one_route(trio, "s3")
    assert trio.held("s3") != want["s3"]
    # the next periodic pass sees it missing; restored at all is the check here (SLOW
    # allows for a busy machine), not within how many intervals
    assert eventually(lambda: trio.held("s3") == want["s3"], SLOW), trio.log("drift.log")
    assert stop(ctl, signal.SIGINT) == 0  # Ctrl-C: a clean exit too
    text = trio.log("drift.log")
    # BMv2's P4Runtime server still believes it holds the entry (ALREADY_EXISTS on the
    # insert): only a program load makes both agree again, and the controller does that
    assert "s3: the switch refused the repair (ALREADY_EXISTS" in text
    assert "s3: program loaded again (forced)" in text
    assert "controller: stopped on SIGINT" in text


def test_a_higher_election_id_takes_over_and_ours_stops_writing(trio: Trio) -> None:
    ours_want, theirs_want = trio.intent(with_workload=True), trio.intent(with_workload=False)
    assert ours_want["s2"] != theirs_want["s2"]  # their intent has no aggregation entry
    ours = trio.controller("--workload", str(trio.workload_path), log="ours.log")
    assert eventually(lambda: all(trio.held(n) == ours_want[n] for n in NAMES), SLOW)
    theirs = trio.controller("--election-id", "2:0", log="theirs.log")
    assert eventually(lambda: all(trio.held(n) == theirs_want[n] for n in NAMES), SLOW), \
        trio.log("theirs.log")
    assert eventually(lambda: all(f"{n}: standby: the controller with election id 2:0 is "
                                  "primary; not writing" in trio.log("ours.log")
                                  for n in NAMES), SLOW), trio.log("ours.log")
    # three of our intervals: had ours kept writing, the aggregation entries would be back
    for _ in range(15):
        assert all(trio.held(n) == theirs_want[n] for n in NAMES), trio.log("ours.log")
        time.sleep(INTERVAL / 5)
    # when they leave, the switches make ours primary again and it restores its intent
    assert stop(theirs) == 0
    assert eventually(lambda: all(trio.held(n) == ours_want[n] for n in NAMES), SLOW), \
        trio.log("ours.log")
    assert "s1: primary now (election id 1:0): writing" in trio.log("ours.log")
    assert stop(ours) == 0


def test_a_backup_takes_over_when_the_primary_exits(trio: Trio) -> None:
    want = trio.intent()
    primary = trio.controller("--workload", str(trio.workload_path), log="primary.log")
    assert eventually(lambda: all(trio.held(n) == want[n] for n in NAMES), SLOW)
    backup = trio.controller("--workload", str(trio.workload_path), "--backup",
                             log="backup.log")
    assert eventually(lambda: all(f"{n}: standby: the controller with election id 1:0 is "
                                  "primary; not writing" in trio.log("backup.log")
                                  for n in NAMES), SLOW), trio.log("backup.log")
    assert stop(primary) == 0
    assert eventually(lambda: all(f"{n}: primary now" in trio.log("backup.log")
                                  for n in NAMES), SLOW), trio.log("backup.log")
    _delete_one_route(trio, "s1")  # only a writing controller can put it back
    assert eventually(lambda: trio.held("s1") == want["s1"], SLOW), \
        trio.log("backup.log")
    assert "s1: program loaded again (forced)" in trio.log("backup.log")
    assert stop(backup) == 0
