"""The guard on CASSINI's pick: what the scheduler asks it, what it does with the answer,
and which jobs a packet-level check must run (docs/cassini-guard.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

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
from innet.cassini.sim.guard import PacketGuard, affected, restricted
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
