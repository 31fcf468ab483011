"""A sweep on a Dask cluster gives the numbers of the same sweep run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.cassini.experiments.placement_sweep import sweep
from innet.cassini.experiments.settings import EvaluationSettings, SweepSettings
from innet.cassini.model.profiles import load_jobs
from innet.cassini.placement.scheduler import PlannerSettings
from innet.cassini.sim.engine import FluidEngine
from innet.cassini.sim.fluid import FluidConfig
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[3]
QUICK = FluidConfig(iterations=6, realign_pct=5.0, realign_budget_pct=10.0)
_EVALUATION = EvaluationSettings(PlannerSettings(candidates=4, checked=2, seed=7, config=QUICK),
                                 FluidEngine(), QUICK)


def test_a_sweep_on_dask_gives_the_local_numbers() -> None:
    distributed = pytest.importorskip("distributed")
    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    jobs = load_jobs(ROOT / "examples" / "jobs-13.json")
    local = sweep(topo, jobs, SweepSettings(_EVALUATION, 3))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        seen: list[int] = []
        remote = sweep(topo, jobs, SweepSettings(_EVALUATION, 3, dask=cluster.scheduler_address),
                       progress=seen.append)
    assert sorted(seen) == [0, 1, 2]
    assert [d.to_dict() for d in remote] == [d.to_dict() for d in local]
    # and the draws differ from each other: equal lists are not equal by being empty
    assert len({str(d.pinned) for d in local}) == 3
