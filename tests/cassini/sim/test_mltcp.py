"""MLTCP on the ns-3 engine: its window rule, its place beside DCTCP, and the policies that
use it (docs/cassini-mltcp.md).

The runs need the ns3 wheel, g++ and nlohmann-json; without them these tests skip with the
reason (and fail under INNET_REQUIRE_P4=1, as in CI).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ns3_helpers import needs_ns3

from innet.cassini.experiments.evaluation import evaluate_link
from innet.cassini.experiments.settings import EvaluationSettings
from innet.cassini.experiments.trace_sweep import (
    TraceDraw,
    TraceFigures,
    summarise_traces,
    trace_sweep_text,
)
from innet.cassini.experiments.traces import Trace
from innet.cassini.model.profiles import load_jobs
from innet.cassini.placement.scheduler import PlannerSettings
from innet.cassini.sim.engine import FluidEngine
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.ns3 import (
    Ns3Engine,
    Ns3Settings,
    build_config,
    build_program,
    link_run,
    run_config,
    transfers_config,
)
from innet.cli import main
from innet.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
PAIR = ROOT / "examples" / "jobs-vgg19-pair.json"  # two VGG19: 240 ms, Up 150-240 ms at 44 Gbps
LEAFSPINE = ROOT / "topologies" / "leafspine24.json"


def _two_transfers(transport: Ns3Settings, late_ms: float) -> dict[str, Any]:
    """Two jobs on one link, each sending 2 MB at the link's rate: A starts at 0, B
    `late_ms` later (A is then about half through its bytes); samples every 10 ms."""
    cfg = transfers_config(load_jobs(PAIR), 50.0, (0.0, late_ms), 2_000_000, transport)
    raw = run_config(build_program(), cfg, 60.0)
    assert raw["complete"]
    return raw


def _share_of_a(raw: dict[str, Any], start: int, end: int) -> float:
    """A's share of what both jobs' left-to-right flows delivered in samples [start, end)."""
    a, b = (j["flow_samples"][0] for j in raw["jobs"])
    got_a, got_b = a[end] - a[start], b[end] - b[start]
    assert got_a > 0 and got_b > 0  # both send all along the window
    return got_a / (got_a + got_b)


@needs_ns3
def test_the_flow_further_into_its_iteration_gets_the_larger_share() -> None:
    """B starts when A has delivered about half its iteration's bytes. From 30 ms after B's
    start (both windows cut by then) to 280 ms (A still sending), MLTCP gives A, whose F is
    larger all along, a larger share than DCTCP does, and clearly more than half."""
    late = 80.0
    start, end = 11, 28  # samples: 110 ms to 280 ms after the epoch
    dctcp = _share_of_a(_two_transfers(Ns3Settings(), late), start, end)
    mltcp_raw = _two_transfers(Ns3Settings(transport="mltcp"), late)
    assert mltcp_raw["transport"] == "mltcp"
    mltcp = _share_of_a(mltcp_raw, start, end)
    assert mltcp > 0.6
    assert mltcp > dctcp + 0.05
    # and so A leaves the link sooner than under DCTCP: its 2 MB are in by an earlier sample
    a_dctcp = _two_transfers(Ns3Settings(), late)["jobs"][0]["flow_samples"][0]
    a_mltcp = mltcp_raw["jobs"][0]["flow_samples"][0]
    assert a_mltcp.index(2_000_000) < a_dctcp.index(2_000_000)


@needs_ns3
def test_mltcp_with_an_aggressiveness_of_one_is_dctcp_to_the_packet() -> None:
    """F = 0 r + 1 weighs every acknowledged segment 1: MLTCP's increase is then Linux
    Reno's (DCTCP's) step for step, so the colliding pair runs exactly as under DCTCP."""
    jobs = load_jobs(PAIR)
    config = FluidConfig(iterations=4).without_agents()
    dctcp = Ns3Engine().link(jobs, 50.0, {}, config, "base")
    flat = Ns3Engine(Ns3Settings(transport="mltcp", mltcp_slope=0.0, mltcp_intercept=1.0))
    same = flat.link(jobs, 50.0, {}, config, "base")
    assert [j.iterations_ms for j in same.jobs] == [j.iterations_ms for j in dctcp.jobs]
    assert same.marks == dctcp.marks > 0
    # and the default rule changes the run (the test above says how)
    mltcp = Ns3Engine(Ns3Settings(transport="mltcp")).link(jobs, 50.0, {}, config, "base")
    assert [j.iterations_ms for j in mltcp.jobs] != [j.iterations_ms for j in dctcp.jobs]


@needs_ns3
def test_the_policies_are_arms_beside_base_and_cassini() -> None:
    """mltcp measures the base's (unshifted) plan with MLTCP, cassini+mltcp CASSINI's shifted
    one; CASSINI's gain is still against the base, whatever follows it."""
    jobs = load_jobs(PAIR)
    settings = EvaluationSettings(PlannerSettings(precision_deg=5.0), Ns3Engine(),
                                  FluidConfig(iterations=3), ("mltcp", "cassini+mltcp"))
    ev = evaluate_link(jobs, 50.0, settings)
    assert [a.label for a in ev.arms] == ["base", "cassini", "mltcp", "cassini+mltcp"]
    assert ev.cassini.label == "cassini"
    base, _, mltcp, both = ev.arms
    assert mltcp.score == base.score  # the same plan, another transport
    assert mltcp.run.marks > 0  # unshifted, the pair still collides
    assert both.run.marks == 0  # CASSINI's shifts keep them apart: MLTCP has nothing to do
    assert ev.gain.mean == pytest.approx(base.run.summary(False)[0]
                                         / ev.cassini.run.summary(False)[0])


def test_the_fluid_model_refuses_mltcp_and_settings_refuse_unknown_policies() -> None:
    with pytest.raises(InputError, match="needs --engine ns3"):
        FluidEngine().with_transport("mltcp")
    assert FluidEngine().with_transport("dctcp") == FluidEngine()
    with pytest.raises(InputError, match="unknown policy 'bbr'"):
        EvaluationSettings(policies=("bbr",))
    with pytest.raises(InputError, match="transport must be one of dctcp, mltcp"):
        Ns3Settings(transport="cubic").check()
    with pytest.raises(InputError, match="intercept > 0"):
        Ns3Settings(transport="mltcp", mltcp_intercept=0.0).check()


def test_the_config_names_the_senders_transport() -> None:
    network, run = link_run(load_jobs(PAIR), 50.0, {}, "t")
    plain = build_config(network, run, FluidConfig(iterations=1), Ns3Settings(), 1000.0)
    assert plain["transport"] == {"cc": "dctcp"}
    mltcp = build_config(network, run, FluidConfig(iterations=1),
                         Ns3Settings(transport="mltcp", mltcp_slope=2.0), 1000.0)
    assert mltcp["transport"] == {"cc": "mltcp", "slope": 2.0, "intercept": 1.0}


@needs_ns3
def test_the_program_refuses_an_unknown_transport() -> None:
    network, run = link_run(load_jobs(PAIR), 50.0, {}, "t")
    cfg = build_config(network, run, FluidConfig(iterations=1), Ns3Settings(), 1000.0)
    cfg["transport"] = {"cc": "bbr"}
    with pytest.raises(RuntimeError, match=r"transport\.cc: expected 'dctcp' or 'mltcp'"):
        run_config(build_program(), cfg, 60.0)


def _figures(jct: float, marks: float = 0.0) -> TraceFigures:
    return TraceFigures(jct, jct, 1.0, 1.0, marks, 0)


def test_a_sweep_summary_reports_each_policy_and_its_own_losses() -> None:
    """Two draws: MLTCP 10% slower than the base in draw 1 (a loss of its own, not
    CASSINI's), as fast in draw 0; its geometric mean and marks beside CASSINI's."""
    trace = Trace("snapshot", ())
    draws = [TraceDraw(i, trace, {"base": _figures(100.0, 10), "base+shifts": _figures(100.0),
                                  "cassini": _figures(100.0),
                                  "mltcp": _figures(100.0 if i == 0 else 110.0, 5)},
                       (90.0, 90.0), {}) for i in range(2)]
    summary = summarise_traces(draws)
    assert summary["policies"] == ["mltcp"]
    assert summary["mltcp"]["worse_draw_indices"] == [1]
    assert summary["worse_draws"] == 0
    assert summary["mltcp"]["jct_mean_ms"] == pytest.approx((100 / 110) ** 0.5)
    assert summary["mltcp"]["marks_ratio"] == pytest.approx(2.0)
    line = next(x for x in trace_sweep_text(draws, summary).splitlines() if "mltcp:" in x)
    assert "marks 2x fewer (10)" in line and "worse than the base in 1 draws" in line
    louder = [replace(d, arms=d.arms | {"mltcp": _figures(100.0, 40)}) for d in draws]
    assert "marks 4x more (80)" in trace_sweep_text(louder, summarise_traces(louder))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_mltcp_options_are_refused_in_one_line_where_they_cannot_apply(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = ["cassini", "evaluate", "--jobs", str(PAIR), "--capacity", "50", "--out",
            str(tmp_path)]
    code, err = _cli(capsys, *base, "--policy", "mltcp")
    assert code == 2 and "needs --engine ns3" in err and len(err.strip().splitlines()) == 1
    code, err = _cli(capsys, *base, "--mltcp-slope", "2")
    assert code == 2 and "--engine ns3 only" in err and len(err.strip().splitlines()) == 1
    code, err = _cli(capsys, "cassini", "sweep", "--topology", str(LEAFSPINE), "--jobs",
                     str(ROOT / "examples" / "jobs-13.json"), "--draws", "1", "--out",
                     str(tmp_path), "--policy", "mltcp")
    assert code == 2 and "trace sweeps" in err and len(err.strip().splitlines()) == 1
