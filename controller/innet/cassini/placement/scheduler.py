"""Scheduling on a topology: a Themis-like base proposes placements, CASSINI ranks them.

A cluster is a `innet.topology.Topology` whose hosts carry GPUs (`gpus`, default 1);
a job gets one GPU slot per GPU it asks for. A job spanning several hosts runs a ring
all-reduce: host i sends to host i+1 (and the last to the first) at the rate of the job's Up
phase, along the path the switches forward on (`innet.routing`: shortest, equal-cost
choices spread by destination), so the links CASSINI plans for are the ones the data plane
loads. On a leaf-spine, the links shared by two or more jobs are the uplinks and downlinks
of racks that hold pieces of several jobs.

The base is Themis-like: jobs furthest behind their fair share (highest finish-time
fairness rho = (waited + work) / work) get GPUs first; each job goes to the tightest rack
that holds it whole, else across the racks with most free GPUs. Jobs with equal rho can be
served in any order and a job fits equally well in any rack that holds it, so those choices
give several placements of equal fairness: the candidates. Candidate 0 is the base's own
pick. CASSINI scores each candidate by the mean compatibility of its shared links (best
shifts per link), drops candidates whose Affinity graph has a conflicting loop, takes the
best and assigns each job its shift. Everything here is a pure function of its inputs.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from innet.cassini.model.affinity import Assignment, Conflict, LinkShifts, assign_shifts
from innet.cassini.model.geometry import (
    DEFAULT_PRECISION_DEG,
    DEFAULT_RESOLUTION_MS,
    LinkSolution,
    best_shifts,
    score_at,
)
from innet.cassini.model.profiles import JobProfile, Phase, check_names
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import Cache, components, simulate_parts
from innet.cassini.sim.trace import TraceJobRun, TraceResult, TraceSchedule, simulate_trace
from innet.errors import InputError
from innet.names import natural_key
from innet.routing import Hop, host_path, next_hops
from innet.topology import Topology

LinkKey = tuple[str, str]


def link_name(key: LinkKey) -> str:
    return f"{key[0]}->{key[1]}"


# ------------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class Cluster:
    """GPU slots grouped by the switch their host hangs from, and every directed link's Gbps."""

    topology: Topology
    racks: tuple[tuple[str, tuple[str, ...]], ...]  # (switch, one host name per GPU)
    capacity_gbps: Mapping[LinkKey, float]

    @property
    def gpus(self) -> int:
        return sum(len(slots) for _, slots in self.racks)

    def rack_of(self, host: str) -> str:
        return self.topology.host_switch(host)[0]


def cluster_from_topology(topology: Topology) -> Cluster:
    racks: dict[str, list[str]] = {}
    for host in sorted(topology.hosts.values(), key=lambda h: natural_key(h.name)):
        switch = topology.host_switch(host.name)[0]
        racks.setdefault(switch, []).extend([host.name] * host.gpus)
    capacity: dict[LinkKey, float] = {}
    for i, link in enumerate(topology.links):
        if link.mbps is None:
            raise InputError(f"links[{i}] ({link.a.node}-{link.b.node}) has no Mbps: CASSINI "
                             "needs every link's capacity", source=topology.source)
        capacity[(link.a.node, link.b.node)] = link.mbps / 1000.0
        capacity[(link.b.node, link.a.node)] = link.mbps / 1000.0
    ordered = sorted(racks.items(), key=lambda kv: natural_key(kv[0]))
    return Cluster(topology, tuple((s, tuple(h)) for s, h in ordered), capacity)


class _Router:
    """Host-to-host paths as the switches forward them (`innet.routing`), cached per
    destination for the whole planning."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.hops: dict[str, dict[str, Hop]] = {}
        self.cache: dict[LinkKey, tuple[str, ...]] = {}

    def path(self, a: str, b: str) -> tuple[str, ...]:
        key = (a, b)
        if key not in self.cache:
            if b not in self.hops:
                self.hops[b] = next_hops(self.topology, b)
            self.cache[key] = host_path(self.topology, a, b, self.hops[b])
        return self.cache[key]


def ring_hops(hosts: Sequence[str]) -> list[LinkKey]:
    """Host pairs of a ring all-reduce; GPUs of one host talk inside it, not on the wire."""
    ring: list[str] = []
    for h in hosts:
        if not ring or ring[-1] != h:
            ring.append(h)
    if len(ring) > 1 and ring[0] == ring[-1]:
        ring.pop()
    if len(ring) < 2:
        return []
    return [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]


# ---------------------------------------------------------------------------- the base (Themis)


@dataclass(frozen=True)
class Placement:
    """job -> one host per GPU, in ring order (rack by rack)."""

    hosts: Mapping[str, tuple[str, ...]]

    def key(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple(sorted(self.hosts.items()))


@dataclass(frozen=True)
class Proposal:
    """What a base scheduler hands CASSINI: candidates of equal fairness, and who waits."""

    candidates: tuple[Placement, ...]
    waiting: tuple[str, ...]


class BaseScheduler(Protocol):
    def __call__(self, cluster: Cluster, jobs: Sequence[JobProfile], count: int,
                 seed: int) -> Proposal: ...


def finish_time_fairness(job: JobProfile) -> float:
    """Themis's rho for a job not yet served: time to finish (waited + work) over the time it
    would take alone (work). The larger, the further behind its fair share."""
    return (job.waited_ms + job.work_ms) / job.work_ms


def _pinned_free(cluster: Cluster, jobs: Sequence[JobProfile]) -> dict[str, list[str]]:
    free = {rack: list(slots) for rack, slots in cluster.racks}
    where = {h: rack for rack, slots in cluster.racks for h in slots}
    for job in jobs:
        if job.hosts is None:
            continue
        for h in job.hosts:
            if h not in cluster.topology.hosts:
                raise InputError(f"job {job.name!r}: hosts: unknown host {h!r}")
            rack = where.get(h)
            if rack is None or h not in free[rack]:
                raise InputError(f"job {job.name!r}: hosts: host {h!r} has no free GPU left "
                                 f"({cluster.topology.hosts[h].gpus} GPU(s) in all)")
            free[rack].remove(h)
    return free


def _pack(order: Sequence[JobProfile], free: Mapping[str, list[str]],
          rng: np.random.Generator | None) -> dict[str, tuple[str, ...]]:
    free = {rack: list(slots) for rack, slots in free.items()}
    out: dict[str, tuple[str, ...]] = {}
    for job in order:
        g = job.gpus
        racks = list(free)
        fits = [r for r in racks if len(free[r]) >= g]
        taken: list[str] = []
        if fits:
            if rng is None:
                rack = min(fits, key=lambda r: len(free[r]))  # best fit, first on ties
            else:
                rack = fits[int(rng.integers(len(fits)))]
            taken, free[rack] = free[rack][:g], free[rack][g:]
        else:
            ties = (rng.permutation(len(racks)) if rng is not None else np.arange(len(racks)))
            order_r = sorted(range(len(racks)), key=lambda i: (-len(free[racks[i]]), ties[i]))
            for i in order_r:
                rack = racks[i]
                n = min(g - len(taken), len(free[rack]))
                taken += free[rack][:n]
                free[rack] = free[rack][n:]
                if len(taken) == g:
                    break
        out[job.name] = tuple(taken)
    return out


def themis_candidates(cluster: Cluster, jobs: Sequence[JobProfile], count: int = 20,
                      seed: int = 0) -> Proposal:
    """Up to `count` distinct placements of equal finish-time fairness; candidate 0 is the
    deterministic best-fit in fairness order (what the base alone would run).

    The others alternate between kinds, so that none crowds the others out: best-fit
    with two jobs of the same size trading their GPUs (`_swaps`: the same racks filled the
    same way, only which job crosses which link changes, which is what CASSINI's ranking is
    about), and packings in a random order within each fairness group with random ties
    (other fragments, other racks spanned). When the jobs leave GPUs free, every third is a
    random packing into the fewest racks that hold them (`_fewest_racks`, random slots
    within them, so that rings take other spines), from a stream of its own so that the
    other kinds stay what they were: the GPUs left over are whole racks with quiet uplinks,
    where a job arriving later shares no link with the running ones."""
    total = cluster.gpus
    for job in jobs:
        if job.gpus > total:
            raise InputError(f"job {job.name!r}: gpus {job.gpus} is more than the cluster's "
                             f"{total} GPUs")
    free = _pinned_free(cluster, jobs)
    pinned = {j.name: j.hosts for j in jobs if j.hosts is not None}
    rho = {j.name: finish_time_fairness(j) for j in jobs}
    movable = sorted((j for j in jobs if j.hosts is None), key=lambda j: -rho[j.name])
    left = sum(len(s) for s in free.values())
    admitted: list[JobProfile] = []
    waiting: list[str] = []
    for job in movable:
        if job.gpus <= left:
            admitted.append(job)
            left -= job.gpus
        else:
            waiting.append(job.name)

    def build(hosts: Mapping[str, tuple[str, ...]]) -> Placement:
        merged = {**{k: v for k, v in pinned.items() if v is not None}, **hosts}
        return Placement({j.name: merged[j.name] for j in jobs if j.name in merged})

    candidates = [build(_pack(admitted, free, None))]
    seen = {candidates[0].key()}
    rng = np.random.default_rng(seed)
    groups: list[list[JobProfile]] = []
    for job in admitted:
        if groups and math.isclose(rho[groups[-1][0].name], rho[job.name], rel_tol=1e-9):
            groups[-1].append(job)
        else:
            groups.append([job])
    swaps = _swaps(cluster, admitted, candidates[0].hosts, rng)
    compact_rng = np.random.default_rng([seed, 1])
    compact = _fewest_racks(free, sum(j.gpus for j in admitted), compact_rng)
    tries = 0
    while len(candidates) < count and tries < count * 20:
        tries += 1
        placement = None
        if compact is not None and tries % 3 == 0:
            order = [g[i] for g in groups for i in compact_rng.permutation(len(g))]
            slots = {r: [h[i] for i in compact_rng.permutation(len(h))]
                     for r, h in compact.items()}
            placement = _pack(order, slots, compact_rng)
        elif tries % 2 == 1:
            placement = next(swaps, None)
        if placement is None:
            order = [g[i] for g in groups for i in rng.permutation(len(g))]
            placement = _pack(order, free, rng)
        built = build(placement)
        if built.key() not in seen:
            seen.add(built.key())
            candidates.append(built)
    return Proposal(tuple(candidates), tuple(waiting))


def _fewest_racks(free: Mapping[str, list[str]], need: int,
                  rng: np.random.Generator) -> dict[str, list[str]] | None:
    """The free GPUs of the fewest racks that hold `need` (the racks with most free first,
    random ties), or None when those are every rack with a free GPU (nothing left whole).

    Packing into these leaves the other racks' GPUs free and their uplinks quiet: a job
    arriving later can take them without sharing a link with a running one. A scheduler
    that knows nothing of the arrivals still knows that fragments next to busy uplinks are
    where arrivals collide."""
    racks = [r for r in free if free[r]]
    ties = rng.permutation(len(racks))
    order = sorted(range(len(racks)), key=lambda i: (-len(free[racks[i]]), ties[i]))
    out: dict[str, list[str]] = {}
    got = 0
    for i in order:
        if got >= need:
            break
        out[racks[i]] = free[racks[i]]
        got += len(free[racks[i]])
    return out if len(out) < len(racks) else None


def _swaps(cluster: Cluster, admitted: Sequence[JobProfile],
           first: Mapping[str, tuple[str, ...]],
           rng: np.random.Generator) -> Iterator[dict[str, tuple[str, ...]]]:
    """`first` with two admitted jobs of the same size trading hosts, in a random order of
    the pairs; only pairs where one of the two spans racks (two jobs inside racks trade
    nothing a link sees)."""
    spans = {j.name: len({cluster.rack_of(h) for h in first[j.name]}) > 1 for j in admitted}
    pairs = [(a.name, b.name) for i, a in enumerate(admitted) for b in admitted[i + 1:]
             if a.gpus == b.gpus and (spans[a.name] or spans[b.name])]
    for k in rng.permutation(len(pairs)):
        a, b = pairs[int(k)]
        yield {**first, a: first[b], b: first[a]}


# ------------------------------------------------------------------------- CASSINI's ranking


@dataclass(frozen=True)
class SharedLink:
    """Links carrying the same two or more jobs (merged), their scores and relative shifts."""

    links: tuple[str, ...]
    jobs: tuple[str, ...]
    capacity_gbps: float
    period_ms: float
    score_unshifted: float
    score_best: float
    score: float  # at the plan's shifts
    relative_shifts_ms: Mapping[str, float]
    weights: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"links": list(self.links), "jobs": list(self.jobs),
                "capacity_gbps": self.capacity_gbps, "period_ms": self.period_ms,
                "score_unshifted": self.score_unshifted, "score_best": self.score_best,
                "score": self.score, "relative_shifts_ms": dict(self.relative_shifts_ms)}


@dataclass(frozen=True)
class CandidateScore:
    index: int
    score: float  # mean best compatibility over shared links (1 when nothing is shared)
    achieved: float  # mean compatibility at the assigned shifts (below score on a conflict)
    shared_links: int
    loops: int
    conflicts: int

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "score": self.score, "achieved": self.achieved,
                "shared_links": self.shared_links,
                "loops": self.loops, "conflicts": self.conflicts}


@dataclass(frozen=True)
class ClusterPlan:
    """Everything an experiment needs to run the plan: where, when and how much.

    placement: job -> hosts (one per GPU, ring order); shifts_ms: job -> ms its traffic
    starts after the common epoch; jobs: the running jobs' profiles (phases to pace traffic);
    routes: job -> node path of each ring hop; traffic: link "a->b" -> job -> hops over it;
    shared: the links with two or more jobs. `score` is the mean compatibility of the
    shared links at these shifts (1 when nothing is shared).
    """

    mode: str  # "base" (candidate 0, no shifts), "base+shifts", "cassini"
    jobs: tuple[JobProfile, ...]
    placement: Mapping[str, tuple[str, ...]]
    shifts_ms: Mapping[str, float]
    routes: Mapping[str, tuple[tuple[str, ...], ...]]
    traffic: Mapping[str, Mapping[str, int]]
    capacity_gbps: Mapping[str, float]
    shared: tuple[SharedLink, ...]
    score: float
    candidate: int
    candidates: tuple[CandidateScore, ...]
    waiting: tuple[str, ...]
    loops: int
    conflicts: tuple[Conflict, ...]
    warnings: tuple[str, ...]

    def job(self, name: str) -> JobProfile:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def phases(self, name: str) -> tuple[Phase, ...]:
        return self.job(name).phases

    def shared_links(self) -> list[str]:
        return [link for s in self.shared for link in s.links]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "placement": {k: list(v) for k, v in self.placement.items()},
            "shifts_ms": dict(self.shifts_ms),
            "score": self.score,
            "shared_links": [s.to_dict() for s in self.shared],
            "routes": {k: [list(p) for p in v] for k, v in self.routes.items()},
            "jobs": [j.to_dict() for j in self.jobs],
            "candidate": self.candidate,
            "candidates": [c.to_dict() for c in self.candidates],
            "waiting": list(self.waiting),
            "loops": self.loops,
            "conflicts": [c.describe() for c in self.conflicts],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class _Evaluated:
    placement: Placement
    score: CandidateScore
    groups: tuple[tuple[tuple[LinkKey, ...], tuple[tuple[str, int], ...], LinkSolution], ...]
    assignment: Assignment
    traffic: Mapping[LinkKey, Mapping[str, int]]
    routes: Mapping[str, tuple[tuple[str, ...], ...]]
    load: float  # Mbit/ms the placement puts on the network: sum of hops x volume / T
    exposed: int  # free GPUs left in racks whose uplinks carry traffic

    def footprint(self) -> tuple[int, float]:
        """What breaks a tie in the fluid check: free GPUs next to busy uplinks first (a
        job arriving there shares a link with a running one), then the load."""
        return self.exposed, round(self.load, 9)


class _Planner:
    """Holds what candidates share: the router, the jobs, and a memo of link solutions (the
    same jobs on the same capacity score the same in every candidate)."""

    def __init__(self, cluster: Cluster, jobs: Sequence[JobProfile], precision_deg: float,
                 seed: int) -> None:
        self.cluster = cluster
        self.jobs = {j.name: j for j in jobs}
        self.order = [j.name for j in jobs]
        self.router = _Router(cluster.topology)
        self.precision = precision_deg
        self.seed = seed
        self.memo: dict[tuple[tuple[tuple[str, int], ...], float], LinkSolution] = {}

    def solve(self, members: tuple[tuple[str, int], ...], capacity: float) -> LinkSolution:
        key = (members, capacity)
        if key not in self.memo:
            self.memo[key] = best_shifts([self.jobs[j] for j, _ in members], capacity,
                                         weights=[float(m) for _, m in members],
                                         precision_deg=self.precision, seed=self.seed,
                                         flag="")
        return self.memo[key]

    def score_at(self, members: tuple[tuple[str, int], ...], solution: LinkSolution,
                 shifts: Mapping[str, float]) -> float:
        return score_at([self.jobs[j] for j, _ in members], shifts, solution.capacity_gbps,
                        weights=[float(m) for _, m in members], precision_deg=self.precision)

    def period(self, name: str) -> float:
        r = DEFAULT_RESOLUTION_MS
        return max(1, round(self.jobs[name].iteration_ms / r)) * r

    def evaluate(self, index: int, placement: Placement) -> _Evaluated:
        traffic: dict[LinkKey, dict[str, int]] = {}
        routes: dict[str, tuple[tuple[str, ...], ...]] = {}
        for name in self.order:
            hosts = placement.hosts.get(name)
            if hosts is None:
                continue
            paths = tuple(self.router.path(a, b) for a, b in ring_hops(hosts))
            routes[name] = paths
            for path in paths:
                for a, b in itertools.pairwise(path):
                    per = traffic.setdefault((a, b), {})
                    per[name] = per.get(name, 0) + 1
        grouped: dict[tuple[tuple[str, int], ...], list[LinkKey]] = {}
        for key, per in traffic.items():
            if len(per) >= 2:
                members = tuple((j, per[j]) for j in self.order if j in per)
                grouped.setdefault(members, []).append(key)
        groups = []
        for members, keys in grouped.items():
            capacity = min(self.cluster.capacity_gbps[k] for k in keys)
            groups.append((tuple(keys), members, self.solve(members, capacity)))
        # most to gain first: when loops force a compromise, the traversal honours these
        groups.sort(key=lambda g: -(g[2].score - g[2].score_unshifted) * len(g[0]))
        link_shifts = [LinkShifts(link_name(k), sol.shift_map(), sol.circle.step_ms)
                       for keys, _, sol in groups for k in keys]
        periods = {j: self.period(j) for j in self.order if j in placement.hosts}
        assignment = assign_shifts(periods, link_shifts)
        count = sum(len(keys) for keys, _, _ in groups)
        best = sum(sol.score * len(keys) for keys, _, sol in groups)
        achieved = best
        if assignment.conflicts:
            achieved = sum(self.score_at(members, sol, assignment.shifts_ms) * len(keys)
                           for keys, members, sol in groups)
        score = CandidateScore(index, best / count if count else 1.0,
                               achieved / count if count else 1.0, count, assignment.loops,
                               len(assignment.conflicts))
        load = sum(hops * self.jobs[j].volume_mbit / self.jobs[j].iteration_ms
                   for per in traffic.values() for j, hops in per.items())
        return _Evaluated(placement, score, tuple(groups), assignment, traffic, routes, load,
                          self._exposed(placement, traffic))

    def _exposed(self, placement: Placement, traffic: Mapping[LinkKey, Mapping[str, int]]) -> int:
        hosts = self.cluster.topology.hosts
        busy = {a for a, b in traffic if a not in hosts and b not in hosts}
        used = Counter(self.cluster.rack_of(h) for hs in placement.hosts.values() for h in hs)
        return sum(len(slots) - used[rack] for rack, slots in self.cluster.racks if rack in busy)

    def plan(self, mode: str, chosen: _Evaluated, shifted: bool,
             candidates: Sequence[CandidateScore], waiting: Sequence[str],
             warnings: list[str]) -> ClusterPlan:
        running = [self.jobs[j] for j in self.order if j in chosen.placement.hosts]
        shifts = ({j: float(chosen.assignment.shifts_ms.get(j, 0.0)) for j in self.order
                   if j in chosen.placement.hosts} if shifted
                  else {j.name: 0.0 for j in running})
        shared: list[SharedLink] = []
        notes = list(warnings)
        for keys, members, sol in chosen.groups:
            names = tuple(j for j, _ in members)
            weights = tuple(float(m) for _, m in members)
            at = self.score_at(members, sol, shifts)
            if sol.circle.warning and sol.circle.warning not in notes:
                notes.append(sol.circle.warning)
            shared.append(SharedLink(tuple(link_name(k) for k in keys), names,
                                     sol.capacity_gbps, sol.circle.period_ms,
                                     sol.score_unshifted, sol.score, at, sol.shift_map(),
                                     weights))
        n_links = sum(len(s.links) for s in shared)
        score = (sum(s.score * len(s.links) for s in shared) / n_links) if n_links else 1.0
        conflicts = chosen.assignment.conflicts if shifted else ()
        return ClusterPlan(
            mode, tuple(running),
            {j: chosen.placement.hosts[j] for j in self.order if j in chosen.placement.hosts},
            shifts, dict(chosen.routes),
            {link_name(k): dict(v) for k, v in chosen.traffic.items()},
            {link_name(k): self.cluster.capacity_gbps[k] for k in chosen.traffic},
            tuple(shared), score, chosen.score.index, tuple(candidates), tuple(waiting),
            chosen.assignment.loops, conflicts, tuple(notes))


@dataclass(frozen=True)
class CheckedOption:
    """One plan CASSINI ran in the fluid model before choosing: a candidate with or without
    its shifts, and what it achieved (slowdowns are iteration time / the job's T alone)."""

    candidate: int
    shifted: bool
    mean_ms: float
    p99_ms: float
    mean_x: float
    p99_x: float
    marks: float
    feasible: bool  # no time figure worse than the base's placement without shifts
    cost: float  # what the choice minimises among the feasible ones
    jct_mean_ms: float = math.nan  # completion times, when the round knows them (`finishing`)
    jct_p99_ms: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Schedule:
    """The three plans an evaluation compares, from one set of candidates."""

    base: ClusterPlan  # the base's own pick, no shifts
    base_shifted: ClusterPlan  # the base's pick with CASSINI's shifts
    cassini: ClusterPlan  # CASSINI's pick among the candidates, with its shifts
    checked: tuple[CheckedOption, ...] = ()  # the fluid check behind CASSINI's pick


DEFAULT_CHECKED = 20
DEFAULT_CHECK = FluidConfig(iterations=40, realign_pct=5.0, realign_budget_pct=10.0)
MARKS_WEIGHT = 0.1  # cost = log mean_x + log p99_x + MARKS_WEIGHT x log marks ratio
_MARKS_FLOOR = 1e3  # packets: below this a marks ratio means nothing


Finishing = Mapping[str, tuple[float, int]]  # job -> (ms since it arrived, iterations left)
_Figures = tuple[float, float, float, float, float, float, float]
_TIMES = (0, 1, 2, 3, 5, 6)  # the figures no option may have worse than the base's


def _figures(plan: ClusterPlan, config: FluidConfig, cache: Cache,
             finishing: Finishing | None, rounds: dict[tuple[Any, ...], TraceResult]
             ) -> _Figures:
    """Iteration time mean and p99 (ms, then as slowdowns), marks, and the completion time
    mean and p99 (0 without `finishing`).

    Without `finishing` every job iterates `config.iterations` times, side by side (the
    steady state `cassini plan` is about). With it (a trace's round) the plan runs as the
    trace will run it: each job from now for the iterations it has left, leaving when done,
    its completion time what it has spent since it arrived plus that run's. A steady state
    misjudges a trace's short jobs: a plan whose iterations look better side by side can
    still finish the last job later once the others have left (a 128-server snapshot draw:
    p99 JCT +3% where the steady state saw its p99 iteration fall from 1.43x to 1.25x).
    """
    shifted = any(v != 0 for v in plan.shifts_ms.values())
    cfg = replace(config, realign_pct=config.realign_pct if shifted else None)
    if finishing is None:
        run = simulate_parts(plan.jobs, plan.traffic, plan.capacity_gbps, plan.shifts_ms, cfg,
                             plan.mode, cache)
        mean_ms, p99_ms = run.summary(False)
        mean_x, p99_x = run.summary(True)
        return mean_ms, p99_ms, mean_x, p99_x, run.marks, 0.0, 0.0
    times: list[float] = []
    slowdowns: list[float] = []
    jct: list[float] = []
    marks = 0.0
    for members, sub in components(plan.jobs, plan.traffic):
        cap = {link: plan.capacity_gbps[link] for link in sub}
        runs = tuple(TraceJobRun(j, -finishing[j.name][0], 0.0, (),
                                 max(1, finishing[j.name][1]),
                                 ((0.0, float(plan.shifts_ms.get(j.name, 0.0))),)
                                 if shifted else ())
                     for j in members)
        key = (runs, tuple(sorted((link, tuple(sorted(per.items())), cap[link])
                                  for link, per in sub.items())), cfg)
        part = rounds.get(key)
        if part is None:
            part = simulate_trace(TraceSchedule(plan.mode, runs, {}, sub, cap, 1), cfg)
            rounds[key] = part
        for o in part.jobs:
            times += o.iterations_ms
            slowdowns += [t / o.iteration_ms for t in o.iterations_ms]
            jct.append(o.jct_ms)
        marks += part.marks
    return (float(np.mean(times)), float(np.percentile(times, 99)), float(np.mean(slowdowns)),
            float(np.percentile(slowdowns, 99)), marks, float(np.mean(jct)),
            float(np.percentile(jct, 99)))


def _better(cost: float, footprint: tuple[int, float],
            best: tuple[float, tuple[int, float], int] | None) -> bool:
    """Lower cost wins. At the same cost (the fluid model sees no difference, typically
    between placements without contention) the smaller footprint: fewer free GPUs next to
    busy uplinks, so that the jobs arriving next can run without sharing a link with the
    running ones; then less traffic on the network: shorter rings (a packet network charges
    every hop latency, which the fluid model does not) and uplinks left free."""
    if best is None or cost < best[0] - 1e-9:
        return True
    return abs(cost - best[0]) <= 1e-9 and footprint < best[1]


def _to_check(ranked: Sequence[_Evaluated], checked: int) -> list[_Evaluated]:
    """The candidates worth a fluid run: the best half by CASSINI's ranking (mean link
    score), the other half by fewest shared links (fewer collisions to interleave at all:
    the better predictor when shifts drift), without repeats."""
    by_links = sorted(ranked, key=lambda e: (e.score.shared_links, -e.score.achieved,
                                             e.score.index))
    out: list[_Evaluated] = []
    for a, b in itertools.zip_longest(ranked, by_links):
        for e in (a, b):
            if e is not None and e not in out and len(out) < checked:
                out.append(e)
    return out


def schedule(topology: Topology | Cluster, jobs: Sequence[JobProfile], *,
             candidates: int = 20, seed: int = 0,
             precision_deg: float = DEFAULT_PRECISION_DEG,
             base_scheduler: BaseScheduler = themis_candidates,
             progress: Callable[[int], Any] | None = None,
             checked: int = DEFAULT_CHECKED,
             fluid: FluidConfig = DEFAULT_CHECK,
             finishing: Finishing | None = None) -> Schedule:
    """Candidates from the base, each scored by CASSINI; `progress(i)` after each one.

    With `checked` = 0 this is the paper's CASSINI: the best mean link score among the
    candidates without conflicts, with its shifts. Otherwise the `checked` most promising
    candidates run in the fluid model (`fluid`), each with and without its shifts, next to
    the base's placement with and without; the pick is the one with the lowest cost (log
    mean + log p99 slowdown + a little of the marks) among those no worse than the base's
    placement without shifts in mean or p99 (ms or slowdown), and, given `finishing` (a
    trace's round: what each job has spent and has left), in mean or p99 completion time.
    The base itself always qualifies, so the pick never loses to it in that model.
    """
    if candidates < 1:
        raise InputError(f"--candidates must be >= 1, got {candidates}")
    if checked < 0:
        raise InputError(f"--checked must be >= 0, got {checked}")
    check_names(jobs)
    cluster = topology if isinstance(topology, Cluster) else cluster_from_topology(topology)
    proposal = base_scheduler(cluster, jobs, candidates, seed)
    planner = _Planner(cluster, jobs, precision_deg, seed)
    evaluated = []
    for i, placement in enumerate(proposal.candidates):
        evaluated.append(planner.evaluate(i, placement))
        if progress is not None:
            progress(i)
    scores = [e.score for e in evaluated]
    warnings: list[str] = []
    if proposal.waiting:
        warnings.append(f"not enough free GPUs: {', '.join(proposal.waiting)} wait for the "
                        "next round")
    clean = [e for e in evaluated if e.score.conflicts == 0]
    pool = clean or evaluated
    if not clean:
        warnings.append("every candidate placement has a conflicting loop: keeping the one "
                        "with the best score at its assigned shifts; some links will not get "
                        "their best shifts")
    ranked = sorted(pool, key=lambda e: (-e.score.achieved, e.score.shared_links,
                                         e.footprint(), e.score.index))
    waiting = proposal.waiting
    base = planner.plan("base", evaluated[0], False, scores, waiting, warnings)
    base_shifted = planner.plan("base+shifts", evaluated[0], True, scores, waiting, warnings)
    if checked == 0:
        return Schedule(base, base_shifted,
                        planner.plan("cassini", ranked[0], True, scores, waiting, warnings))
    fluid.check()
    cache: Cache = {}
    rounds: dict[tuple[Any, ...], TraceResult] = {}
    reference = _figures(base, fluid, cache, finishing, rounds)
    options: list[tuple[_Evaluated, bool, ClusterPlan, _Figures]] = [
        (evaluated[0], False, base, reference),
        (evaluated[0], True, base_shifted,
         _figures(base_shifted, fluid, cache, finishing, rounds))]
    for e in _to_check(ranked, checked):
        for shifted in (True, False):
            if e is evaluated[0]:
                continue
            plan = planner.plan("cassini", e, shifted, scores, waiting, warnings)
            options.append((e, shifted, plan, _figures(plan, fluid, cache, finishing, rounds)))
    report: list[CheckedOption] = []
    best: tuple[float, tuple[int, float], int] | None = None
    for k, (e, shifted, _, fig) in enumerate(options):
        feasible = all(fig[i] <= reference[i] * (1 + 1e-9) for i in _TIMES)
        marks = math.log((fig[4] + _MARKS_FLOOR) / (reference[4] + _MARKS_FLOOR))
        cost = math.log(fig[2]) + math.log(fig[3]) + MARKS_WEIGHT * marks
        report.append(CheckedOption(e.score.index, shifted, fig[0], fig[1], fig[2], fig[3],
                                    fig[4], feasible, cost,
                                    fig[5] if finishing is not None else math.nan,
                                    fig[6] if finishing is not None else math.nan))
        if feasible and _better(cost, e.footprint(), best):
            best = (cost, e.footprint(), k)
    assert best is not None  # the base qualifies against itself
    e, shifted, _, _ = options[best[2]]
    chosen = planner.plan("cassini", e, shifted, scores, waiting, warnings)
    return Schedule(base, base_shifted, chosen, tuple(report))


def plan_cluster(topology: Topology | Cluster, jobs: Sequence[JobProfile], *,
                 candidates: int = 20, seed: int = 0,
                 precision_deg: float = DEFAULT_PRECISION_DEG,
                 base_scheduler: BaseScheduler = themis_candidates,
                 checked: int = DEFAULT_CHECKED,
                 fluid: FluidConfig = DEFAULT_CHECK) -> ClusterPlan:
    """CASSINI's plan for `jobs` on `topology`: placement, per-job shifts, routes, shared
    links. The entry point for experiments (`innet run cassini`)."""
    return schedule(topology, jobs, candidates=candidates, seed=seed,
                    precision_deg=precision_deg, base_scheduler=base_scheduler,
                    checked=checked, fluid=fluid).cassini
