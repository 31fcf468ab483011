"""The steady fluid simulation: a fixed set of jobs, each run until it has measured enough
iterations, which is what `cassini plan` and `cassini evaluate --jobs` compare arms by.

The model (rates, queues, marks, the agents' grid) is `fluid`'s; this module adds the
bounds checked before a run, the per-job and per-link results, and the split of a cluster
into the groups of jobs that share links (`simulate_parts`), which run independently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

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

FloatArray = npt.NDArray[np.float64]
# Simulated time past 10^8 ms (28 hours) means a capacity or a rate so small that the
# clock's relative step (1e-9 of t) eats into phases (fluid.MAX_EVENTS bounds the steps).
MAX_SPAN_MS = 1e8
_DEFAULT = FluidConfig()


@dataclass(frozen=True)
class JobRun:
    name: str
    iteration_ms: float  # the profile's, without contention
    iterations_ms: tuple[float, ...]  # measured, start to start
    marks: float  # packets
    realignments: int

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.iterations_ms))

    @property
    def p99_ms(self) -> float:
        return float(np.percentile(self.iterations_ms, 99))

    @property
    def slowdown(self) -> tuple[float, ...]:
        return tuple(t / self.iteration_ms for t in self.iterations_ms)


@dataclass(frozen=True)
class LinkRun:
    name: str
    capacity_gbps: float
    jobs: tuple[str, ...]
    marks: float  # packets
    excess_mbit: float  # offered demand above capacity, integrated
    overloaded_ms: float  # time offered demand exceeded capacity


@dataclass(frozen=True)
class FluidResult:
    label: str
    jobs: tuple[JobRun, ...]
    links: tuple[LinkRun, ...]
    duration_ms: float
    shifts_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def marks(self) -> float:
        return sum(link.marks for link in self.links)

    def pooled(self, normalise: bool) -> FloatArray:
        """Every measured iteration of every job, in ms or as a multiple of the job's T."""
        values = [v for j in self.jobs for v in (j.slowdown if normalise else j.iterations_ms)]
        return np.asarray(values, dtype=np.float64)

    def summary(self, normalise: bool) -> tuple[float, float]:
        pooled = self.pooled(normalise)
        return float(pooled.mean()), float(np.percentile(pooled, 99))


@dataclass
class _Job:
    profile: JobProfile
    segments: list[tuple[bool, float, float]]  # (is_up, ms or Mbit, Gbps)
    links: list[tuple[int, int]]  # (link index, hops)
    shift: float
    seg: int = -1  # -1: waiting to start (or to realign)
    left: float = 0.0
    start: float = math.nan
    times: list[float] = field(default_factory=list)
    marks: float = 0.0
    realigned: int = 0
    grid: float = 0.0  # re-alignment grid (ms): see realign_grid


@dataclass(frozen=True)
class RunBound:
    """What a run can cost at most, from the input alone: simulated ms and events."""

    span_ms: float
    events: int
    slowest: str  # the job whose contended iteration bounds the span
    slowest_ms: float


def run_bound(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]],
              capacity_gbps: Mapping[str, float], iterations: int) -> RunBound:
    """Upper bounds, before running: max-min filling gives a job in an Up phase at least
    min(its Gbps, min over its links of C / (hops of every job on the link)), so its
    iteration lasts at most its Down time + volume / that rate, plus one re-alignment wait
    (< T); the run lasts until the slowest has `iterations` + 1 of them. A job iterates at
    most span / (its fastest iteration) times, and each iteration is one event per segment
    (and a wait)."""
    hops_on = {link: sum(per.values()) for link, per in traffic.items()}
    worst: dict[str, float] = {}
    events = 0.0
    for j in jobs:
        links = [link for link, per in traffic.items() if j.name in per]
        share = min((float(capacity_gbps[link]) / hops_on[link] for link in links),
                    default=math.inf)
        down = sum(seg[1] for seg in segments(j) if not seg[0])
        ups = [p for p in j.phases if p.gbps > 0]
        worst[j.name] = down + sum(p.volume_mbit / min(p.gbps, share) for p in ups) \
            + j.iteration_ms
    slowest = max(worst, key=lambda n: worst[n]) if worst else ""
    span = (iterations + 1) * (worst[slowest] if worst else 0.0)
    for j in jobs:
        links = [link for link, per in traffic.items() if j.name in per]
        alone = min((float(capacity_gbps[link]) / traffic[link][j.name] for link in links),
                    default=math.inf)
        down = sum(seg[1] for seg in segments(j) if not seg[0])
        fastest = max(EPS, down + sum(p.volume_mbit / min(p.gbps, alone)
                                       for p in j.phases if p.gbps > 0))
        events += (span / fastest + 2) * (len(segments(j)) + 1)
    return RunBound(span, int(min(events, 1e18)), slowest, worst.get(slowest, 0.0))


def check_bound(bound: RunBound, config: FluidConfig) -> None:
    """Refuse a run whose clock cannot step or that would run past the machine's patience."""
    if not bound.span_ms <= MAX_SPAN_MS:
        raise InputError(f"a capacity or rate too small to simulate: an iteration of "
                         f"{_elide(bound.slowest)} may last {bound.slowest_ms / 1000:.3g} s, "
                         f"the run {bound.span_ms / 3.6e6:.3g} h of simulated time (at most "
                         f"{MAX_SPAN_MS / 3.6e6:.3g}); raise the capacity or lower --iterations")
    if bound.events > MAX_EVENTS and not config.force:
        raise InputError(f"the fluid model would take up to {bound.events:.3g} steps "
                         f"(about {bound.events / 1e5:.0f} s; at most {MAX_EVENTS:.0e} without "
                         f"--force): lower --iterations or raise the capacity")


def _elide(name: str, keep: int = 40) -> str:
    return name if len(name) <= keep else f"{name[:20]}...{name[-17:]}"


def simulate(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]],
             capacity_gbps: Mapping[str, float], shifts_ms: Mapping[str, float],
             config: FluidConfig = _DEFAULT, label: str = "") -> FluidResult:
    """Run every job until each has `config.iterations` measured iterations.

    traffic: link -> job -> hops of the job's ring over the link; capacity_gbps: link ->
    Gbps; shifts_ms: job -> ms its first iteration starts after the epoch (missing: 0).
    Refused up front (InputError) when `run_bound` exceeds the limits.
    """
    config.check()
    used = {link: per for link, per in traffic.items() if per}
    bound = run_bound(jobs, used, capacity_gbps, config.iterations)
    check_bound(bound, config)
    names = [link for link in traffic if traffic[link]]
    state = _states(jobs, traffic, names, shifts_ms)
    links = Links.of([float(capacity_gbps[link]) for link in names], config)
    t = 0.0
    guard = 0
    horizon = bound.span_ms * 1.01 + 2 * max(j.iteration_ms for j in jobs)
    while any(len(s.times) < config.iterations for s in state):
        guard += 1
        if t > horizon or guard > 2 * bound.events + 1000:  # a bound above did not hold
            raise RuntimeError(f"fluid simulation past its bound (t {t:.6g} of {horizon:.6g} "
                               f"ms, {guard} of {bound.events} steps)")
        up = [s for s in state if s.seg >= 0 and s.segments[s.seg][0]]
        timers = [s for s in state if s.seg < 0 or not s.segments[s.seg][0]]
        # every job in an Up phase that gets no rate at all: nothing can ever happen
        t += step(links, up, timers, math.inf,
                  "fluid simulation: no job can progress (a zero rate)")
        done_at = EPS * max(1.0, t)
        for s in state:
            while s.left <= done_at:
                _advance(s, t, config)
    return FluidResult(label, tuple(JobRun(s.profile.name, s.profile.iteration_ms,
                                           tuple(s.times[:config.iterations]), s.marks,
                                           s.realigned) for s in state),
                       tuple(LinkRun(link, links.capacity[i], tuple(traffic[link]),
                                     links.marks[i], links.excess[i], links.overloaded[i])
                             for i, link in enumerate(names)),
                       t, dict(shifts_ms))


def _states(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]],
            names: Sequence[str], shifts_ms: Mapping[str, float]) -> list[_Job]:
    """Each job before its first start: waiting out its shift, on its re-alignment grid."""
    index = {link: i for i, link in enumerate(names)}
    state = [_Job(j, segments(j), [(index[link], int(traffic[link][j.name]))
                                    for link in names if j.name in traffic[link]],
                  float(shifts_ms.get(j.name, 0.0)) % j.iteration_ms) for j in jobs]
    grids = realign_grid(jobs, traffic)
    for s in state:
        s.left = s.shift  # wait for the first start
        s.grid = grids[s.profile.name]
    return state


def _advance(s: _Job, t: float, config: FluidConfig) -> None:
    """The current segment is over: start the next one, or the next iteration."""
    if 0 <= s.seg < len(s.segments) - 1:
        s.seg += 1
        s.left = s.segments[s.seg][1]
        return
    if s.seg >= 0 and config.realign_pct is not None:  # an iteration ended: on the grid?
        late = (t - s.shift) % s.grid
        if s.grid - late <= 1e-6:  # on the grid, up to float rounding
            late = 0.0
        period = s.profile.iteration_ms
        if (late > config.realign_pct / 100.0 * period
                and s.grid - late <= config.realign_budget_pct / 100.0 * period + EPS):
            s.seg = -1
            s.left = s.grid - late
            s.realigned += 1
            if s.left > EPS * max(1.0, t):
                return
    if not math.isnan(s.start):
        s.times.append(t - s.start)
    s.start = t
    s.seg = 0
    s.left = s.segments[0][1]


def single_link(jobs: Sequence[JobProfile], capacity_gbps: float,
                name: str = "link") -> tuple[dict[str, dict[str, int]], dict[str, float]]:
    """traffic and capacity maps for jobs that all share one link (and nothing else)."""
    return {name: {j.name: 1 for j in jobs}}, {name: float(capacity_gbps)}


Cache = dict[tuple[Any, ...], FluidResult]


def components(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]]
               ) -> list[tuple[list[JobProfile], dict[str, dict[str, int]]]]:
    """The jobs joined by the links they share, each group with its links' traffic (a job
    that shares nothing is a group of its own, with no links)."""
    parent = {j.name: j.name for j in jobs}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for per in traffic.values():
        names = [n for n in per if n in parent]
        for a in names[1:]:
            parent[find(a)] = find(names[0])
    groups: dict[str, tuple[list[JobProfile], dict[str, dict[str, int]]]] = {}
    for job in jobs:
        groups.setdefault(find(job.name), ([], {}))[0].append(job)
    for link, per in traffic.items():  # one pass: a large cluster has hundreds of groups
        if per and all(n in parent for n in per):
            groups[find(next(iter(per)))][1][link] = dict(per)
    return list(groups.values())


def simulate_parts(jobs: Sequence[JobProfile], traffic: Mapping[str, Mapping[str, int]],
                   capacity_gbps: Mapping[str, float], shifts_ms: Mapping[str, float],
                   config: FluidConfig = _DEFAULT, label: str = "",
                   cache: Cache | None = None) -> FluidResult:
    """`simulate`, one connected component (jobs joined by the links they share) at a time.

    Jobs of different components never meet on a link, so each component runs on its own
    exactly as in the whole: every job's measured iterations are the same as `simulate`'s.
    Marks differ in one way: a component's links count them while its own jobs run, not
    until the slowest job of the whole cluster is done. With `cache`, a
    component already run with the same jobs, shifts, links and settings (the running jobs
    recur in every candidate placement) is not run again.
    """
    runs: dict[str, JobRun] = {}
    links: dict[str, LinkRun] = {}
    duration = 0.0
    for members, sub in components(jobs, traffic):
        cap = {link: capacity_gbps[link] for link in sub}
        shifts = {j.name: float(shifts_ms.get(j.name, 0.0)) for j in members}
        key = (tuple((j.name, j.iteration_ms, j.phases) for j in members),
               tuple(sorted(shifts.items())),
               tuple(sorted((link, tuple(sorted(per.items())), cap[link])
                            for link, per in sub.items())), config)
        part = cache.get(key) if cache is not None else None
        if part is None:
            part = simulate(members, sub, cap, shifts, config, label)
            if cache is not None:
                cache[key] = part
        runs.update((r.name, r) for r in part.jobs)
        links.update((r.name, r) for r in part.links)
        duration = max(duration, part.duration_ms)
    return FluidResult(label, tuple(runs[j.name] for j in jobs),
                       tuple(links[link] for link in traffic if link in links), duration,
                       dict(shifts_ms))
