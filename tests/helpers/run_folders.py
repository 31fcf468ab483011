"""Run folders laid out as `innet run aggregation`, `run cluster` and `run cassini` write
them, without BMv2: the commands' own planning and writing code (prepare_run_folder,
plan_document, write_results, to_dict) over counters chosen by the test instead of counted
by switches."""

from __future__ import annotations

import json
from pathlib import Path

from innet.aggpacket import VECTOR_LEN
from innet.cassini import load_jobs
from innet.cassini.placement.cluster import link_name
from innet.cassini.placement.scheduler import PlannerSettings, schedule
from innet.emulation.aggregation import (
    AggregationRunOptions,
    StrategyRun,
    default_workload,
    measured_cost,
    plan_document,
    split_workload,
    write_results,
)
from innet.emulation.cassini_run import CassiniExperiment, RunResult
from innet.emulation.cluster_run import ClusterRunOptions, PolicyRun, job_row
from innet.emulation.cluster_run import write_results as write_cluster_results
from innet.emulation.experiment import prepare_run_folder
from innet.emulation.jobs import JobRecord
from innet.emulation.linkload import link_totals
from innet.plan.cluster import Admission, ClusterState, JobRequest, admit
from innet.plan.intent import plan_job
from innet.plan.program import C_ECN_MARKED, C_PORT_IN, C_PORT_OUT
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
BT15 = str(ROOT / "topologies" / "bt15.json")
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")
TRACE = str(ROOT / "examples" / "trace-cluster-leafspine.json")
PAIR = str(ROOT / "examples" / "jobs-vgg19-pair.json")


def aggregation_folder(out: Path, strategies: tuple[str, ...] = ("soar", "all-red"),
                       values: int = 4096) -> list[StrategyRun]:
    """A lossless run of `strategies` on bt15: every uplink's first transmissions are its
    messages per chunk x chunks (what the switches count without loss), and each switch
    is given its own number of packets sent again (its position + 1), so a load that took
    another switch's figure shows."""
    o = AggregationRunOptions(topology=BT15, strategies=strategies, values=values,
                              progress=False)
    topo = load_topology(o.topology)
    window = o.checked_window()
    workloads = split_workload(default_workload(topo), o.jobs, 2 * window)
    chunks = -(-values // VECTOR_LEN)
    plans = {s: [plan_job(topo, w, s, o.k, seed=o.seed) for w in workloads]
             for s in strategies}
    prepare_run_folder(out, {"topology.json": o.topology},
                       plan_document(o, workloads, window, chunks, plans))
    results = []
    for s, jps in plans.items():
        msgs = {sw: m for jp in jps for sw, m in jp.msgs.items()}
        first = {sw: m * chunks for sw, m in msgs.items()}
        again = {sw: i + 1 for i, sw in enumerate(sorted(first))}
        every = {sw: n + again[sw] for sw, n in first.items()}
        results.append(StrategyRun(
            strategy=s, k=o.k, blue=tuple(sorted({b for jp in jps for b in jp.blue})),
            rounds=chunks, predicted_cost=sum(jp.plan.cost for jp in jps),
            measured_cost=measured_cost(jps, first, chunks), sums_exact=True,
            writes=10, link_packets=first, predicted_msgs=msgs, values=values, chunks=chunks,
            link_repeats=again, total_cost=measured_cost(jps, every, chunks)))
    write_results(out, results, topo, workloads)
    return results


def cluster_folder(out: Path) -> list[PolicyRun]:
    """A run cluster of two jobs under soar+cassini on leafspine24, the second admitted
    beside the first (their shifts and blue sets the planner's), with CE marks on one
    link of the first job's tree."""
    o = ClusterRunOptions(topology=LEAFSPINE, trace=TRACE, policies=("soar+cassini",),
                          progress=False)
    topo = load_topology(o.topology)
    prepare_run_folder(out, {"topology.json": o.topology, "trace.json": o.trace},
                       {"policies": list(o.policies), "scale": vars(o.scale)})
    state = ClusterState(topo)
    rows = []
    first: Admission | None = None
    for name in ("a", "b"):
        profile = load_jobs(PAIR)[0]
        request = JobRequest(name, profile, 4, 5, 2016)
        got = admit(state, request, "soar+cassini")
        assert isinstance(got, Admission)
        first = first or got
        state = state.with_job(got)
        record = JobRecord(request, "soar+cassini", "VGG19", state="done", admission=got)
        rows.append(job_row(record, 0.0, 0.0, o))
    assert first is not None
    tree = first.plan.tree
    edge = (tree.ids[1], tree.ids[int(tree.parent[1])])
    run = PolicyRun("soar+cassini", rows, {link_name(edge): 7}, 1.0, 1.0, 12.0)
    write_cluster_results(out, [run], o)
    return [run]


def cassini_folder(out: Path) -> CassiniExperiment:
    """A run cassini of the VGG19 pair on leafspine24: the scheduler's three arms, with
    receivers' figures chosen by the test and per-link figures made by the command's own
    `link_totals` from port counters chosen by the test (arm i: port p of every switch sent
    100 x p + i packets and marked i x p; every host sent 50 + i)."""
    topo = load_topology(LEAFSPINE)
    plans = schedule(topo, load_jobs(PAIR), PlannerSettings(seed=0))
    arms = (plans.base, plans.base_shifted, plans.cassini)
    prepare_run_folder(out, {"topology.json": LEAFSPINE, "jobs.json": PAIR},
                       {p.mode: p.to_dict() for p in arms})
    ports = {s: sorted({e.port for link in topo.links for e in (link.a, link.b)
                        if e.node == s and e.port is not None}) for s in topo.switches}
    runs = []
    for i, p in enumerate(arms):
        before = {s: {C_PORT_OUT: {}, C_PORT_IN: {}, C_ECN_MARKED: {}} for s in topo.switches}
        after = {s: {C_PORT_OUT: {q: 100 * q + i for q in ps},
                     C_PORT_IN: dict.fromkeys(ps, 50 + i),
                     C_ECN_MARKED: {q: i * q for q in ps}} for s, ps in ports.items()}
        links = link_totals(topo, before, after)
        marks = sum(r["marks_ab"] + r["marks_ba"] for r in links)
        runs.append(RunResult(p.mode, {j: list(h) for j, h in p.placement.items()},
                              dict(p.shifts_ms), {}, {}, {}, marks, {}, {}, 0, links))
    result = CassiniExperiment({p.mode: p for p in arms}, tuple(runs), 800, 80.0, 4.0, 100,
                               20, 5)
    (out / "results.json").write_text(json.dumps(result.to_dict(), indent=1))
    return result
