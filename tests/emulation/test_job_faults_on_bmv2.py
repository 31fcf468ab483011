"""Faults while a job runs on the network that is up (BMv2 in Mininet, the leaf-spine, one
network for the three tests): a worker's agent killed, the destination killed, a link of the
job's tree down for five seconds. A dead process fails its job cleanly, naming it, and the
job's room is released (the switches read back equal to the intent); a link that comes back
costs time, not sums."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from innet.emulation import live
from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")
READY = "innet net: ready"


@dataclass
class Up:
    env: dict[str, str]
    run: Path
    record: live.NetworkRecord

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        return live.ask(self.record, request)

    def rows(self) -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in self.ask({"op": "job_list"})["jobs"]}

    def submit(self, name: str, iterations: int) -> dict[str, Any]:
        return self.ask({"op": "job_submit", "job": {"name": name, "model": "VGG19",
                                                     "workers": 6, "iterations": iterations}})

    def wait(self, name: str, test: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            row = self.rows()[name]
            if test(row):
                return row
            if time.monotonic() > deadline:
                pytest.fail(f"job {name} after {timeout:g} s: {row}")
            time.sleep(0.5)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    tmp = tmp_path_factory.mktemp("faults")
    env = {**os.environ, "INNET_STATE_DIR": str(tmp / "state")}
    log, run = tmp / "net-up.log", tmp / "run"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 LEAFSPINE, "--no-cli", "--out", str(run)],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        deadline = time.monotonic() + 180
        while READY not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        record = live.running(tmp / "state")
        assert record is not None
        yield Up(env, run, record)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        assert own_leftovers(load_topology(LEAFSPINE)) == []
    assert code == 0, log.read_text()


def kill(pattern: str) -> None:
    """SIGKILL the one process whose command line matches (an out-of-memory kill would)."""
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True
                          ).stdout.split()
    assert len(pids) == 1, (pattern, pids)
    os.kill(int(pids[0]), signal.SIGKILL)


def released(up: Up) -> None:
    back = up.ask({"op": "readback"})
    assert back["equal"], back["differ"]


def test_a_killed_worker_fails_its_job_naming_it(up: Up) -> None:
    row = up.submit("lost-worker", 200)
    up.wait("lost-worker", lambda r: r["iterations_done"] >= 2, 60)
    victim = row["hosts"][3]
    kill(f"jobagent .*lost-worker/worker-{victim}.json")
    row = up.wait("lost-worker", lambda r: r["state"] != "running", 30)
    assert row["state"] == "failed" and f"worker {victim}'s agent died" in row["why"]
    assert row["sums_exact"] is True  # what it finished was exact
    assert not subprocess.run(["pgrep", "-f", "lost-worker/"], capture_output=True).stdout
    released(up)


def test_a_killed_destination_fails_its_job_naming_it(up: Up) -> None:
    row = up.submit("lost-dest", 200)
    up.wait("lost-dest", lambda r: r["iterations_done"] >= 2, 60)
    kill("agghost dest .*lost-dest/dest.json")
    row = up.wait("lost-dest", lambda r: r["state"] != "running", 30)
    assert row["state"] == "failed"
    assert f"destination {row['hosts'][0]} died" in row["why"]
    assert not subprocess.run(["pgrep", "-f", "lost-dest/"], capture_output=True).stdout
    released(up)


def test_a_link_down_for_five_seconds_costs_time_not_sums(up: Up) -> None:
    row = up.submit("detour", 25)
    up.wait("detour", lambda r: r["iterations_done"] >= 3, 60)
    worker = row["hosts"][-1]  # the last worker: on the far leaf, under a blue switch
    edge = load_topology(LEAFSPINE).host_switch(worker)[0]
    assert up.ask({"op": "link", "a": worker, "b": edge, "up": False})["up"] is False
    time.sleep(5)
    up.ask({"op": "link", "a": worker, "b": edge, "up": True})
    row = up.wait("detour", lambda r: r["state"] != "running", 120)
    assert row["state"] == "done" and row["iterations_done"] == 25, (row["why"], row)
    assert row["sums_exact"] is True and row["retransmissions"] > 0
    lines = [json.loads(x) for x in
             (up.run / "jobs" / "detour" / f"progress-{worker}.jsonl").read_text().splitlines()]
    assert max(x.get("iteration_ms", 0) for x in lines) > 4000  # the iteration it stalled
    released(up)
