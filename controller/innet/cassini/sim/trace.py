"""A trace's jobs over time in the fluid model: arrive, wait for GPUs, train, leave.

`innet.cassini.sim.steady.simulate` runs a fixed set of jobs until each has measured enough
iterations; a trace needs more: each job becomes ready at a time (when the scheduler placed
it), may have to wait for the jobs that held its GPUs before it (`after`), trains exactly
`iterations` iterations and leaves, so its traffic stops contending and its completion time
(JCT: finish - arrival) is a result. The rules, which the ns-3 program follows to the letter
(`ns3-sim/cassini-sim`, config version 2):

- A job starts at max(ready_ms, the finish of every job in `after`).
- With CASSINI's agents (`shifts` not empty), its first iteration waits for the next point
  of its grid: shift + m G (G from `fluid.realign_grid`), the shift being the last entry of
  `shifts` whose `at_ms` has passed. The base has no agents and starts at once.
- At the end of each iteration but the last, an agent whose job got a new shift (the
  scheduler re-planned at a later round) waits for the new grid's next point, whatever it
  costs (the paper's agents apply new shifts at the next iteration); otherwise it re-aligns
  as the steady simulation does (late by more than `realign_pct` of T, wait at most
  `realign_budget_pct`).
- After its last iteration the job leaves at once.

Up phases share links max-min fairly and marks are the same fluid-queue proxy: both
simulations advance with `fluid.step`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from innet.cassini.model.profiles import JobProfile
from innet.cassini.sim.fluid import (
    EPS,
    MAX_EVENTS,
    FluidConfig,
    Links,
    realign_grid,
    segments,
    step,
)
from innet.errors import InputError


@dataclass(frozen=True)
class TraceJobRun:
    """What an engine runs for one job of a trace (plain data, from
    `experiments.replay.plan_trace`)."""

    profile: JobProfile
    arrival_ms: float
    ready_ms: float  # placed by the scheduler at this time (>= arrival)
    after: tuple[str, ...]  # jobs that held these GPUs before: they must have left
    iterations: int  # trained, then the job leaves
    shifts: tuple[tuple[float, float], ...] = ()  # (from ms, shift ms); empty: no agent

    @property
    def name(self) -> str:
        return self.profile.name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arrival_ms": self.arrival_ms, "ready_ms": self.ready_ms,
                "after": list(self.after), "iterations": self.iterations,
                "shifts": [[a, s] for a, s in self.shifts]}


@dataclass(frozen=True)
class TraceSchedule:
    """One arm's plan of a whole trace: every job where and when, and the links it loads
    (link "a->b" -> job -> ring hops over it, as `ClusterPlan.traffic`)."""

    mode: str  # "base", "base+shifts", "cassini"
    jobs: tuple[TraceJobRun, ...]
    placement: Mapping[str, tuple[str, ...]]
    traffic: Mapping[str, Mapping[str, int]]
    capacity_gbps: Mapping[str, float]
    rounds: int
    warnings: tuple[str, ...] = ()

    @property
    def agents(self) -> bool:
        return any(j.shifts for j in self.jobs)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "rounds": self.rounds,
                "jobs": [j.to_dict() | {"hosts": list(self.placement[j.name])}
                         for j in self.jobs]}


@dataclass(frozen=True)
class JobOutcome:
    name: str
    iteration_ms: float  # the profile's T
    arrival_ms: float
    ideal_ms: float  # the JCT at its own pace in this schedule (ready - arrival + N x T)
    start_ms: float
    finish_ms: float
    iterations_ms: tuple[float, ...]
    marks: float
    realignments: int

    @property
    def jct_ms(self) -> float:
        return self.finish_ms - self.arrival_ms

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "iteration_ms": self.iteration_ms,
                "arrival_ms": self.arrival_ms, "start_ms": self.start_ms,
                "finish_ms": self.finish_ms, "jct_ms": self.jct_ms, "ideal_ms": self.ideal_ms,
                "iterations": len(self.iterations_ms), "marks": self.marks,
                "realignments": self.realignments}


@dataclass(frozen=True)
class TraceResult:
    label: str
    jobs: tuple[JobOutcome, ...]
    marks: float
    duration_ms: float

    def jct(self) -> tuple[float, float]:
        """Mean and p99 job completion time (ms)."""
        v = np.asarray([j.jct_ms for j in self.jobs], dtype=np.float64)
        return float(v.mean()), float(np.percentile(v, 99))

    def iteration_slowdown(self) -> tuple[float, float]:
        """Mean and p99 of every iteration of every job over its own T."""
        v = np.asarray([t / j.iteration_ms for j in self.jobs for t in j.iterations_ms],
                       dtype=np.float64)
        return (float(v.mean()), float(np.percentile(v, 99))) if v.size else (1.0, 1.0)


def ideal_ms(job: TraceJobRun) -> float:
    """The job's completion time at its own pace, placed when this schedule placed it."""
    return job.ready_ms - job.arrival_ms + job.iterations * job.profile.iteration_ms


def trace_bound(sched: TraceSchedule) -> float:
    """Simulated ms a run can last at most: the last ready time plus every job one after the
    other at its slowest (max-min gives it at least min(Gbps, C / every hop on the link))."""
    hops_on = {link: sum(per.values()) for link, per in sched.traffic.items()}
    total = 0.0
    for j in sched.jobs:
        links = [link for link, per in sched.traffic.items() if j.name in per]
        share = min((float(sched.capacity_gbps[link]) / hops_on[link] for link in links),
                    default=math.inf)
        down = sum(s[1] for s in segments(j.profile) if not s[0])
        up = sum(p.volume_mbit / min(p.gbps, share) for p in j.profile.phases if p.gbps > 0)
        total += (j.iterations + 1) * (down + up + j.profile.iteration_ms)
    return max((j.ready_ms for j in sched.jobs), default=0.0) + total


@dataclass
class _State:
    run: TraceJobRun
    segments: list[tuple[bool, float, float]]
    links: list[tuple[int, int]]
    grid: float
    phase: str = "idle"  # idle (not started), wait (for a grid point), busy, done
    seg: int = 0
    left: float = math.inf
    start: float = math.nan  # this iteration's
    started: float = math.nan
    finished: float = math.nan
    aligned: float | None = None  # the shift the agent last aligned to
    times: list[float] = field(default_factory=list)
    marks: float = 0.0
    realigned: int = 0

    def shift_at(self, t: float) -> float:
        s = self.run.shifts[0][1]
        for at, shift in self.run.shifts:
            if at <= t + 1e-9:
                s = shift
        return s


def grid_wait(shift: float, grid: float, t: float) -> float:
    """Wait from t to the next point of shift + m grid (0 when t is on it)."""
    wait = (shift - t) % grid
    return 0.0 if wait <= 1e-6 or grid - wait <= 1e-6 else wait


def simulate_trace(sched: TraceSchedule, config: FluidConfig | None = None,
                   label: str | None = None) -> TraceResult:
    """Run the schedule until every job has left (the rules in the module's docstring)."""
    config = config if config is not None else FluidConfig()
    config.check()
    limit = 4 * sum((j.iterations + 2) * (len(segments(j.profile)) + 2) for j in sched.jobs)
    if limit > MAX_EVENTS and not config.force:
        raise InputError(f"the fluid model would take up to {limit:.3g} steps (about "
                         f"{limit / 1e5:.0f} s; at most {MAX_EVENTS:.0e} without --force): "
                         "fewer jobs or iterations")
    run = _TraceRun(sched, config)
    horizon = trace_bound(sched) * 1.01 + 1.0
    guard = 0
    while any(s.phase != "done" for s in run.order):
        guard += 1
        if run.t > horizon or guard > limit + 1000:
            raise RuntimeError(f"fluid trace past its bound (t {run.t:.6g} of {horizon:.6g} "
                               f"ms, {guard} steps)")
        run.step()
    outcomes = tuple(JobOutcome(s.run.name, s.run.profile.iteration_ms, s.run.arrival_ms,
                                ideal_ms(s.run), s.started, s.finished, tuple(s.times),
                                s.marks, s.realigned) for s in run.order)
    return TraceResult(label if label is not None else sched.mode, outcomes,
                       sum(run.links.marks), run.t)


class _TraceRun:
    """One trace run in progress: the jobs' states, the links and the clock."""

    def __init__(self, sched: TraceSchedule, config: FluidConfig) -> None:
        names = [link for link, per in sched.traffic.items() if per]
        index = {link: i for i, link in enumerate(names)}
        grids = realign_grid([j.profile for j in sched.jobs], sched.traffic)
        self.states = {j.name: _State(j, segments(j.profile),
                                      [(index[link], int(sched.traffic[link][j.name]))
                                       for link in names if j.name in sched.traffic[link]],
                                      grids[j.name])
                       for j in sched.jobs}
        self.order = list(self.states.values())
        self.links = Links.of([float(sched.capacity_gbps[link]) for link in names], config)
        self.config = config
        self.pct = config.realign_pct if config.realign_pct is not None else 5.0
        self.t = 0.0

    def startable(self, s: _State) -> bool:
        return all(self.states[a].phase == "done" for a in s.run.after if a in self.states)

    def step(self) -> None:
        """Start the jobs whose time has come, then one step of the fluid model."""
        t = self.t
        for s in self.order:  # jobs whose GPUs and time have come
            if s.phase == "idle" and self.startable(s) and s.run.ready_ms <= t + EPS * max(1, t):
                self.start(s, t)
        up = [s for s in self.order if s.phase == "busy" and s.segments[s.seg][0]]
        timers = [s for s in self.order
                  if s.phase == "wait" or (s.phase == "busy" and not s.segments[s.seg][0])]
        until = min((max(0.0, s.run.ready_ms - t) for s in self.order
                     if s.phase == "idle" and self.startable(s)), default=math.inf)
        self.t = t = t + step(self.links, up, timers, until,
                              "fluid trace: no job can progress (a dependency loop or a "
                              "zero rate)")
        for s in self.order:
            while s.phase in ("busy", "wait") and s.left <= EPS * max(1.0, t):
                if s.phase == "wait":
                    _begin(s, t)
                elif s.seg < len(s.segments) - 1:
                    s.seg += 1
                    s.left = s.segments[s.seg][1]
                else:
                    self.end_iteration(s, t)

    def start(self, s: _State, t: float) -> None:
        """The job's GPUs are free: with an agent it waits for its grid, else it starts."""
        s.started = t
        if s.run.shifts:
            s.aligned = s.shift_at(t)
            wait = grid_wait(s.aligned, s.grid, t)
            if wait > 0:
                s.phase, s.left = "wait", wait
                s.start = t + wait
                return
        _begin(s, t)

    def end_iteration(self, s: _State, now: float) -> None:
        s.times.append(now - s.start)
        if len(s.times) >= s.run.iterations:
            s.phase, s.finished, s.left = "done", now, math.inf
            return
        if s.run.shifts:
            shift = s.shift_at(now)
            wait = grid_wait(shift, s.grid, now)
            if shift != s.aligned:  # a new shift from a later round: apply it now
                s.aligned = shift
            else:
                late = (s.grid - wait) % s.grid if wait > 0 else 0.0
                period = s.run.profile.iteration_ms
                if not (late > self.pct / 100.0 * period
                        and wait <= self.config.realign_budget_pct / 100.0 * period + EPS):
                    wait = 0.0
            if wait > 0:  # counted in the iteration it ends, as the steady simulation does
                s.realigned += 1
                s.times[-1] += wait
                s.phase, s.left = "wait", wait
                return
        _begin(s, now)


def _begin(s: _State, now: float) -> None:
    s.start = now
    s.phase, s.seg, s.left = "busy", 0, s.segments[0][1]


def traffic_of(routes: Mapping[str, Sequence[Sequence[str]]]) -> dict[str, dict[str, int]]:
    """link "a->b" -> job -> hops, from each job's ring paths."""
    out: dict[str, dict[str, int]] = {}
    for job, paths in routes.items():
        for path in paths:
            for a, b in itertools.pairwise(path):
                per = out.setdefault(f"{a}->{b}", {})
                per[job] = per.get(job, 0) + 1
    return out
