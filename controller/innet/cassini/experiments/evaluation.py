"""`cassini evaluate` as functions: the arms run in the fluid model, their figures, the plots.

One link (`evaluate_link`: no shifts against CASSINI's shifts) or a cluster
(`evaluate_cluster`: the base's placement without shifts, the same with CASSINI's shifts, and
CASSINI's plan). Both return an `Evaluation`: typed runs and the link whose circle the shifts
change most, so the command line, the demo and notebooks print or plot the same thing.
`write_report` draws the CDF and the circle and writes the summary JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from innet.cassini.experiments.settings import EvaluationSettings
from innet.cassini.model.geometry import Circle, best_shifts, unified_circle
from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.scheduler import ClusterPlan, Schedule, schedule
from innet.cassini.sim.engine import Engine
from innet.cassini.sim.steady import FluidResult
from innet.jsonout import dumps
from innet.table import format_table
from innet.topology import Topology


@dataclass(frozen=True)
class Arm:
    """One arm: its fluid run and the mean link score of its plan."""

    run: FluidResult
    score: float

    @property
    def label(self) -> str:
        return self.run.label


@dataclass(frozen=True)
class LinkCircle:
    """The jobs of one link on their unified circle, before and after the shifts (the polar
    plot's input)."""

    jobs: tuple[JobProfile, ...]
    weights: tuple[float, ...]
    circle: Circle
    capacity_gbps: float
    shifts_ms: dict[str, float]
    scores: tuple[float, float]  # without and with the shifts
    where: str


@dataclass(frozen=True)
class Gain:
    """Base over CASSINI (above 1: CASSINI better)."""

    mean: float
    p99: float
    marks_ratio: float  # inf: CASSINI leaves no marks where the base has some


@dataclass(frozen=True)
class Evaluation:
    arms: tuple[Arm, ...]  # the base first, then CASSINI's plan, then settings.policies
    where: str  # what the jobs ran on, for titles
    circle: LinkCircle | None
    plan: ClusterPlan | None = None  # CASSINI's plan (cluster evaluations)
    warnings: tuple[str, ...] = ()

    @property
    def normalised(self) -> bool:
        """Jobs of different iteration times compare only as slowdowns (x), else in ms."""
        return len({j.iteration_ms for j in self.arms[0].run.jobs}) > 1

    @property
    def unit(self) -> str:
        return "x" if self.normalised else "ms"

    @property
    def cassini(self) -> Arm:
        """CASSINI's arm (after it may come the MLTCP policies' arms)."""
        return next(a for a in self.arms if a.label == "cassini")

    @property
    def gain(self) -> Gain:
        base, best = self.arms[0].run, self.cassini.run
        (bm, bp), (cm, cp) = base.summary(self.normalised), best.summary(self.normalised)
        ratio = (base.marks / best.marks if best.marks > 0
                 else float("inf") if base.marks > 0 else 1.0)
        return Gain(bm / cm, bp / cp, ratio)

    def to_dict(self) -> dict[str, Any]:
        """The summary JSON: {"unit", "runs": [...], "gain": {...}} (+ placement, shifts)."""
        rows: list[dict[str, Any]] = []
        for arm in self.arms:
            mean, p99 = arm.run.summary(self.normalised)
            rows.append({"label": arm.label, "score": arm.score, "mean": mean, "p99": p99,
                         "marks": arm.run.marks,
                         "realignments": sum(j.realignments for j in arm.run.jobs),
                         "jobs": {j.name: {"iteration_ms": j.iteration_ms,
                                           "mean_ms": j.mean_ms, "p99_ms": j.p99_ms,
                                           "marks": j.marks} for j in arm.run.jobs}})
        g = self.gain
        out: dict[str, Any] = {"unit": self.unit, "runs": rows,
                               "gain": {"mean": g.mean, "p99": g.p99,
                                        "marks_ratio": g.marks_ratio}}
        if self.plan is not None:
            out["placement"] = {k: list(v) for k, v in self.plan.placement.items()}
            out["shifts_ms"] = dict(self.plan.shifts_ms)
        return out


def evaluate_link(jobs: Sequence[JobProfile], capacity_gbps: float,
                  settings: EvaluationSettings, *, force: bool = False) -> Evaluation:
    """Every job on one link: without shifts (the agents off) against CASSINI's shifts, both
    run by the engine with `settings.config`; `force` lets the shift search run past its
    time limit."""
    planner, engine, config = settings.planner, settings.engine, settings.config
    solution = best_shifts(jobs, capacity_gbps, precision_deg=planner.precision_deg,
                           seed=planner.seed, force=force)
    arms: tuple[Arm, ...] = (
        Arm(engine.link(jobs, capacity_gbps, {}, config.without_agents(), "base"),
            solution.score_unshifted),
        Arm(engine.link(jobs, capacity_gbps, solution.shift_map(), config, "cassini"),
            solution.score))
    for policy in settings.policies:  # MLTCP on the senders, without shifts or with them
        with_shifts = policy.startswith("cassini")
        arms += (Arm(settings.policy_engine(policy).link(
            jobs, capacity_gbps, solution.shift_map() if with_shifts else {},
            config if with_shifts else config.without_agents(), policy),
            solution.score if with_shifts else solution.score_unshifted),)
    circle = LinkCircle(tuple(jobs), (1.0,) * len(jobs), solution.circle, capacity_gbps,
                        solution.shift_map(), (solution.score_unshifted, solution.score),
                        "one shared link")
    warnings = (solution.circle.warning,) if solution.circle.warning else ()
    return Evaluation(arms, f"one {capacity_gbps:g} Gbps link", circle, warnings=warnings)


def evaluate_cluster(topology: Topology, jobs: Sequence[JobProfile],
                     settings: EvaluationSettings,
                     progress: Callable[[int], None] | None = None) -> Evaluation:
    """The jobs placed on `topology`: the base's placement, it with CASSINI's shifts, and
    CASSINI's plan, each run by the engine with `settings.config` (the agents off for the
    base). The plans are the same whichever engine measures them."""
    result = schedule(topology, jobs, settings.planner, progress=progress)
    config = settings.config

    def run(p: ClusterPlan, engine: Engine = settings.engine) -> FluidResult:
        run_config = config.without_agents() if p.mode in ("base", "mltcp") else config
        return engine.plan(topology, p, run_config)

    arms = tuple(Arm(run(p), p.score) for p in (result.base, result.base_shifted,
                                                 result.cassini))
    for policy in settings.policies:  # the base's plan or CASSINI's, MLTCP on the senders
        p = replace(result.cassini if policy.startswith("cassini") else result.base,
                    mode=policy)
        arms += (Arm(run(p, settings.policy_engine(policy)), p.score),)
    plan = result.cassini
    return Evaluation(arms, f"{topology.name}, CASSINI keeps candidate #{plan.candidate}",
                      _pick_link(result, jobs, settings.planner.precision_deg), plan,
                      tuple(plan.warnings))


def _pick_link(result: Schedule, jobs: Sequence[JobProfile],
               precision_deg: float) -> LinkCircle | None:
    """The link whose circle the shifts change most, in CASSINI's placement or (if more) in
    the base's placement with CASSINI's shifts; None when no link carries two jobs."""
    by_name = {j.name: j for j in jobs}
    options = [(s.score - s.score_unshifted, -k, s, plan)
               for k, plan in enumerate((result.cassini, result.base_shifted))
               for s in plan.shared]
    if not options:
        return None
    _, _, pick, plan = max(options, key=lambda o: (o[0], o[1]))
    members = tuple(by_name[j] for j in pick.jobs)
    where = "CASSINI's placement" if plan.mode == "cassini" else "the base's placement"
    return LinkCircle(members, tuple(pick.weights),
                      unified_circle([j.iteration_ms for j in members],
                                     precision_deg=precision_deg),
                      pick.capacity_gbps, {j: plan.shifts_ms[j] for j in pick.jobs},
                      (pick.score_unshifted, pick.score),
                      f"link {' '.join(pick.links)} in {where}")


def write_report(evaluation: Evaluation, out: Path, prefix: str, title: str) -> list[Path]:
    """PREFIXcdf.png, PREFIXcircle.png (when a link carries two jobs) and PREFIXsummary.json
    (the summary with the plots' paths) in `out`; returns the plots' paths."""
    from innet.cassini.experiments.plots import (  # matplotlib: only when drawing
        plot_cdf,
        plot_circle,
    )

    paths = [out / f"{prefix}cdf.png"]
    plot_cdf([a.run for a in evaluation.arms], paths[0], normalise=evaluation.normalised,
             title=title)
    c = evaluation.circle
    if c is not None:
        paths.append(out / f"{prefix}circle.png")
        plot_circle(list(c.jobs), list(c.weights), c.circle, c.capacity_gbps, {}, c.shifts_ms,
                    c.scores, c.where, paths[-1])
    summary = evaluation.to_dict() | {"plots": [str(p) for p in paths]}
    (out / f"{prefix}summary.json").write_text(dumps(summary, indent=1) + "\n")
    return paths


def evaluation_text(ev: Evaluation) -> str:
    """The arms' table, CASSINI's gain and the jobs the contention slowed."""
    unit = ev.unit
    rows: list[list[Any]] = []
    for arm in ev.arms:
        mean, p99 = arm.run.summary(ev.normalised)
        rows.append([arm.label, arm.score, mean, p99, arm.run.marks / 1e6,
                     sum(j.realignments for j in arm.run.jobs)])
    lines = [format_table(["run", "score", f"mean ({unit})", f"p99 ({unit})",
                           "marks (M pkts)", "re-alignments"], rows)]
    base, best = ev.arms[0].run, ev.cassini.run
    gain = ev.gain
    marks = (f"{gain.marks_ratio:.3g}x fewer" if best.marks > 0
             else f"{base.marks / 1e6:.3g}M -> 0")
    lines.append(f"CASSINI vs base: mean {gain.mean:.3f}x, p99 {gain.p99:.3f}x better; marks "
                 f"{marks}")
    slowed = [[b.name, b.iteration_ms, b.mean_ms, b.p99_ms, c.mean_ms, c.p99_ms, b.marks / 1e6,
               c.marks / 1e6]
              for b, c in zip(base.jobs, best.jobs, strict=True)
              if b.mean_ms > b.iteration_ms * 1.0005 or c.mean_ms > c.iteration_ms * 1.0005]
    if slowed:
        lines += ["", format_table(["job (slowed)", "alone (ms)", "base mean", "base p99",
                                    "cassini mean", "cassini p99", "base marks (M)",
                                    "cassini marks (M)"], slowed, digits=1)]
    return "\n".join(lines)
