"""Which engine runs an evaluation's arms: the fluid model (in process) or ns-3 (packets).

Planning always uses the fluid model (CASSINI's candidate check runs in it); an engine only
decides how the chosen plans are *measured*. Both give a `FluidResult` (a `TraceResult` for
a trace), so the tables, figures and summaries are the same code whichever ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.scheduler import ClusterPlan
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import Cache, FluidResult, simulate, simulate_parts, single_link
from innet.cassini.sim.trace import TraceResult, TraceSchedule, simulate_trace
from innet.errors import InputError
from innet.topology import Topology

ENGINES = ("fluid", "ns3")
# policies an evaluation may add beside base, base+shifts and cassini: the base's or
# CASSINI's plan with MLTCP on the senders (docs/cassini-mltcp.md); packet engines only
MLTCP_POLICIES = ("mltcp", "cassini+mltcp")
# MLTCP's aggressiveness F(r) = slope x r + intercept (r: the share of the iteration's bytes
# a flow has delivered). The paper gives the linear form; these values are innet's, chosen
# on the development pair (docs/cassini-mltcp.md): F runs from 1 to 2 over an iteration, so
# a flow is never less aggressive than DCTCP (below 1 a flow alone after a cut regains its
# window slower than DCTCP would, stretching its iteration off its period).
MLTCP_SLOPE = 1.0
MLTCP_INTERCEPT = 1.0


class Engine(Protocol):
    """Runs a plan (or jobs on one link, or a trace's schedule) and reports what the fluid
    model reports."""

    @property
    def name(self) -> str: ...

    @property
    def separate_runs(self) -> bool:
        """Each run is a program of its own (ns-3): several can go at once, and the output
        says what runs them."""
        ...

    def describe(self, fastest_gbps: float, trace: bool = False) -> str: ...

    def marks_note(self, config: FluidConfig) -> str: ...

    def plan(self, topology: Topology, plan: ClusterPlan, config: FluidConfig,
             only: set[str] | None = None, cache: Cache | None = None) -> FluidResult: ...

    def trace(self, topology: Topology, sched: TraceSchedule,
              config: FluidConfig) -> TraceResult: ...

    def trace_alone(self, topology: Topology, sched: TraceSchedule,
                    config: FluidConfig) -> TraceResult | None: ...

    def link(self, jobs: Sequence[JobProfile], capacity_gbps: float,
             shifts_ms: Mapping[str, float], config: FluidConfig,
             label: str) -> FluidResult: ...

    def with_transport(self, transport: str) -> Engine:
        """The same engine with the senders' congestion control `transport` ("dctcp",
        "mltcp"); InputError where the engine has no congestion control to change."""
        ...


@dataclass(frozen=True)
class FluidEngine:
    """The fluid model in this process (picklable: sweeps ship it to workers)."""

    name: str = "fluid"
    separate_runs: bool = False

    def describe(self, fastest_gbps: float, trace: bool = False) -> str:
        return "the fluid model (no packets)"

    def marks_note(self, config: FluidConfig) -> str:
        return f"marks above {config.threshold_kb:g} KB"

    def plan(self, topology: Topology, plan: ClusterPlan, config: FluidConfig,
             only: set[str] | None = None, cache: Cache | None = None) -> FluidResult:
        """The plan's steady run. With `only`, the traffic of those jobs alone (the others
        run beside them at their own pace). With `cache` (a sweep's draw, whose plans share
        most jobs), one group of jobs sharing links at a time, each group run once: the
        iterations are the same, marks count while a group's own jobs run."""
        traffic: Mapping[str, Mapping[str, int]] = plan.traffic
        shifts: Mapping[str, float] = plan.shifts_ms
        label = plan.mode
        if only is not None:
            kept = {link: {k: v for k, v in per.items() if k in only}
                    for link, per in plan.traffic.items()}
            traffic = {link: per for link, per in kept.items() if per}
            shifts, label = {}, "running-only"
        if cache is None:
            return simulate(plan.jobs, traffic, plan.capacity_gbps, shifts, config, label)
        return simulate_parts(plan.jobs, traffic, plan.capacity_gbps, shifts, config, label,
                              cache)

    def trace(self, topology: Topology, sched: TraceSchedule,
              config: FluidConfig) -> TraceResult:
        return simulate_trace(sched, config)

    def trace_alone(self, topology: Topology, sched: TraceSchedule,
                    config: FluidConfig) -> TraceResult | None:
        """None: the fluid model's ideal is exact without a run (`trace.ideal_ms`)."""
        return None

    def link(self, jobs: Sequence[JobProfile], capacity_gbps: float,
             shifts_ms: Mapping[str, float], config: FluidConfig,
             label: str) -> FluidResult:
        traffic, cap = single_link(jobs, capacity_gbps)
        return simulate(jobs, traffic, cap, shifts_ms, config, label)

    def with_transport(self, transport: str) -> Engine:
        """The fluid model shares a link max-min at every instant: it has no windows for
        MLTCP to grow, so MLTCP is refused rather than imitated."""
        if transport != "dctcp":
            raise InputError(f"--policy {transport} needs --engine ns3: the fluid model has "
                             "no congestion windows for MLTCP to scale")
        return self


def make_engine(name: str, *, rate_scale: float | None = None, ecmp: bool = False,
                seed: int = 0, mltcp_slope: float | None = None,
                mltcp_intercept: float | None = None) -> Engine:
    """The engine called `name`. ns-3 is checked (wheel, g++, the program compiles) here, so
    a missing piece is one line before any work."""
    if name == "fluid":
        if rate_scale is not None or ecmp:
            raise InputError("--rate-scale and --ecmp apply to --engine ns3 only")
        if mltcp_slope is not None or mltcp_intercept is not None:
            raise InputError("--mltcp-slope and --mltcp-intercept apply to --engine ns3 only")
        return FluidEngine()
    if name != "ns3":
        raise InputError(f"unknown engine {name!r} (one of {', '.join(ENGINES)})")
    from innet.cassini.sim.ns3 import Ns3Engine, Ns3Settings, check_available

    settings = Ns3Settings(rate_scale=rate_scale, routing="ecmp" if ecmp else "static",
                           seed=seed)
    if mltcp_slope is not None:
        settings = replace(settings, mltcp_slope=mltcp_slope)
    if mltcp_intercept is not None:
        settings = replace(settings, mltcp_intercept=mltcp_intercept)
    settings.check()
    check_available()
    return Ns3Engine(settings)
