"""The Affinity graph: trees are honoured exactly, loops are kept or reported."""

from __future__ import annotations

import math

import numpy as np
import pytest

from innet.cassini.model.affinity import LinkShifts, assign_shifts
from innet.errors import InputError


def holds(periods: dict[str, float], link: LinkShifts, shifts: dict[str, float],
          tol: float = 1e-6) -> bool:
    names = list(link.shifts_ms)
    for a in names:
        for b in names:
            if a >= b:
                continue
            g = math.gcd(round(periods[a] * 1000), round(periods[b] * 1000)) / 1000
            diff = (shifts[b] - shifts[a]) - (link.shifts_ms[b] - link.shifts_ms[a])
            r = diff % g
            if min(r, g - r) > tol:
                return False
    return True


def random_forest(seed: int) -> tuple[dict[str, float], list[LinkShifts]]:
    """Loop-free by construction: each new link joins one job already placed to 1-3 new ones
    (or, now and then, starts a new component)."""
    rng = np.random.default_rng(seed)
    periods: dict[str, float] = {}
    links: list[LinkShifts] = []
    placed: list[str] = []

    def new_job() -> str:
        name = f"j{len(periods)}"
        periods[name] = float(rng.choice([60, 90, 120, 180, 240, 100.5]))
        return name

    for i in range(int(rng.integers(4, 12))):
        members = [new_job() for _ in range(int(rng.integers(1, 4)))]
        if placed and rng.random() > 0.15:
            members.insert(int(rng.integers(0, len(members) + 1)),
                           placed[int(rng.integers(len(placed)))])
        elif len(members) == 1:
            members.append(new_job())
        placed += [m for m in members if m not in placed]
        shifts = {m: float(rng.uniform(0, periods[m])) for m in members}
        links.append(LinkShifts(f"L{i}", shifts, 1.0))
    for _ in range(3):  # lone jobs, on no shared link
        new_job()
    return periods, links


@pytest.mark.parametrize("seed", range(25))
def test_on_a_loop_free_graph_every_links_relative_shifts_hold(seed: int) -> None:
    periods, links = random_forest(seed)
    result = assign_shifts(periods, links)
    assert result.loops == 0 and result.ok
    assert set(result.shifts_ms) == set(periods)
    for link in links:
        assert holds(periods, link, dict(result.shifts_ms)), link
    for job, shift in result.shifts_ms.items():
        assert 0 <= shift < periods[job]
    for root in result.roots:
        assert result.shifts_ms[root] == 0.0
    assert "j0" in result.roots or any(r in periods for r in result.roots)


def test_each_component_gets_its_own_root() -> None:
    periods = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0, "e": 100.0}
    links = [LinkShifts("L1", {"a": 0, "b": 30}), LinkShifts("L2", {"c": 10, "d": 50})]
    result = assign_shifts(periods, links)
    assert result.roots == ("a", "c", "e")
    assert result.shifts_ms == {"a": 0.0, "b": 30.0, "c": 0.0, "d": 40.0, "e": 0.0}


TRIANGLE = {"a": 100.0, "b": 100.0, "c": 100.0}


def test_a_consistent_loop_is_kept() -> None:
    links = [LinkShifts("L1", {"a": 0, "b": 10}, 1.0), LinkShifts("L2", {"b": 0, "c": 20}, 1.0),
             LinkShifts("L3", {"a": 0, "c": 30}, 1.0)]
    result = assign_shifts(TRIANGLE, links)
    assert result.loops == 1 and result.ok
    assert all(holds(TRIANGLE, link, dict(result.shifts_ms)) for link in links)
    # within one time step still agrees
    nearly = [*links[:2], LinkShifts("L3", {"a": 0, "c": 30.8}, 1.0)]
    assert assign_shifts(TRIANGLE, nearly).ok


def test_a_conflicting_loop_is_reported() -> None:
    links = [LinkShifts("L1", {"a": 0, "b": 10}, 1.0), LinkShifts("L2", {"b": 0, "c": 20}, 1.0),
             LinkShifts("L3", {"a": 0, "c": 50}, 1.0)]
    result = assign_shifts(TRIANGLE, links)
    assert result.loops == 1 and not result.ok
    (conflict,) = result.conflicts
    # breadth-first from a: L1 and L3 are tree edges and hold; the loop breaks on L2
    assert conflict.link == "L2" and set(conflict.jobs) == {"b", "c"}
    assert conflict.error_ms == pytest.approx(20.0)
    assert "L2" in conflict.describe()
    assert holds(TRIANGLE, links[0], dict(result.shifts_ms))
    assert holds(TRIANGLE, links[2], dict(result.shifts_ms))


def test_loops_use_the_common_period_of_each_pair() -> None:
    # a: 40 ms, b: 60 ms: shifting b by 20 ms (their gcd) is the same as not shifting it
    periods = {"a": 40.0, "b": 60.0, "c": 60.0}
    links = [LinkShifts("L1", {"a": 0, "b": 5}, 0.5), LinkShifts("L2", {"b": 0, "c": 7}, 0.5),
             LinkShifts("L3", {"a": 0, "c": 32}, 0.5)]  # 5 + 7 = 12 = 32 mod 20
    assert assign_shifts(periods, links).ok
    result = assign_shifts(periods, links)
    assert all(holds(periods, link, dict(result.shifts_ms)) for link in links)
    links[2] = LinkShifts("L3", {"a": 0, "c": 35}, 0.5)  # 35 = 15 mod 20: no value fits
    assert not assign_shifts(periods, links).ok


def test_links_with_the_same_jobs_are_merged_not_counted_as_loops() -> None:
    up = LinkShifts("l1->sp1", {"a": 0, "b": 50}, 1.0)
    down = LinkShifts("sp1->l2", {"a": 0, "b": 50}, 1.0)
    result = assign_shifts({"a": 100.0, "b": 100.0}, [up, down])
    assert result.loops == 0 and result.ok
    assert result.groups == (("l1->sp1", "sp1->l2"),)
    # merged links that ask for different shifts cannot both be met: that is reported
    odd = LinkShifts("sp1->l2", {"a": 0, "b": 20}, 1.0)
    assert not assign_shifts({"a": 100.0, "b": 100.0}, [up, odd]).ok


def test_unknown_job_on_a_link_is_refused() -> None:
    with pytest.raises(InputError, match="link L1: unknown job"):
        assign_shifts({"a": 100.0}, [LinkShifts("L1", {"a": 0, "z": 1})])
