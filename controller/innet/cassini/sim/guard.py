"""CASSINI's guard on packets: the jobs a pick changes, run briefly on the packet engine
beside the base's plan, before the pick is committed (docs/cassini-guard.md).

The fluid check (`placement.scheduler`) keeps only picks no worse than the base's placement
in the fluid model, but the fluid model shares every link max-min with fluid queues: it
charges no hop latency, no packet times, no slow start, no window dynamics. Where its
predicted gain is smaller than what it ignores, the pick can lose on a real network. The
guard runs the pick and the reference where they differ (the jobs placed or shifted
otherwise, with every job sharing a link with them, in either plan) for a few iterations on
the engine, and accepts the pick only if no time figure is worse there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from innet.cassini.placement.scheduler import (
    ClusterPlan,
    Figures,
    Finishing,
    round_runs,
    trace_figures,
)
from innet.cassini.sim.engine import Engine
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import components
from innet.cassini.sim.trace import TraceSchedule
from innet.errors import InputError
from innet.topology import Topology

GUARD_ITERATIONS = 10  # per job and run, at most (traces train 20-40 by default, 60-120 the long)


def affected(reference: ClusterPlan, option: ClusterPlan) -> frozenset[str]:
    """The jobs whose iterations `option` can change against `reference`: those it places
    or shifts otherwise, and every job that shares a link with one of them in either plan,
    to closure. The others sit in the same groups, at the same shifts, in both plans, so on
    any engine they run the same in both."""
    names = {j.name for j in reference.jobs} | {j.name for j in option.jobs}
    out = {n for n in names
           if reference.placement.get(n) != option.placement.get(n)
           or reference.shifts_ms.get(n, 0.0) != option.shifts_ms.get(n, 0.0)}
    groups = [{j.name for j in members} for plan in (reference, option)
              for members, _ in components(plan.jobs, plan.traffic)]
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
    """`plan`'s jobs `names` (a union of its link groups) as a trace from now: each for
    the iterations it has left, at most `most`."""
    jobs = [j for j in plan.jobs if j.name in names]
    traffic = {link: dict(per) for link, per in plan.traffic.items() if names & set(per)}
    shifted = any(plan.shifts_ms.get(n, 0.0) != 0 for n in names)
    runs = round_runs(jobs, plan, finishing, shifted, most)
    return TraceSchedule(plan.mode, runs, {j.name: plan.placement[j.name] for j in jobs},
                         traffic, {link: plan.capacity_gbps[link] for link in traffic}, 1)


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
        """The first option no worse than `reference` in any time figure on the engine
        (iteration mean and p99, in ms and as slowdowns; completion mean and p99), and the
        runs it took. A steady plan (no `finishing`) runs `config.iterations` per job."""
        if finishing is None:
            finishing = {j.name: (0.0, config.iterations)
                         for plan in (reference, *options) for j in plan.jobs}
        runs = 0
        seen: dict[frozenset[str], Figures] = {}
        for k, option in enumerate(options):
            names = affected(reference, option)
            if not names:
                return k, runs
            if names not in seen:
                seen[names] = self._figures(topology, reference, names, finishing, config)
                runs += 1
            mine = self._figures(topology, option, names, finishing, config)
            runs += 1
            if mine.no_worse(seen[names]):
                return k, runs
        return None, runs

    def _figures(self, topology: Topology, plan: ClusterPlan, names: frozenset[str],
                 finishing: Mapping[str, tuple[float, int]], config: FluidConfig) -> Figures:
        sched = restricted(plan, names, finishing, self.iterations)
        run_config = config if sched.agents else config.without_agents()
        return trace_figures([self.engine.trace(topology, sched, run_config)])
