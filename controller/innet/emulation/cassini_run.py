"""`innet run cassini`: the base's and CASSINI's plans on BMv2 in Mininet, three arms.

CASSINI places the jobs and computes time shifts; the switches get routes and an ECN
threshold; every switch port's egress queue drains at the rate that stands for the links'
capacity (BMv2's set_queue_rate), so the shared links are real bottlenecks inside the switch
where enq_qdepth sees them. Each job's flows are paced on/off UDP (ECT(0)) from host agents
that cut their rate on echoed CE marks (DCTCP-like, `innet.emulation.agent`); receivers
count CE marks, switch counters count marked packets. Three arms run one after the other on
the same network and hosts: the base's placement without shifts (no agents re-aligning),
the base's placement with CASSINI's shifts for it, and CASSINI's placement with its shifts
(both with CASSINI's agents, re-aligning on the grid of their interleaving).

Scale: the emulator forwards thousands, not billions, of packets per second, so Gbps map to
packets per second by one factor: the slowest link's capacity is `capacity_pps`. Time: the
emulation runs `slowdown` times slower than the jobs' own clock (iterations, phases and shifts
last that many times longer, every rate, the switches' included, is that many times lower),
so each phase carries the same packets through the same queues while the machine's
scheduling jitter (milliseconds on a busy two-core machine) is small against a phase and the
switches never run short of CPU. Times are reported on the jobs' clock (divided back).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from innet.bmv2.thrift import QueueSetting, queue_commands
from innet.cassini import load_jobs
from innet.cassini.placement.scheduler import ClusterPlan, PlannerSettings, schedule
from innet.emulation.experiment import controlled_network, prepare_run_folder
from innet.emulation.linkload import link_totals, read_port_counts
from innet.errors import InputError
from innet.plan.intent import network_intent
from innet.plan.program import C_ECN_MARKED
from innet.topology import Topology, load_topology

# The emulation's clock runs this many times slower than the jobs': 4 keeps the busiest
# switch of the four-job run under a third of a core and a phase (90 ms x 4) long against
# the stalls of a busy machine
DEFAULT_SLOWDOWN = 4.0
MAX_SLOWDOWN = 20.0


@dataclass(frozen=True)
class Flow:
    job: str
    job_id: int
    src: str
    dst: str


@dataclass
class RunResult:
    label: str
    placement: dict[str, list[str]]
    shifts_ms: dict[str, float]
    ce_received: dict[str, int]
    packets_received: dict[str, int]
    packets_sent: dict[str, int]
    switch_marks: int
    iteration_ms: dict[str, list[float]]
    realigned: dict[str, int]
    unacked: int  # iterations whose end-of-communication ack never came (lost in a queue)
    # every link's packets and CE marks each way during the arm, by the switches' port
    # counters (innet.emulation.linkload.link_totals): what `innet view` draws on the links
    links: list[dict[str, Any]] = field(default_factory=list)

    @property
    def times(self) -> list[float]:
        return [t for v in self.iteration_ms.values() for t in v]

    @property
    def ce_total(self) -> int:
        """CE-marked packets at the receivers (each counted once)."""
        return sum(self.ce_received.values())

    @property
    def mean_ms(self) -> float:
        times = self.times
        return float(np.mean(times)) if times else 0.0

    @property
    def p99_ms(self) -> float:
        times = self.times
        return float(np.percentile(times, 99)) if times else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "ce_total": self.ce_total, "mean_ms": self.mean_ms,
                "p99_ms": self.p99_ms}


@dataclass(frozen=True)
class CassiniExperiment:
    """What `innet run cassini` measured: the three arms' plans and runs and the settings."""

    plans: dict[str, ClusterPlan]  # by arm: base, base+shifts, cassini
    runs: tuple[RunResult, ...]  # in the same order
    capacity_pps: int
    pps_per_gbps: float
    slowdown: float
    queue_depth: int
    ecn_threshold: int
    iterations: int

    def run(self, label: str) -> RunResult:
        return next(r for r in self.runs if r.label == label)

    def to_dict(self) -> dict[str, Any]:
        """results.json: plans (placement, shifts, score, candidate, shared links), the
        settings and every arm's figures."""
        return {"plans": {m: {"placement": {j: list(h) for j, h in p.placement.items()},
                              "shifts_ms": dict(p.shifts_ms), "score": p.score,
                              "candidate": p.candidate, "shared_links": p.shared_links()}
                          for m, p in self.plans.items()},
                "capacity_pps": self.capacity_pps, "pps_per_gbps": self.pps_per_gbps,
                "slowdown": self.slowdown, "queue_depth": self.queue_depth,
                "ecn_threshold": self.ecn_threshold, "iterations": self.iterations,
                "runs": [r.to_dict() for r in self.runs]}


def flows_of(placement: dict[str, tuple[str, ...]], order: list[str]) -> list[Flow]:
    """A ring all-reduce: each host of a job sends to the next one (one flow per hop)."""
    out = []
    for job in order:
        hosts = list(dict.fromkeys(placement[job]))  # GPUs of one host talk inside it
        if len(hosts) < 2:
            continue
        for i, h in enumerate(hosts):
            nxt = hosts[(i + 1) % len(hosts)]
            out.append(Flow(job, order.index(job), h, nxt))
    return out


def _link_capacity_gbps(topo: Topology) -> float:
    mbps = [link.mbps for link in topo.links if link.mbps is not None]
    if not mbps:
        raise InputError("the topology's links have no Mbps: CASSINI needs link capacities",
                         source=topo.source)
    return min(mbps) / 1000.0


@dataclass(frozen=True)
class CassiniRunOptions:
    """What one `innet run cassini` runs, built once by its caller (the front end, the demo,
    a benchmark, a test) and passed whole. `capacity_pps`: packets/s standing for the
    slowest link's capacity; `slowdown`: how many times slower than the jobs' clock the
    emulation runs; `queue_depth` and `ecn_threshold` in packets; `seed`: the placement's."""

    topology: str
    jobs: str
    iterations: int = 30
    capacity_pps: int = 800
    queue_depth: int = 100
    ecn_threshold: int = 20
    seed: int = 0
    pcap: bool = False
    progress: bool = True
    slowdown: float = DEFAULT_SLOWDOWN
    tls: bool = False  # P4Runtime over TLS, certificates in the run folder

    def check(self) -> None:
        if self.iterations < 1:
            raise InputError(f"--iterations must be >= 1, got {self.iterations}")
        if self.capacity_pps < 10:
            raise InputError(f"--capacity-pps must be >= 10, got {self.capacity_pps}")
        if not 1.0 <= self.slowdown <= MAX_SLOWDOWN or self.capacity_pps / self.slowdown < 10:
            raise InputError(f"--slowdown must be in 1..{MAX_SLOWDOWN:g} and leave the switches "
                             f"at least 10 packets/s (--capacity-pps / --slowdown), got "
                             f"{self.slowdown:g}")


@dataclass(frozen=True)
class _Arm:
    """One arm as its agents run it: the plan, its ring flows and shifts, the scale from
    Gbps to packets/s, and where its agents write."""

    plan: ClusterPlan
    flows: list[Flow]
    shifts: dict[str, float]  # job -> ms, on the jobs' clock
    scale: float  # packets/s per Gbps
    options: CassiniRunOptions
    logs: Path

    @property
    def label(self) -> str:
        return self.plan.mode

    @property
    def tag(self) -> str:
        """The label as it goes into file names."""
        return self.label.replace(" ", "-").replace("+", "-")

    @property
    def longest_s(self) -> float:
        """The longest iteration of the arm's jobs, in seconds on the emulation's clock."""
        return (max(self.plan.job(f.job).iteration_ms for f in self.flows)
                * self.options.slowdown / 1000)

    @property
    def duration_s(self) -> float:
        """How long the receivers listen at most: they stop once idle after the last
        packet, so this only bounds a run that went wrong."""
        o = self.options
        nominal = (3.0 + (o.iterations + 2) * self.longest_s
                   + max(self.shifts.values()) * o.slowdown / 1000 + 2.0)
        return 4 * nominal + 10.0

    @property
    def idle_s(self) -> float:
        return max(3.0, 2 * self.longest_s)  # longer than any Down phase


def run_cassini(options: CassiniRunOptions, out: Path) -> CassiniExperiment:
    o = options
    o.check()
    topo = load_topology(o.topology)
    result_plans = schedule(topo, load_jobs(o.jobs), PlannerSettings(seed=o.seed))
    plans = (result_plans.base, result_plans.base_shifted, result_plans.cassini)
    arms = _arms(plans, topo, o, out / "logs")
    prepare_run_folder(out, {"topology.json": o.topology, "jobs.json": o.jobs},
                       {p.mode: p.to_dict() for p in plans})
    runs: list[RunResult] = []
    # the long-running controller keeps routes, ECN threshold and queue settings on every
    # switch for the whole run, restoring one that restarts
    intent = network_intent(topo, [], ecn_threshold=o.ecn_threshold)
    setup = queue_commands([QueueSetting(rate_pps=round(o.capacity_pps / o.slowdown),
                                         depth=o.queue_depth)])
    with controlled_network(topo, out, intent.entries(), replication=intent.replication(),
                            setup=setup, pcap=o.pcap, tls=o.tls) as cn:
        for arm in arms:
            if o.progress:
                print(f"  {arm.label}: {len(arm.flows)} flows, {o.iterations} iterations ...",
                      file=sys.stderr, flush=True)
            runs.append(_one_run(cn.network, topo, arm, cn.controller))
    result = CassiniExperiment({p.mode: p for p in plans}, tuple(runs), o.capacity_pps,
                               arms[0].scale, o.slowdown, o.queue_depth, o.ecn_threshold,
                               o.iterations)
    (out / "results.json").write_text(json.dumps(result.to_dict(), indent=1))
    _report(out, result)
    return result


def _arms(plans: tuple[ClusterPlan, ...], topo: Topology, options: CassiniRunOptions,
          logs: Path) -> list[_Arm]:
    """Each plan's arm: its jobs' ring flows and shifts (a job on one host has no flow)."""
    orders = [[j.name for j in plan.jobs if j.name in plan.placement] for plan in plans]
    flows = [flows_of(dict(plan.placement), order)
             for plan, order in zip(plans, orders, strict=True)]
    if not any(flows):
        raise InputError("no job spans two hosts: nothing crosses the network",
                         source=options.jobs)
    scale = options.capacity_pps / _link_capacity_gbps(topo)  # packets per second per Gbps
    return [_Arm(plan, arm_flows, {j: float(plan.shifts_ms.get(j, 0.0)) for j in order},
                 scale, options, logs)
            for plan, order, arm_flows in zip(plans, orders, flows, strict=True)]


def _marks(ctl: Any) -> int:
    """CE marks counted by every switch, through the controller's current sessions."""
    return sum(p for s in ctl.views() for p, _ in
               ctl.session(s).read_counters(C_ECN_MARKED).values())


def _one_run(net: Any, topo: Topology, arm: _Arm, ctl: Any) -> RunResult:
    """One arm; every time and rate given to the agents is on the emulation's clock (times x
    the slowdown, rates / the slowdown), every time read back is divided back."""
    duration = arm.duration_s
    marks_before = _marks(ctl)
    ports_before = read_port_counts(ctl.session, ctl.views())
    receivers = _start_receivers(net, arm)
    time.sleep(0.5)
    senders = _start_senders(net, topo, arm)
    for f, proc, _ in senders:
        _, err = proc.communicate(timeout=duration + 60)
        if proc.returncode != 0:
            raise RuntimeError(f"the sender of {f.job} on {f.src} failed: "
                               f"{err.decode(errors='replace')[-500:]}")
    for dst, (proc, _) in receivers.items():
        _, err = proc.communicate(timeout=duration + 30)
        if proc.returncode != 0:
            raise RuntimeError(f"the receiver on {dst} failed: "
                               f"{err.decode(errors='replace')[-500:]}")
    time.sleep(0.3)
    marks = _marks(ctl) - marks_before
    links = link_totals(topo, ports_before, read_port_counts(ctl.session, ctl.views()))
    ids = {f.job_id: f.job for f in arm.flows}
    got, ce = _received(ids, [rx_out for _, rx_out in receivers.values()])
    sent, times, realigned, unacked = _sent(arm, ids, senders)
    return RunResult(arm.label, {j: list(h) for j, h in arm.plan.placement.items()},
                     arm.shifts, ce, got, sent, marks, times, realigned, unacked, links)


def _start_receivers(net: Any, arm: _Arm) -> dict[str, tuple[Any, Path]]:
    """A receiving agent on every flow's destination: its process and the file it writes."""
    receivers = {}
    for dst in sorted({f.dst for f in arm.flows}):
        rx_out = arm.logs / f"rx-{arm.tag}-{dst}.json"
        receivers[dst] = (net.host(dst).popen(
            [sys.executable, "-m", "innet.cli.agent", "receive", "--duration",
             f"{arm.duration_s:.2f}", "--idle", f"{arm.idle_s:.2f}", "--out", str(rx_out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE), rx_out)
    return receivers


def _start_senders(net: Any, topo: Topology, arm: _Arm) -> list[tuple[Flow, Any, Path]]:
    """A sending agent per flow, all on one epoch: the flow, its process and its file.
    Shifted arms run CASSINI's agents (re-aligning on the grid of their interleaving),
    the base's do not re-align."""
    from innet.cassini.placement.scheduler import DEFAULT_CHECK
    from innet.cassini.sim.fluid import realign_grid
    from innet.emulation.agent import WINDOW_S

    plan, slowdown = arm.plan, arm.options.slowdown
    agents = any(v != 0 for v in arm.shifts.values())
    grid = realign_grid(plan.jobs, plan.traffic)
    epoch = time.time() + 2.5  # every sender is up and waiting by then
    senders = []
    for i, f in enumerate(arm.flows):
        job = plan.job(f.job)
        phases = [{"start_ms": p.start_ms * slowdown, "duration_ms": p.duration_ms * slowdown,
                   "pps": p.gbps * arm.scale / slowdown} for p in job.phases]
        tx_out = arm.logs / f"tx-{arm.tag}-{f.job}-{i}.json"
        senders.append((f, net.host(f.src).popen(
            [sys.executable, "-m", "innet.cli.agent", "send", "--dest",
             topo.hosts[f.dst].ip, "--job", str(f.job_id), "--iteration-ms",
             str(job.iteration_ms * slowdown), "--phases", json.dumps(phases), "--shift-ms",
             str(arm.shifts[f.job] * slowdown), "--epoch", f"{epoch:.6f}", "--iterations",
             str(arm.options.iterations), "--out", str(tx_out), "--window-ms",
             str(WINDOW_S * 1000 * slowdown),
             *(["--grid-ms", str(grid[f.job] * slowdown), "--budget-pct",
                str(DEFAULT_CHECK.realign_budget_pct)] if agents else ["--no-realign"])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE),
            tx_out))
    return senders


def _received(ids: dict[int, str], files: list[Path]) -> tuple[dict[str, int], dict[str, int]]:
    """Packets and CE marks per job, from every receiver's file."""
    got: dict[str, int] = dict.fromkeys(ids.values(), 0)
    ce: dict[str, int] = dict.fromkeys(ids.values(), 0)
    for rx_out in files:
        data = json.loads(rx_out.read_text())
        for jid, n in data["packets"].items():
            got[ids[int(jid)]] += n
        for jid, n in data["ce"].items():
            ce[ids[int(jid)]] += n
    return got, ce


def _sent(arm: _Arm, ids: dict[int, str], senders: list[tuple[Flow, Any, Path]]
          ) -> tuple[dict[str, int], dict[str, list[float]], dict[str, int], int]:
    """Per job, from every sender's file: packets sent, iteration times on the jobs' clock
    (a job's iteration ends when its slowest flow has delivered) and re-alignments; and
    the iterations whose acknowledgement never came."""
    sent: dict[str, int] = dict.fromkeys(ids.values(), 0)
    times: dict[str, list[float]] = {j: [] for j in ids.values()}
    realigned: dict[str, int] = dict.fromkeys(ids.values(), 0)
    unacked = 0
    for f, _, tx_out in senders:
        data = json.loads(tx_out.read_text())
        sent[f.job] += sum(r["sent"] for r in data["iterations"])
        unacked += sum(not r["acked"] for r in data["iterations"])
        realigned[f.job] += data["realigned"]
        per_iter = [r["iteration_ms"] / arm.options.slowdown for r in data["iterations"]]
        if not times[f.job]:
            times[f.job] = per_iter
        else:
            times[f.job] = [max(a, b) for a, b in zip(times[f.job], per_iter, strict=False)]
    return sent, times, realigned, unacked


_COLORS = {"base": "tab:gray", "base+shifts": "tab:orange", "cassini": "tab:blue"}


def _report(out: Path, experiment: CassiniExperiment) -> None:
    """cassini.png (marks per arm, CDF of iteration times) and summary.md."""
    _plot(out / "cassini.png", experiment.runs)
    (out / "summary.md").write_text("\n".join(_summary(experiment)) + "\n")


def _plot(path: Path, runs: tuple[RunResult, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    labels = [r.label for r in runs]
    axes[0].bar(labels, [sum(r.ce_received.values()) for r in runs],
                color=[_COLORS.get(x, "tab:red") for x in labels])
    axes[0].set_ylabel("CE-marked packets at the receivers")
    axes[0].set_title("ECN marks per arm", fontsize=10)
    for r in runs:
        all_times = np.sort(r.times)
        if len(all_times):
            axes[1].plot(all_times, np.arange(1, len(all_times) + 1) / len(all_times),
                         color=_COLORS.get(r.label, "tab:red"), label=r.label)
    axes[1].set_xlabel("iteration time (ms)")
    axes[1].set_ylabel("CDF")
    axes[1].set_title("iteration times (all jobs)", fontsize=10)
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _summary(experiment: CassiniExperiment) -> list[str]:
    """summary.md: the plans, the settings, a row per arm and CASSINI against the base."""
    result, runs = experiment.to_dict(), experiment.runs
    lines = ["# CASSINI on BMv2", ""]
    for mode, plan in result["plans"].items():
        shifts = {k: round(v, 1) for k, v in plan["shifts_ms"].items() if v}
        lines.append(f"- {mode}: placement {json.dumps(plan['placement'])}; shifts (ms) "
                     f"{json.dumps(shifts) if shifts else 'none'}; shared links: "
                     f"{', '.join(plan['shared_links']) or 'none'}.")
    lines += ["",
              f"Every switch port drains {result['capacity_pps']} packets/s on the jobs' clock "
              f"(the links' capacity; {result['pps_per_gbps']:.1f} packets/s per Gbps); the "
              f"emulation ran {result['slowdown']:g} times slower (iterations, phases and "
              f"shifts that much longer, every rate that much lower, times reported on the "
              f"jobs' clock), queue depth "
              f"{result['queue_depth']}, ECN threshold {result['ecn_threshold']} packets; "
              f"{result['iterations']} iterations per job.", "",
              "| arm | CE at receivers | marked at switches | packets sent | received | "
              "mean iteration ms | p99 iteration ms | re-alignments | unacknowledged |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r, d in zip(runs, result["runs"], strict=True):
        lines.append(f"| {r.label} | {d['ce_total']} | {r.switch_marks} | "
                     f"{sum(r.packets_sent.values())} | {sum(r.packets_received.values())} | "
                     f"{d['mean_ms']:.1f} | {d['p99_ms']:.1f} | {sum(r.realigned.values())} | "
                     f"{r.unacked} |")
    by = {d["label"]: d for d in result["runs"]}
    if "base" in by and "cassini" in by:
        a, b = by["base"], by["cassini"]
        ratio = (f"{a['ce_total'] / b['ce_total']:.3g}x fewer" if b["ce_total"]
                 else f"{a['ce_total']} -> 0")
        lines += ["", f"CASSINI against the base without shifts: CE marks {ratio}; p99 "
                      f"iteration {a['p99_ms']:.0f} -> {b['p99_ms']:.0f} ms, mean "
                      f"{a['mean_ms']:.0f} -> {b['mean_ms']:.0f} ms."]
    lines += ["", "Switch counters count a packet at every switch that marks it, receivers once. "
              "Senders cut their rate on echoed CE marks (DCTCP-like). A sender waits for the "
              "receiver's acknowledgement of each iteration's last packet (resent every 50 ms, "
              "for at most max(1 s, 2 T)); an iteration whose acknowledgement is lost ends at "
              "that limit.", "", "![cassini](cassini.png)"]
    return lines
