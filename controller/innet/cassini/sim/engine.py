"""Which engine runs an evaluation's arms: the fluid model (in process) or ns-3 (packets).

Planning always uses the fluid model (CASSINI's candidate check runs in it); an engine only
decides how the chosen plans are *measured*. Both give a `FluidResult`, so the tables,
figures and summaries are the same code whichever ran. `None` stands for the fluid model
everywhere, which keeps its exact code path (and its numbers) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.scheduler import ClusterPlan
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import FluidResult
from innet.cassini.sim.trace import TraceResult, TraceSchedule
from innet.errors import InputError
from innet.topology import Topology

ENGINES = ("fluid", "ns3")


class Engine(Protocol):
    """Runs a plan (or jobs on one link) and reports what the fluid model reports."""

    @property
    def name(self) -> str: ...

    def describe(self, fastest_gbps: float, trace: bool = False) -> str: ...

    def plan(self, topology: Topology, plan: ClusterPlan, config: FluidConfig,
             only: set[str] | None = None) -> FluidResult: ...

    def trace(self, topology: Topology, sched: TraceSchedule,
              config: FluidConfig) -> TraceResult: ...

    def trace_alone(self, topology: Topology, sched: TraceSchedule,
                    config: FluidConfig) -> TraceResult: ...

    def link(self, jobs: Sequence[JobProfile], capacity_gbps: float,
             shifts_ms: Mapping[str, float], config: FluidConfig,
             label: str) -> FluidResult: ...


def make_engine(name: str, *, rate_scale: float | None = None, ecmp: bool = False,
                seed: int = 0) -> Engine | None:
    """The engine called `name`; None for the fluid model. ns-3 is checked (wheel, g++, the
    program compiles) here, so a missing piece is one line before any work."""
    if name == "fluid":
        if rate_scale is not None or ecmp:
            raise InputError("--rate-scale and --ecmp apply to --engine ns3 only")
        return None
    if name != "ns3":
        raise InputError(f"unknown engine {name!r} (one of {', '.join(ENGINES)})")
    from innet.cassini.sim.ns3 import Ns3Engine, Ns3Settings, check_available

    settings = Ns3Settings(rate_scale=rate_scale, routing="ecmp" if ecmp else "static",
                           seed=seed)
    settings.check()
    check_available()
    return Ns3Engine(settings)
