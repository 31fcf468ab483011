"""Jobs on a network that is up (BMv2 in Mininet, the leaf-spine): two jobs, the second
submitted while the first runs, both aggregate every iteration's gradient through the
switches to the end with exact sums; the second's admission writes only its own entries and
leaves the first's iterations as long as they were; `job list --json` shows where each ran
and how; a cancel leaves every switch read back equal to the remaining jobs' intent, and a
job queued for lack of hosts is admitted into the room the cancel left and runs.

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


def progress(run: Path, name: str) -> list[list[dict[str, Any]]]:
    """Every worker's iteration lines of job `name`, as its agents wrote them."""
    return [[json.loads(x) for x in f.read_text().splitlines() if '"iteration"' in x]
            for f in sorted((run / "jobs" / name).glob("progress-*.jsonl"))]


def wait_jobs(env: dict[str, str], names: set[str], timeout: float) -> dict[str, Any]:
    """The job list once none of `names` runs any more."""
    deadline = time.monotonic() + timeout
    while True:
        rows = {r["name"]: r for r in job(env, "list")["jobs"]}
        if all(rows[n]["state"] != "running" for n in names):
            return rows
        if time.monotonic() > deadline:
            pytest.fail(f"jobs still running after {timeout:g} s: {rows}")
        time.sleep(1.0)


def test_two_jobs_run_to_the_end_and_a_cancel_admits_the_queue(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    """The live cluster's first promise: a job submitted while another runs writes only its
    own entries and does not slow the first; both run every iteration with exact sums; a
    cancel leaves the switches equal to the remaining jobs' intent and starts the queue."""
    topo = load_topology(LEAFSPINE)
    log, run = tmp_path / "net-up.log", tmp_path / "run"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 LEAFSPINE, "--no-cli", "--out", str(run)],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        wait_for(log, READY, proc, SLOW)
        first = job(env, "submit", "--model", "VGG19", "--workers", "6", "--iterations",
                    "20", "--name", "first")
        assert first["state"] == "running"
        time.sleep(10)
        admitted_at = time.time()
        second = job(env, "submit", "--model", "ResNet50", "--workers", "6",
                     "--iterations", "20", "--name", "second")
        assert second["state"] == "running"
        changes = intent_changes(intent_of(topo, [first]), intent_of(topo, [first, second]))
        assert second["writes"] == sum(changes.values()) > 0
        assert set(second["switches"]) == set(changes)
        rows = wait_jobs(env, {"first", "second"}, 120)
        for name, n in (("first", 20), ("second", 20)):
            r = rows[name]
            assert r["state"] == "done" and r["iterations_done"] == n, r
            assert r["sums_exact"] is True and r["marks"] is not None, r
            assert len(r["hosts"]) == 7 and r["blue"] and r["shift_ms"] is not None
            assert r["mean_iteration_ms"] is not None
        # the first job's iterations before and after the second's admission
        lines = progress(run, "first")
        slowest = [max(w[i]["iteration_ms"] for w in lines) for i in range(20)]
        starts = [lines[0][i]["start"] for i in range(20)]
        before = [d for d, t in zip(slowest, starts, strict=True) if t < admitted_at]
        after = [d for d, t in zip(slowest, starts, strict=True) if t >= admitted_at]
        assert before and after
        mean_before, mean_after = sum(before) / len(before), sum(after) / len(after)
        assert abs(mean_after - mean_before) < 0.1 * mean_before, (before, after)
        record = live.running(Path(env["INNET_STATE_DIR"]))
        assert record is not None
        assert live.ask(record, {"op": "readback"})["equal"]  # released: routes only
        big = job(env, "submit", "--model", "VGG19", "--workers", "12", "--iterations",
                  "100000", "--name", "big")
        waiting = job(env, "submit", "--model", "ResNet50", "--workers", "12",
                      "--iterations", "3", "--name", "waiting")
        assert big["state"] == "running"
        assert waiting["state"] == "queued" and "no free hosts" in waiting["why"]
        cancelled = job(env, "cancel", "big")
        assert cancelled["admitted"] == ["waiting"]
        back = live.ask(record, {"op": "readback"})
        assert back["equal"], back["differ"]
        rows = {r["name"]: r for r in job(env, "list")["jobs"]}
        remaining = intent_of(topo, [rows["waiting"]]).entries()
        assert back["entries"] == {s: len(es) for s, es in remaining.items()}
        rows = wait_jobs(env, {"waiting"}, 60)
        assert rows["waiting"]["state"] == "done" and rows["waiting"]["sums_exact"] is True
        assert rows["big"]["state"] == "cancelled"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()


def test_a_job_survives_a_switch_restarted_under_it(env: dict[str, str],
                                                   tmp_path: Path) -> None:
    """A blue switch of a running job crashes (SIGKILL) and comes back blank: the controller
    loads it again, the workers' timers and the destination's requests send again what it
    held, and the job ends every iteration with exact sums, the switches equal to the
    intent."""
    log, run = tmp_path / "net-up.log", tmp_path / "run"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 LEAFSPINE, "--no-cli", "--out", str(run)],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        wait_for(log, READY, proc, SLOW)
        row = job(env, "submit", "--model", "VGG19", "--workers", "6", "--iterations", "30",
                  "--name", "steady")
        assert row["state"] == "running" and row["blue"]
        record = live.running(Path(env["INNET_STATE_DIR"]))
        assert record is not None
        deadline = time.monotonic() + 60
        while job(env, "list")["jobs"][0]["iterations_done"] < 5:
            assert time.monotonic() < deadline, job(env, "list")
            time.sleep(0.5)
        victim = row["blue"][0]
        assert live.ask(record, {"op": "restart", "switch": victim}) == {"restarted": victim}
        rows = wait_jobs(env, {"steady"}, 120)
        steady = rows["steady"]
        assert steady["state"] == "done" and steady["iterations_done"] == 30, steady
        assert steady["sums_exact"] is True
        assert live.ask(record, {"op": "readback"})["equal"]
        text = (run / "logs" / "controller.log").read_text()
        assert f"{victim}: program loaded again" in text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()


def test_a_job_avoids_switches_whose_pool_is_full(env: dict[str, str], tmp_path: Path) -> None:
    """A job that takes every cell of its switches' pools (256 slots) leaves no room on its
    tree: the next job is placed where its whole tree has room, aggregates there while the
    first runs, and ends with exact sums; the first's cancel leaves routes only."""
    log, run = tmp_path / "net-up.log", tmp_path / "run"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 LEAFSPINE, "--no-cli", "--out", str(run)],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        wait_for(log, READY, proc, SLOW)
        full = job(env, "submit", "--model", "VGG19", "--workers", "4", "--slots", "256",
                   "--iterations", "100000", "--name", "full")
        assert full["state"] == "running" and set(full["slot_bases"].values()) == {0}
        after = job(env, "submit", "--model", "ResNet50", "--workers", "6", "--iterations",
                    "10", "--name", "after")
        assert after["state"] == "running", after
        assert not set(after["slot_bases"]) & set(full["slot_bases"]), (full, after)
        assert after["blue"] and not set(after["blue"]) & set(full["slot_bases"])
        rows = wait_jobs(env, {"after"}, 90)
        assert rows["after"]["state"] == "done" and rows["after"]["sums_exact"] is True
        assert rows["full"]["state"] == "running"
        job(env, "cancel", "full")
        record = live.running(Path(env["INNET_STATE_DIR"]))
        assert record is not None
        back = live.ask(record, {"op": "readback"})
        routes_only = intent_of(load_topology(LEAFSPINE), []).entries()
        assert back["equal"], back
        assert back["entries"] == {s: len(es) for s, es in routes_only.items()}
        rows = {r["name"]: r for r in job(env, "list")["jobs"]}
        assert rows["full"]["iterations_done"] > 0 and rows["full"]["sums_exact"] is True
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
