"""`innet cassini evaluate --trace --policy`: the live cluster's run predicted by the fluid
model alone, as `innet run cluster` will run it (no BMv2 needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from innet.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "examples" / "trace-cluster-leafspine.json")
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")


def test_the_prediction_per_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SOAR removes the destinations' incast (one message per chunk above the blue leaves),
    so under it every iteration keeps its 240 ms and nothing is marked; all-red, the leaf
    above each destination carries every worker's chunks and the iterations stretch."""
    assert main(["cassini", "evaluate", "--trace", TRACE, "--topology", LEAFSPINE,
                 "--policy", "soar+cassini", "--policy", "base", "--out", str(tmp_path),
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["policies"]
    assert got == json.loads((tmp_path / "cluster-prediction.json").read_text())["policies"]
    both, base = got["soar+cassini"], got["base"]
    assert both["placed"] == base["placed"] == 4
    assert both["mean_iteration_ms"] == pytest.approx(240.0) and both["marks"] == 0
    assert base["mean_iteration_ms"] > 2 * 240 and base["marks"] > 0
    assert both["predicted_cost"] < base["predicted_cost"]
    assert all(j["blue"] for j in both["jobs"]) and not any(j["blue"] for j in base["jobs"])
    # the fourth job waits for hosts: it starts only after one of the first three has left
    assert both["jobs"][3]["ready_s"] > 20 * 0.24


def test_a_policy_needs_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cassini", "evaluate", "--jobs", str(ROOT / "examples" / "jobs-13.json"),
                 "--topology", LEAFSPINE, "--policy", "soar", "--out", str(tmp_path)]) == 2
    assert "give --trace" in capsys.readouterr().err
