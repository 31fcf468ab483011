"""`innet run cluster`: a trace's jobs arrive on one BMv2 network, once per policy.

The network comes up once (BMv2 in Mininet, routes and the ECN threshold everywhere, every
egress queue draining `capacity_pps / slowdown` packets/s, as `innet run cassini` binds its
links). For each policy the trace is replayed from a fresh epoch: each job is submitted at
its arrival (scaled by the slowdown) to the same job desk `innet net up` uses
(innet.emulation.jobs), so it is planned jointly (innet.plan.cluster), installed as its
difference, run by its hosts' agents (gradients aggregated through the switches, ECN
reaction) and released when it ends; jobs that do not fit wait in the queue. When every job
has ended, the switches' counters say how many packets were CE-marked on each link and how
many first transmissions each egress port sent (SOAR's cost, measured), and the fluid model
replays the same jobs with the same plans and start times (innet.plan.clusterfluid) to
predict what BMv2 measured. Everything is reported on the jobs' clock (divided back by the
slowdown).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.bmv2.thrift import QueueSetting, queue_commands
from innet.cassini.experiments.traces import Trace, load_trace
from innet.cassini.placement.cluster import link_name
from innet.emulation.aggregation import uplink_ports
from innet.emulation.cassini_run import DEFAULT_SLOWDOWN, MAX_SLOWDOWN
from innet.emulation.control import LiveNetwork
from innet.emulation.experiment import ControlledNetwork, controlled_network, prepare_run_folder
from innet.emulation.jobrun import START_MARGIN_S, JobLauncher, RunScale
from innet.emulation.jobs import JobRecord
from innet.errors import InputError
from innet.plan.cluster import POLICIES, JobRequest
from innet.plan.clusterfluid import Arrival, LinkBound, RanJob, predict, replay_trace
from innet.plan.intent import IntentOptions, network_intent
from innet.plan.linkdemand import chunks_per_iteration
from innet.plan.program import C_AGG_FIRST, C_ECN_MARKED
from innet.progress import bar
from innet.topology import Topology, load_topology

TICK_S = 0.2
Counts = dict[str, dict[int, int]]  # switch -> port -> packets


@dataclass(frozen=True)
class ClusterRunOptions:
    """One `innet run cluster`, built once by its caller and passed whole: the trace's jobs
    each take `gpus` workers and one more host as destination; `k` for SOAR's policies."""

    topology: str
    trace: str
    policies: tuple[str, ...] = POLICIES
    capacity_pps: int = 800
    slowdown: float = DEFAULT_SLOWDOWN
    queue_depth: int = 100
    ecn_threshold: int = 20
    k: int = 4
    progress: bool = True
    tls: bool = False

    def check(self) -> None:
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown or not self.policies or len(set(self.policies)) != len(self.policies):
            raise InputError(f"--policy: each of {', '.join(POLICIES)} at most once, got "
                             f"{', '.join(self.policies) or 'none'}")
        if not 1.0 <= self.slowdown <= MAX_SLOWDOWN or self.capacity_pps / self.slowdown < 10:
            raise InputError(f"--slowdown must be in 1..{MAX_SLOWDOWN:g} and leave the switches "
                             f"at least 10 packets/s (--capacity-pps / --slowdown), got "
                             f"{self.slowdown:g}")

    @property
    def scale(self) -> RunScale:
        return RunScale(self.slowdown, self.capacity_pps, self.capacity_pps / self.slowdown)

    @property
    def bound(self) -> LinkBound:
        return LinkBound(self.capacity_pps, self.queue_depth, self.ecn_threshold)


@dataclass
class PolicyRun:
    """One policy's replay of the trace: its jobs' rows, the links' marks, SOAR's cost
    measured and predicted, and the fluid model's prediction beside the measurement."""

    policy: str
    jobs: list[dict[str, Any]]
    link_marks: dict[str, int]
    measured_cost: float
    predicted_cost: float
    duration_s: float
    predicted: dict[str, Any] = field(default_factory=dict)

    @property
    def marks(self) -> int:
        return sum(self.link_marks.values())

    @property
    def mean_jct_s(self) -> float | None:
        jcts = [j["jct_s"] for j in self.jobs if j["jct_s"] is not None]
        return sum(jcts) / len(jcts) if jcts else None

    @property
    def mean_iteration_ms(self) -> float | None:
        times = [t for j in self.jobs for t in j["iteration_ms"]]
        return sum(times) / len(times) if times else None

    @property
    def sums_exact(self) -> bool:
        return all(j["sums_exact"] is True and j["state"] == "done" for j in self.jobs)

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "link_marks": self.link_marks, "marks": self.marks,
                "measured_cost": self.measured_cost, "predicted_cost": self.predicted_cost,
                "mean_jct_s": self.mean_jct_s, "mean_iteration_ms": self.mean_iteration_ms,
                "sums_exact": self.sums_exact, "duration_s": self.duration_s,
                "fluid": self.predicted}


def trace_requests(trace: Trace, topo: Topology, options: ClusterRunOptions
                   ) -> list[tuple[JobRequest, float]]:
    """Each job of the trace as a request (its GPUs as workers, values at the run's scale),
    with its arrival in ms; one that could never fit the network is refused here."""
    out = []
    for j in sorted(trace.jobs, key=lambda t: t.arrival_ms):
        req = JobRequest(j.name, j.profile, j.profile.gpus, j.iterations,
                         options.scale.values(j.profile, topo), k=options.k)
        req.check(topo)
        out.append((req, j.arrival_ms))
    if not out:
        raise InputError("the trace has no job", source=options.trace)
    return out


def run_cluster(options: ClusterRunOptions, out: Path) -> list[PolicyRun]:
    o = options
    o.check()
    topo = load_topology(o.topology)
    requests = trace_requests(load_trace(o.trace), topo, o)
    prepare_run_folder(out, {"topology.json": o.topology, "trace.json": o.trace},
                       {"policies": list(o.policies), "scale": vars(o.scale)})
    intent = network_intent(topo, [], ecn_threshold=o.ecn_threshold)
    setup = queue_commands([QueueSetting(rate_pps=round(o.capacity_pps / o.slowdown),
                                         depth=o.queue_depth)])
    runs: list[PolicyRun] = []
    with controlled_network(topo, out, intent.entries(), replication=intent.replication(),
                            setup=setup, tls=o.tls) as cn:
        for policy in o.policies:
            if o.progress:
                print(f"  {policy}: {len(requests)} jobs ...", file=sys.stderr, flush=True)
            runs.append(run_policy(cn, topo, requests, policy, o, out / tag(policy)))
            write_results(out, runs, o)
    return runs


def tag(policy: str) -> str:
    return policy.replace("+", "-")


def run_policy(cn: ControlledNetwork, topo: Topology, requests: list[tuple[JobRequest, float]],
               policy: str, o: ClusterRunOptions, folder: Path) -> PolicyRun:
    """The trace once, under `policy`, from a fresh epoch; every job ended before it returns."""
    folder.mkdir(parents=True, exist_ok=True)
    before = read_counts(cn)
    t0 = time.time()
    launcher = JobLauncher(cn, topo, folder, o.scale, epoch=t0)
    routes = network_intent(topo, [], ecn_threshold=o.ecn_threshold)
    live = LiveNetwork(topo, cn, routes, IntentOptions(ecn_threshold=o.ecn_threshold),
                       folder=folder, scale=o.scale, launch=launcher.start,
                       keep_ended=None)  # policy_result reads every job at the end
    pending = list(requests)
    deadline = t0 + time_bound(requests, o)
    ledger = Ledger(read_counts(cn)[C_AGG_FIRST])
    with bar(total=len(requests), desc=policy, unit="job", show=o.progress) as progress:
        while pending or live.jobs.active():
            now = time.time()
            while pending and t0 + pending[0][1] * o.slowdown / 1000 <= now:
                req, _ = pending.pop(0)
                live.jobs.submit(req, policy, req.profile.model or req.profile.name)
                ledger.update(cn, topo, live.jobs.records)
            live.jobs.tick()
            ledger.update(cn, topo, live.jobs.records)
            progress.n = sum(r.state in ("done", "failed") for r in live.jobs.records.values())
            progress.refresh()
            if now > deadline:
                break
            time.sleep(TICK_S)
    live.close()  # a job still running past the bound is cancelled, and says so
    after = read_counts(cn)
    ledger.close(after[C_AGG_FIRST])
    run = policy_result(topo, policy, live.jobs.records, requests, t0, o,
                        diff_counts(before, after), time.time() - t0)
    for row in run.jobs:
        row["measured_cost"] = ledger.cost(row["name"])
    return run


@dataclass
class Ledger:
    """Each job's first transmissions, from the switches' per-port counters: read whenever
    the set of running jobs changes, and each interval's increments on a port given to the
    one job whose tree sends through it (its uplinks, weighted by 1/rate as phi weighs
    them). A port that two jobs used in one interval makes both `shared` (no per-job
    figure); a job that just ended still counts as a user for one interval (packets still
    queued in the switches)."""

    last: Counts
    users: dict[str, dict[tuple[str, int], float]] = field(default_factory=dict)
    running: frozenset[str] = frozenset()
    lingering: frozenset[str] = frozenset()
    per_job: dict[str, float] = field(default_factory=dict)
    shared: set[str] = field(default_factory=set)

    def update(self, cn: ControlledNetwork, topo: Topology,
               records: dict[str, JobRecord]) -> None:
        now = frozenset(n for n, r in records.items() if r.state == "running")
        if now == self.running:
            return
        for n in now - set(self.users):
            a = records[n].admission
            assert a is not None
            tree = a.plan.tree
            self.users[n] = {(s, port): float(tree.weight[tree.index[s]])
                             for s, port in uplink_ports(topo, a.plan).items()}
        self.close(read_counts(cn)[C_AGG_FIRST])
        self.lingering = self.running - now
        self.running = now

    def close(self, counts: Counts) -> None:
        """Attribute what the ports sent since the last reading."""
        active = self.running | self.lingering
        for s, ports in counts.items():
            for port, n in ports.items():
                delta = n - self.last.get(s, {}).get(port, 0)
                if not delta:
                    continue
                who = [j for j in active if (s, port) in self.users.get(j, {})]
                if len(who) == 1:
                    j = who[0]
                    self.per_job[j] = self.per_job.get(j, 0.0) + delta * self.users[j][(s, port)]
                elif len(who) > 1:
                    self.shared.update(who)
        self.last = counts

    def cost(self, job: str) -> float | None:
        """The job's measured first-transmission cost; None when its ports were shared."""
        return None if job in self.shared else self.per_job.get(job, 0.0)


def time_bound(requests: list[tuple[JobRequest, float]], o: ClusterRunOptions) -> float:
    """Seconds a replay may take at most: every job one after the other at 4x its own time."""
    return 60.0 + sum(4 * r.iterations * r.profile.iteration_ms * o.slowdown / 1000
                      for r, _ in requests) + max(a for _, a in requests) * o.slowdown / 1000


def read_counts(cn: ControlledNetwork) -> dict[str, Counts]:
    """The CE marks and first transmissions of every egress port of every switch, now."""
    out: dict[str, Counts] = {}
    for name in (C_ECN_MARKED, C_AGG_FIRST):
        out[name] = {s: {i: p for i, (p, _) in cn.controller.session(s).read_counters(name)
                         .items()} for s in cn.addresses}
    return out


def diff_counts(before: dict[str, Counts], after: dict[str, Counts]) -> dict[str, Counts]:
    return {name: {s: {i: p - before[name].get(s, {}).get(i, 0) for i, p in ports.items()}
                   for s, ports in per.items()} for name, per in after.items()}


def port_links(topo: Topology) -> dict[tuple[str, int], tuple[str, str]]:
    """(switch, port) -> the directed link its egress queue feeds."""
    out = {}
    for s in topo.switches:
        for link, far in topo.neighbours(s):
            port = link.end(s).port
            if port is not None:
                out[(s, port)] = (s, far.node)
    return out


def policy_result(topo: Topology, policy: str, records: dict[str, JobRecord],
                  requests: list[tuple[JobRequest, float]], t0: float, o: ClusterRunOptions,
                  counts: dict[str, Counts], duration_s: float) -> PolicyRun:
    links = port_links(topo)
    marks = {link_name(links[(s, p)]): n for s, ports in counts[C_ECN_MARKED].items()
             for p, n in ports.items() if n and (s, p) in links}
    rates = {(link.a.node, link.b.node): link.rate for link in topo.links}
    rates.update({(b, a): r for (a, b), r in list(rates.items())})
    measured = sum(n / rates[links[(s, p)]] for s, ports in counts[C_AGG_FIRST].items()
                   for p, n in ports.items() if (s, p) in links)
    arrivals = {r.name: a for r, a in requests}
    rows = [job_row(records[r.name], arrivals[r.name], t0, o) for r, _ in requests
            if r.name in records]
    predicted_cost = sum(row["predicted_cost"] for row in rows if row["predicted_cost"])
    run = PolicyRun(policy, rows, marks, measured, predicted_cost, duration_s)
    run.predicted = fluid_prediction(topo, records, rows, policy, o)
    return run


def job_row(record: JobRecord, arrival_ms: float, t0: float, o: ClusterRunOptions
            ) -> dict[str, Any]:
    """One job of results.json, on the jobs' clock."""
    a, st = record.admission, record.stats
    ended = st.get("ended_at")
    chunks = chunks_per_iteration(record.request.values) * st.get("iterations_done", 0)
    return {"name": record.name, "state": record.state, "why": record.why,
            "hosts": list(a.hosts) if a else [], "blue": list(a.blue) if a else [],
            "shift_ms": a.shift_ms if a else None, "iterations": record.request.iterations,
            "iterations_done": st.get("iterations_done", 0),
            "arrival_s": arrival_ms / 1000,
            "start_s": (None if st.get("started_at") is None
                        else (st["started_at"] - t0) / o.slowdown),
            "jct_s": (None if ended is None
                      else (ended - t0) / o.slowdown - arrival_ms / 1000),
            "iteration_ms": st.get("iteration_ms", []),
            "mean_iteration_ms": st.get("mean_iteration_ms"), "marks": st.get("marks"),
            "retransmissions": st.get("retransmissions"), "sums_exact": st.get("sums_exact"),
            "phi": a.phi if a else None,
            "predicted_cost": a.phi * chunks if a else None,
            "values": record.request.values, "writes": record.writes}


def fluid_prediction(topo: Topology, records: dict[str, JobRecord], rows: list[dict[str, Any]],
                     policy: str, o: ClusterRunOptions) -> dict[str, Any]:
    """The fluid model on the jobs that ran, from the times they started: mean iteration
    time and JCT beside BMv2's."""
    ran = [RanJob(admission, row["arrival_s"] * 1000, row["start_s"] * 1000,
                  row["iterations_done"])
           for row in rows if row["iterations_done"] and row["start_s"] is not None
           and (admission := records[row["name"]].admission) is not None]
    if not ran:
        return {}
    result = predict(topo, ran, policy, o.bound)
    times = [t for j in result.jobs for t in j.iterations_ms]
    return {"mean_iteration_ms": sum(times) / len(times),
            "mean_jct_s": sum(j.jct_ms for j in result.jobs) / len(result.jobs) / 1000,
            "marks": result.marks,
            "jobs": {j.name: {"mean_iteration_ms": sum(j.iterations_ms) / len(j.iterations_ms),
                              "jct_s": j.jct_ms / 1000} for j in result.jobs}}


def write_results(out: Path, runs: list[PolicyRun], o: ClusterRunOptions) -> None:
    """results.json and the plots, rewritten after every policy."""
    from innet.emulation.cluster_plots import plot_cluster, summary_lines

    data = {"policies": {r.policy: r.to_dict() for r in runs},
            "scale": {"slowdown": o.slowdown, "capacity_pps": o.capacity_pps,
                      "queue_depth": o.queue_depth, "ecn_threshold": o.ecn_threshold}}
    (out / "results.json").write_text(json.dumps(data, indent=1))
    plot_cluster(out, runs)
    (out / "summary.md").write_text("\n".join(summary_lines(runs)) + "\n")



def predict_trace(options: ClusterRunOptions) -> dict[str, dict[str, Any]]:
    """What `run_cluster` will measure, from the fluid model alone: per policy, the trace's
    jobs admitted at their arrivals (or when a job that leaves makes room), started on
    their grids after the launcher's margin, with the mean JCT and iteration time, marks
    and SOAR's cost of every job's plan (`innet cassini evaluate --trace --policy`)."""
    o = options
    o.check()
    topo = load_topology(o.topology)
    arrivals = [Arrival(r, a) for r, a in trace_requests(load_trace(o.trace), topo, o)]
    out = {}
    for policy in o.policies:
        ran, result = replay_trace(topo, arrivals, policy, o.bound,
                                   START_MARGIN_S * 1000 / o.slowdown)
        times = [t for j in result.jobs for t in j.iterations_ms]
        cost = sum(r.admission.phi * chunks_per_iteration(r.admission.request.values)
                   * r.iterations for r in ran)
        out[policy] = {
            "mean_jct_s": sum(j.jct_ms for j in result.jobs) / len(result.jobs) / 1000,
            "mean_iteration_ms": sum(times) / len(times), "marks": result.marks,
            "predicted_cost": cost, "placed": len(ran), "jobs": [
                {"name": r.admission.name, "hosts": list(r.admission.hosts),
                 "blue": list(r.admission.blue), "shift_ms": r.admission.shift_ms,
                 "ready_s": r.ready_ms / 1000} for r in ran]}
    return out
