"""The fluid model both simulations share: its settings, one job's segments, the agents'
re-alignment grid, max-min rates and the step that moves every link and job forward.

No packets: each job alternates compute (fixed duration) and Up phases (a volume to send,
phase Gbps x phase duration). While jobs are in Up phases their rates are the max-min fair
share of the links they cross (a job's ring crosses a link `hops` times and uses hops x its
rate there), capped at the phase's Gbps; an Up phase that gets less than its Gbps lasts
longer and the iteration stretches. Rates only change when a phase starts or ends, so a
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

The steady simulation (`steady.simulate`: a fixed set of jobs until each has enough
iterations) and the trace simulation (`trace.simulate_trace`: jobs that arrive, train and
leave) differ only in when jobs start and stop; both advance time with `step`, so the two
cannot drift apart in how rates, queues and marks evolve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from innet.cassini.model.profiles import JobProfile
from innet.errors import InputError

EPS = 1e-9  # the clock's relative resolution: what is this close counts as done
# Bounds checked before a run (docs/inputs.md): the loop handles about 10^5 events a second
# here, so 2 x 10^6 is some 20 s.
MAX_EVENTS = 2_000_000
_US = 1000


@dataclass(frozen=True)
class FluidConfig:
    """How a run is measured, whichever engine runs it (ns-3 reads the same settings)."""

    iterations: int = 100  # measured per job; the run lasts until every job has them
    threshold_kb: float = 100.0  # queue above this marks
    buffer_kb: float = 4000.0  # queue cap (a switch's share of buffer for one port)
    packet_bytes: int = 1500
    realign_pct: float | None = None  # None: no agent; 5.0: CASSINI's agents
    realign_budget_pct: float = 100.0  # the longest wait a re-alignment may cost, % of T
    force: bool = False  # run past MAX_EVENTS (never past steady.MAX_SPAN_MS)

    def check(self) -> None:
        if self.iterations < 1:
            raise InputError(f"--iterations must be >= 1, got {self.iterations}")
        if not 0 < self.threshold_kb < self.buffer_kb:
            raise InputError(f"the marking threshold must be in (0, buffer = "
                             f"{self.buffer_kb:g} KB), got {self.threshold_kb:g} KB")

    def without_agents(self) -> FluidConfig:
        """The same run for an arm that has no shifts to keep (the base)."""
        return replace(self, realign_pct=None)


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
        if p.start_ms > t + EPS:
            out.append((False, p.start_ms - t, 0.0))
        out.append((True, p.volume_mbit, p.gbps))
        t = p.end_ms
    if job.iteration_ms > t + EPS:
        out.append((False, job.iteration_ms - t, 0.0))
    return out


class Phased(Protocol):
    """What the step reads and moves of a job: its segments, the current one, its links,
    what is left of the segment (ms, or Mbit in an Up phase) and the marks charged to it."""

    segments: list[tuple[bool, float, float]]
    seg: int
    links: list[tuple[int, int]]
    left: float
    marks: float


_P = TypeVar("_P", bound=Phased)


def max_min(active: Sequence[Phased], capacity: Sequence[float]) -> list[float]:
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
            tol[link] = EPS * max(1.0, capacity[link])
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
        live = [i for i in live if not (rate[i] >= want[i] - EPS
                                        or any(link in full for link, _ in links[i]))]
    return rate


def _offered(up: Sequence[_P], n_links: int) -> tuple[list[float],
                                                      list[list[tuple[_P, float]]]]:
    """Per link: the Gbps the jobs in an Up phase offer it (hops weigh), and each job's part
    of it (marks are charged in proportion)."""
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


@dataclass
class Links:
    """The links of a run, by index: capacity, fluid queue and what each has counted."""

    capacity: list[float]
    threshold: float  # Mbit
    buffer: float  # Mbit
    per_packet: float  # Mbit
    queue: list[float] = field(default_factory=list)
    queued: set[int] = field(default_factory=set)  # links whose queue is not empty
    marks: list[float] = field(default_factory=list)  # packets
    excess: list[float] = field(default_factory=list)  # Mbit offered above capacity
    overloaded: list[float] = field(default_factory=list)  # ms offered above capacity

    @classmethod
    def of(cls, capacity: Sequence[float], config: FluidConfig) -> Links:
        n = len(capacity)
        return cls(list(capacity), config.threshold_kb * 8e-3, config.buffer_kb * 8e-3,
                   config.packet_bytes * 8e-6, [0.0] * n, set(), [0.0] * n, [0.0] * n,
                   [0.0] * n)

    def account(self, up: Sequence[Phased], dt: float) -> None:
        """dt ms of the jobs in `up` sending: queues, marks (charged to the jobs), excess.
        Only links offered traffic or holding a queue can change: an idle, empty link
        stays empty and marks nothing (skipping it leaves every sum as it was)."""
        offered, shares = _offered(up, len(self.capacity))
        for i in sorted({link for s in up for link, _ in s.links} | self.queued):
            slope = offered[i] - self.capacity[i]
            above = _time_above(self.queue[i], slope, dt, self.threshold)
            if above > 0:  # a draining queue above the threshold marks too
                volume = self.capacity[i] * above / self.per_packet
                self.marks[i] += volume
                for s, part in shares[i]:
                    s.marks += volume * part / offered[i]
            if slope > 0:
                self.excess[i] += slope * dt
                self.overloaded[i] += dt
            self._fill(i, slope * dt)

    def _fill(self, i: int, change: float) -> None:
        """Link i's queue after a step that changed it by `change`, within 0..buffer."""
        self.queue[i] = min(self.buffer, max(0.0, self.queue[i] + change))
        if self.queue[i] > 0:
            self.queued.add(i)
        else:
            self.queued.discard(i)


def step(links: Links, up: Sequence[Phased], timers: Sequence[Phased], until: float,
         stuck: str) -> float:
    """Move to the next event and return how long that took (ms): jobs in `up` send at
    their max-min rates, `timers` (compute, waits) count down, and nothing happens later
    than `until` ms from now. RuntimeError(`stuck`) when nothing can ever happen."""
    rates = max_min(up, links.capacity) if up else []
    dt = min((s.left for s in timers), default=math.inf)
    dt = min(dt, until)
    for s, r in zip(up, rates, strict=True):
        if r > 0:
            dt = min(dt, s.left / r)
    if not math.isfinite(dt):
        raise RuntimeError(stuck)
    dt = max(dt, 0.0)
    links.account(up, dt)
    for s, r in zip(up, rates, strict=True):
        s.left -= r * dt
    for s in timers:
        s.left -= dt
    return dt
