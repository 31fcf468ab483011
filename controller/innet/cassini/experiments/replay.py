"""Replaying a trace through the schedulers: the rounds of the base and of CASSINI.

`plan_trace` replays a trace through a scheduler as rounds: at each arrival and at each
departure the jobs running keep their GPUs (pinned), the queued ones go to the GPUs free at
that moment (the Themis-like base, or CASSINI's pick among its candidates), and CASSINI
re-plans every running job's shift. Departures are predicted at the jobs' own pace
(ready + iterations x T): a scheduler knows how long a job trains, not what contention will
cost it. When the measured run is slower, a job placed on GPUs still held waits for them:
each job names the jobs that held its GPUs (`after`), and the engines start it only when
those have left. Everything here is a pure function of its inputs, but for the wall time
each of CASSINI's rounds took to plan (guard runs included), kept for the report: the
issue's question of whether the planner keeps up with arrivals at 1,024 servers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from innet.cassini.experiments.traces import Trace, check_fits
from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.cluster import Cluster, cluster_from_topology
from innet.cassini.placement.scheduler import (
    DEFAULT_PLANNER,
    ClusterPlan,
    PlannerSettings,
    Schedule,
    schedule,
)
from innet.cassini.sim.steady import components
from innet.cassini.sim.trace import TraceJobRun, TraceSchedule, grid_wait, traffic_of
from innet.errors import InputError
from innet.topology import Topology


@dataclass(frozen=True)
class TracePlans:
    """The arms of one trace: the base's rounds (without and with CASSINI's shifts, same
    placements) and CASSINI's rounds."""

    base: TraceSchedule
    base_shifted: TraceSchedule
    cassini: TraceSchedule
    # CASSINI's rounds and what its guard did in them (`GuardCount`); empty without a guard
    guard: Mapping[str, int] = field(default_factory=dict)
    # wall seconds of each of CASSINI's rounds (the schedule call, guard runs included)
    planning_s: tuple[float, ...] = ()

    def arms(self) -> tuple[TraceSchedule, ...]:
        return (self.base, self.base_shifted, self.cassini)


# rounds planned; rounds the guard was asked (the fluid check preferred something to the
# base's placement); rounds it turned the fluid check's first pick down; rounds that then
# kept the base's placement; packet-level runs it made
GUARD_COUNTS: tuple[str, ...] = ("rounds", "asked", "turned_down", "kept_base", "runs")


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
    # whether any round planned an interleaving (a nonzero shift): only then do the jobs get
    # agents; the shifts themselves are translated to the round's time, so never all zero
    interleaved: bool = False
    guard: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GUARD_COUNTS, 0))
    planning_s: list[float] = field(default_factory=list)


def _count_guard(counts: dict[str, int], s: Schedule) -> None:
    verdicts = [c.guard for c in s.checked if c.guard]
    counts["rounds"] += 1
    counts["asked"] += bool(verdicts)
    counts["turned_down"] += "worse" in verdicts
    counts["kept_base"] += bool(verdicts) and "accepted" not in verdicts
    counts["runs"] += s.guard_runs


def keep_running(plan: ClusterPlan, previous: Mapping[str, float], now_ms: float = 0.0
                 ) -> dict[str, float]:
    """The plan's shifts, each connected component translated by one common time c (which
    changes no link's interleaving) so that its agents wait least.

    An agent waits for its grid: a running job whose shift moves by d waits d mod T at the
    end of its iteration (forward only: it cannot start before the iteration it is in has
    ended), a job placed now waits (shift - now) mod T before its first. A component of new
    jobs only starts from now as the plan has it, as a snapshot's do from time 0: the job the
    plan starts first starts at once. Otherwise c minimises the waits of the component's
    running and new jobs together (ties: the smallest c)."""
    period = {j.name: j.iteration_ms for j in plan.jobs}
    out: dict[str, float] = {}
    for members, _ in components(plan.jobs, plan.traffic):
        group = {j.name for j in members}
        new = {j: float(plan.shifts_ms.get(j, 0.0)) for j in group}
        # when each agent is ready to follow its (new) grid: a running job at its old grid
        # point, a new one now
        ready = {j: previous.get(j, now_ms) for j in group}

        def waits(c: float, new: dict[str, float] = new, ready: dict[str, float] = ready
                  ) -> float:
            return sum(grid_wait(new[j] + c, period[j], ready[j]) for j in ready)

        if all(j not in previous for j in group):
            choices = [now_ms]
        else:
            choices = [ready[j] - new[j] for j in group]
        c = min(choices, key=lambda x: (round(waits(x), 6), x))
        for j in group:
            out[j] = round((new[j] + c) % period[j], 6)
    return out


def _left(end_ms: float, now_ms: float, period_ms: float) -> int:
    """Iterations a running job has left by the replay's prediction (it leaves at `end_ms`)."""
    return max(0, math.ceil((end_ms - now_ms) / period_ms - 1e-9))


def _replay(cluster: Cluster, trace: Trace, pick: Callable[[Schedule], ClusterPlan],
            settings: PlannerSettings, progress: Callable[[float], Any] | None,
            clock: Callable[[], float] = time.perf_counter) -> _Arm:
    """One arm's rounds: at each arrival or predicted departure, the queued jobs that fit
    are planned around the running ones, and `pick` says which of the schedule's plans the
    arm follows."""
    replaying = _Replaying(cluster, trace)
    pending = sorted(trace.jobs, key=lambda j: j.arrival_ms)  # stable: file order on ties
    queue: list[str] = []
    at = 0
    while at < len(pending) or queue:
        times = [pending[at].arrival_ms] if at < len(pending) else []
        times += list(replaying.running.values())
        if not times:
            raise InputError(f"jobs {', '.join(queue)} can never be placed")  # pragma: no cover
        t = min(times)
        replaying.depart(t)
        while at < len(pending) and pending[at].arrival_ms <= t + 1e-9:
            queue.append(pending[at].name)
            at += 1
        if not queue or min(replaying.profiles[q].gpus for q in queue) > replaying.free_gpus():
            continue
        started = clock()
        planned = schedule(cluster, replaying.jobs_at(t, queue), settings,
                           finishing=replaying.finishing(t, queue))
        replaying.arm.planning_s.append(clock() - started)
        _count_guard(replaying.arm.guard, planned)
        plan = pick(planned)
        replaying.place(plan, queue, t)
        if progress is not None:
            progress(t)
    return replaying.arm


class _Replaying:
    """The state of one arm's replay: who runs until when, and which GPU slots are free
    (each slot remembers the job that last held it, so a job placed there waits for it)."""

    def __init__(self, cluster: Cluster, trace: Trace) -> None:
        self.profiles = {j.name: j.profile for j in trace.jobs}
        self.iters = {j.name: j.iterations for j in trace.jobs}
        self.arrival = {j.name: j.arrival_ms for j in trace.jobs}
        self.arm = _Arm({}, {}, {}, {}, {}, {}, [])
        self.running: dict[str, float] = {}  # job -> predicted departure
        self.free: dict[str, list[str | None]] = {}  # host -> its free GPU slots: who held each
        for _, slots in cluster.racks:
            for h in slots:
                self.free.setdefault(h, []).append(None)

    def free_gpus(self) -> int:
        return sum(len(v) for v in self.free.values())

    def depart(self, t: float) -> None:
        for name in [n for n, end in self.running.items() if end <= t + 1e-9]:
            del self.running[name]
            for h in self.arm.hosts[name]:
                self.free[h].append(name)

    def jobs_at(self, t: float, queue: Sequence[str]) -> list[JobProfile]:
        """The running jobs pinned where they run, the queued ones free to place."""
        jobs = [replace(self.profiles[n], hosts=self.arm.hosts[n]) for n in self.running]
        return jobs + [replace(self.profiles[q], hosts=None, waited_ms=t - self.arrival[q])
                       for q in queue]

    def finishing(self, t: float, queue: Sequence[str]) -> dict[str, tuple[float, int]]:
        """What each job has spent since it arrived and the iterations it has left."""
        out = {n: (t - self.arrival[n], _left(end, t, self.profiles[n].iteration_ms))
               for n, end in self.running.items()}
        return out | {q: (t - self.arrival[q], self.iters[q]) for q in queue}

    def place(self, plan: ClusterPlan, queue: list[str], t: float) -> None:
        """The plan's placements of queued jobs (taken off `queue`), and its shifts."""
        arm = self.arm
        for q in [q for q in queue if q in plan.placement]:
            hosts = plan.placement[q]
            held: list[str] = []
            for h in hosts:
                slot = self.free[h].pop(0)
                if slot is not None and slot not in held:
                    held.append(slot)
            arm.hosts[q], arm.ready[q], arm.after[q] = hosts, t, tuple(held)
            arm.routes[q] = plan.routes.get(q, ())
            self.running[q] = t + self.iters[q] * self.profiles[q].iteration_ms
            queue.remove(q)
        arm.capacity.update(plan.capacity_gbps)
        arm.interleaved |= any(abs(v) > 1e-9 for v in plan.shifts_ms.values())
        previous = {j: s[-1][1] for j, s in arm.shifts.items() if j in self.running}
        for j, s in keep_running(plan, previous, t).items():
            if j in previous and abs(previous[j] - s) < 1e-6:
                continue
            arm.shifts.setdefault(j, []).append((t, s))
        for w in plan.warnings:
            if w not in arm.warnings and not w.startswith("not enough free GPUs"):
                arm.warnings.append(w)


def _schedule_of(mode: str, trace: Trace, arm: _Arm, shifts: bool) -> TraceSchedule:
    runs = []
    agents = shifts and arm.interleaved
    for j in trace.jobs:
        table = tuple(arm.shifts.get(j.name, [(arm.ready[j.name], 0.0)])) if agents else ()
        runs.append(TraceJobRun(j.profile, j.arrival_ms, arm.ready[j.name], arm.after[j.name],
                                j.iterations, table))
    traffic = traffic_of(arm.routes)
    return TraceSchedule(mode, tuple(runs), dict(arm.hosts), traffic,
                         {link: arm.capacity[link] for link in traffic},
                         len({r.ready_ms for r in runs}), tuple(arm.warnings))


def plan_trace(topology: Topology | Cluster, trace: Trace,
               settings: PlannerSettings = DEFAULT_PLANNER,
               progress: Callable[[float], Any] | None = None) -> TracePlans:
    """Replay `trace` through the base and through CASSINI (module docstring); the base's
    rounds never run the fluid check (it follows the base's own placement)."""
    cluster = topology if isinstance(topology, Cluster) else cluster_from_topology(topology)
    check_fits(trace, cluster)
    base = _replay(cluster, trace, lambda s: s.base_shifted, replace(settings, checked=0),
                   progress)
    cassini = _replay(cluster, trace, lambda s: s.cassini, settings, progress)
    return TracePlans(_schedule_of("base", trace, base, False),
                      _schedule_of("base+shifts", trace, base, True),
                      _schedule_of("cassini", trace, cassini, True),
                      dict(cassini.guard) if settings.guard is not None else {},
                      tuple(cassini.planning_s))


SHARE_MIN_GAP = 0.005  # below this share of the base's JCT, a draw has nothing to capture


def jct_share(base: float, cassini: float, ideal: float) -> float:
    """The share of the ideal's gain CASSINI captures: (base - CASSINI) / (base - ideal);
    NaN when the base is within 0.5% of the ideal: nothing measurable to capture (on ns-3
    a job's packet time alone varies by that much with where it sits, and a share of such a
    gap reads -2,000% for 0.1 s). Sums over draws (the sweep's share) count every draw."""
    gap = base - ideal
    return (base - cassini) / gap if gap > SHARE_MIN_GAP * abs(base) else math.nan
