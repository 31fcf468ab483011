"""`innet run cluster` on BMv2 in Mininet, small: two jobs of a trace, the second arriving
while the first runs, under SOAR+CASSINI and the base. Every iteration of every job ends
with exact sums; SOAR's cost measured by the switches' counters equals the plans' phi for
what was sent; the fluid model predicts each policy; results.json, the plots and the
summary are written. (The four-job, four-policy trace is a benchmark:
benchmarks/cluster_trace.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
LEAFSPINE = ROOT / "topologies" / "leafspine24.json"
TRACE = {"trace": "cluster", "description": "two jobs, the second while the first runs",
         "jobs": [{"name": "vgg19-1", "model": "VGG19", "gpus": 4, "arrival_ms": 0.0,
                   "iterations": 5},
                  {"name": "gpt-2-2", "model": "GPT-2", "gpus": 3, "arrival_ms": 300.0,
                   "iterations": 5}]}


def test_a_trace_runs_under_two_policies_with_exact_sums_and_costs(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(TRACE))
    out = tmp_path / "run"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "innet.cli", "run", "cluster", "--topology", str(LEAFSPINE),
             "--trace", str(trace), "--policy", "soar+cassini", "--policy", "base", "--out",
             str(out), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout)
        assert answer["ok"] and list(answer["policies"]) == ["soar+cassini", "base"]
        saved = json.loads((out / "results.json").read_text())["policies"]
        for policy, run in saved.items():
            assert [j["name"] for j in run["jobs"]] == ["vgg19-1", "gpt-2-2"]
            for j in run["jobs"]:
                assert j["state"] == "done" and j["iterations_done"] == 5, (policy, j)
                assert j["sums_exact"] is True and len(j["iteration_ms"]) == 5
                assert j["jct_s"] > 0  # workers: the trace's GPUs; one more host: destination
                assert len(j["hosts"]) == {"vgg19-1": 5, "gpt-2-2": 4}[j["name"]]
            assert run["measured_cost"] == pytest.approx(run["predicted_cost"], rel=1e-9)
            # per job, from the counters read whenever the running set changed: these two
            # jobs' trees send through no common port
            for j in run["jobs"]:
                assert j["measured_cost"] == pytest.approx(j["predicted_cost"], rel=1e-9), j
            assert run["fluid"]["mean_iteration_ms"] > 0
        assert all(j["blue"] for j in saved["soar+cassini"]["jobs"])
        assert not any(j["blue"] for j in saved["base"]["jobs"])
        for name in ("cluster.png", "timeline.png", "summary.md"):
            assert (out / name).stat().st_size > 0
    finally:
        assert own_leftovers(load_topology(str(LEAFSPINE))) == []
