"""Scheduling on a topology: the base proposes placements (`candidates`), CASSINI ranks them.

CASSINI scores each candidate by the mean compatibility of its shared links (best shifts
per link), drops candidates whose Affinity graph has a conflicting loop, takes the best and
assigns each job its shift; with `checked` > 0 it first runs the most promising ones in the
fluid model and keeps the best that is no worse than the base. Everything here is a pure
function of its inputs.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

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
from innet.cassini.placement.candidates import (
    BaseScheduler,
    Placement,
    themis_candidates,
)
from innet.cassini.placement.cluster import (
    Cluster,
    LinkKey,
    Router,
    cluster_from_topology,
    link_name,
    ring_hops,
)
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import Cache, components, simulate_parts
from innet.cassini.sim.trace import TraceJobRun, TraceResult, TraceSchedule, simulate_trace
from innet.errors import InputError
from innet.topology import Topology


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
    exposed_load: float  # each such free GPU times its rack's uplink load (Mbit/ms), summed

    def footprint(self) -> tuple[int, float]:
        """What breaks a tie in the fluid check: free GPUs next to busy uplinks first (a
        job arriving there shares a link with a running one), then the load."""
        return self.exposed, round(self.load, 9)


class _Planner:
    """Holds what candidates share: the router, the jobs, and a memo of link solutions (the
    same jobs on the same capacity score the same in every candidate)."""

    def __init__(self, cluster: Cluster, jobs: Sequence[JobProfile],
                 settings: PlannerSettings) -> None:
        self.cluster = cluster
        self.jobs = {j.name: j for j in jobs}
        self.order = [j.name for j in jobs]
        self.router = Router(cluster.topology)
        self.precision = settings.precision_deg
        self.seed = settings.seed
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
                          *self._exposed(placement, traffic))

    def _exposed(self, placement: Placement, traffic: Mapping[LinkKey, Mapping[str, int]]
                 ) -> tuple[int, float]:
        """The free GPUs in racks whose uplinks carry traffic, and each of them weighted by
        that traffic (Mbit/ms up from the rack): how much a job arriving there would meet."""
        hosts = self.cluster.topology.hosts
        uplink: dict[str, float] = {}
        for (a, b), per in traffic.items():
            if a not in hosts and b not in hosts:
                rate = sum(hops * self.jobs[j].volume_mbit / self.jobs[j].iteration_ms
                           for j, hops in per.items())
                uplink[a] = uplink.get(a, 0.0) + rate
        used = Counter(self.cluster.rack_of(h) for hs in placement.hosts.values() for h in hs)
        free = {rack: len(slots) - used[rack] for rack, slots in self.cluster.racks}
        return (sum(n for rack, n in free.items() if rack in uplink),
                round(sum(n * uplink.get(rack, 0.0) for rack, n in free.items()), 9))

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
    guard: str = ""  # the packet-level guard's verdict: "accepted", "worse", or "" (not asked)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Schedule:
    """The three plans an evaluation compares, from one set of candidates."""

    base: ClusterPlan  # the base's own pick, no shifts
    base_shifted: ClusterPlan  # the base's pick with CASSINI's shifts
    cassini: ClusterPlan  # CASSINI's pick among the candidates, with its shifts
    checked: tuple[CheckedOption, ...] = ()  # the fluid check behind CASSINI's pick
    guard_runs: int = 0  # packet-level runs the guard made before CASSINI's pick stood


DEFAULT_CHECKED = 20
DEFAULT_CHECK = FluidConfig(iterations=40, realign_pct=5.0, realign_budget_pct=10.0)
MARKS_WEIGHT = 0.1  # cost = log mean_x + log p99_x + MARKS_WEIGHT x log marks ratio
_MARKS_FLOOR = 1e3  # packets: below this a marks ratio means nothing
GUARD_TRIES = 2  # options a guard may run before CASSINI falls back to the base's placement


Finishing = Mapping[str, tuple[float, int]]  # job -> (ms since it arrived, iterations left)


class PlanGuard(Protocol):
    """A second opinion on the fluid check's pick before it is committed: the fluid model
    shares links max-min with fluid queues, and a gain it predicts can be a loss on a packet
    network (docs/cassini-guard.md). Given the reference (the base's placement without
    shifts) and the options the fluid check prefers to it, best first, the guard answers
    with the index of the first option it accepts (None: keep the reference) and how many
    runs it made."""

    def first_accepted(self, topology: Topology, reference: ClusterPlan,
                       options: Sequence[ClusterPlan], finishing: Finishing | None,
                       config: FluidConfig) -> tuple[int | None, int]: ...


@dataclass(frozen=True)
class PlannerSettings:
    """How CASSINI plans, the same in every round and every draw (picklable: sweeps ship
    it to workers): the base's candidates, how many of them the fluid check runs (0: the
    paper's ranking alone), the angle step of the shift search, the seed of the search's
    restarts and of the candidates, the fluid run the check measures with, and the guard
    (None: the fluid check's pick stands) that must accept a pick other than the base's."""

    candidates: int = 20
    checked: int = DEFAULT_CHECKED
    precision_deg: float = DEFAULT_PRECISION_DEG
    seed: int = 0
    config: FluidConfig = DEFAULT_CHECK
    guard: PlanGuard | None = None

    def check(self) -> None:
        if self.candidates < 1:
            raise InputError(f"--candidates must be >= 1, got {self.candidates}")
        if self.checked < 0:
            raise InputError(f"--checked must be >= 0, got {self.checked}")


DEFAULT_PLANNER = PlannerSettings()


class Figures(NamedTuple):
    """What the fluid check measured of one plan (slowdowns: iteration time / own T)."""

    mean_ms: float
    p99_ms: float
    mean_x: float
    p99_x: float
    marks: float
    jct_mean_ms: float  # 0 without `finishing`
    jct_p99_ms: float

    def no_worse(self, reference: Figures) -> bool:
        """No time figure (marks aside) worse than the reference's, up to rounding."""
        return all(mine <= ref * (1 + 1e-9) for mine, ref in
                   zip(self.times(), reference.times(), strict=True))

    def times(self) -> tuple[float, ...]:
        return (self.mean_ms, self.p99_ms, self.mean_x, self.p99_x, self.jct_mean_ms,
                self.jct_p99_ms)

    def cost(self, reference: Figures) -> float:
        marks = math.log((self.marks + _MARKS_FLOOR) / (reference.marks + _MARKS_FLOOR))
        return math.log(self.mean_x) + math.log(self.p99_x) + MARKS_WEIGHT * marks


def _figures(plan: ClusterPlan, config: FluidConfig, cache: Cache,
             finishing: Finishing | None, rounds: dict[tuple[Any, ...], TraceResult]
             ) -> Figures:
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
    run_config = config if shifted else config.without_agents()
    if finishing is None:
        run = simulate_parts(plan.jobs, plan.traffic, plan.capacity_gbps, plan.shifts_ms,
                             run_config, plan.mode, cache)
        mean_ms, p99_ms = run.summary(False)
        mean_x, p99_x = run.summary(True)
        return Figures(mean_ms, p99_ms, mean_x, p99_x, run.marks, 0.0, 0.0)
    return _round_figures(plan, run_config, shifted, finishing, rounds)


def round_runs(jobs: Sequence[JobProfile], plan: ClusterPlan, finishing: Finishing,
               shifted: bool, most: int | None = None) -> tuple[TraceJobRun, ...]:
    """`jobs` of `plan` as a trace from now (time 0): each arrived what it has spent ago
    and trains the iterations it has left (at least 1, at most `most`), at the plan's shift
    when `shifted` (then CASSINI's agent keeps it there)."""
    runs = []
    for j in jobs:
        spent, left = finishing[j.name]
        left = max(1, left if most is None else min(most, left))
        table = ((0.0, float(plan.shifts_ms.get(j.name, 0.0))),) if shifted else ()
        runs.append(TraceJobRun(j, -spent, 0.0, (), left, table))
    return tuple(runs)


def _trace_figures(parts: Sequence[TraceResult]) -> Figures:
    """The check's figures of a round run as traces (`round_runs`), part by part."""
    times: list[float] = []
    slowdowns: list[float] = []
    jct: list[float] = []
    for part in parts:
        for o in part.jobs:
            times += o.iterations_ms
            slowdowns += [t / o.iteration_ms for t in o.iterations_ms]
            jct.append(o.jct_ms)
    return Figures(float(np.mean(times)), float(np.percentile(times, 99)),
                   float(np.mean(slowdowns)), float(np.percentile(slowdowns, 99)),
                   sum(p.marks for p in parts), float(np.mean(jct)),
                   float(np.percentile(jct, 99)))


def _round_figures(plan: ClusterPlan, config: FluidConfig, shifted: bool,
                   finishing: Finishing, rounds: dict[tuple[Any, ...], TraceResult]
                   ) -> Figures:
    """`_figures` of a trace's round: each group of jobs sharing links run as a trace from
    now, each job for the iterations it has left (groups already run are reused)."""
    parts = []
    for members, sub in components(plan.jobs, plan.traffic):
        cap = {link: plan.capacity_gbps[link] for link in sub}
        runs = round_runs(members, plan, finishing, shifted)
        key = (runs, tuple(sorted((link, tuple(sorted(per.items())), cap[link])
                                  for link, per in sub.items())), config)
        part = rounds.get(key)
        if part is None:
            part = simulate_trace(TraceSchedule(plan.mode, runs, {}, sub, cap, 1), config)
            rounds[key] = part
        parts.append(part)
    return _trace_figures(parts)


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


def _no_more_exposed(ranked: Sequence[_Evaluated], first: _Evaluated) -> list[_Evaluated]:
    """The candidates that leave no more free GPUs next to busy uplinks than the base's
    placement (`first`) does, and no more traffic beside them (each free GPU weighted by its
    rack's uplink load): the only ones CASSINI may pick in place of it. The round's check
    sees only the jobs placed now; a job arriving later lands on the GPUs left free, and
    where those sit in racks whose uplinks carry traffic it shares a running job's uplink.
    A pick that exposes more of them, or moves a heavier job beside them, trades a gain now
    for a collision no check of this round can see (docs/cassini-planner.md, step 3: in
    dynamic traces such picks made the arrivals' p99 iteration 1.99x their own T against
    the base's 1.34x, and 1.32x against 1.18x). A full cluster leaves no GPU free, so every
    candidate qualifies. Only a trace's rounds (`schedule(finishing=...)`) ask this: a plan
    of a fixed set of jobs has no later arrivals to spare."""
    slack = 1 + 1e-9
    return [e for e in ranked if e.exposed <= first.exposed
            and e.exposed_load <= first.exposed_load * slack]


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


@dataclass
class _Round:
    """One call of `schedule`: the candidates scored, what every plan carries along."""

    planner: _Planner
    evaluated: list[_Evaluated]
    scores: list[CandidateScore]
    waiting: tuple[str, ...]
    warnings: list[str]

    def plan(self, mode: str, chosen: _Evaluated, shifted: bool) -> ClusterPlan:
        return self.planner.plan(mode, chosen, shifted, self.scores, self.waiting,
                                 self.warnings)


def schedule(topology: Topology | Cluster, jobs: Sequence[JobProfile],
             settings: PlannerSettings = DEFAULT_PLANNER, *,
             base_scheduler: BaseScheduler = themis_candidates,
             progress: Callable[[int], Any] | None = None,
             finishing: Finishing | None = None) -> Schedule:
    """Candidates from the base, each scored by CASSINI; `progress(i)` after each one.

    With `settings.checked` = 0 this is the paper's CASSINI: the best mean link score among
    the candidates without conflicts, with its shifts. Otherwise the `checked` most
    promising candidates run in the fluid model (`settings.config`), each with and without
    its shifts, next to the base's placement with and without; the pick is the one with the
    lowest cost (log mean + log p99 slowdown + a little of the marks) among those no worse
    than the base's placement without shifts in mean or p99 (ms or slowdown), and, given
    `finishing` (a trace's round: what each job has spent and has left), in mean or p99
    completion time. The base itself always qualifies, so the pick never loses to it in
    that model.
    """
    settings.check()
    check_names(jobs)
    cluster = topology if isinstance(topology, Cluster) else cluster_from_topology(topology)
    proposal = base_scheduler(cluster, jobs, settings.candidates, settings.seed)
    planner = _Planner(cluster, jobs, settings)
    evaluated = []
    for i, placement in enumerate(proposal.candidates):
        evaluated.append(planner.evaluate(i, placement))
        if progress is not None:
            progress(i)
    warnings: list[str] = []
    if proposal.waiting:
        warnings.append(f"not enough free GPUs: {', '.join(proposal.waiting)} wait for the "
                        "next round")
    clean = [e for e in evaluated if e.score.conflicts == 0]
    if not clean:
        warnings.append("every candidate placement has a conflicting loop: keeping the one "
                        "with the best score at its assigned shifts; some links will not get "
                        "their best shifts")
    ranked = sorted(clean or evaluated, key=lambda e: (-e.score.achieved,
                                                       e.score.shared_links,
                                                       e.footprint(), e.score.index))
    rnd = _Round(planner, evaluated, [e.score for e in evaluated], proposal.waiting, warnings)
    base = rnd.plan("base", evaluated[0], False)
    base_shifted = rnd.plan("base+shifts", evaluated[0], True)
    if settings.checked == 0:
        return Schedule(base, base_shifted, rnd.plan("cassini", ranked[0], True))
    return _checked_pick(rnd, ranked, base, base_shifted, settings, finishing)


def _checked_pick(rnd: _Round, ranked: Sequence[_Evaluated], base: ClusterPlan,
                  base_shifted: ClusterPlan, settings: PlannerSettings,
                  finishing: Finishing | None) -> Schedule:
    """CASSINI's pick by the fluid check (`schedule`'s docstring), with what it measured."""
    config = settings.config
    config.check()
    cache: Cache = {}
    rounds: dict[tuple[Any, ...], TraceResult] = {}
    first = rnd.evaluated[0]
    reference = _figures(base, config, cache, finishing, rounds)
    options: list[tuple[_Evaluated, bool, Figures]] = [
        (first, False, reference),
        (first, True, _figures(base_shifted, config, cache, finishing, rounds))]
    allowed = ranked if finishing is None else _no_more_exposed(ranked, first)
    for e in _to_check(allowed, settings.checked):
        for shifted in (True, False):
            if e is first:
                continue
            plan = rnd.plan("cassini", e, shifted)
            options.append((e, shifted, _figures(plan, config, cache, finishing, rounds)))
    report: list[CheckedOption] = []
    for e, shifted, fig in options:
        report.append(CheckedOption(e.score.index, shifted, fig.mean_ms, fig.p99_ms,
                                    fig.mean_x, fig.p99_x, fig.marks, fig.no_worse(reference),
                                    fig.cost(reference),
                                    fig.jct_mean_ms if finishing is not None else math.nan,
                                    fig.jct_p99_ms if finishing is not None else math.nan))
    order = _preference(options, reference)
    chosen, runs = order[0], 0
    guard = settings.guard
    if guard is not None and chosen != 0:
        ahead = order[:order.index(0)][:GUARD_TRIES]
        plans = [rnd.plan("cassini", options[k][0], options[k][1]) for k in ahead]
        accepted, runs = guard.first_accepted(rnd.planner.cluster.topology, base, plans,
                                              finishing, config)
        chosen = 0 if accepted is None else ahead[accepted]
        for k in ahead[:len(ahead) if accepted is None else accepted + 1]:
            report[k] = replace(report[k], guard="accepted" if k == chosen else "worse")
    e, shifted, _ = options[chosen]
    return Schedule(base, base_shifted, rnd.plan("cassini", e, shifted), tuple(report), runs)


def _preference(options: Sequence[tuple[_Evaluated, bool, Figures]],
                reference: Figures) -> list[int]:
    """The feasible options (no time figure worse than the reference, which is option 0),
    most preferred first by `_better`: lowest cost, then the smallest footprint."""
    left = [k for k, (_, _, fig) in enumerate(options) if fig.no_worse(reference)]
    order: list[int] = []
    while left:
        best: tuple[float, tuple[int, float], int] | None = None
        for k in left:
            e, _, fig = options[k]
            if _better(fig.cost(reference), e.footprint(), best):
                best = (fig.cost(reference), e.footprint(), k)
        assert best is not None
        order.append(best[2])
        left.remove(best[2])
    return order


def plan_cluster(topology: Topology | Cluster, jobs: Sequence[JobProfile],
                 settings: PlannerSettings = DEFAULT_PLANNER, *,
                 base_scheduler: BaseScheduler = themis_candidates) -> ClusterPlan:
    """CASSINI's plan for `jobs` on `topology`: placement, per-job shifts, routes, shared
    links. The entry point for experiments (`innet run cassini`)."""
    return schedule(topology, jobs, settings, base_scheduler=base_scheduler).cassini
