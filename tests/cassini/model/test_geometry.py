"""One link: the unified circle, the score, and the best-shift search against an oracle."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from innet.cassini.model.geometry import (
    best_shifts,
    demand_curve,
    score_at,
    unified_circle,
)
from innet.cassini.model.profiles import JobProfile, Phase, single_phase_job, zoo_job
from innet.errors import InputError


def test_half_on_half_off_at_capacity_interleave_perfectly_with_half_a_shift() -> None:
    a = single_phase_job("a", 100, 0, 50, 50)
    b = single_phase_job("b", 100, 0, 50, 50)
    solution = best_shifts([a, b], 50)
    assert solution.score == pytest.approx(1.0, abs=1e-9)
    assert solution.shifts_ms == pytest.approx((0.0, 50.0))
    assert solution.score_unshifted < 1.0
    assert solution.score_unshifted == pytest.approx(0.5, abs=1e-9)  # excess 50 half the time
    assert score_at([a, b], {"a": 0, "b": 0}, 50) == pytest.approx(0.5, abs=1e-9)
    assert score_at([a, b], {"a": 0, "b": 25}, 50) == pytest.approx(0.75, abs=1e-9)


def test_jobs_that_never_exceed_capacity_score_1_at_every_shift() -> None:
    jobs = [single_phase_job("a", 100, 10, 60, 20), single_phase_job("b", 150, 0, 90, 15),
            single_phase_job("c", 60, 30, 30, 10)]
    assert best_shifts(jobs, 50).score == 1.0
    for s_b, s_c in itertools.product(range(0, 150, 7), range(0, 60, 11)):
        assert score_at(jobs, {"b": s_b, "c": s_c}, 50) == pytest.approx(1.0, abs=1e-12)


def test_40_and_60_ms_jobs_share_a_120_ms_circle() -> None:
    circle = unified_circle([40, 60])
    assert circle.period_ms == 120 and circle.exact and circle.warning is None
    # 5 degrees of the shorter iteration: 72 steps per 40 ms
    assert circle.step_ms == pytest.approx(40 / 72) and circle.samples == 216
    a = single_phase_job("a", 40, 0, 10, 30)
    b = single_phase_job("b", 60, 0, 20, 30)
    ca, cb = demand_curve(a, circle, 40), demand_curve(b, circle, 60)
    assert np.allclose(ca, np.roll(ca, 72)) and np.allclose(cb, np.roll(cb, 108))  # 3 and 2 laps
    assert ca.sum() * circle.step_ms == pytest.approx(3 * 10 * 30)  # volume is kept


def test_circle_rounds_then_caps_with_a_warning() -> None:
    assert unified_circle([40.4, 59.7]).period_ms == 120  # rounded to 1 ms first
    capped = unified_circle([199, 211])  # LCM 41989 ms > 100 x 211 ms
    assert not capped.exact and capped.period_ms == 211
    assert capped.warning is not None and "41989" in capped.warning
    assert unified_circle([199, 211], cap_factor=1000).period_ms == 41989
    assert unified_circle([100], precision_deg=10).samples == 36
    with pytest.raises(InputError, match="precision"):
        unified_circle([100], precision_deg=0)
    with pytest.raises(InputError, match="capacity"):
        best_shifts([single_phase_job("a", 100, 0, 50, 50)], 0)


def test_vgg19_pair_gets_the_papers_120_ms_shift() -> None:
    a, b = zoo_job("VGG19", "a"), zoo_job("VGG19", "b")
    solution = best_shifts([a, b], 50)
    assert solution.score == 1.0 and solution.shifts_ms == (0.0, 120.0)
    # of all the shifts that interleave perfectly, it takes the middle of the plateau
    assert solution.score_unshifted < 0.8


# ------------------------------------------------------------------------- exhaustive oracle


def oracle(jobs: list[JobProfile], capacity: float, step: float,
           period: float) -> tuple[float, dict[tuple[int, ...], float]]:
    """Every combination of grid shifts, demand point-sampled at bin centres (exact when the
    phases sit on the grid), score by the definition."""
    n = round(period / step)
    centres = (np.arange(n) + 0.5) * step
    counts = [math.ceil(j.iteration_ms / step - 1e-9) for j in jobs]
    scores = {}
    for combo in itertools.product(*(range(c) for c in counts[1:])):
        shifts = (0, *combo)
        demand = np.zeros(n)
        for job, m in zip(jobs, shifts, strict=True):
            demand += np.array([job.demand_at(t - m * step) for t in centres])
        scores[shifts] = 1 - np.maximum(demand - capacity, 0).mean() / capacity
    return max(scores.values()), scores


def random_job(rng: np.random.Generator, name: str, step: float) -> JobProfile:
    period = float(rng.choice([60.0, 90.0, 120.0]))
    slots = round(period / step)
    phases: list[Phase] = []
    start = int(rng.integers(0, slots // 3))
    while start < slots - 1 and len(phases) < 3:
        length = int(rng.integers(1, max(2, slots // 3)))
        length = min(length, slots - start)
        phases.append(Phase(start * step, length * step, float(rng.integers(10, 45))))
        start += length + int(rng.integers(1, 4))
    return JobProfile(name, period, tuple(phases))


@pytest.mark.parametrize("seed", range(6))
def test_search_matches_the_exhaustive_oracle_on_small_grids(seed: int) -> None:
    rng = np.random.default_rng(seed)
    step = 5.0  # 30 degrees of a 60 ms iteration
    k = 2 if seed < 3 else 3
    jobs = [random_job(rng, f"j{i}", step) for i in range(k)]
    jobs[0] = JobProfile("j0", 60.0, jobs[0].phases if jobs[0].iteration_ms == 60 else
                         (Phase(10, 20, 40),))
    capacity = 50.0
    solution = best_shifts(jobs, capacity, precision_deg=30)
    assert solution.circle.step_ms == pytest.approx(step)
    best, table = oracle(jobs, capacity, step, solution.circle.period_ms)
    assert solution.method in ("exhaustive", "trivial")
    assert solution.score == pytest.approx(best, abs=1e-9)
    chosen = tuple(round(s / step) for s in solution.shifts_ms)
    assert table.get(chosen, 1.0 if solution.method == "trivial" else -9) == pytest.approx(
        solution.score, abs=1e-9)
    # the same search by coordinate descent: exact with one free job (its line search is
    # exhaustive), never above the optimum and close to it with two, and always honest
    descent = best_shifts(jobs, capacity, precision_deg=30, exhaustive_cells=0)
    if solution.method == "exhaustive":
        assert descent.method == "descent"
        again = tuple(round(s / step) for s in descent.shifts_ms)
        assert table[again] == pytest.approx(descent.score, abs=1e-9)
        assert descent.score <= best + 1e-9
        assert descent.score >= (best - 1e-9 if k == 2 else best - 0.01)


def test_descent_on_four_jobs_never_beats_the_oracle_and_scores_what_it_claims() -> None:
    rng = np.random.default_rng(42)
    step = 5.0
    jobs = [JobProfile("j0", 60.0, (Phase(0, 25, 40),))]
    jobs += [random_job(rng, f"j{i}", step) for i in range(1, 4)]
    solution = best_shifts(jobs, 60.0, precision_deg=30, exhaustive_cells=0)
    best, table = oracle(jobs, 60.0, step, solution.circle.period_ms)
    chosen = tuple(round(s / step) for s in solution.shifts_ms)
    assert solution.score <= best + 1e-9
    assert table[chosen] == pytest.approx(solution.score, abs=1e-9)
    assert solution.score >= best - 0.02
    assert solution.score >= solution.score_unshifted - 1e-12
