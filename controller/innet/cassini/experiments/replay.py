"""Replaying a trace through the schedulers: the rounds of the base and of CASSINI.

`plan_trace` replays a trace through a scheduler as rounds: at each arrival and at each
departure the jobs running keep their GPUs (pinned), the queued ones go to the GPUs free at
that moment (the Themis-like base, or CASSINI's pick among its candidates), and CASSINI
re-plans every running job's shift. Departures are predicted at the jobs' own pace
(ready + iterations x T): a scheduler knows how long a job trains, not what contention will
cost it. When the measured run is slower, a job placed on GPUs still held waits for them:
each job names the jobs that held its GPUs (`after`), and the engines start it only when
those have left. Everything here is a pure function of its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from innet.cassini.experiments.traces import Trace, check_fits
from innet.cassini.placement.scheduler import (
    DEFAULT_CHECK,
    DEFAULT_CHECKED,
    Cluster,
    ClusterPlan,
    cluster_from_topology,
    schedule,
)
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import components
from innet.cassini.sim.trace import TraceJobRun, TraceSchedule, traffic_of
from innet.errors import InputError
from innet.topology import Topology


@dataclass(frozen=True)
class TracePlans:
    """The arms of one trace: the base's rounds (without and with CASSINI's shifts, same
    placements) and CASSINI's rounds."""

    base: TraceSchedule
    base_shifted: TraceSchedule
    cassini: TraceSchedule

    def arms(self) -> tuple[TraceSchedule, ...]:
        return (self.base, self.base_shifted, self.cassini)


@dataclass
class _Arm:
    """One history being replayed: who runs where, predicted departures, shifts so far."""

    hosts: dict[str, tuple[str, ...]]
    ready: dict[str, float]
    after: dict[str, tuple[str, ...]]
    shifts: dict[str, list[tuple[float, float]]]
    routes: dict[str, tuple[tuple[str, ...], ...]]
    capacity: dict[str, float]
    warnings: list[str]


def keep_running(plan: ClusterPlan, previous: Mapping[str, float]) -> dict[str, float]:
    """The plan's shifts, each connected component translated by one common time c (which
    changes no link's interleaving) so that the running jobs' shifts move least."""
    period = {j.name: j.iteration_ms for j in plan.jobs}
    out: dict[str, float] = {}
    for members, _ in components(plan.jobs, plan.traffic):
        group = {j.name for j in members}
        new = {j: float(plan.shifts_ms.get(j, 0.0)) for j in group}
        old = {j: previous[j] for j in group if j in previous}

        def cost(c: float, new: dict[str, float] = new, old: dict[str, float] = old) -> float:
            total = 0.0
            for j, s in old.items():
                d = (new[j] + c - s) % period[j]
                total += min(d, period[j] - d)
            return total

        choices = [old[j] - new[j] for j in old] or [0.0]
        c = min(choices, key=lambda x: (cost(x), x))
        for j in group:
            out[j] = round((new[j] + c) % period[j], 6)
    return out


def _left(end_ms: float, now_ms: float, period_ms: float) -> int:
    """Iterations a running job has left by the replay's prediction (it leaves at `end_ms`)."""
    return max(0, math.ceil((end_ms - now_ms) / period_ms - 1e-9))


def _replay(cluster: Cluster, trace: Trace, pick: Callable[[Any], ClusterPlan],
            candidates: int, seed: int, checked: int, fluid: FluidConfig,
            progress: Callable[[float], Any] | None) -> _Arm:
    profiles = {j.name: j.profile for j in trace.jobs}
    iters = {j.name: j.iterations for j in trace.jobs}
    arrival = {j.name: j.arrival_ms for j in trace.jobs}
    pending = sorted(trace.jobs, key=lambda j: j.arrival_ms)  # stable: file order on ties
    arm = _Arm({}, {}, {}, {}, {}, {}, [])
    running: dict[str, float] = {}  # job -> predicted departure
    free: dict[str, list[str | None]] = {}  # host -> its free GPU slots: who held each
    for _, slots in cluster.racks:
        for h in slots:
            free.setdefault(h, []).append(None)
    queue: list[str] = []
    at = 0
    while at < len(pending) or queue:
        times = [pending[at].arrival_ms] if at < len(pending) else []
        times += list(running.values())
        if not times:
            raise InputError(f"jobs {', '.join(queue)} can never be placed")  # pragma: no cover
        t = min(times)
        for name in [n for n, end in running.items() if end <= t + 1e-9]:
            del running[name]
            for h in arm.hosts[name]:
                free[h].append(name)
        while at < len(pending) and pending[at].arrival_ms <= t + 1e-9:
            queue.append(pending[at].name)
            at += 1
        left = sum(len(v) for v in free.values())
        if not queue or min(profiles[q].gpus for q in queue) > left:
            continue
        jobs = [replace(profiles[n], hosts=arm.hosts[n]) for n in running]
        jobs += [replace(profiles[q], hosts=None, waited_ms=t - arrival[q]) for q in queue]
        finishing = {n: (t - arrival[n], _left(end, t, profiles[n].iteration_ms))
                     for n, end in running.items()}
        finishing |= {q: (t - arrival[q], iters[q]) for q in queue}
        plan = pick(schedule(cluster, jobs, candidates=candidates, seed=seed, fluid=fluid,
                             checked=checked, finishing=finishing))
        for q in [q for q in queue if q in plan.placement]:
            hosts = plan.placement[q]
            held: list[str] = []
            for h in hosts:
                slot = free[h].pop(0)
                if slot is not None and slot not in held:
                    held.append(slot)
            arm.hosts[q], arm.ready[q], arm.after[q] = hosts, t, tuple(held)
            arm.routes[q] = plan.routes.get(q, ())
            running[q] = t + iters[q] * profiles[q].iteration_ms
            queue.remove(q)
        arm.capacity.update(plan.capacity_gbps)
        previous = {j: s[-1][1] for j, s in arm.shifts.items() if j in running}
        for j, s in keep_running(plan, previous).items():
            if j in previous and abs(previous[j] - s) < 1e-6:
                continue
            arm.shifts.setdefault(j, []).append((t, s))
        for w in plan.warnings:
            if w not in arm.warnings and not w.startswith("not enough free GPUs"):
                arm.warnings.append(w)
        if progress is not None:
            progress(t)
    return arm


def _schedule_of(mode: str, trace: Trace, arm: _Arm, shifts: bool) -> TraceSchedule:
    runs = []
    agents = shifts and any(s != 0 for v in arm.shifts.values() for _, s in v)
    for j in trace.jobs:
        table = tuple(arm.shifts.get(j.name, [(arm.ready[j.name], 0.0)])) if agents else ()
        runs.append(TraceJobRun(j.profile, j.arrival_ms, arm.ready[j.name], arm.after[j.name],
                                j.iterations, table))
    traffic = traffic_of(arm.routes)
    return TraceSchedule(mode, tuple(runs), dict(arm.hosts), traffic,
                         {link: arm.capacity[link] for link in traffic},
                         len({r.ready_ms for r in runs}), tuple(arm.warnings))


def plan_trace(topology: Topology | Cluster, trace: Trace, *, candidates: int = 20,
               seed: int = 0, checked: int = DEFAULT_CHECKED,
               fluid: FluidConfig = DEFAULT_CHECK,
               progress: Callable[[float], Any] | None = None) -> TracePlans:
    """Replay `trace` through the base and through CASSINI (module docstring)."""
    cluster = topology if isinstance(topology, Cluster) else cluster_from_topology(topology)
    check_fits(trace, cluster)
    base = _replay(cluster, trace, lambda s: s.base_shifted, candidates, seed, checked=0,
                   fluid=fluid, progress=progress)
    cassini = _replay(cluster, trace, lambda s: s.cassini, candidates, seed, checked,
                      fluid, progress)
    return TracePlans(_schedule_of("base", trace, base, False),
                      _schedule_of("base+shifts", trace, base, True),
                      _schedule_of("cassini", trace, cassini, True))


SHARE_MIN_GAP = 0.005  # below this share of the base's JCT, a draw has nothing to capture


def jct_share(base: float, cassini: float, ideal: float) -> float:
    """The share of the ideal's gain CASSINI captures: (base - CASSINI) / (base - ideal);
    NaN when the base is within 0.5% of the ideal: nothing measurable to capture (on ns-3
    a job's packet time alone varies by that much with where it sits, and a share of such a
    gap reads -2,000% for 0.1 s). Sums over draws (the sweep's share) count every draw."""
    gap = base - ideal
    return (base - cassini) / gap if gap > SHARE_MIN_GAP * abs(base) else math.nan
