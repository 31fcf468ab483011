"""Jobs on a network that is up (BMv2 in Mininet, the leaf-spine): a second job's admission
writes only its own entries, `job list --json` shows where each runs, a cancel leaves every
switch read back equal to the remaining jobs' intent, and a job queued for lack of hosts is
admitted into the room the cancel left.

The machine's one-network record lives in the test's own folder (INNET_STATE_DIR), so a
network someone runs by hand is neither seen nor touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from innet.emulation import live
from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.plan.intent import Workload, network_intent, plan_job
from innet.plan.jobintent import intent_changes
from innet.topology import Topology, load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")
READY = "innet net: ready"
SLOW = 180.0  # eight BMv2 switches up on a busy two-core machine


def innet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "innet.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=180)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**os.environ, "INNET_STATE_DIR": str(tmp_path / "state")}
    assert own_leftovers(load_topology(LEAFSPINE)) == []


def wait_for(path: Path, text: str, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in (path.read_text() if path.exists() else ""):
            return
        if proc.poll() is not None:
            pytest.fail(f"innet net up ended ({proc.returncode}) before {text!r}:\n"
                        f"{path.read_text()}")
        time.sleep(0.5)
    pytest.fail(f"no {text!r} after {timeout:g} s:\n{path.read_text()}")


def job(env: dict[str, str], *args: str) -> Any:
    done = innet(env, "job", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def intent_of(topo: Topology, rows: list[dict[str, Any]]) -> Any:
    """The intent of these admitted jobs rebuilt from what `job list` shows of them."""
    plans = [plan_job(topo, Workload(r["job"], r["hosts"][0], tuple(r["hosts"][1:]),
                                     slots=r["slots"]), blue=r["blue"]) for r in rows]
    held: dict[str, dict[int, tuple[int, int]]] = {}
    for r in rows:
        for s, base in r["slot_bases"].items():
            held.setdefault(s, {})[r["job"]] = (base, r["slots"])
    return network_intent(topo, plans, held=held)


def test_jobs_are_admitted_and_released_on_a_running_network(env: dict[str, str],
                                                              tmp_path: Path) -> None:
    topo = load_topology(LEAFSPINE)
    log = tmp_path / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 LEAFSPINE, "--no-cli", "--out", str(tmp_path / "run")],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        wait_for(log, READY, proc, SLOW)
        first = job(env, "submit", "--model", "VGG19", "--workers", "6", "--iterations",
                    "20", "--name", "first")
        second = job(env, "submit", "--model", "ResNet50", "--workers", "6",
                     "--iterations", "20", "--name", "second")
        assert first["state"] == second["state"] == "admitted"
        changes = intent_changes(intent_of(topo, [first]), intent_of(topo, [first, second]))
        assert second["writes"] == sum(changes.values()) > 0
        assert set(second["switches"]) == set(changes)
        waiting = job(env, "submit", "--model", "VGG19", "--workers", "12", "--iterations",
                      "5", "--name", "waiting")
        assert waiting["state"] == "queued" and "no free hosts" in waiting["why"]
        rows = {r["name"]: r for r in job(env, "list")["jobs"]}
        for name in ("first", "second"):
            assert len(rows[name]["hosts"]) == 7 and rows[name]["blue"], rows[name]
            assert rows[name]["shift_ms"] is not None and rows[name]["iterations_done"] == 0
        cancelled = job(env, "cancel", "first")
        assert cancelled["admitted"] == ["waiting"]
        rows = {r["name"]: r for r in job(env, "list")["jobs"]}
        assert [rows[n]["state"] for n in ("first", "second", "waiting")] == [
            "cancelled", "admitted", "admitted"]
        record = live.running(Path(env["INNET_STATE_DIR"]))
        assert record is not None
        back = live.ask(record, {"op": "readback"})
        assert back["equal"], back["differ"]
        remaining = intent_of(topo, [rows["second"], rows["waiting"]]).entries()
        assert back["entries"] == {s: len(es) for s, es in remaining.items()}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
