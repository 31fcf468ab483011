"""The guard on CASSINI's pick: what the scheduler asks it, what it does with the answer,
and which jobs a packet-level check must run (docs/cassini-guard.md)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from innet.cassini.model.profiles import load_jobs
from innet.cassini.placement.scheduler import (
    GUARD_TRIES,
    ClusterPlan,
    Finishing,
    PlannerSettings,
    Schedule,
    schedule,
)
from innet.cassini.sim.engine import FluidEngine
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.guard import (
    PacketGuard,
    Samples,
    affected,
    bounded_above,
    cable_groups,
    no_worse_where_judged,
    restricted,
    tail_depth,
)
from innet.cassini.sim.steady import components
from innet.topology import Topology, load_topology

ROOT = Path(__file__).resolve().parents[3]
THIRTEEN = ROOT / "examples" / "jobs-13.json"


@dataclass
class Answering:
    """A guard that answers `accepted` (None: turns every option down) and records what it
    was shown."""

    accepted: int | None
    shown: list[list[ClusterPlan]] = field(default_factory=list)

    def first_accepted(self, topology: Topology, reference: ClusterPlan,
                       options: Sequence[ClusterPlan], finishing: Finishing | None,
                       config: FluidConfig) -> tuple[int | None, int]:
        assert reference.mode == "base" and not any(reference.shifts_ms.values())
        self.shown.append(list(options))
        return self.accepted, 7


@pytest.fixture(scope="module")
def leafspine() -> Topology:
    return load_topology(ROOT / "topologies" / "leafspine24.json")


@pytest.fixture(scope="module")
def unguarded(leafspine: Topology) -> Schedule:
    return schedule(leafspine, load_jobs(THIRTEEN))


def _same(a: ClusterPlan, b: ClusterPlan) -> bool:
    return dict(a.placement) == dict(b.placement) and dict(a.shifts_ms) == dict(b.shifts_ms)


def _guarded(leafspine: Topology, guard: Answering) -> Schedule:
    return schedule(leafspine, load_jobs(THIRTEEN), PlannerSettings(guard=guard))


def test_the_13_jobs_pick_is_not_the_bases(unguarded: Schedule) -> None:
    """The scenario the tests below need: the fluid check prefers a plan to the base's."""
    assert not _same(unguarded.cassini, unguarded.base)
    assert unguarded.guard_runs == 0 and not any(c.guard for c in unguarded.checked)


def test_a_guard_that_turns_everything_down_keeps_the_bases_placement(
        leafspine: Topology, unguarded: Schedule) -> None:
    guard = Answering(None)
    got = _guarded(leafspine, guard)
    assert len(guard.shown) == 1 and 1 <= len(guard.shown[0]) <= GUARD_TRIES
    assert _same(guard.shown[0][0], unguarded.cassini)  # the fluid check's pick comes first
    assert _same(got.cassini, got.base) and got.cassini.mode == "cassini"
    assert got.guard_runs == 7
    verdicts = [c.guard for c in got.checked if c.guard]
    assert verdicts == ["worse"] * len(guard.shown[0])


def test_a_guard_that_accepts_the_first_changes_nothing(leafspine: Topology,
                                                        unguarded: Schedule) -> None:
    got = _guarded(leafspine, Answering(0))
    assert _same(got.cassini, unguarded.cassini)
    assert [c.guard for c in got.checked if c.guard] == ["accepted"]


def test_a_guard_that_accepts_the_second_gets_the_fluid_checks_second_choice(
        leafspine: Topology) -> None:
    guard = Answering(1)
    got = _guarded(leafspine, guard)
    options = guard.shown[0]
    assert len(options) == 2, "the scenario has two options preferred to the base's"
    assert _same(got.cassini, options[1]) and not _same(options[0], options[1])
    chosen = [c for c in got.checked if c.guard == "accepted"]
    first = [c for c in got.checked if c.guard == "worse"]
    assert len(chosen) == 1 and len(first) == 1
    assert chosen[0].cost >= first[0].cost - 1e-9  # preference order: the lower cost first
    assert chosen[0].feasible and first[0].feasible


def test_the_paper_ranking_never_asks_the_guard(leafspine: Topology) -> None:
    guard = Answering(None)
    schedule(leafspine, load_jobs(THIRTEEN), PlannerSettings(checked=0, guard=guard))
    assert guard.shown == []


def test_affected_jobs_are_the_changed_ones_and_all_their_link_partners(
        unguarded: Schedule) -> None:
    base, pick = unguarded.base, unguarded.cassini
    names = affected(base, pick)
    changed = {j.name for j in pick.jobs
               if base.placement[j.name] != pick.placement[j.name]
               or base.shifts_ms[j.name] != pick.shifts_ms[j.name]}
    assert changed and changed <= names
    for plan in (base, pick):
        for members, _ in components(plan.jobs, plan.traffic):
            group = {j.name for j in members}
            assert group <= names or not group & names  # whole groups, in both plans
        for link, per in plan.traffic.items():  # and whoever sends the other way
            a, b = link.split("->")
            if set(per) & names:
                assert set(plan.traffic.get(f"{b}->{a}", {})) <= names
    for name in {j.name for j in base.jobs} - names:
        assert base.placement[name] == pick.placement[name]
        assert base.shifts_ms[name] == pick.shifts_ms[name]
    assert affected(base, base) == frozenset()
    assert affected(pick, replace(pick, mode="other")) == frozenset()


def test_the_restricted_run_carries_only_those_jobs_and_their_links(
        unguarded: Schedule) -> None:
    base, pick = unguarded.base, unguarded.cassini
    names = affected(base, pick)
    finishing = {j.name: (250.0, 9) for j in pick.jobs}
    sched = restricted(pick, names, finishing, 3)
    assert {r.name for r in sched.jobs} == names == set(sched.placement)
    assert all(set(per) <= names for per in sched.traffic.values())
    assert {link for link, per in pick.traffic.items() if set(per) & names} == set(
        sched.traffic)
    assert all(r.iterations == 3 and r.arrival_ms == -250.0 for r in sched.jobs)
    assert sched.agents  # the pick is shifted: CASSINI's agents keep the shifts
    assert not restricted(base, names, finishing, None).agents
    assert {r.iterations for r in restricted(base, names, finishing, None).jobs} == {9}


def test_a_packet_guard_runs_nothing_when_the_plans_are_the_same(
        leafspine: Topology, unguarded: Schedule) -> None:
    guard = PacketGuard(FluidEngine())
    base = unguarded.base
    assert guard.first_accepted(leafspine, base, [replace(base, mode="cassini")], None,
                                FluidConfig()) == (0, 0)


# ------------------------------------------------------------------ the verdict

def _mean_p99(values: Sequence[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.percentile(values, 99))


def test_tail_depth_is_the_ranks_numpys_p99_reads() -> None:
    """Oracle: change each rank alone and see whether numpy's p99 moves."""
    for n in (1, 2, 30, 99, 100, 101, 225, 1000):
        base = list(range(n))
        moved = [k for k in range(n)
                 if np.percentile([*base[:k], base[k] + 0.5, *base[k + 1:]], 99)
                 != np.percentile(base, 99)]
        assert moved and n - min(moved) == tail_depth(n), n


def test_a_bounded_part_never_raises_the_wholes_mean_or_p99() -> None:
    """Exhaustive on small parts and random others: whenever the verdict accepts `mine`
    for `ref`, the union with any other samples has no larger mean and p99."""
    rng = np.random.default_rng(5)
    values = (1.0, 2.0, 3.0)
    accepted = 0
    for n in (1, 2, 3):
        for mine in itertools.product(values, repeat=n):
            for ref in itertools.product(values, repeat=n):
                for whole in (n, n + 1, n + 3, n + 150):
                    if not bounded_above(sorted(mine), sorted(ref), whole):
                        continue
                    accepted += 1
                    for _ in range(4):
                        others = list(rng.choice(values, whole - n))
                        got = _mean_p99(list(mine) + others)
                        was = _mean_p99(list(ref) + others)
                        assert got[0] <= was[0] + 1e-12 and got[1] <= was[1] + 1e-12
    assert accepted > 100


def test_a_part_with_a_lower_p99_of_its_own_can_raise_the_wholes() -> None:
    """Why the verdict reads the whole's ranks, not the part's own p99: the option lowers
    the part's slowest iteration and raises the next ones; among the untouched jobs'
    iterations those are the whole's p99."""
    ref = sorted([1.0] * 7 + [1.1, 1.1, 3.0])
    mine = sorted([1.0] * 7 + [1.5, 1.5, 2.0])
    others = [1.0] * 190
    assert _mean_p99(mine)[1] < _mean_p99(ref)[1] and sum(mine) <= sum(ref)
    assert _mean_p99(mine + others)[1] > _mean_p99(ref + others)[1]
    assert not bounded_above(mine, ref, len(mine) + len(others))


def test_the_verdict_wants_as_many_samples_and_no_larger_sum() -> None:
    assert not bounded_above([1.0], [1.0, 1.0], 10)
    assert not bounded_above([0.5, 2.0], [1.0, 1.0], 2)       # the tail
    assert not bounded_above([1.0, 1.5, 1.5], [0.1, 1.5, 1.5], 300)  # the mean
    assert bounded_above([0.5, 1.5, 1.5], [1.0, 1.5, 1.5], 300)
    fast = Samples((1.0, 2.0), (1.0, 1.0), (5.0,))
    slow_jct = Samples((1.0, 2.0), (1.0, 1.0), (6.0,))
    assert no_worse_where_judged(fast, slow_jct, 100, 30)
    assert not no_worse_where_judged(slow_jct, fast, 100, 30)


def test_jobs_on_the_two_directions_of_a_cable_are_one_group(unguarded: Schedule) -> None:
    """On packets a job's ACKs queue behind the data sent the other way on its links: the
    guard must run those jobs together (the fluid model's groups keep them apart)."""
    base = unguarded.base
    x, y, z = base.jobs[:3]
    plan = replace(base, jobs=(x, y, z), traffic={
        "s1->s2": {x.name: 1}, "s2->s1": {y.name: 1}, "s3->s4": {z.name: 2}})
    groups = sorted(map(sorted, cable_groups(plan.jobs, plan.traffic)))
    assert groups == [sorted([x.name, y.name]), [z.name]]
    assert len(components(plan.jobs, plan.traffic)) == 3
    moved = replace(plan, placement={**plan.placement, x.name: ("elsewhere",)})
    assert affected(plan, moved) == {x.name, y.name}
