"""The two experiments end to end on BMv2 switches in Mininet (skipped without them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]


def _check_cost(r: Any) -> None:
    """Every uplink's first transmissions are exactly the messages SOAR's model predicts per
    chunk, whatever BMv2 or the fault injection dropped and the workers sent again: the
    switches count what they send again apart. Nothing is sent again without a
    retransmission."""
    assert r.link_packets == {s: r.predicted_msgs[s] * r.rounds for s in r.link_packets}, r
    assert r.cost_matches, r
    assert r.total_cost >= r.measured_cost
    if r.retransmissions == 0:
        assert sum(r.link_repeats.values()) == 0, r


def test_measured_cost_equals_phi_and_every_sum_is_exact(tmp_path: Path) -> None:
    from innet.emulation.aggregation import AggregationRunOptions, run_aggregation

    topo_file = str(ROOT / "topologies" / "bt15.json")
    results = run_aggregation(AggregationRunOptions(
        topo_file, strategies=("soar", "top", "all-red"), k=4, values=20 * 32 + 5,
        progress=False), tmp_path)
    assert [r.strategy for r in results] == ["soar", "top", "all-red"]
    for r in results:
        assert r.sums_exact, r
        assert (r.values, r.chunks, r.rounds) == (645, 21, 21), r
        assert r.events["emitted"] == 21 * len(r.blue), r
        _check_cost(r)
    soar, top, red = results
    assert soar.predicted_cost < red.predicted_cost and soar.predicted_cost <= top.predicted_cost
    saved = json.loads((tmp_path / "results.json").read_text())
    for entry in saved:
        for key in ("strategy", "k", "blue", "rounds", "predicted_cost", "measured_cost",
                    "total_cost", "sums_exact", "values", "chunks", "retransmissions",
                    "duration_s", "goodput_values_per_s", "events", "link_repeats"):
            assert key in entry
    assert (tmp_path / "aggregation.png").exists() and (tmp_path / "summary.md").exists()
    assert own_leftovers(load_topology(topo_file)) == []


def test_with_loss_every_strategy_measures_phi_exactly(tmp_path: Path) -> None:
    """5% of the aggregation packets dropped at every switch: every strategy still measures
    its phi exactly on the uplinks, and what was sent again shows as overhead."""
    from innet.emulation.aggregation import (
        DEFAULT_STRATEGIES,
        AggregationRunOptions,
        run_aggregation,
    )

    topo_file = str(ROOT / "topologies" / "bt15.json")
    results = run_aggregation(AggregationRunOptions(topo_file, k=4, values=20 * 32, loss=0.05,
                                                    progress=False), tmp_path)
    assert [r.strategy for r in results] == list(DEFAULT_STRATEGIES)
    for r in results:
        assert r.sums_exact, r
        _check_cost(r)
        assert r.events["fault_drop"] > 0 and r.retransmissions > 0, r
    assert sum(r.total_cost - r.measured_cost for r in results) > 0
    _check_folder_views(tmp_path, results)
    assert own_leftovers(load_topology(topo_file)) == []


def _check_folder_views(folder: Path, results: list[Any]) -> None:
    """`innet view` of the run folder draws, per strategy, its blue set and on every uplink
    the packets the switches counted there (first and sent again)."""
    from innet.view.folder import folder_summary

    views = folder_summary(folder)["views"]
    assert [v["label"] for v in views] == [r.strategy for r in results]
    for r, v in zip(results, views, strict=True):
        assert v["blue"] == sorted(r.blue) and v["notes"] == [], v
        assert {row["from"]: row["packets"] for row in v["loads"]} == {
            s: n + r.link_repeats[s] for s, n in r.link_packets.items()}


def test_in_the_link_bound_regime_the_busiest_link_sets_the_pace(tmp_path: Path) -> None:
    """--link-pps: the switches' ports drain at the links' rates (BMv2 queue rates). All red
    on bt15, s1's uplink to the destination carries 16 messages per chunk at 200 packets/s;
    BMv2 spaces a rate-limited queue's packets by 1 / rate, so the stream cannot end before
    that link has drained them all (it takes about a tenth of that without rates)."""
    from innet.emulation.aggregation import AggregationRunOptions, run_aggregation

    topo_file = str(ROOT / "topologies" / "bt15.json")
    (r,) = run_aggregation(AggregationRunOptions(topo_file, strategies=("all-red",), k=4,
                                                 values=32 * 32, link_pps=200, progress=False),
                           tmp_path)
    assert r.sums_exact, r
    _check_cost(r)
    assert (r.bottleneck_switch, r.bottleneck_messages, r.bottleneck_pps) == ("s1", 16, 200)
    sent = r.link_packets["s1"] + r.link_repeats["s1"]
    assert sent >= 32 * 16 and r.duration_s >= (sent - 1) / 200, r
    summary = (tmp_path / "summary.md").read_text()
    assert "Link-bound regime: the fastest link drains 200 packets/s" in summary
    assert own_leftovers(load_topology(topo_file)) == []


def test_cassini_cuts_ce_marks_and_the_tail_against_the_base(tmp_path: Path) -> None:
    """Four zoo jobs, three arms on the same hosts; results.json has per arm the CE marks at
    receivers and switches and the mean and p99 iteration times."""
    from innet.emulation.cassini_run import CassiniRunOptions, run_cassini

    topo_file = str(ROOT / "topologies" / "leafspine24.json")
    result = run_cassini(CassiniRunOptions(topo_file,
                                           str(ROOT / "examples" / "jobs-4-leafspine.json"),
                                           iterations=8, progress=False), tmp_path).to_dict()
    base, shifted, cassini = result["runs"]
    assert [r["label"] for r in result["runs"]] == ["base", "base+shifts", "cassini"]
    assert result["plans"]["cassini"]["shifts_ms"]["vgg19-b"] == pytest.approx(120.0)
    assert result["plans"]["base"]["placement"] != result["plans"]["cassini"]["placement"]
    assert shifted["placement"] == base["placement"] and any(shifted["shifts_ms"].values())
    for run in result["runs"]:
        assert {"ce_received", "switch_marks", "mean_ms", "p99_ms", "ce_total"} <= set(run)
        assert sum(run["packets_sent"].values()) > 0
        # the links' loads (what `innet view` draws) are the switches' own counts: every
        # mark at some link's egress, every packet a host sent on its link to its switch
        links = run["links"]
        assert sum(k["marks_ab"] + k["marks_ba"] for k in links) == run["switch_marks"]
        hosts = load_topology(topo_file).hosts
        from_hosts = sum(k["packets_ab"] if k["a"] in hosts else k["packets_ba"]
                         for k in links if k["a"] in hosts or k["b"] in hosts)
        assert from_hosts >= sum(run["packets_sent"].values())
    seen = "; ".join(f"{r['label']}: CE {r['ce_total']}, switch marks {r['switch_marks']}, "
                     f"p99 {r['p99_ms']:.0f} ms, realigned {r.get('realigned')}, "
                     f"unacked {r.get('unacked')}" for r in result["runs"])
    assert base["ce_total"] > 0 and cassini["ce_total"] * 10 <= base["ce_total"], seen
    assert cassini["switch_marks"] * 10 <= base["switch_marks"], seen
    assert cassini["p99_ms"] < base["p99_ms"], seen
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["label"] for r in saved["runs"]] == ["base", "base+shifts", "cassini"]
    assert (tmp_path / "cassini.png").exists() and (tmp_path / "summary.md").exists()
    assert own_leftovers(load_topology(topo_file)) == []


def test_a_switch_restarted_blank_mid_experiment_is_restored(tmp_path: Path) -> None:
    """The experiment runs on the long-running controller: s4 (blue under SOAR, k = 4) is
    killed and started again without a program between two plans; the controller loads it
    again and the next plan's sums and costs are exact."""
    from innet.emulation.aggregation import AggregationRunOptions, run_aggregation

    restarted: list[str] = []

    def restart_s4(run: Any, strategy: str) -> None:
        if strategy != "top":
            return
        sw = run.switch("s4")
        sw.proc.kill()
        sw.proc.wait(5)
        sw.start([])  # simple_switch_grpc --no-p4 again, on the same interfaces and ports
        restarted.append(strategy)

    topo_file = str(ROOT / "topologies" / "bt15.json")
    results = run_aggregation(AggregationRunOptions(topo_file, strategies=("soar", "top"), k=4,
                                                    values=10 * 32, progress=False),
                              tmp_path, before_plan=restart_s4)
    assert restarted == ["top"]
    for r in results:
        assert r.sums_exact, r
        _check_cost(r)
    text = (tmp_path / "logs" / "controller.log").read_text()
    assert "s4: stream lost" in text and "s4: program loaded again" in text
    assert own_leftovers(load_topology(topo_file)) == []
