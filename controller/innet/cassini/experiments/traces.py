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

Replaying one through the base and CASSINI is `replay.plan_trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from innet.cassini.model.profiles import JobProfile, job_from_dict, load_zoo, zoo_job
from innet.cassini.placement.cluster import Cluster, cluster_from_topology
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
