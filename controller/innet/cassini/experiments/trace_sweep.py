"""Traces as evaluations and sweeps: job completion times for the base and CASSINI.

One draw is one trace (`traces.make_trace(kind, topology, seed, index)`), replayed through
the base and CASSINI (`replay.plan_trace`) and measured by an engine (the fluid model's
`sim.trace.simulate_trace`, or ns-3). Per arm: mean and p99 job completion time (JCT, from
arrival to leaving), mean and p99 iteration slowdown, marks, re-alignments; beside them the
no-contention ideal (each job at its own pace where the schedule placed it), and the share of
the ideal's gain CASSINI captures, (base - CASSINI) / (base - ideal). A draw where CASSINI's
mean or p99 JCT, or mean or p99 iteration slowdown, is worse than the base's by more than
the tolerance is a loss. Pure functions; the CLI prints.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from innet.cassini.experiments.draws import run_tasks
from innet.cassini.experiments.replay import (
    GUARD_COUNTS,
    SHARE_MIN_GAP,
    TracePlans,
    jct_share,
    plan_trace,
)
from innet.cassini.experiments.settings import (
    DEFAULT_EVALUATION,
    EvaluationSettings,
    SweepSettings,
    TraceSpec,
)
from innet.cassini.experiments.traces import Trace
from innet.cassini.sim.trace import TraceResult, TraceSchedule
from innet.table import format_table
from innet.topology import Topology

TRACE_TOLERANCE = 0.02
NOTHING_TO_CAPTURE = f"n/a (the base is within {100 * SHARE_MIN_GAP:g}% of the ideal)"
ARMS = ("base", "base+shifts", "cassini")
_KEYS = ("jct_mean_ms", "jct_p99_ms", "iter_mean_x", "iter_p99_x")


@dataclass(frozen=True)
class TraceFigures:
    jct_mean_ms: float
    jct_p99_ms: float
    iter_mean_x: float
    iter_p99_x: float
    marks: float
    realignments: int

    @staticmethod
    def of(r: TraceResult) -> TraceFigures:
        (jm, jp), (im, ip) = r.jct(), r.iteration_slowdown()
        return TraceFigures(jm, jp, im, ip, r.marks, sum(j.realignments for j in r.jobs))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TraceDraw:
    index: int
    trace: Trace
    arms: dict[str, TraceFigures]
    ideal: tuple[float, float]  # mean and p99 JCT at every job's own pace (N x T)
    jobs: dict[str, list[dict[str, Any]]]  # arm -> per-job outcomes
    warnings: tuple[str, ...] = ()
    # the same on the engine: every job alone where the base placed it (ns-3: packets take
    # time even alone); None on the fluid model, where it is `ideal`
    measured_ideal: tuple[float, float] | None = None
    # mean and p99 iteration over its own T in that run alone; None on the fluid model, where
    # every iteration alone takes exactly T (1.0)
    measured_ideal_iteration: tuple[float, float] | None = None
    guard: Mapping[str, int] = field(default_factory=dict)  # replay.GUARD_COUNTS; {}: none
    planning_s: tuple[float, ...] = ()  # wall seconds per CASSINI round (TracePlans)

    @property
    def reference(self) -> tuple[float, float]:
        """The ideal CASSINI is measured against: the engine's own when it has one."""
        return self.measured_ideal if self.measured_ideal is not None else self.ideal

    @property
    def reference_iteration(self) -> tuple[float, float]:
        """Mean and p99 iteration slowdown with no contention: 1.0 unless measured."""
        return self.measured_ideal_iteration or (1.0, 1.0)

    def worse(self, tolerance: float = TRACE_TOLERANCE, arm: str = "cassini") -> bool:
        b, c = self.arms["base"], self.arms[arm]
        return any(getattr(c, k) > getattr(b, k) * (1 + tolerance) for k in _KEYS)

    def share(self, which: int, analytic: bool = False) -> float:
        key = _KEYS[which]
        ideal = self.ideal if analytic else self.reference
        return jct_share(getattr(self.arms["base"], key), getattr(self.arms["cassini"], key),
                         ideal[which])

    def to_dict(self) -> dict[str, Any]:
        return {"draw": self.index, "trace": self.trace.to_dict(),
                "arms": {k: v.to_dict() for k, v in self.arms.items()},
                "ideal": {"jct_mean_ms": self.ideal[0], "jct_p99_ms": self.ideal[1]},
                "measured_ideal": (None if self.measured_ideal is None else
                                   {"jct_mean_ms": self.measured_ideal[0],
                                    "jct_p99_ms": self.measured_ideal[1],
                                    "iter_mean_x": self.reference_iteration[0],
                                    "iter_p99_x": self.reference_iteration[1]}),
                "share_mean": _null(self.share(0)), "share_p99": _null(self.share(1)),
                "worse": self.worse(), "jobs": self.jobs, "warnings": list(self.warnings),
                "guard": dict(self.guard) or None, "planning_s": list(self.planning_s)}


def _null(x: float) -> float | None:
    return None if math.isnan(x) else x


def run_schedule(topology: Topology, sched: TraceSchedule,
                 settings: EvaluationSettings) -> TraceResult:
    """One arm's schedule on the engine (MLTCP's arms: with MLTCP on the senders);
    CASSINI's agents only where a job has shifts."""
    config = settings.config if sched.agents else settings.config.without_agents()
    engine = (settings.policy_engine(sched.mode) if sched.mode in settings.policies
              else settings.engine)
    return engine.trace(topology, sched, config)


def policy_schedules(plans: TracePlans, policies: Sequence[str]) -> list[TraceSchedule]:
    """The MLTCP policies' schedules: the base's (no shifts) or CASSINI's, renamed."""
    return [replace(plans.cassini if p.startswith("cassini") else plans.base, mode=p)
            for p in policies]


def evaluate_trace(topology: Topology, trace: Trace,
                   settings: EvaluationSettings = DEFAULT_EVALUATION, index: int = 0,
                   arm_workers: int = 1) -> TraceDraw:
    """Plan `trace` for every arm and measure each; the ideal from the base's schedule
    (the rounds place the same jobs at the same times in every arm: admission only counts
    free GPUs), and measured too by an engine that has contention to remove (ns-3). On an
    engine of separate runs, `arm_workers` of them (the arms and the measured ideal:
    independent of each other) go at once: one large draw alone then uses the machine's
    cores, as a sweep of many draws does with one process per draw."""
    plans = plan_trace(topology, trace, settings.planner)
    engine = settings.engine
    schedules = list(plans.arms()) + policy_schedules(plans, settings.policies)
    alone_config = settings.config.without_agents()
    alone: TraceResult | None = None
    if engine.separate_runs and arm_workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=arm_workers) as pool:
            ideal_run = pool.submit(engine.trace_alone, topology, plans.base, alone_config)
            results = list(pool.map(lambda s: run_schedule(topology, s, settings), schedules))
            alone = ideal_run.result()
    else:
        results = [run_schedule(topology, s, settings) for s in schedules]
        alone = engine.trace_alone(topology, plans.base, alone_config)
    arms: dict[str, TraceFigures] = {}
    jobs: dict[str, list[dict[str, Any]]] = {}
    for sched, result in zip(schedules, results, strict=True):
        arms[sched.mode] = TraceFigures.of(result)
        hosts = sched.placement
        jobs[sched.mode] = [j.to_dict() | {"hosts": list(hosts[j.name])} for j in result.jobs]
    ideal = np.asarray([j["ideal_ms"] for j in jobs["base"]], dtype=np.float64)
    measured = measured_iteration = None
    if alone is not None:
        measured, measured_iteration = alone.jct(), alone.iteration_slowdown()
        jobs["ideal"] = [j.to_dict() for j in alone.jobs]
    return TraceDraw(index, trace, arms, (float(ideal.mean()), float(np.percentile(ideal, 99))),
                     jobs, plans.cassini.warnings, measured, measured_iteration, plans.guard,
                     plans.planning_s)


def run_trace_draw(topology: Topology, spec: TraceSpec, settings: EvaluationSettings,
                   index: int, arm_workers: int = 1) -> TraceDraw:
    """Draw `index`: a trace of `spec` seeded (seed, index), evaluated. Any process gives
    the same draw."""
    trace = spec.make(topology, settings.planner.seed, index)
    return evaluate_trace(topology, trace, settings, index, arm_workers)


def trace_sweep(topology: Topology, spec: TraceSpec, settings: SweepSettings,
                progress: Callable[[int], Any] | None = None) -> list[TraceDraw]:
    """Every draw of `spec`, where `settings` says; `progress(i)` as draw i finishes."""
    spec.make(topology, settings.evaluation.planner.seed, 0)  # a bad spec fails here, once
    # the cores the draws leave idle (fewer draws than workers) go to each draw's engine runs
    arm_workers = (max(1, settings.workers // settings.draws)
                   if settings.evaluation.engine.separate_runs and settings.dask is None else 1)
    task = functools.partial(run_trace_draw, topology, spec, settings.evaluation,
                             arm_workers=arm_workers)
    return run_tasks(task, settings.draws, progress=progress, workers=settings.workers,
                     dask=settings.dask)


def _geomean(values: Sequence[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else 1.0


def _pooled_share(draws: Sequence[TraceDraw], key: str,
                  ideal: Sequence[float]) -> tuple[float, float]:
    """CASSINI's share of the ideal's gain in figure `key` (each draw's ideal in `ideal`),
    summed over draws, and the gap. The share is NaN when the summed gap is within
    SHARE_MIN_GAP of the summed base, the rule `jct_share` applies to one draw: below it the
    share measures where each arm's jobs sit (ns-3's packet time), not contention."""
    base = sum(getattr(d.arms["base"], key) for d in draws)
    gap = sum(getattr(d.arms["base"], key) - i for d, i in zip(draws, ideal, strict=True))
    got = sum(getattr(d.arms["base"], key) - getattr(d.arms["cassini"], key) for d in draws)
    return (got / gap if gap > SHARE_MIN_GAP * abs(base) else math.nan), gap


def summarise_traces(draws: Sequence[TraceDraw],
                     tolerance: float = TRACE_TOLERANCE) -> dict[str, Any]:
    """Geometric means of base / arm (above 1: faster) for JCT and iteration slowdown, the
    ideal's (base / ideal), the share of the ideal's gain captured (pooled over draws:
    sum of base - CASSINI over sum of base - ideal), marks in total, and the losses."""
    out: dict[str, Any] = {"draws": len(draws), "tolerance": tolerance}
    extra = [a for a in (draws[0].arms if draws else {}) if a not in ARMS]
    for arm in ("base+shifts", "cassini", *extra):
        g: dict[str, Any] = {k: _geomean([getattr(d.arms["base"], k) / getattr(d.arms[arm], k)
                                            for d in draws]) for k in _KEYS}
        total = sum(d.arms[arm].marks for d in draws)
        base_total = sum(d.arms["base"].marks for d in draws)
        g["marks_total"] = total
        g["marks_ratio"] = (base_total / total if total > 0
                            else math.inf if base_total > 0 else 1.0)
        out[arm] = g
        if arm in extra:  # a policy beside CASSINI: its own losses against the base
            lost = [d.index for d in draws if d.worse(tolerance, arm)]
            g["worse_draws"], g["worse_draw_indices"] = len(lost), lost
    out["policies"] = extra
    out["marks_total_base"] = sum(d.arms["base"].marks for d in draws)
    out["measured_ideal"] = all(d.measured_ideal is not None for d in draws)
    picks: tuple[tuple[str, Callable[[TraceDraw], tuple[float, float]]], ...] = (
        ("ideal", lambda d: d.reference), ("analytic_ideal", lambda d: d.ideal))
    for name, pick in picks:
        out[name] = {"jct_mean_ms": _geomean([d.arms["base"].jct_mean_ms / pick(d)[0]
                                              for d in draws]),
                     "jct_p99_ms": _geomean([d.arms["base"].jct_p99_ms / pick(d)[1]
                                             for d in draws])}
        for which, key in ((0, "jct_mean_ms"), (1, "jct_p99_ms")):
            suffix = "" if name == "ideal" else "_analytic"
            share, gap = _pooled_share(draws, key, [pick(d)[which] for d in draws])
            out[f"share_{key}{suffix}"], out[f"gap_{key}{suffix}"] = share, gap
    # the same for iteration times (over each job's own T), the paper's measure of its
    # dynamic trace (section 5.3): a job's JCT hides how few of its iterations were slowed
    for which, key in ((0, "iter_mean_x"), (1, "iter_p99_x")):
        out[f"share_{key}"], _ = _pooled_share(
            draws, key, [d.reference_iteration[which] for d in draws])
    worse = [d.index for d in draws if d.worse(tolerance)]
    out["worse_draws"] = len(worse)
    out["worse_draw_indices"] = worse
    out["max_loss"] = max((getattr(d.arms["cassini"], k) / getattr(d.arms["base"], k) - 1
                           for d in draws for k in _KEYS), default=0.0)
    if any(d.guard for d in draws):
        out["guard"] = {k: sum(d.guard.get(k, 0) for d in draws) for k in GUARD_COUNTS}
    rounds = [s for d in draws for s in d.planning_s]
    if rounds:
        out["planning"] = {"rounds": len(rounds), "median_s": float(np.median(rounds)),
                           "max_s": max(rounds)}
    return out


def _planning_line(summary: dict[str, Any]) -> list[str]:
    """How long CASSINI's rounds took to plan (none when no round was timed)."""
    p = summary.get("planning")
    if not p:
        return []
    return [f"Planner: CASSINI's {p['rounds']} rounds (an arrival or a departure that frees "
            f"GPUs for queued jobs) took {p['median_s']:.3g} s median, {p['max_s']:.3g} s "
            "at most, guard runs included (wall time)."]


def _guard_lines(summary: dict[str, Any]) -> list[str]:
    """What the packet-level guard did, summed over the draws (none without a guard)."""
    g = summary.get("guard")
    if not g:
        return []
    return [f"Guard: asked in {g['asked']} of CASSINI's {g['rounds']} rounds, turned the "
            f"fluid check's pick down in {g['turned_down']} (kept the base's placement in "
            f"{g['kept_base']}); {g['runs']} runs on the engine."]


def _marks_text(ratio: float) -> str:
    """Base's marks over an arm's, in words."""
    return ("all marks gone" if math.isinf(ratio) else f"{ratio:.3g}x fewer" if ratio >= 1
            else f"{1 / ratio:.3g}x more")


def _policy_line(policy: str, g: dict[str, Any]) -> str:
    """A policy's summary line (beside CASSINI's), with its own losses against the base."""
    return (f"  {policy + ':':14} JCT mean {g['jct_mean_ms']:.3f}x, p99 {g['jct_p99_ms']:.3f}x; "
            f"iteration mean {g['iter_mean_x']:.3f}x, p99 {g['iter_p99_x']:.3f}x; marks "
            f"{_marks_text(g['marks_ratio'])} ({g['marks_total']:.4g}); worse than the base "
            f"in {g['worse_draws']} draws")


def trace_sweep_text(draws: Sequence[TraceDraw], summary: dict[str, Any]) -> str:
    rows = []
    for d in draws:
        b, c = d.arms["base"], d.arms["cassini"]
        rows.append([d.index, len(d.trace.jobs), b.jct_mean_ms / 1e3, c.jct_mean_ms / 1e3,
                     d.reference[0] / 1e3, b.jct_p99_ms / 1e3, c.jct_p99_ms / 1e3,
                     d.reference[1] / 1e3,
                     b.iter_p99_x, c.iter_p99_x, b.marks, c.marks,
                     "-" if math.isnan(d.share(0)) else f"{100 * d.share(0):.0f}%",
                     "-" if math.isnan(d.share(1)) else f"{100 * d.share(1):.0f}%",
                     "WORSE" if d.worse(summary["tolerance"]) else ""])
    table = format_table(["draw", "jobs", "base JCT s", "cassini JCT s", "ideal JCT s",
                          "base p99 s", "cassini p99 s", "ideal p99 s", "base iter p99 x",
                          "cassini iter p99 x", "base marks", "cassini marks",
                          "share mean", "share p99", ""], rows, digits=3)
    c, s, i = summary["cassini"], summary["base+shifts"], summary["ideal"]
    where = ("every job alone on the engine where the base placed it"
             if summary["measured_ideal"] else "every job at its own pace")

    def pct(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{100 * x:.0f}%"

    return "\n".join([
        table, "",
        f"{summary['draws']} draws; geometric mean of base / arm (above 1: faster):",
        f"  CASSINI:       JCT mean {c['jct_mean_ms']:.3f}x, p99 {c['jct_p99_ms']:.3f}x; "
        f"iteration mean {c['iter_mean_x']:.3f}x, p99 {c['iter_p99_x']:.3f}x; marks "
        f"{_marks_text(c['marks_ratio'])} ({summary['marks_total_base']:.4g} -> "
        f"{c['marks_total']:.4g})",
        f"  base + shifts: JCT mean {s['jct_mean_ms']:.3f}x, p99 {s['jct_p99_ms']:.3f}x; "
        f"iteration mean {s['iter_mean_x']:.3f}x, p99 {s['iter_p99_x']:.3f}x; marks "
        f"{_marks_text(s['marks_ratio'])}",
        *[_policy_line(p, summary[p]) for p in summary.get("policies", [])],
        f"  ideal ({where}): "
        f"JCT mean {i['jct_mean_ms']:.3f}x, p99 {i['jct_p99_ms']:.3f}x"
        + (f"; at N x T: {summary['analytic_ideal']['jct_mean_ms']:.3f}x, "
           f"{summary['analytic_ideal']['jct_p99_ms']:.3f}x (CASSINI's share of that: "
           f"{pct(summary['share_jct_mean_ms_analytic'])}, "
           f"{pct(summary['share_jct_p99_ms_analytic'])})" if summary["measured_ideal"] else ""),
        f"CASSINI's share of the ideal's gain, summed over draws: JCT mean "
        f"{pct(summary['share_jct_mean_ms'])} (of {summary['gap_jct_mean_ms'] / 1e3:.3g} s), "
        f"p99 {pct(summary['share_jct_p99_ms'])} (of {summary['gap_jct_p99_ms'] / 1e3:.3g} s); "
        f"iteration time mean {pct(summary['share_iter_mean_x'])}, p99 "
        f"{pct(summary['share_iter_p99_x'])}"
        + ("" if not any(math.isnan(v) for k, v in summary.items() if k.startswith("share_"))
           else
           f" (n/a: the base is within {100 * SHARE_MIN_GAP:g}% of the ideal, nothing to "
           "capture)") + ".",
        f"Worse than "
        f"the base by more than {100 * summary['tolerance']:g}% (JCT or iteration, mean or "
        f"p99) in {summary['worse_draws']} of {summary['draws']} draws (largest loss "
        f"{100 * summary['max_loss']:+.1f}%).", *_guard_lines(summary),
        *_planning_line(summary)])


def evaluation_trace_text(d: TraceDraw) -> str:
    """One trace's arms, the ideal, and CASSINI's share of the ideal's gain."""
    rows: list[list[Any]] = []
    for arm in [*ARMS, *(a for a in d.arms if a not in ARMS)]:
        f = d.arms[arm]
        rows.append([arm, f.jct_mean_ms, f.jct_p99_ms, f.iter_mean_x, f.iter_p99_x, f.marks,
                     f.realignments])
    rows.append(["ideal (N x T)", d.ideal[0], d.ideal[1], 1.0, 1.0, 0, 0])
    if d.measured_ideal is not None:
        rows.append(["ideal (each alone)", d.measured_ideal[0], d.measured_ideal[1], "", "", 0,
                     0])
    b, c = d.arms["base"], d.arms["cassini"]

    def pct(x: float) -> str:
        return NOTHING_TO_CAPTURE if math.isnan(x) else f"{100 * x:.0f}%"

    marks = ("no marks either way" if b.marks == 0 and c.marks == 0 else
             f"{b.marks:.4g} -> 0" if c.marks == 0 else f"{b.marks / c.marks:.3g}x fewer")
    return "\n".join([
        format_table(["run", "JCT mean (ms)", "JCT p99 (ms)", "iteration mean (x)",
                      "iteration p99 (x)", "marks", "re-alignments"], rows, digits=3),
        f"CASSINI vs base: JCT mean {b.jct_mean_ms / c.jct_mean_ms:.3f}x, p99 "
        f"{b.jct_p99_ms / c.jct_p99_ms:.3f}x better; marks {marks}; it captures "
        f"{pct(d.share(0))} of the ideal's gain in mean JCT, {pct(d.share(1))} in p99",
        *_guard_lines({"guard": d.guard}),
        *_planning_line(summarise_traces([d]))])
