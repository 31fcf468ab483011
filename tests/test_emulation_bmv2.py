"""The two experiments end to end on BMv2 switches in Mininet (skipped without them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.emulation.net import _own_leftovers, require_bmv2, require_mininet
from controller.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")
ROOT = Path(__file__).resolve().parent.parent


def test_measured_cost_equals_phi_and_every_sum_is_exact(tmp_path: Path) -> None:
    from controller.emulation.aggregation import run_aggregation

    topo_file = str(ROOT / "topologies" / "bt15.json")
    results = run_aggregation(topo_file, tmp_path, strategies=("soar", "top", "all-red"), k=4,
                              values=20 * 32 + 5, progress=False)
    assert [r.strategy for r in results] == ["soar", "top", "all-red"]
    for r in results:
        assert r.sums_exact, r
        assert (r.values, r.chunks, r.retransmissions) == (645, 21, 0), r
        assert r.measured_cost == pytest.approx(r.predicted_cost), r
        assert r.events["emitted"] == 21 * len(r.blue) and r.events["stale"] == 0
        # the egress counters saw exactly the messages SOAR's model predicts on every uplink
        assert {s: n // r.rounds for s, n in r.link_packets.items()} == r.predicted_msgs
    soar, top, red = results
    assert soar.predicted_cost < red.predicted_cost and soar.predicted_cost <= top.predicted_cost
    saved = json.loads((tmp_path / "results.json").read_text())
    for entry in saved:
        for key in ("strategy", "k", "blue", "rounds", "predicted_cost", "measured_cost",
                    "sums_exact", "values", "chunks", "retransmissions", "duration_s",
                    "goodput_values_per_s", "events"):
            assert key in entry
    assert (tmp_path / "aggregation.png").exists() and (tmp_path / "summary.md").exists()
    assert _own_leftovers(load_topology(topo_file)) == []


def test_cassini_shifts_reduce_ce_marks(tmp_path: Path) -> None:
    from controller.emulation.cassini_run import run_cassini

    topo_file = str(ROOT / "topologies" / "leafspine24.json")
    result = run_cassini(topo_file, str(ROOT / "examples" / "jobs-vgg19-pair-leafspine.json"),
                         tmp_path, iterations=8, progress=False)
    plain, shifted = result["runs"]
    assert plain["label"] == "no shifts" and shifted["label"] == "cassini"
    assert result["plan"]["shifts_ms"]["vgg19-b"] == pytest.approx(120.0)
    ce_plain = sum(plain["ce_received"].values())
    ce_shifted = sum(shifted["ce_received"].values())
    assert ce_plain > 0 and ce_shifted < ce_plain
    assert shifted["switch_marks"] < plain["switch_marks"]
    assert (tmp_path / "cassini.png").exists()
    assert _own_leftovers(load_topology(topo_file)) == []
