"""The fluid evaluator: max-min stretching, marks, agents, and CASSINI's gain."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.cassini.model.geometry import best_shifts
from innet.cassini.model.profiles import load_jobs, single_phase_job
from innet.cassini.placement.scheduler import schedule
from innet.cassini.sim.fluid import MAX_EVENTS, FluidConfig
from innet.cassini.sim.steady import check_bound, run_bound, simulate, single_link
from innet.errors import InputError
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[3]
SHORT = FluidConfig(iterations=20)


def test_a_job_alone_below_capacity_runs_at_its_own_pace_without_marks() -> None:
    job = single_phase_job("a", 100, 30, 50, 40)
    traffic, capacity = single_link([job], 50)
    run = simulate([job], traffic, capacity, {}, SHORT)
    assert run.jobs[0].iterations_ms == pytest.approx([100.0] * 20)
    assert run.marks == 0 and run.links[0].excess_mbit == 0


def test_colliding_up_phases_share_max_min_and_stretch() -> None:
    a = single_phase_job("a", 100, 50, 50, 40)
    b = single_phase_job("b", 100, 50, 50, 40)
    traffic, capacity = single_link([a, b], 50)
    run = simulate([a, b], traffic, capacity, {}, SHORT)
    # 50 ms x 40 Gbps at 25 Gbps each: 80 ms; plus 50 ms of compute
    for job in run.jobs:
        assert job.iterations_ms == pytest.approx([130.0] * 20)
        assert job.marks > 0
    # the link sends at capacity while its queue is above the threshold: about 80 ms each time
    per_iteration = run.marks / 20 * 1500 * 8 / 1e6 / 50  # ms above threshold
    assert per_iteration == pytest.approx(80.0, rel=0.01)
    # a small job and a big one: the small one gets all it wants, the big one the rest
    c = single_phase_job("c", 100, 50, 50, 10)
    traffic, capacity = single_link([a, c], 50)
    run = simulate([a, c], traffic, capacity, {}, SHORT)
    assert [j.mean_ms for j in run.jobs] == pytest.approx([100.0, 100.0])


def test_hops_weigh_a_jobs_share_and_unrelated_links_do_not_interfere() -> None:
    a = single_phase_job("a", 100, 50, 50, 40)
    b = single_phase_job("b", 100, 50, 50, 40)
    traffic = {"x": {"a": 2}, "y": {"b": 1}}
    run = simulate([a, b], traffic, {"x": 50.0, "y": 50.0}, {}, SHORT)
    # a crosses x twice: 2 r <= 50, so r = 25 and its 50 ms Up phase takes 80 ms
    assert run.jobs[0].mean_ms == pytest.approx(130.0)
    assert run.jobs[1].mean_ms == pytest.approx(100.0)


def test_vgg19_pair_gains_with_cassinis_shift() -> None:
    jobs = load_jobs(ROOT / "examples" / "jobs-vgg19-pair.json")
    solution = best_shifts(jobs, 50)
    traffic, capacity = single_link(jobs, 50)
    base = simulate(jobs, traffic, capacity, {}, SHORT, "base")
    cassini = simulate(jobs, traffic, capacity, solution.shift_map(), SHORT, "cassini")
    base_mean, base_p99 = base.summary(False)
    mean, p99 = cassini.summary(False)
    assert mean == pytest.approx(240.0) and p99 == pytest.approx(240.0)
    assert base_mean / mean > 1.2 and base_p99 / p99 > 1.2
    assert cassini.marks == 0 < base.marks


def test_13_job_leaf_spine_scenario_gains() -> None:
    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    result = schedule(topo, load_jobs(ROOT / "examples" / "jobs-13.json"))
    config = FluidConfig(iterations=40)
    runs = {p.mode: simulate(p.jobs, p.traffic, p.capacity_gbps, p.shifts_ms, config, p.mode)
            for p in (result.base, result.cassini)}
    base_mean, base_p99 = runs["base"].summary(True)
    mean, p99 = runs["cassini"].summary(True)
    assert base_mean / mean > 1.02
    assert base_p99 / p99 > 1.1
    assert runs["cassini"].marks < 0.8 * runs["base"].marks


def test_agents_realign_late_jobs_and_leave_punctual_ones_alone() -> None:
    a = single_phase_job("a", 100, 50, 50, 40)
    b = single_phase_job("b", 100, 50, 50, 40)
    traffic, capacity = single_link([a, b], 50)
    agents = FluidConfig(iterations=20, realign_pct=5.0)
    # interleaved: nobody is late
    calm = simulate([a, b], traffic, capacity, {"b": 50.0}, agents)
    assert all(j.realignments == 0 for j in calm.jobs)
    assert [j.mean_ms for j in calm.jobs] == pytest.approx([100.0, 100.0])
    # colliding: 30 ms late each time, so each iteration waits for the next slot
    late = simulate([a, b], traffic, capacity, {}, agents)
    assert all(j.realignments > 0 for j in late.jobs)
    assert all(t % 100 == pytest.approx(0, abs=1e-6) for t in late.jobs[0].iterations_ms)


def test_bad_settings_are_refused() -> None:
    job = single_phase_job("a", 100, 30, 50, 40)
    traffic, capacity = single_link([job], 50)
    with pytest.raises(InputError, match="iterations"):
        simulate([job], traffic, capacity, {}, FluidConfig(iterations=0))
    with pytest.raises(InputError, match="threshold"):
        simulate([job], traffic, capacity, {}, FluidConfig(threshold_kb=5000))


def test_realignment_grid_is_the_common_period_with_partners() -> None:
    """A 180 ms job sharing a link with a 300 ms one keeps its interleaving modulo
    gcd = 60 ms, so a late iteration waits for the next 60 ms point, not for its own next
    slot; the budget caps any single wait."""
    from innet.cassini.sim.fluid import realign_grid

    a = single_phase_job("a", 180, 110, 70, 40)
    b = single_phase_job("b", 300, 180, 120, 42)
    c = single_phase_job("c", 300, 180, 120, 42)
    assert realign_grid([a, b], {"x": {"a": 1, "b": 1}}) == {"a": 60.0, "b": 60.0}
    assert realign_grid([a, b, c], {"x": {"a": 1, "b": 1}, "y": {"b": 1, "c": 1}}) == {
        "a": 60.0, "b": 300.0, "c": 300.0}
    assert realign_grid([a], {"x": {"a": 1}}) == {"a": 180.0}
    traffic, capacity = single_link([a, b], 50)
    run = simulate([a, b], traffic, capacity, {}, FluidConfig(iterations=30, realign_pct=5.0))
    longest = max(t for j in run.jobs for t in j.iterations_ms)
    assert longest <= 300 + 60 + 1e-6  # the old own-slot rule made these 600 ms
    assert any(j.realignments for j in run.jobs)
    capped = simulate([a, b], traffic, capacity, {},
                      FluidConfig(iterations=30, realign_pct=5.0, realign_budget_pct=1.0))
    for job in capped.jobs:  # a wait is at most 1% of T
        stretch = simulate([a, b], traffic, capacity, {}, FluidConfig(iterations=30))
        assert job.p99_ms <= max(j.p99_ms for j in stretch.jobs) + 0.01 * 300 + 1e-6


def test_a_tiny_capacity_is_simulated_exactly() -> None:
    """--capacity 0.01 is in the documented range: 2,000 Mbit each at 0.005 Gbps takes
    400 s, plus 50 ms of compute (it raised "does not progress" once)."""
    a = single_phase_job("a", 100, 50, 50, 40)
    b = single_phase_job("b", 100, 50, 50, 40)
    traffic, capacity = single_link([a, b], 0.01)
    run = simulate([a, b], traffic, capacity, {}, FluidConfig(iterations=3))
    for job in run.jobs:
        assert job.iterations_ms == pytest.approx([400_050.0] * 3)
    bound = run_bound([a, b], traffic, capacity, 3)
    assert bound.span_ms >= run.duration_ms
    assert bound.slowest_ms >= 400_050.0


def test_runs_past_the_models_limits_are_refused_up_front() -> None:
    a = single_phase_job("a", 100, 50, 50, 40)
    b = single_phase_job("b", 100, 50, 50, 40)
    traffic, capacity = single_link([a, b], 1e-9)  # an iteration would last 127 years
    with pytest.raises(InputError, match=r"too small to simulate: an iteration of a may last "):
        simulate([a, b], traffic, capacity, {}, FluidConfig(iterations=3))
    # a 1 ms job next to one that 0.01 Gbps slows to 400 s: millions of steps
    fast = single_phase_job("fast", 1, 0.5, 0.5, 0.001)
    traffic, capacity = single_link([a, fast], 0.01)
    bound = run_bound([a, fast], traffic, capacity, 20)
    assert bound.events > MAX_EVENTS
    with pytest.raises(InputError, match=r"would take up to .* steps .* without --force"):
        simulate([a, fast], traffic, capacity, {}, FluidConfig(iterations=20))
    check_bound(bound, FluidConfig(iterations=20, force=True))  # --force lifts the step limit
