"""Fluid evaluation: what shifts and placements do to iteration times and ECN marks.

No packets: each job alternates compute (fixed duration) and Up phases (a volume to send,
phase Gbps x phase duration). While jobs are in Up phases their rates are the max-min fair
share of the links they cross (a job's ring crosses a link `hops` times and uses hops x its
rate there), capped at the phase's Gbps; an Up phase that gets less than its Gbps lasts
longer and the iteration stretches. Rates only change when a phase starts or ends, so the
simulation jumps from event to event and is exact for this model.

Marks: each link also keeps a fluid queue fed by the *offered* demand (what the jobs in Up
phases would send, sum of hops x Gbps) and drained at capacity, capped at a buffer. The
volume the link sends while that queue is above a threshold (capacity x time above it) is
marked, counted in packets of 1500 bytes and charged to the jobs by their share of the
offered demand. It is a proxy for ECN marks (DCTCP-like senders keep the real queue near the
threshold): it counts how long and how hard links are oversubscribed.

Agents: with `realign_pct`, a job whose iteration would start later than its planned grid
by more than that share of T waits for the next point of the grid, as CASSINI's per-host
agents do; the base has no agents. The grid is not the job's own slots (epoch + shift + k T),
which would cost a late job up to a whole period: a job's interleaving with a partner of
period T_k only depends on its shift modulo gcd(T_j, T_k) (shifting j by that gcd is, by the
Chinese remainder theorem, a common translation of both), so every point of
epoch + shift + m G_j with G_j = lcm over j's link partners of gcd(T_j, T_k) restores all of
j's interleavings at once. With partners of its own period G_j = T_j, as before; a 180 ms job
sharing links only with 300 ms jobs re-aligns on a 60 ms grid. `realign_grid` computes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from innet.cassini.profiles import JobProfile
from innet.errors import InputError

FloatArray = npt.NDArray[np.float64]
_EPS = 1e-9
# Bounds checked before a run (docs/inputs.md): the loop handles about 10^5 events a second
# here, so 2 x 10^6 is some 20 s; and simulated time past 10^8 ms (28 hours) means a
# capacity or a rate so small that the clock's relative step (1e-9 of t) eats into phases.
MAX_EVENTS = 2_000_000
MAX_SPAN_MS = 1e8


@dataclass(frozen=True)
class FluidConfig:
    iterations: int = 100  # measured per job; the run lasts until every job has them
    threshold_kb: float = 100.0  # queue above this marks
    buffer_kb: float = 4000.0  # queue cap (a switch's share of buffer for one port)
    packet_bytes: int = 1500
    realign_pct: float | None = None  # None: no agent; 5.0: CASSINI's agents
    realign_budget_pct: float = 100.0  # the longest wait a re-alignment may cost, % of T
    force: bool = False  # run past MAX_EVENTS (never past MAX_SPAN_MS)

    def check(self) -> None:
        if self.iterations < 1:
            raise InputError(f"--iterations must be >= 1, got {self.iterations}")
        if not 0 < self.threshold_kb < self.buffer_kb:
            raise InputError(f"the marking threshold must be in (0, buffer = "
                             f"{self.buffer_kb:g} KB), got {self.threshold_kb:g} KB")


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


_US = 1000


def realign_grid(jobs: Sequence[JobProfile],
                 traffic: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """G_j = lcm over the jobs sharing a link with j of gcd(T_j, T_k), in ms (periods taken
    on whole microseconds); T_j for a job that shares no link."""
    period = {j.name: max(1, round(j.iteration_ms * _US)) for j in jobs}
    partners: dict[str, set[str]] = {j.name: set() for j in jobs}
    for per in traffic.values():
        names = [n for n in per if n in period]
        for a in names:
            partners[a].update(n for n in names if n != a)
    out = {}
    for name, others in partners.items():
        grid = math.lcm(*(math.gcd(period[name], period[k]) for k in others)) if others else 0
        out[name] = (grid or period[name]) / _US
    return out


def segments(job: JobProfile) -> list[tuple[bool, float, float]]:
    """One iteration as (is_up, ms or Mbit, Gbps) in order: the compute gaps and the Up
    phases' volumes (what every engine runs one after the other)."""
    out: list[tuple[bool, float, float]] = []
    t = 0.0
    for p in job.phases:
        if p.start_ms > t + _EPS:
            out.append((False, p.start_ms - t, 0.0))
        out.append((True, p.volume_mbit, p.gbps))
        t = p.end_ms
    if job.iteration_ms > t + _EPS:
        out.append((False, job.iteration_ms - t, 0.0))
    return out


def _max_min(active: Sequence[_Job], capacity: Sequence[float]) -> list[float]:
    """Progressive filling: raise every unfrozen job's rate together until a link fills or a
    job reaches its phase's Gbps; hops weigh a job's use of a link. Only the links of the
    active jobs are touched (the arithmetic is the same, in the same order)."""
    rate = [0.0] * len(active)
    links = [j.links for j in active]
    room: dict[int, float] = {}
    tol: dict[int, float] = {}
    for ls in links:
        for link, _ in ls:
            room[link] = capacity[link]
            tol[link] = _EPS * max(1.0, capacity[link])
    want = [j.segments[j.seg][2] for j in active]
    live = list(range(len(active)))
    while live:
        load: dict[int, float] = {}
        for i in live:
            for link, hops in links[i]:
                load[link] = load.get(link, 0.0) + hops
        step = min(min(want[i] - rate[i] for i in live),
                   min((room[link] / weight for link, weight in load.items()),
                       default=math.inf))
        step = max(step, 0.0)
        for i in live:
            rate[i] += step
            for link, hops in links[i]:
                room[link] -= step * hops
        full = {link for link in load if room[link] <= tol[link]}
        live = [i for i in live if not (rate[i] >= want[i] - _EPS
                                        or any(link in full for link, _ in links[i]))]
    return rate


class _Phased(Protocol):
    """What the link accounting reads of a job: its segments, the current one, its links."""

    segments: list[tuple[bool, float, float]]
    seg: int
    links: list[tuple[int, int]]


_P = TypeVar("_P", bound=_Phased)


def _fill(queue: list[float], queued: set[int], i: int, change: float, buffer: float) -> None:
    """Link i's queue after a step that changed it by `change`, within 0..buffer; `queued`
    keeps the links with something queued, the only ones a quiet step must visit."""
    queue[i] = min(buffer, max(0.0, queue[i] + change))
    if queue[i] > 0:
        queued.add(i)
    else:
        queued.discard(i)


def _offered(up: Sequence[_P], n_links: int) -> tuple[list[float],
                                                      list[list[tuple[_P, float]]]]:
    """Per link: the Gbps the jobs in an Up phase offer it (hops weigh), and each job's part
    of it (marks are charged in proportion). One place for the fluid run and the trace run."""
    offered = [0.0] * n_links
    shares: list[list[tuple[_P, float]]] = [[] for _ in range(n_links)]
    for s in up:
        gbps = s.segments[s.seg][2]
        for link, hops in s.links:
            offered[link] += hops * gbps
            shares[link].append((s, hops * gbps))
    return offered, shares


def _time_above(q0: float, slope: float, dt: float, threshold: float) -> float:
    if slope > 0:
        return dt if q0 > threshold else max(0.0, dt - (threshold - q0) / slope)
    if slope < 0:
        return 0.0 if q0 <= threshold else min(dt, (q0 - threshold) / -slope)
    return dt if q0 > threshold else 0.0


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
        fastest = max(_EPS, down + sum(p.volume_mbit / min(p.gbps, alone)
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
             config: FluidConfig = FluidConfig(), label: str = "") -> FluidResult:
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
    index = {link: i for i, link in enumerate(names)}
    capacity = [float(capacity_gbps[link]) for link in names]
    state = [_Job(j, segments(j), [(index[link], int(traffic[link][j.name]))
                                    for link in names if j.name in traffic[link]],
                  float(shifts_ms.get(j.name, 0.0)) % j.iteration_ms) for j in jobs]
    grids = realign_grid(jobs, traffic)
    for s in state:
        s.left = s.shift  # wait for the first start
        s.grid = grids[s.profile.name]
    queue = [0.0] * len(names)
    queued: set[int] = set()  # links whose queue is not empty
    threshold = config.threshold_kb * 8e-3  # KB -> Mbit
    buffer = config.buffer_kb * 8e-3
    per_packet = config.packet_bytes * 8e-6  # Mbit
    marks = [0.0] * len(names)
    excess = [0.0] * len(names)
    overloaded = [0.0] * len(names)
    t = 0.0
    guard = 0
    horizon = bound.span_ms * 1.01 + 2 * max(j.iteration_ms for j in jobs)
    while any(len(s.times) < config.iterations for s in state):
        guard += 1
        if t > horizon or guard > 2 * bound.events + 1000:  # a bound above did not hold
            raise RuntimeError(f"fluid simulation past its bound (t {t:.6g} of {horizon:.6g} "
                               f"ms, {guard} of {bound.events} steps)")
        up = [s for s in state if s.seg >= 0 and s.segments[s.seg][0]]
        rates = _max_min(up, capacity) if up else []
        dt = math.inf
        for s in state:
            if s.seg < 0 or not s.segments[s.seg][0]:
                dt = min(dt, s.left)
        for s, r in zip(up, rates, strict=True):
            if r > 0:
                dt = min(dt, s.left / r)
        if not math.isfinite(dt):  # every job in an Up phase that gets no rate at all
            raise RuntimeError("fluid simulation: no job can progress (a zero rate)")
        dt = max(dt, 0.0)
        offered, shares = _offered(up, len(names))
        # only links offered traffic or holding a queue can change: an idle, empty link
        # stays empty and marks nothing (skipping it leaves every sum as it was)
        active = {link for s in up for link, _ in s.links} | queued
        for i in sorted(active):
            slope = offered[i] - capacity[i]
            above = _time_above(queue[i], slope, dt, threshold)
            if above > 0:
                volume = capacity[i] * above / per_packet
                marks[i] += volume
                for s, part in shares[i]:
                    s.marks += volume * part / offered[i]
            if slope > 0:
                excess[i] += slope * dt
                overloaded[i] += dt
            _fill(queue, queued, i, slope * dt, buffer)
        t += dt
        rate_of = {id(s): r for s, r in zip(up, rates, strict=True)}
        for s in state:
            if s.seg >= 0 and s.segments[s.seg][0]:
                s.left -= rate_of[id(s)] * dt
            else:
                s.left -= dt
        done_at = _EPS * max(1.0, t)
        for s in state:
            while s.left <= done_at:
                _advance(s, t, config)
    return FluidResult(label, tuple(JobRun(s.profile.name, s.profile.iteration_ms,
                                           tuple(s.times[:config.iterations]), s.marks,
                                           s.realigned) for s in state),
                       tuple(LinkRun(link, capacity[i], tuple(traffic[link]), marks[i],
                                     excess[i], overloaded[i]) for i, link in enumerate(names)),
                       t, dict(shifts_ms))


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
                and s.grid - late <= config.realign_budget_pct / 100.0 * period + _EPS):
            s.seg = -1
            s.left = s.grid - late
            s.realigned += 1
            if s.left > _EPS * max(1.0, t):
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
                   config: FluidConfig = FluidConfig(), label: str = "",
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
