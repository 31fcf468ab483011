"""Sweeps over random placements of the running jobs: does CASSINI help in every draw?

One placement is an anecdote. A jobs file pins the jobs that already run (`hosts`); a sweep
draws those jobs' servers at random N times (one distinct GPU slot per GPU, uniformly over
the cluster), lets the base and CASSINI place the other jobs around them, and runs the fluid
model (or ns-3) for three arms of every draw: the base's placement without shifts, the same with
CASSINI's shifts, and CASSINI's plan. Everything here is a pure function of its inputs (the
draws are seeded); the CLI does the printing, files and progress bar.

Figures per arm: mean and p99 of every iteration of every job pooled, in ms and as a
multiple of each job's iteration time alone (the slowdown: jobs with different iteration
times are only comparable that way; a p99 in ms is the longest job's own period whenever it
is not slowed), and the marks. A draw where CASSINI is worse than the base by more than the
tolerance in any of the four time figures counts as a loss.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from innet.cassini.experiments.draws import run_tasks
from innet.cassini.experiments.settings import DEFAULT_EVALUATION, EvaluationSettings, SweepSettings
from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.cluster import cluster_from_topology
from innet.cassini.placement.scheduler import ClusterPlan, schedule
from innet.cassini.sim.steady import Cache, FluidResult, JobRun
from innet.errors import InputError
from innet.table import format_table
from innet.topology import Topology

DEFAULT_DRAWS = 40
TOLERANCE = 0.01
ARMS = ("base", "base+shifts", "cassini")


@dataclass(frozen=True)
class ArmFigures:
    mean_ms: float
    p99_ms: float
    mean_x: float  # slowdown: iteration time / the job's iteration time alone
    p99_x: float
    marks: float  # packets marked (fluid proxy)
    realignments: int

    @staticmethod
    def of(run: FluidResult) -> ArmFigures:
        mean_ms, p99_ms = run.summary(False)
        mean_x, p99_x = run.summary(True)
        return ArmFigures(mean_ms, p99_ms, mean_x, p99_x, run.marks,
                          sum(j.realignments for j in run.jobs))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Draw:
    index: int
    pinned: dict[str, tuple[str, ...]]  # the running jobs' drawn servers
    arms: dict[str, ArmFigures]
    candidate: int  # CASSINI's pick among the base's candidates
    shifted: bool  # whether CASSINI's pick runs with its shifts
    score_base: float
    score_cassini: float

    @property
    def base(self) -> ArmFigures:
        return self.arms["base"]

    @property
    def cassini(self) -> ArmFigures:
        return self.arms["cassini"]

    def worse(self, tolerance: float = TOLERANCE) -> bool:
        """CASSINI worse than the base by more than `tolerance` in any time figure."""
        b, c = self.base, self.cassini
        return any(getattr(c, k) > getattr(b, k) * (1 + tolerance)
                   for k in ("mean_ms", "p99_ms", "mean_x", "p99_x"))

    def to_dict(self) -> dict[str, Any]:
        return {"draw": self.index, "pinned": {k: list(v) for k, v in self.pinned.items()},
                "base": self.base.to_dict(), "base_shifts": self.arms["base+shifts"].to_dict(),
                "running_only": self.arms["running-only"].to_dict(),
                "cassini": self.cassini.to_dict(), "candidate": self.candidate,
                "cassini_shifted": self.shifted, "score_base": self.score_base,
                "score_cassini": self.score_cassini, "worse": self.worse()}


def draw_pinned(topology: Topology, jobs: Sequence[JobProfile],
                rng: np.random.Generator) -> tuple[JobProfile, ...]:
    """The jobs with their `hosts` replaced by a uniform draw of distinct GPU slots (ring
    order: rack by rack, as the base would lay a job out)."""
    cluster = cluster_from_topology(topology)
    slots = [h for _, hosts in cluster.racks for h in hosts]
    pinned = [j for j in jobs if j.hosts is not None]
    need = sum(j.gpus for j in pinned)
    if need > len(slots):
        raise InputError(f"the running jobs ask for {need} GPUs, the cluster has {len(slots)}")
    picks = rng.permutation(len(slots))[:need]
    out: list[JobProfile] = []
    at = 0
    for job in jobs:
        if job.hosts is None:
            out.append(job)
            continue
        mine = sorted(int(i) for i in picks[at:at + job.gpus])
        at += job.gpus
        out.append(replace(job, hosts=tuple(slots[i] for i in mine)))
    return tuple(out)


def run_draw(topology: Topology, jobs: Sequence[JobProfile], index: int,
             settings: EvaluationSettings = DEFAULT_EVALUATION) -> Draw:
    """Draw `index` of a sweep seeded `settings.planner.seed`: draw the running jobs'
    servers, plan, run the three arms on the engine with `settings.config` (iterations, and
    CASSINI's agents, which run wherever a plan has shifts; the base's placement without
    shifts runs without). A pure function of its arguments: any process gives the same
    draw."""
    rng = np.random.default_rng([settings.planner.seed, index])
    drawn = draw_pinned(topology, jobs, rng)
    result = schedule(topology, drawn, settings.planner)
    engine, config = settings.engine, settings.config
    arms: dict[str, ArmFigures] = {}
    cache: Cache = {}  # the fluid engine's groups of jobs, run once for the whole draw
    for plan in (result.base, result.base_shifted, result.cassini):
        shifted = any(v != 0 for v in plan.shifts_ms.values())
        run_config = config if shifted else config.without_agents()
        arms[plan.mode] = ArmFigures.of(engine.plan(topology, plan, run_config, cache=cache))
    # what no placement of the arriving jobs can beat: the running jobs' own collisions
    running = {j.name for j in drawn if j.hosts is not None}
    measured = engine.plan(topology, result.base, config.without_agents(), only=running,
                           cache=cache)
    arms["running-only"] = ArmFigures.of(with_idle(measured, result.base, config.iterations))
    return _draw(index, drawn, arms, result)


def with_idle(run: FluidResult, plan: ClusterPlan, iterations: int) -> FluidResult:
    """The running jobs' run with every other job of the plan beside it at its own pace.

    The bound compares pooled figures with the base's, which pool every job; without the
    arriving jobs (at slowdown 1 when their traffic is left out, as the fluid path's run of
    them on no links gives) it would pool only the contended running jobs and come out
    *below* 1 (the 0.845x seen in a 3-iteration ns-3 sweep)."""
    have = {j.name for j in run.jobs}
    idle = tuple(JobRun(j.name, j.iteration_ms, (j.iteration_ms,) * iterations, 0.0, 0)
                 for j in plan.jobs if j.name not in have)
    by_name = {j.name: j for j in (*run.jobs, *idle)}
    return replace(run, jobs=tuple(by_name[j.name] for j in plan.jobs))


def _draw(index: int, drawn: Sequence[JobProfile], arms: dict[str, ArmFigures],
          result: Any) -> Draw:
    pinned = {j.name: j.hosts for j in drawn if j.hosts is not None}
    return Draw(index, pinned, arms, result.cassini.candidate,
                any(v != 0 for v in result.cassini.shifts_ms.values()), result.base.score,
                result.cassini.score)


def sweep(topology: Topology, jobs: Sequence[JobProfile], settings: SweepSettings,
          progress: Callable[[int], Any] | None = None) -> list[Draw]:
    """Every draw, where `settings` says; `progress(i)` as draw i finishes. Each draw is
    seeded by (seed, index) alone, so the numbers do not depend on where it ran."""
    if settings.draws < 1:
        raise InputError(f"--draws must be >= 1, got {settings.draws}")
    if settings.workers < 1:
        raise InputError(f"--workers must be >= 1, got {settings.workers}")
    if not any(j.hosts is not None for j in jobs):
        raise InputError("no job has hosts: a sweep draws the servers of the running jobs "
                         "(give some jobs a hosts list)")
    task = functools.partial(run_draw, topology, tuple(jobs), settings=settings.evaluation)
    return run_tasks(task, settings.draws, progress=progress, workers=settings.workers,
                     dask=settings.dask)


def _geomean(values: Sequence[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else 1.0


def summarise(draws: Sequence[Draw], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Geometric means of base / arm per figure (above 1: the arm is faster), marks in
    total, and the draws in which CASSINI is worse than the base by more than `tolerance`.
    Two bounds put them in proportion: `ideal` (every job at its own pace) and
    `running_only` (only the running jobs' traffic, unshifted: their collisions stay
    whatever the arriving jobs do)."""
    out: dict[str, Any] = {"draws": len(draws), "tolerance": tolerance}
    for arm in ("base+shifts", "cassini"):
        gains = {}
        for key in ("mean_ms", "p99_ms", "mean_x", "p99_x"):
            gains[key] = _geomean([getattr(d.base, key) / getattr(d.arms[arm], key)
                                   for d in draws])
        total = sum(d.arms[arm].marks for d in draws)
        base_total = sum(d.base.marks for d in draws)
        gains["marks_total"] = total
        gains["marks_ratio"] = (base_total / total if total > 0
                                else math.inf if base_total > 0 else 1.0)
        out["cassini" if arm == "cassini" else "base_shifts"] = gains
    out["marks_total_base"] = sum(d.base.marks for d in draws)
    # the most any plan could gain: every job at its own pace (slowdown 1)
    out["ideal"] = {"mean_x": _geomean([d.base.mean_x for d in draws]),
                    "p99_x": _geomean([d.base.p99_x for d in draws])}
    # the most a placement of the arriving jobs could gain, the running ones left unshifted
    floor = [d.arms["running-only"] for d in draws]
    floor_marks = sum(f.marks for f in floor)
    out["running_only"] = {
        "mean_x": _geomean([d.base.mean_x / f.mean_x for d, f in zip(draws, floor,
                                                                      strict=True)]),
        "p99_x": _geomean([d.base.p99_x / f.p99_x for d, f in zip(draws, floor, strict=True)]),
        "marks_total": floor_marks}
    worse = [d.index for d in draws if d.worse(tolerance)]
    out["worse_draws"] = len(worse)
    out["worse_draw_indices"] = worse
    out["better_p99_draws"] = sum(d.cassini.p99_x < d.base.p99_x * (1 - tolerance)
                                  for d in draws)
    out["better_mean_draws"] = sum(d.cassini.mean_x < d.base.mean_x * (1 - tolerance)
                                   for d in draws)
    out["fewer_marks_draws"] = sum(d.cassini.marks < d.base.marks for d in draws)
    out["more_marks_draws"] = sum(d.cassini.marks > d.base.marks for d in draws)
    out["base_placement_kept"] = sum(d.candidate == 0 for d in draws)
    return out


def sweep_text(draws: Sequence[Draw], summary: dict[str, Any]) -> str:
    """The per-draw table and the summary's lines, as `cassini sweep` prints them."""
    rows = []
    for d in draws:
        b, c = d.base, d.cassini
        rows.append([d.index, d.candidate, "yes" if d.shifted else "no", b.mean_x, c.mean_x,
                     b.p99_x, c.p99_x, b.mean_ms, c.mean_ms, b.p99_ms, c.p99_ms,
                     b.marks / 1e6, c.marks / 1e6, "WORSE" if d.worse() else ""])
    table = format_table(["draw", "pick", "shifts", "base mean x", "cassini mean x",
                          "base p99 x", "cassini p99 x", "base mean ms", "cassini mean ms",
                          "base p99 ms", "cassini p99 ms", "base marks M", "cassini marks M",
                          ""], rows, digits=3)
    c, s = summary["cassini"], summary["base_shifts"]

    def ratio(x: float) -> str:
        return "all marks gone" if math.isinf(x) else f"{x:.3g}x fewer"

    lines = [table, "",
             f"{summary['draws']} draws; geometric mean of base / arm (above 1: faster than "
             "the base):",
             f"  CASSINI:       mean {c['mean_x']:.3f}x, p99 {c['p99_x']:.3f}x (slowdown); "
             f"mean {c['mean_ms']:.3f}x, p99 {c['p99_ms']:.3f}x (ms); marks "
             f"{ratio(c['marks_ratio'])} in total",
             f"  base + shifts: mean {s['mean_x']:.3f}x, p99 {s['p99_x']:.3f}x (slowdown); "
             f"mean {s['mean_ms']:.3f}x, p99 {s['p99_ms']:.3f}x (ms); marks "
             f"{ratio(s['marks_ratio'])} in total",
             f"  bounds: every job at its own pace: mean {summary['ideal']['mean_x']:.3f}x, "
             f"p99 {summary['ideal']['p99_x']:.3f}x; only the running jobs' traffic "
             f"(unshifted): mean {summary['running_only']['mean_x']:.3f}x, p99 "
             f"{summary['running_only']['p99_x']:.3f}x, "
             f"{summary['running_only']['marks_total'] / 1e6:.4g}M marks against the base's "
             f"{summary['marks_total_base'] / 1e6:.4g}M",
             f"CASSINI worse than the base by more than {100 * summary['tolerance']:g}% "
             f"(mean or p99, ms or slowdown) in {summary['worse_draws']} of "
             f"{summary['draws']} draws; better p99 in {summary['better_p99_draws']}, better "
             f"mean in {summary['better_mean_draws']}, fewer marks in "
             f"{summary['fewer_marks_draws']}, more in {summary['more_marks_draws']}; the "
             f"base's placement kept in {summary['base_placement_kept']}."]
    return "\n".join(lines)
