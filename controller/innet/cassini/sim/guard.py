"""CASSINI's guard on packets: the jobs a pick changes, run briefly on the packet engine
beside the base's plan, before the pick is committed (docs/cassini-guard.md).

The fluid check (`placement.scheduler`) keeps only picks no worse than the base's placement
in the fluid model, but the fluid model shares every link max-min with fluid queues: it
charges no hop latency, no packet times, no slow start, no window dynamics. Where its
predicted gain is smaller than what it ignores, the pick can lose on a real network. The
guard runs the pick and the reference where they differ (the jobs placed or shifted
otherwise, with every job sharing a cable with them, in either plan) for a few iterations on
the engine, and accepts the pick only if its samples there bound the round's mean and p99
from above (`no_worse_where_judged`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.scheduler import (
    ClusterPlan,
    Finishing,
    round_runs,
)
from innet.cassini.sim.engine import Engine
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import components
from innet.cassini.sim.trace import TraceResult, TraceSchedule
from innet.errors import InputError
from innet.topology import Topology

GUARD_ITERATIONS = 10  # per job and run, at most (traces train 20-40 by default, 60-120 the long)


def cable_groups(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]]
                 ) -> list[set[str]]:
    """`jobs` joined by the cables their `traffic` shares, in either direction. On packets a
    job's ACKs ride the reverse of its data's links and queue behind the data of the jobs
    sending there, so jobs the fluid model keeps apart (it sees the data alone) still slow
    each other (docs/cassini-guard.md: the 128-server draws the guard let through when it
    grouped jobs by directed links)."""
    cables: dict[str, dict[str, int]] = {}
    for link, per in traffic.items():
        a, b = link.split("->")
        cables.setdefault("<->".join(sorted((a, b))), {}).update(dict.fromkeys(per, 1))
    return [{j.name for j in members} for members, _ in components(jobs, cables)]


def affected(reference: ClusterPlan, option: ClusterPlan) -> frozenset[str]:
    """The jobs whose iterations `option` can change against `reference`: those it places
    or shifts otherwise, and every job that shares a cable with one of them in either plan
    (`cable_groups`), to closure. The others sit in the same groups, at the same shifts, in
    both plans, so on any engine they run the same in both."""
    names = {j.name for j in reference.jobs} | {j.name for j in option.jobs}
    out = {n for n in names
           if reference.placement.get(n) != option.placement.get(n)
           or reference.shifts_ms.get(n, 0.0) != option.shifts_ms.get(n, 0.0)}
    groups = [*cable_groups(reference.jobs, reference.traffic),
              *cable_groups(option.jobs, option.traffic)]
    grew = bool(out)
    while grew:
        grew = False
        for group in groups:
            if group & out and not group <= out:
                out |= group
                grew = True
    return frozenset(out)


def restricted(plan: ClusterPlan, names: frozenset[str], finishing: Finishing,
               most: int | None) -> TraceSchedule:
    """`plan`'s jobs `names` (a union of its cable groups) as a trace from now: each for
    the iterations it has left, at most `most`."""
    jobs = [j for j in plan.jobs if j.name in names]
    traffic = {link: dict(per) for link, per in plan.traffic.items() if names & set(per)}
    shifted = any(plan.shifts_ms.get(n, 0.0) != 0 for n in names)
    runs = round_runs(jobs, plan, finishing, shifted, most)
    return TraceSchedule(plan.mode, runs, {j.name: plan.placement[j.name] for j in jobs},
                         traffic, {link: plan.capacity_gbps[link] for link in traffic}, 1)


@dataclass(frozen=True)
class Samples:
    """What a run of the affected jobs measured, each sorted ascending: every iteration's
    time (ms) and slowdown (over its job's own T), and every job's completion time."""

    times_ms: tuple[float, ...]
    slowdowns: tuple[float, ...]
    jct_ms: tuple[float, ...]

    @classmethod
    def of(cls, run: TraceResult) -> Samples:
        times = [t for o in run.jobs for t in o.iterations_ms]
        slowdowns = [t / o.iteration_ms for o in run.jobs for t in o.iterations_ms]
        return cls(tuple(sorted(times)), tuple(sorted(slowdowns)),
                   tuple(sorted(o.jct_ms for o in run.jobs)))


def tail_depth(n: int) -> int:
    """How many of the largest of `n` samples numpy's p99 (linear) reads: those from rank
    floor(0.99 (n - 1)) up."""
    return n - math.floor(0.99 * (n - 1)) if n > 0 else 0


def bounded_above(mine: Sequence[float], ref: Sequence[float], whole: int) -> bool:
    """Whether `mine` in place of `ref`, among any other samples making `whole` in all,
    can raise neither the mean nor the p99: as many samples, a sum no larger, and each of
    the `tail_depth(whole)` largest no larger than the reference's at the same rank.

    The largest j of a union are, rank by rank, monotone in the largest j of each part, so
    the ranks p99 reads stay below the reference's whatever the others are. Comparing the
    part's own mean and p99 is not enough: an option can lower the part's two slowest
    iterations and raise the next few, which are the whole's p99 once the untouched jobs
    join (docs/cassini-guard.md: the earlier verdict, and what it let through)."""
    if len(mine) != len(ref):
        return False
    slack = 1 + 1e-9
    if sum(mine) > sum(ref) * slack:
        return False
    depth = min(len(mine), max(tail_depth(whole), 1))
    return all(a <= b * slack for a, b in zip(mine[::-1][:depth], ref[::-1][:depth], strict=True))


def no_worse_where_judged(mine: Samples, ref: Samples, iterations: int, jobs: int) -> bool:
    """The verdict: `mine` raises neither the mean nor the p99 of the iteration times,
    slowdowns or completion times of a round of `jobs` jobs training `iterations` in all,
    whatever the jobs outside the affected ones do (they run alike in both plans)."""
    return (bounded_above(mine.times_ms, ref.times_ms, iterations)
            and bounded_above(mine.slowdowns, ref.slowdowns, iterations)
            and bounded_above(mine.jct_ms, ref.jct_ms, jobs))


@dataclass(frozen=True)
class PacketGuard:
    """`scheduler.PlanGuard` on an engine (ns-3; picklable: sweeps ship it to workers)."""

    engine: Engine
    iterations: int | None = GUARD_ITERATIONS  # None: every iteration the jobs have left

    def check(self) -> None:
        if self.iterations is not None and self.iterations < 1:
            raise InputError(f"--guard-iterations must be >= 1, got {self.iterations}")

    def first_accepted(self, topology: Topology, reference: ClusterPlan,
                       options: Sequence[ClusterPlan], finishing: Finishing | None,
                       config: FluidConfig) -> tuple[int | None, int]:
        """The first option that raises no time figure of the round on the engine
        (iteration mean and p99, in ms and as slowdowns; completion mean and p99;
        `no_worse_where_judged`), and the runs it took. A steady plan (no `finishing`) runs
        `config.iterations` per job."""
        if finishing is None:
            finishing = {j.name: (0.0, config.iterations)
                         for plan in (reference, *options) for j in plan.jobs}
        iterations = sum(max(1, finishing[j.name][1]) for j in reference.jobs)
        runs = 0
        seen: dict[frozenset[str], Samples] = {}
        for k, option in enumerate(options):
            names = affected(reference, option)
            if not names:
                return k, runs
            if names not in seen:
                seen[names] = self._samples(topology, reference, names, finishing, config)
                runs += 1
            mine = self._samples(topology, option, names, finishing, config)
            runs += 1
            if no_worse_where_judged(mine, seen[names], iterations, len(reference.jobs)):
                return k, runs
        return None, runs

    def _samples(self, topology: Topology, plan: ClusterPlan, names: frozenset[str],
                 finishing: Mapping[str, tuple[float, int]], config: FluidConfig) -> Samples:
        sched = restricted(plan, names, finishing, self.iterations)
        run_config = config if sched.agents else config.without_agents()
        return Samples.of(self.engine.trace(topology, sched, run_config))
