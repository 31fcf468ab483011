"""The paper's three traces: jobs arrive, the scheduler places them on free GPUs, they leave.

A trace is data: jobs (zoo models or profiles), each with the time it arrives and the
iterations it trains. Three generators draw the paper's kinds, seeded:

- snapshot: every job present at time 0 and the cluster exactly full; none is pinned, so
  the scheduler places all of them (one round).
- dynamic: a running cluster (jobs placed at time 0 fill a share of the GPUs, the
  occupancy, two thirds unless told, and train long) into which DLRM and ResNet50 jobs
  arrive at once (the paper's stress test, section 5.3) and take every GPU left (two
  rounds).
- poisson: jobs of every kind arrive with exponential gaps (a target load), train and
  leave; a job that does not fit waits, gaining fairness (Themis's rho) as it waits.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from innet.cassini.fluid import FluidConfig, components
from innet.cassini.profiles import JobProfile, job_from_dict, load_zoo, zoo_job
from innet.cassini.scheduler import (
    DEFAULT_CHECK,
    DEFAULT_CHECKED,
    Cluster,
    ClusterPlan,
    cluster_from_topology,
    schedule,
)
from innet.cassini.tracesim import TraceJobRun, TraceSchedule, traffic_of
from innet.errors import InputError, finite_number, parse_json, quote, read_text
from innet.topology import Topology

KINDS = ("snapshot", "dynamic", "poisson")
# the jobs that arrive in the dynamic trace: the paper's stress test "triggers DLRM and
# ResNet50 arrivals while other jobs are running" (section 5.3)
DYNAMIC_ARRIVALS = ("DLRM", "ResNet50")
SIZES = (2, 3, 4, 5, 6)  # GPUs a drawn job asks for (racks of 4: many must span racks)
DEFAULT_ITERATIONS = (20, 40)  # trained per job, drawn in [lo, hi]
DEFAULT_POISSON_JOBS = 60
DEFAULT_LOAD = 0.9  # poisson: GPU demand over the cluster's GPUs
DEFAULT_OCCUPANCY = 2 / 3  # dynamic: the share of the GPUs the running jobs hold at 0
MAX_TRACE_JOBS = 2000
_TRACE_FIELDS = {"arrival_ms", "iterations"}
_TOP = {"trace", "description", "comment", "jobs"}


@dataclass(frozen=True)
class TraceJob:
    profile: JobProfile
    arrival_ms: float
    iterations: int

    @property
    def name(self) -> str:
        return self.profile.name

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.profile.model is not None:
            out = {"name": self.name, "model": self.profile.model, "gpus": self.profile.gpus}
        else:
            out = self.profile.to_dict()
        return out | {"arrival_ms": self.arrival_ms, "iterations": self.iterations}


@dataclass(frozen=True)
class Trace:
    kind: str
    jobs: tuple[TraceJob, ...]
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.kind, "description": self.description,
                "jobs": [j.to_dict() for j in self.jobs]}


# ------------------------------------------------------------------------------- generators


def _draw_sizes(rng: np.random.Generator, total: int) -> list[int]:
    """GPU counts that add up to `total` exactly (the last job takes what is left; a lone
    GPU left over joins the job before)."""
    sizes: list[int] = []
    left = total
    while left > 0:
        g = int(SIZES[int(rng.integers(len(SIZES)))])
        if g >= left or left - g == 1:
            g = left
        sizes.append(g)
        left -= g
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes[-2] += sizes.pop()
    return sizes


def _models(rng: np.random.Generator, n: int, pool: Sequence[str]) -> list[str]:
    return [pool[int(rng.integers(len(pool)))] for _ in range(n)]


def _job(model: str, i: int, gpus: int) -> JobProfile:
    return zoo_job(model, f"{model.lower()}-{i}", gpus)


def _iters(rng: np.random.Generator, span: tuple[int, int]) -> int:
    return int(rng.integers(span[0], span[1] + 1))


def snapshot_trace(cluster: Cluster, rng: np.random.Generator,
                   iterations: tuple[int, int] = DEFAULT_ITERATIONS) -> Trace:
    """Jobs of every zoo model filling the cluster, all present at time 0."""
    sizes = _draw_sizes(rng, cluster.gpus)
    models = _models(rng, len(sizes), list(load_zoo()))
    jobs = tuple(TraceJob(_job(m, i + 1, g), 0.0, _iters(rng, iterations))
                 for i, (m, g) in enumerate(zip(models, sizes, strict=True)))
    return Trace("snapshot", jobs, f"snapshot: {len(jobs)} jobs fill the {cluster.gpus} GPUs "
                                   "at time 0, none pinned")


def dynamic_trace(cluster: Cluster, rng: np.random.Generator,
                  iterations: tuple[int, int] = DEFAULT_ITERATIONS,
                  occupancy: float = DEFAULT_OCCUPANCY) -> Trace:
    """Jobs of every model take `occupancy` of the GPUs at time 0 and train long (3x);
    once they run (after 2 of the longest iterations), DLRM and ResNet50 jobs (the paper's
    arrivals) arrive and take every GPU left. The occupancy decides how often the arrivals
    must share an uplink with a running job whatever the scheduler does: the fragments
    they get sit in racks the running jobs' rings cross."""
    first = max(2, round(cluster.gpus * occupancy))
    if cluster.gpus - first < 2:
        raise InputError(f"--occupancy {occupancy:g} of {cluster.gpus} GPUs leaves "
                         f"{max(0, cluster.gpus - first)} for the arriving jobs, which need "
                         "at least 2")
    zoo = load_zoo()
    sizes = _draw_sizes(rng, first)
    models = _models(rng, len(sizes), list(zoo))
    long = (3 * iterations[0], 3 * iterations[1])
    jobs = [TraceJob(_job(m, i + 1, g), 0.0, _iters(rng, long))
            for i, (m, g) in enumerate(zip(models, sizes, strict=True))]
    at = 2 * max(zoo[m].iteration_ms for m in models)
    rest = cluster.gpus - sum(sizes)
    late = _draw_sizes(rng, rest)
    for k, (m, g) in enumerate(zip(_models(rng, len(late), DYNAMIC_ARRIVALS), late,
                                   strict=True)):
        jobs.append(TraceJob(_job(m, len(sizes) + k + 1, g), at, _iters(rng, iterations)))
    return Trace("dynamic", tuple(jobs),
                 f"dynamic: {len(sizes)} jobs take {sum(sizes)} GPUs at 0; "
                 f"{len(jobs) - len(sizes)} DLRM/ResNet50 jobs arrive at {at:g} ms and take "
                 f"the {rest} left")


def poisson_trace(cluster: Cluster, rng: np.random.Generator, count: int = DEFAULT_POISSON_JOBS,
                  load: float = DEFAULT_LOAD,
                  iterations: tuple[int, int] = DEFAULT_ITERATIONS) -> Trace:
    """`count` jobs of every model arriving with exponential gaps: the mean gap makes the GPU
    demand `load` times the cluster's GPUs (GPU-ms per job / (load x GPUs))."""
    zoo = load_zoo()
    models = _models(rng, count, list(zoo))
    sizes = [int(SIZES[int(rng.integers(len(SIZES)))]) for _ in range(count)]
    iters = [_iters(rng, iterations) for _ in range(count)]
    work = np.mean([g * n * zoo[m].iteration_ms for m, g, n in zip(models, sizes, iters,
                                                                   strict=True)])
    gap = float(work) / (load * cluster.gpus)
    t = 0.0
    jobs = []
    for i, (m, g, n) in enumerate(zip(models, sizes, iters, strict=True)):
        jobs.append(TraceJob(_job(m, i + 1, min(g, cluster.gpus)), round(t, 3), n))
        t += float(rng.exponential(gap))
    return Trace("poisson", tuple(jobs),
                 f"poisson: {count} jobs, mean gap {gap:.4g} ms (load {load:g} of "
                 f"{cluster.gpus} GPUs)")


def make_trace(kind: str, topology: Topology | Cluster, seed: int, index: int = 0, *,
               count: int = DEFAULT_POISSON_JOBS, load: float = DEFAULT_LOAD,
               iterations: tuple[int, int] = DEFAULT_ITERATIONS,
               occupancy: float = DEFAULT_OCCUPANCY) -> Trace:
    """Trace `index` of kind `kind` seeded `seed`: the same arguments give the same trace."""
    if kind not in KINDS:
        raise InputError(f"unknown trace {kind!r} (one of {', '.join(KINDS)})")
    if not 1 <= iterations[0] <= iterations[1]:
        raise InputError(f"trace iterations must be 1 <= lo <= hi, got {iterations[0]}-"
                         f"{iterations[1]}")
    if not 1 <= count <= MAX_TRACE_JOBS:
        raise InputError(f"--trace-jobs must be in [1, {MAX_TRACE_JOBS}], got {count}")
    if not (finite_number(load) and load > 0):
        raise InputError(f"--load must be > 0, got {load}")
    if not (finite_number(occupancy) and 0 < occupancy < 1):
        raise InputError(f"--occupancy must be in (0, 1), got {occupancy}")
    cluster = topology if isinstance(topology, Cluster) else cluster_from_topology(topology)
    if cluster.gpus < 2:
        raise InputError(f"a trace needs at least 2 GPUs, the cluster has {cluster.gpus}")
    rng = np.random.default_rng([seed, index])
    if kind == "snapshot":
        return snapshot_trace(cluster, rng, iterations)
    if kind == "dynamic":
        return dynamic_trace(cluster, rng, iterations, occupancy)
    return poisson_trace(cluster, rng, count, load, iterations)


# ----------------------------------------------------------------------------------- files


def trace_from_data(data: Any, *, source: str | None = None) -> Trace:
    if not isinstance(data, dict) or "jobs" not in data:
        raise InputError('a trace file is an object {"trace", "jobs": [...]}', source=source)
    extra = set(data) - _TOP
    if extra:
        raise InputError(f"unknown field(s): {', '.join(sorted(extra))}", source=source)
    raw = data["jobs"]
    if not isinstance(raw, list) or not raw or len(raw) > MAX_TRACE_JOBS:
        raise InputError(f"jobs must be a non-empty list of at most {MAX_TRACE_JOBS}",
                         source=source)
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InputError(f"jobs[{i}] must be an object, got {quote(item)}", source=source)
        profile = job_from_dict({k: v for k, v in item.items() if k not in _TRACE_FIELDS}, i,
                                source=source)
        where = f"job {quote(profile.name)}: "
        if profile.hosts is not None:
            raise InputError(f"{where}hosts: a trace places every job itself (drop hosts)",
                             source=source)
        if profile.name in seen:
            raise InputError(f"{where}name is used twice", source=source)
        seen.add(profile.name)
        arrival = item.get("arrival_ms", 0.0)
        if not finite_number(arrival) or not 0 <= arrival <= 1e12:
            raise InputError(f"{where}arrival_ms must be a number in [0, 1e12], got "
                             f"{quote(arrival)}", source=source)
        n = item.get("iterations")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100_000:
            raise InputError(f"{where}iterations must be an integer in [1, 100000] (what the "
                             f"job trains), got {quote(n)}", source=source)
        jobs.append(TraceJob(profile, float(arrival), n))
    kind = data.get("trace", "file")
    if not isinstance(kind, str):
        raise InputError(f"trace must be a name, got {quote(kind)}", source=source)
    return Trace(kind, tuple(jobs), str(data.get("description", "")))


def load_trace(path: str | Path) -> Trace:
    p = Path(path)
    return trace_from_data(parse_json(read_text(p), str(p)), source=str(p))


def check_fits(trace: Trace, cluster: Cluster) -> None:
    """A job asking for more GPUs than the cluster has would wait forever: refused."""
    for job in trace.jobs:
        if job.profile.gpus > cluster.gpus:
            raise InputError(f"job {quote(job.name)} asks for {job.profile.gpus} GPUs, the "
                             f"cluster has {cluster.gpus}: the trace does not fit")


# ------------------------------------------------------------------------------- replaying


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


def _keep_running(plan: ClusterPlan, previous: Mapping[str, float]) -> dict[str, float]:
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
        for j, s in _keep_running(plan, previous).items():
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
