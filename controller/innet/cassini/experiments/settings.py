"""What the front end decides once and the experiments pass whole: how arms are planned
and measured, how many draws a sweep runs and where, and which trace a draw generates.

All frozen and picklable: a sweep ships them to its worker processes or Dask workers, and a
draw is a pure function of them and its index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from innet.cassini.experiments.traces import (
    DEFAULT_ITERATIONS,
    DEFAULT_LOAD,
    DEFAULT_OCCUPANCY,
    DEFAULT_POISSON_JOBS,
    Trace,
    make_trace,
)
from innet.cassini.placement.cluster import Cluster
from innet.cassini.placement.scheduler import DEFAULT_CHECK, PlannerSettings
from innet.cassini.sim.engine import MLTCP_POLICIES, Engine, FluidEngine
from innet.cassini.sim.fluid import FluidConfig
from innet.errors import InputError
from innet.topology import Topology


@dataclass(frozen=True)
class EvaluationSettings:
    """How an evaluation's arms are planned (`planner`) and measured (`engine` running them
    with `config`; ns-3 reads the same settings). The sweeps and traces measure with the
    fluid run the planner checks with; `cassini evaluate --jobs` measures with its own."""

    planner: PlannerSettings = field(default_factory=PlannerSettings)
    engine: Engine = field(default_factory=FluidEngine)
    config: FluidConfig = DEFAULT_CHECK
    # arms beside base, base+shifts and cassini (engine.MLTCP_POLICIES): the base's plan
    # and CASSINI's, measured with MLTCP on every sender
    policies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in MLTCP_POLICIES]
        if unknown:
            raise InputError(f"unknown policy {unknown[0]!r} (beside base and cassini: "
                             f"{', '.join(MLTCP_POLICIES)})")

    def policy_engine(self, policy: str) -> Engine:
        """The engine that measures `policy`'s arm: MLTCP's arms change the transport."""
        return self.engine.with_transport("mltcp" if policy.endswith("mltcp") else "dctcp")


DEFAULT_EVALUATION = EvaluationSettings()


@dataclass(frozen=True)
class SweepSettings:
    """A sweep: every draw evaluated with `evaluation`, in `workers` processes or on the
    Dask scheduler at `dask` ("tcp://HOST:PORT")."""

    evaluation: EvaluationSettings
    draws: int
    workers: int = 1
    dask: str | None = None


@dataclass(frozen=True)
class TraceSpec:
    """The trace a draw generates (`traces.make_trace`): its kind and the kind's knobs."""

    kind: str
    count: int = DEFAULT_POISSON_JOBS
    load: float = DEFAULT_LOAD
    iterations: tuple[int, int] = DEFAULT_ITERATIONS
    occupancy: float = DEFAULT_OCCUPANCY

    def make(self, topology: Topology | Cluster, seed: int, index: int = 0) -> Trace:
        return make_trace(self.kind, topology, seed, index, count=self.count, load=self.load,
                          iterations=self.iterations, occupancy=self.occupancy)
