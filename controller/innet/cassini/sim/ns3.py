"""The packet-level engine: CASSINI's plans run on ns-3 (TCP DCTCP, RED queues marking ECN).

The fluid model shares every link max-min fairly and wastes nothing, so collisions cost little
by construction. This engine runs the same plans through a packet-level simulator: a small
C++ program (`ns3-sim/cassini-sim/`, GPL-2.0 like ns-3, run as a separate process) that innet
compiles once against the `ns3` wheel's headers and libraries, configures with a JSON file and
reads back as JSON. It returns a `FluidResult`, so `Evaluation`, `ArmFigures` and the tables
work unchanged.

The model, fixed for every arm and scenario (docs/cassini-ns3.md):
- Topology: innet's hosts, switches and links; each switch forwards to each host on
  `innet.routing`'s next hop (static host routes), so the links the plan believes jobs share
  are the links they share. `routing="ecmp"` uses ns-3's global routing with per-packet
  random ECMP instead, and the output says so.
- Rates: every link's rate and every phase's Gbps are multiplied by `rate_scale` (default:
  the fastest link becomes 0.1 Gbps) and every link's delay divided by it, so the
  bandwidth-delay product, the marking threshold and the buffer are the same number of
  packets as in the real network while the simulator handles a few hundred times fewer
  packets. Iteration times, phases and shifts are not scaled.
- Queues: every egress port is RED in DCTCP's step mode (instant queue, mark CE above K
  packets, no early drops), K = ceil(C x RTT / 7) for the longest host-to-host path's base
  RTT, a buffer of 300 packets (450 KB: a shallow-buffer switch's share of one port).
- Traffic: each ring hop of a job (`scheduler.ring_hops`) is one long-lived DCTCP
  connection; in an Up phase the sender writes the phase's bytes (Gbps x duration) at the
  phase's rate; the phase ends when every hop has delivered them; Down phases are compute
  time. An iteration is its segments one after the other, as in the fluid model, so a
  congested link stretches it. The first `warmup` iterations of every job (connections in
  slow start) are run but not measured. Agents re-align on the fluid model's grid.
- Marks: packets marked CE at switch egress queues; a queue's marks are charged to the jobs
  crossing it by their share of its bytes (hops x volume).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.cluster import ring_hops
from innet.cassini.placement.scheduler import ClusterPlan
from innet.cassini.sim.engine import MLTCP_INTERCEPT, MLTCP_SLOPE
from innet.cassini.sim.fluid import FluidConfig, realign_grid, segments
from innet.cassini.sim.steady import Cache, FluidResult, JobRun, LinkRun, run_bound
from innet.cassini.sim.trace import JobOutcome, TraceResult, TraceSchedule, ideal_ms, trace_bound
from innet.errors import InputError
from innet.routing import next_hops
from innet.topology import Topology

SOURCE_NAME = "cassini-sim.cc"
NS3_VERSION = "3.44"
LIB_STEM = "ns3.44"  # libns3.44-core.so
NS3_FIX = "/work/main/.venv/bin/pip install --no-deps ns3==3.44.post0 (or ./setup.sh)"
LIBS = ("core", "network", "internet", "point-to-point", "traffic-control")
MSS = 1448
WIRE_BYTES = MSS + 52  # TCP with timestamps (32) + IPv4 (20): what a full packet carries
PPP_BYTES = WIRE_BYTES + 2  # on a point-to-point link
DEFAULT_TARGET_GBPS = 0.1  # the fastest link after scaling
DEFAULT_DELAY_US = 1.0  # a link without a delay: cable plus switch pipeline
BUFFER_PACKETS = 300
EPOCH_MS = 20.0  # the connections' handshakes before the first iteration
MIN_RTO_MS = 10.0
DELACK_MS = 1.0  # below MIN_RTO_MS: a held ACK must not outlast the retransmission timer
# Measured here (CPU time, one core of two, the other busy): with a few tens of connections
# the simulator moves about 1.2e5 packets over one link a second, ACKs included; with more
# it slows, about as connections ** -0.25 (cache misses over the sockets, queues and
# events of a large network): 6e4 with 128 (the 128-server fat-tree), 3.7e4 with 1,024
# (the 1,024-server one). A run estimated past MAX_WALL_S is refused without force.
PACKET_HOPS_PER_S = 1.2e5
RATE_FLOWS = 10  # up to this many connections the rate is PACKET_HOPS_PER_S
RATE_EXPONENT = 0.25
MAX_WALL_S = 900.0
TRANSPORTS = ("dctcp", "mltcp")


@dataclass(frozen=True)
class Ns3Settings:
    """What the ns-3 runs share: fixed before measuring, the same for every arm."""

    rate_scale: float | None = None  # None: the fastest link becomes DEFAULT_TARGET_GBPS
    routing: str = "static"  # "static": innet.routing's next hops; "ecmp": random per packet
    buffer_packets: int = BUFFER_PACKETS
    warmup: int = 1
    seed: int = 0
    timeout_s: float | None = None  # None: 3 x the estimate, at least 60 s
    compensate: bool = True  # take the scaled packet time out of the compute (`compensated`)
    transport: str = "dctcp"  # the senders' congestion control: DCTCP, or MLTCP over it
    mltcp_slope: float = MLTCP_SLOPE
    mltcp_intercept: float = MLTCP_INTERCEPT

    def check(self) -> None:
        if self.routing not in ("static", "ecmp"):
            raise InputError(f"routing must be 'static' or 'ecmp', got {self.routing!r}")
        if self.transport not in TRANSPORTS:
            raise InputError(f"transport must be one of {', '.join(TRANSPORTS)}, "
                             f"got {self.transport!r}")
        if not (self.mltcp_slope >= 0 and self.mltcp_intercept > 0):
            raise InputError(f"MLTCP needs slope >= 0 and intercept > 0, got slope "
                             f"{self.mltcp_slope:g}, intercept {self.mltcp_intercept:g}")
        if self.rate_scale is not None and not 0 < self.rate_scale <= 1:
            raise InputError(f"--rate-scale must be in (0, 1], got {self.rate_scale:g}")
        if self.warmup < 0:
            raise InputError(f"warmup must be >= 0, got {self.warmup}")

    def transport_config(self) -> dict[str, Any]:
        """The config's `transport` field."""
        if self.transport == "mltcp":
            return {"cc": "mltcp", "slope": self.mltcp_slope,
                    "intercept": self.mltcp_intercept}
        return {"cc": "dctcp"}


# --------------------------------------------------------------------------- the network


@dataclass(frozen=True)
class NetLink:
    a: str
    b: str
    gbps: float  # real, before scaling
    delay_us: float  # real, before scaling


@dataclass(frozen=True)
class Network:
    """What the simulator needs of a topology: nodes, links, and each switch's next hop to
    each host (destination-based, as the switches forward)."""

    hosts: tuple[str, ...]
    switches: tuple[str, ...]
    links: tuple[NetLink, ...]
    next_hops: Mapping[str, Mapping[str, str]]  # switch -> host -> neighbour


def network_of(topology: Topology, hosts: Sequence[str] | None = None) -> Network:
    """The topology's links (Mbps -> Gbps, delay or DEFAULT_DELAY_US) and innet.routing's next
    hops toward `hosts` (default: every host)."""
    links = []
    for i, link in enumerate(topology.links):
        if link.mbps is None:
            raise InputError(f"links[{i}] ({link.a.node}-{link.b.node}) has no Mbps: the ns-3 "
                             "engine needs every link's rate", source=topology.source)
        delay = link.delay_ms * 1000.0 if link.delay_ms > 0 else DEFAULT_DELAY_US
        links.append(NetLink(link.a.node, link.b.node, link.mbps / 1000.0, delay))
    table: dict[str, dict[str, str]] = {s: {} for s in sorted(topology.switches)}
    for host in sorted(hosts if hosts is not None else topology.hosts):
        for switch, hop in next_hops(topology, host).items():
            table[switch][host] = hop.neighbour
    return Network(tuple(sorted(topology.hosts)), tuple(sorted(topology.switches)),
                   tuple(links), {s: t for s, t in table.items() if t})


def dumbbell(jobs: Sequence[JobProfile],
             capacity_gbps: float) -> tuple[Network, dict[str, tuple[str, ...]]]:
    """Every job on one shared link: job j sends from sj on switch "left" to rj on "right";
    the hosts' links are as fast as the shared one, so only the shared link is contended."""
    links = [NetLink("left", "right", capacity_gbps, DEFAULT_DELAY_US)]
    hosts: list[str] = []
    table: dict[str, dict[str, str]] = {"left": {}, "right": {}}
    placement: dict[str, tuple[str, ...]] = {}
    for k, job in enumerate(jobs):
        s, r = f"s{k}", f"r{k}"
        hosts += [s, r]
        links += [NetLink(s, "left", capacity_gbps, DEFAULT_DELAY_US),
                  NetLink(r, "right", capacity_gbps, DEFAULT_DELAY_US)]
        table["left"].update({s: s, r: "right"})
        table["right"].update({s: "left", r: r})
        placement[job.name] = (s, r)
    return Network(tuple(hosts), ("left", "right"), tuple(links), table), placement


def flows(placement: Mapping[str, Sequence[str]]) -> dict[str, list[tuple[str, str]]]:
    """job -> its ring's host pairs, as the plan counts them (scheduler.ring_hops)."""
    return {job: ring_hops(hosts) for job, hosts in placement.items()}


def path_of(network: Network, src: str, dst: str) -> tuple[str, ...]:
    """The node path a packet takes following the config's next hops (for the tests and the
    RTT): the source host's only link, then each switch's next hop."""
    first = next(link.b if link.a == src else link.a for link in network.links
                 if src in (link.a, link.b))
    path = [src, first]
    while path[-1] != dst:
        if len(path) > len(network.switches) + 2:
            raise InputError(f"no route from {src} to {dst} in the next hops")
        path.append(network.next_hops[path[-1]][dst])
    return tuple(path)


def rate_scale(network: Network, settings: Ns3Settings) -> float:
    if settings.rate_scale is not None:
        return settings.rate_scale
    return min(1.0, DEFAULT_TARGET_GBPS / max(link.gbps for link in network.links))


def queue_settings(network: Network, pairs: Sequence[tuple[str, str]]) -> tuple[int, float]:
    """(K in packets, the longest base RTT in us) over the flows' paths, at real rates: a full
    packet's serialisation and the propagation on each link out, an ACK's back. Scaling the
    rates by s and the delays by 1/s changes neither K nor the BDP in packets."""
    rate = {}
    for link in network.links:
        rate[(link.a, link.b)] = rate[(link.b, link.a)] = (link.gbps, link.delay_us)
    rtt = 0.0
    fastest = max(link.gbps for link in network.links)
    for src, dst in pairs:
        path = path_of(network, src, dst)
        t = 0.0
        for a, b in itertools.pairwise(path):
            gbps, delay = rate[(a, b)]
            t += 2 * delay + PPP_BYTES * 8e-3 / gbps + 66 * 8e-3 / gbps
        rtt = max(rtt, t)
    if rtt == 0.0:  # no flow: any K
        return 1, 0.0
    k = max(1, math.ceil(fastest * 1e9 * rtt * 1e-6 / (PPP_BYTES * 8) / 7))
    return k, rtt


def link_times_ms(network: Network, scale: float) -> dict[tuple[str, str], float]:
    """Per directed link, what a full packet spends on it at the scaled rate: its stretched
    propagation and its serialisation."""
    out = {}
    for link in network.links:
        cost = link.delay_us / scale / 1e3 + PPP_BYTES * 8 / (link.gbps * scale * 1e9) * 1e3
        out[(link.a, link.b)] = out[(link.b, link.a)] = cost
    return out


def ring_path_ms(network: Network, pairs: Sequence[tuple[str, str]],
                 link_ms: Mapping[tuple[str, str], float]) -> float | None:
    """The longest hop path of a ring in packet time (None: the ring has no hop)."""
    if not pairs:
        return None
    return max(sum(link_ms[(a, b)] for a, b in itertools.pairwise(path_of(network, x, y)))
               for x, y in pairs)


def packet_time_ms(path_ms: float | None, gbps: float, scale: float) -> float:
    """What packets add to an Up phase of a ring alone, at the scaled rates and stretched
    delays: the paced sender's last segment leaves at most one tick (MSS x 8 / the phase's
    scaled rate) late, then crosses the ring's longest hop path (`ring_path_ms`): the bound
    that test_without_contention_every_job_keeps_its_own_iteration_time checks on ns-3."""
    if path_ms is None or gbps <= 0:
        return 0.0
    return MSS * 8 / (gbps * scale * 1e9) * 1e3 + path_ms


def compensated(segs: list[dict[str, Any]], extra_ms: Sequence[float]) -> list[dict[str, Any]]:
    """`segs` with each Up phase's packet time (`extra_ms`, one per Up phase) taken out of
    the compute before it (never below 0), so that a job alone iterates at its profiled T
    wherever it sits. The profile was measured on the network, so its T holds the packet
    time of real rates (microseconds); the scaled network's is ~1/S times that (2.4 ms of a
    120 ms DLRM iteration across racks at S = 0.002), and left in, it made every job 1-2%
    slower than its grid, which CASSINI's agents only catch up with a whole period later:
    an arrival aligned to the grid met a running job that had drifted off it. What is taken
    out is a bound (the last segment leaves up to one sender tick late, or on time), so the
    config also sets each job's `min_iteration_ms` to its T: the program ends no iteration
    before it, and a job alone runs at exactly T in every arm, agents or not, instead of up
    to the bound's slack early (which made the arms without agents look faster than N x T)."""
    out = [dict(seg) for seg in segs]
    ups = [i for i, seg in enumerate(out) if seg["up"]]
    for i, extra in zip(ups, extra_ms, strict=True):
        if i > 0 and not out[i - 1]["up"]:
            take = min(extra, out[i - 1]["ms"])
            out[i - 1]["ms"] -= take
    return out


# ----------------------------------------------------------------------------- the config


@dataclass(frozen=True)
class Ns3Run:
    """One run's input: the jobs where they sit, their shifts, the traffic the plan counts."""

    label: str
    jobs: tuple[JobProfile, ...]
    placement: Mapping[str, tuple[str, ...]]
    shifts_ms: Mapping[str, float]
    traffic: Mapping[str, Mapping[str, int]]  # link "a->b" -> job -> hops (the plan's)
    capacity_gbps: Mapping[str, float]


def run_of_plan(plan: ClusterPlan, only: set[str] | None = None) -> Ns3Run:
    """A plan's run; `only`: the jobs that send (the others still hold their GPUs)."""
    keep = [j for j in plan.jobs if only is None or j.name in only]
    names = {j.name for j in keep}
    traffic = {link: {k: v for k, v in per.items() if k in names}
               for link, per in plan.traffic.items()}
    traffic = {link: per for link, per in traffic.items() if per}
    return Ns3Run(plan.mode, tuple(keep), {j: plan.placement[j] for j in names},
                  {j: float(plan.shifts_ms.get(j, 0.0)) for j in names}, traffic,
                  {link: plan.capacity_gbps[link] for link in traffic})


def build_config(network: Network, run: Ns3Run, config: FluidConfig,
                 settings: Ns3Settings, stop_ms: float) -> dict[str, Any]:
    """The simulator's JSON input (a pure function): rates scaled, delays stretched alike."""
    settings.check()
    scale = rate_scale(network, settings)
    pairs = flows(run.placement)
    all_pairs = [p for ps in pairs.values() for p in ps]
    k, _ = queue_settings(network, all_pairs)
    grids = realign_grid(run.jobs, run.traffic)
    link_ms = link_times_ms(network, scale) if settings.compensate else {}
    largest = 0
    jobs = []
    for job in run.jobs:
        segs: list[dict[str, Any]] = []
        extra: list[float] = []
        path_ms = (ring_path_ms(network, pairs.get(job.name, []), link_ms)
                   if settings.compensate else None)
        for up, amount, gbps in segments(job):
            if up:
                nbytes = max(1, round(amount * 1e6 * scale / 8))  # Mbit -> scaled bytes
                largest = max(largest, nbytes)
                segs.append({"up": True, "bytes": nbytes, "gbps": gbps * scale})
                extra.append(packet_time_ms(path_ms, gbps, scale))
            else:
                segs.append({"up": False, "ms": amount})
        if settings.compensate:
            segs = compensated(segs, extra)
        realign = (None if config.realign_pct is None else
                   {"pct": config.realign_pct, "budget_pct": config.realign_budget_pct,
                    "grid_ms": grids[job.name]})
        jobs.append({"name": job.name, "iteration_ms": job.iteration_ms,
                     # the compensation takes out a bound: the floor takes back its slack
                     "min_iteration_ms": job.iteration_ms if settings.compensate else 0.0,
                     "shift_ms": float(run.shifts_ms.get(job.name, 0.0)),
                     "iterations": config.iterations + settings.warmup, "segments": segs,
                     "flows": [list(p) for p in pairs.get(job.name, [])], "realign": realign})
    used = sorted({h for p in all_pairs for h in p})
    return {
        "version": 1, "seed": settings.seed, "mss": MSS, "epoch_ms": EPOCH_MS,
        "stop_ms": stop_ms, "routing": settings.routing, "rate_scale": scale,
        "transport": settings.transport_config(),
        # warm, long-lived connections: a window of two BDPs never limits a paced sender
        "initial_cwnd": max(10, 14 * k), "min_rto_ms": MIN_RTO_MS,
        "delack_timeout_ms": DELACK_MS,
        "buffer_bytes": max(1 << 20, 2 * largest + (1 << 16)),
        "queue": {"k_packets": k, "buffer_packets": settings.buffer_packets},
        "hosts": list(network.hosts), "switches": list(network.switches),
        "links": [{"a": link.a, "b": link.b, "gbps": link.gbps * scale,
                   "delay_us": link.delay_us / scale} for link in network.links],
        "next_hops": {s: {h: t[h] for h in used if h in t}
                      for s, t in network.next_hops.items()},
        "jobs": jobs,
    }


def link_run(jobs: Sequence[JobProfile], capacity_gbps: float,
             shifts_ms: Mapping[str, float], label: str) -> tuple[Network, Ns3Run]:
    """Every job on one shared link (`dumbbell`) at its shift: the network and the run."""
    network, placement = dumbbell(jobs, capacity_gbps)
    run = Ns3Run(label, tuple(jobs), placement,
                 {j.name: float(shifts_ms.get(j.name, 0.0)) for j in jobs},
                 {"left->right": {j.name: 1 for j in jobs}}, {"left->right": capacity_gbps})
    return network, run


def transfers_config(jobs: Sequence[JobProfile], capacity_gbps: float,
                     starts_ms: Sequence[float], nbytes: int, settings: Ns3Settings,
                     sample_ms: float = 10.0) -> dict[str, Any]:
    """A config for watching how a link is shared: every job of `jobs` (only their names
    and count matter) on one link (`dumbbell`), sending `nbytes` on each of its flows at the
    link's (scaled) rate once, starting at its entry of `starts_ms`, then computing for far
    longer than anything here lasts; every flow's delivered bytes every `sample_ms`. The
    MLTCP window rule's test and docs/cassini-mltcp.md read it."""
    network, run = link_run(jobs, capacity_gbps,
                            {j.name: float(t) for j, t in zip(jobs, starts_ms, strict=True)},
                            "transfers")
    cfg = build_config(network, run, FluidConfig(iterations=1, realign_pct=None),
                       replace(settings, compensate=False, warmup=0), 20_000.0)
    gbps = capacity_gbps * rate_scale(network, settings)
    for job in cfg["jobs"]:
        job["segments"] = [{"up": True, "bytes": nbytes, "gbps": gbps},
                           {"up": False, "ms": 10_000.0}]
        job["iteration_ms"], job["min_iteration_ms"] = 10_000.0, 0.0
    cfg["sample_ms"] = sample_ms
    return cfg


def trace_config(network: Network, sched: TraceSchedule, config: FluidConfig,
                 settings: Ns3Settings, stop_ms: float) -> dict[str, Any]:
    """Config version 2 (a trace): version 1's fields, and per job `ready_ms` (placed then),
    `after` (the jobs that held its GPUs: it starts once they have left), `iterations` (it
    trains them and leaves) and `shifts` ([from ms, shift ms], CASSINI's re-plans; empty
    without agents) in place of `shift_ms`. No warm-up: a job's completion time counts from
    its arrival, slow start included; connections open at time 0 (as a collective library
    sets up its rings before training)."""
    run = Ns3Run(sched.mode, tuple(j.profile for j in sched.jobs), sched.placement, {},
                 sched.traffic, sched.capacity_gbps)
    cfg = build_config(network, run, replace(config, realign_pct=None),
                       replace(settings, warmup=0), stop_ms)
    grids = realign_grid(run.jobs, run.traffic)
    cfg["version"] = 2
    by_name = {j.name: j for j in sched.jobs}
    for entry in cfg["jobs"]:
        job = by_name[entry["name"]]
        del entry["shift_ms"]
        entry.update({"ready_ms": job.ready_ms, "after": list(job.after),
                      "iterations": job.iterations,
                      "shifts": [[a, s] for a, s in job.shifts]})
        entry["realign"] = (None if not job.shifts else
                            {"pct": config.realign_pct if config.realign_pct is not None
                             else 5.0, "budget_pct": config.realign_budget_pct,
                             "grid_ms": grids[job.name]})
    return cfg


def trace_estimate(network: Network, sched: TraceSchedule, settings: Ns3Settings) -> Estimate:
    """A trace's cost: every job's iterations' packets over its paths' links (exact
    counts: each job trains a known number of iterations), and the trace's span bound."""
    scale = rate_scale(network, settings)
    pairs = flows(sched.placement)
    packets = 0.0
    for job in sched.jobs:
        hops = sum(len(path_of(network, a, b)) - 1 for a, b in pairs.get(job.name, []))
        per_iteration = job.profile.volume_mbit * 1e6 * scale / 8 / MSS
        packets += 1.5 * per_iteration * hops * job.iterations
    flows_n = sum(len(v) for v in pairs.values())
    memory = 30 + 0.05 * (len(network.hosts) + len(network.switches)) + 0.3 * flows_n
    return Estimate(trace_bound(sched), packets, packets / packet_rate(flows_n), memory)


def trace_result(sched: TraceSchedule, raw: Mapping[str, Any]) -> TraceResult:
    """Version 2's output as a TraceResult: start, finish and iterations per job; marks at
    switch queues charged to the jobs by hops x volume, as `to_result` does."""
    if not raw.get("complete"):
        raise RuntimeError(f"the ns-3 run stopped at {raw.get('duration_ms', 0):.0f} ms before "
                           "every job had left (its bound did not hold)")
    volume = {j.name: j.profile.volume_mbit for j in sched.jobs}
    job_marks = {j.name: 0.0 for j in sched.jobs}
    total = 0.0
    for q in raw["queues"]:
        if not q["switch"]:
            continue
        marks = float(q["marks"])
        total += marks
        per = sched.traffic.get(f"{q['from']}->{q['to']}", {})
        weight = {k: hops * volume[k] for k, hops in per.items()}
        wsum = sum(weight.values())
        for k, w in weight.items():
            job_marks[k] += marks * w / wsum if wsum > 0 else 0.0
    by_name = {j["name"]: j for j in raw["jobs"]}
    out = []
    for j in sched.jobs:
        r = by_name[j.name]
        out.append(JobOutcome(j.name, j.profile.iteration_ms, j.arrival_ms, ideal_ms(j),
                              float(r["start_ms"]), float(r["finish_ms"]),
                              tuple(float(x) for x in r["iterations_ms"]), job_marks[j.name],
                              int(r["realignments"])))
    return TraceResult(sched.mode, tuple(out), total, float(raw["duration_ms"]))


@dataclass(frozen=True)
class Estimate:
    span_ms: float  # simulated, at most
    packet_hops: float
    wall_s: float
    memory_mb: float


def estimate(network: Network, run: Ns3Run, config: FluidConfig,
             settings: Ns3Settings) -> Estimate:
    """An upper bound before running: the fluid bound's span (every job's slowest iteration
    under max-min sharing), the packets every iteration carries over every link of its
    paths in it, at the rate this machine simulates them; memory for the nodes, sockets and
    their buffers."""
    scale = rate_scale(network, settings)
    iterations = config.iterations + settings.warmup
    bound = run_bound(run.jobs, run.traffic, run.capacity_gbps, iterations) if run.traffic \
        else None
    span = bound.span_ms if bound is not None else max(
        (j.iteration_ms * (iterations + 1) for j in run.jobs), default=0.0)
    pairs = flows(run.placement)
    packets = 0.0
    for job in run.jobs:
        hops = sum(len(path_of(network, a, b)) - 1 for a, b in pairs.get(job.name, []))
        per_iteration = sum(p.volume_mbit for p in job.phases) * 1e6 * scale / 8 / MSS
        count = span / max(job.iteration_ms, 1e-9) + 2
        packets += 1.5 * per_iteration * hops * count  # + an ACK per two packets
    flows_n = sum(len(v) for v in pairs.values())
    memory = 30 + 0.05 * (len(network.hosts) + len(network.switches)) + 0.3 * flows_n
    return Estimate(span, packets, packets / packet_rate(flows_n), memory)


def packet_rate(flows_n: int) -> float:
    """Packet-hops a second of CPU this machine simulates with `flows_n` connections."""
    return PACKET_HOPS_PER_S / float(max(1.0, flows_n / RATE_FLOWS) ** RATE_EXPONENT)


def check_estimate(est: Estimate, force: bool) -> None:
    if est.wall_s > MAX_WALL_S and not force:
        raise InputError(f"the ns-3 run would take up to {est.wall_s / 60:.3g} min here "
                         f"({est.packet_hops:.3g} packet-hops, {est.span_ms / 1000:.3g} s "
                         f"simulated; at most {MAX_WALL_S / 60:.0f} min without --force): lower "
                         "--iterations or --rate-scale")
    avail = _available_mb()
    if avail is not None and est.memory_mb > avail:
        raise InputError(f"the ns-3 run needs about {est.memory_mb:.0f} MB, {avail:.0f} MB "
                         "are available")


def _available_mb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------- build and run


@dataclass(frozen=True)
class Ns3Install:
    include: Path
    lib: Path


def find_ns3() -> Ns3Install:
    """The ns3 wheel's headers and libraries (INNET_NS3_DIR overrides where to look);
    InputError with the fix when missing."""
    import importlib.util
    import sys

    root: Path | None = None
    override = os.environ.get("INNET_NS3_DIR")
    if override:
        root = Path(override)
    else:  # the wheel's folder, skipping any other folder called ns3 on the path
        spec = importlib.util.find_spec("ns3")
        places = list(spec.submodule_search_locations or []) if spec is not None else []
        places += [str(Path(p) / "ns3") for p in sys.path if p]
        root = next((Path(p) for p in places
                     if (Path(p) / "include" / "ns3" / "tcp-dctcp.h").exists()), None)
    if root is None:
        raise InputError(f"ns-3 is not installed: {NS3_FIX}")
    include = root / "include"
    lib = next((root / d for d in ("lib64", "lib") if (root / d / _lib("core")).exists()), None)
    if not (include / "ns3" / "tcp-dctcp.h").exists() or lib is None:
        raise InputError(f"ns-3 at {root} lacks its headers or libraries (ns3/tcp-dctcp.h, "
                         f"{_lib('core')}): {NS3_FIX}")
    return Ns3Install(include, lib)


def _lib(name: str) -> str:
    return f"lib{LIB_STEM}-{name}.so"


def source_path() -> Path:
    from innet.shipped import shipped_dir

    return shipped_dir("ns3") / "cassini-sim" / SOURCE_NAME


def cache_dir() -> Path:
    base = os.environ.get("INNET_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "innet" / "ns3"


def compiler() -> str:
    gxx = shutil.which(os.environ.get("CXX", "g++"))
    if gxx is None:
        raise InputError("g++ is not installed: apt-get install -y g++ nlohmann-json3-dev "
                         "(or ./setup.sh as root)")
    return gxx


def build_program(install: Ns3Install | None = None) -> Path:
    """The compiled program, built once per content of the source, compiler and ns-3 and kept
    in cache_dir()/<hash>/cassini-sim; compiled to a temporary name and renamed, so processes
    building at once do not see half a binary."""
    install = install or find_ns3()
    gxx = compiler()
    source = source_path()
    try:
        text = source.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the ns-3 program: {exc.strerror}",
                         source=str(source)) from None
    flags = ["-std=c++20", "-O2", f"-I{install.include}"]
    libs = [f"-L{install.lib}", f"-Wl,-rpath,{install.lib}"] + [f"-l{LIB_STEM}-{n}"
                                                                for n in LIBS]
    digest = hashlib.sha256(text + "\0".join([gxx, *flags, *libs]).encode()).hexdigest()[:16]
    out = cache_dir() / digest / "cassini-sim"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if not Path("/usr/include/nlohmann/json.hpp").exists() and not any(
            (Path(p) / "nlohmann" / "json.hpp").exists()
            for p in os.environ.get("CPATH", "").split(":") if p):
        raise InputError("nlohmann/json.hpp is missing: apt-get install -y nlohmann-json3-dev "
                         "(or ./setup.sh as root)")
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".build-")
    os.close(fd)
    proc = subprocess.run([gxx, *flags, "-o", tmp, str(source), *libs], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln),
                     proc.stderr.strip()[:300])
        raise InputError(f"the ns-3 program does not compile: {first}", source=str(source))
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


def _cpu_limit(seconds: float) -> Callable[[], None]:
    def apply() -> None:
        import resource

        cap = max(1, math.ceil(seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (cap, cap + 5))
    return apply


def run_config(program: Path, cfg: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run the simulator on one config (niced: it shares the machine); its JSON result.

    `timeout_s` bounds the program's CPU time, not the wall clock: a niced run on a machine
    that others' work keeps busy may be starved for minutes (a 20-draw sweep here died on a
    wall-clock limit while BMv2 benchmarks held both cores), and that is no sign that it
    will not finish. The wall clock only stops a run that makes no progress at all (20x).
    """
    with tempfile.TemporaryDirectory(prefix="innet-ns3-") as tmp:
        cpath, rpath = Path(tmp) / "config.json", Path(tmp) / "result.json"
        cpath.write_text(json.dumps(cfg))
        argv = [str(program), str(cpath), str(rpath)]
        if shutil.which("nice"):
            argv = ["nice", "-n", "19", *argv]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=20 * timeout_s + 600,
                                  preexec_fn=_cpu_limit(timeout_s))
        except subprocess.TimeoutExpired:
            raise InputError(f"the ns-3 run made no progress for {20 * timeout_s + 600:.0f} s "
                             "of wall time; lower --iterations or --rate-scale") from None
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
            raise InputError(f"the ns-3 run took more than {timeout_s:.0f} s of CPU; lower "
                             "--iterations or --rate-scale")
        if proc.returncode != 0:
            msg = proc.stderr.strip().splitlines()
            raise RuntimeError(f"the ns-3 program failed ({proc.returncode}): "
                               f"{msg[-1] if msg else 'no message'}")
        result: dict[str, Any] = json.loads(rpath.read_text())
    return result


def to_result(run: Ns3Run, raw: Mapping[str, Any], warmup: int) -> FluidResult:
    """The simulator's output as a FluidResult: per-job iterations (after the warm-up), switch
    queues' marks as links' marks, charged to the jobs by their share of each link's bytes.
    excess_mbit and overloaded_ms are fluid quantities: NaN here."""
    if not raw.get("complete"):
        raise RuntimeError(f"the ns-3 run stopped at {raw.get('duration_ms', 0):.0f} ms before "
                           "every job had its iterations (its bound did not hold)")
    volume = {j.name: sum(p.volume_mbit for p in j.phases) for j in run.jobs}
    job_marks = {j.name: 0.0 for j in run.jobs}
    links = []
    for q in raw["queues"]:
        if not q["switch"]:
            continue
        name = f"{q['from']}->{q['to']}"
        per = run.traffic.get(name, {})
        marks = float(q["marks"])
        weight = {k: hops * volume[k] for k, hops in per.items()}
        total = sum(weight.values())
        for k, w in weight.items():
            job_marks[k] += marks * w / total if total > 0 else 0.0
        if name in run.traffic:
            links.append(LinkRun(name, run.capacity_gbps[name], tuple(per), marks, math.nan,
                                 math.nan))
    by_name = {j["name"]: j for j in raw["jobs"]}
    jobs = tuple(JobRun(j.name, j.iteration_ms,
                        tuple(by_name[j.name]["iterations_ms"][warmup:]),
                        job_marks[j.name], int(by_name[j.name]["realignments"]))
                 for j in run.jobs)
    return FluidResult(run.label, jobs, tuple(links), float(raw["duration_ms"]),
                       dict(run.shifts_ms))


@dataclass(frozen=True)
class Ns3Engine:
    """`evaluate`'s and `sweep`'s engine on ns-3 (picklable: sweeps ship it to workers)."""

    settings: Ns3Settings = field(default_factory=Ns3Settings)
    name: str = "ns3"
    separate_runs: bool = True  # each run is an ns-3 process of its own

    def marks_note(self, config: FluidConfig) -> str:
        return f"{self.name} engine (marks: CE-marked packets at switch queues)"

    def describe(self, fastest_gbps: float, trace: bool = False) -> str:
        """One line for the output: what runs, and the rate scale (a trace has no warm-up:
        its completion times count slow start)."""
        fastest = fastest_gbps
        scale = (self.settings.rate_scale if self.settings.rate_scale is not None
                 else min(1.0, DEFAULT_TARGET_GBPS / fastest))
        routing = ("innet.routing's static routes" if self.settings.routing == "static"
                   else "ns-3 random per-packet ECMP (not innet's routes)")
        cc = ("DCTCP" if self.settings.transport == "dctcp" else
              f"MLTCP over DCTCP (F = {self.settings.mltcp_slope:g} r + "
              f"{self.settings.mltcp_intercept:g})")
        return (f"ns-3 {NS3_VERSION}, {cc} + RED/ECN; rates scaled x{scale:.3g} (fastest link "
                f"{fastest:g} -> {fastest * scale:.3g} Gbps, delays x{1 / scale:.3g}); "
                f"{routing}; "
                + ("no warm-up (JCT from arrival, slow start included)" if trace else
                   f"{self.settings.warmup} warm-up iteration(s) not measured")
                + "; marks in simulated packets")

    def run(self, network: Network, run: Ns3Run, config: FluidConfig) -> FluidResult:
        est = estimate(network, run, config, self.settings)
        check_estimate(est, config.force)
        program = build_program()
        # TCP may share worse than max-min: room past the fluid bound before calling it stuck
        stop = 4 * est.span_ms + 10_000.0
        cfg = build_config(network, run, config, self.settings, stop)
        timeout = self.settings.timeout_s or max(60.0, 3 * est.wall_s)
        return to_result(run, run_config(program, cfg, timeout), self.settings.warmup)

    def trace(self, topology: Topology, sched: TraceSchedule,
              config: FluidConfig) -> TraceResult:
        """A trace's schedule on ns-3 (config version 2)."""
        hosts = sorted({h for hs in sched.placement.values() for h in hs})
        network = network_of(topology, hosts)
        est = trace_estimate(network, sched, self.settings)
        check_estimate(est, config.force)
        program = build_program()
        cfg = trace_config(network, sched, config, self.settings, 4 * est.span_ms + 10_000.0)
        timeout = self.settings.timeout_s or max(60.0, 3 * est.wall_s)
        return trace_result(sched, run_config(program, cfg, timeout))

    def trace_alone(self, topology: Topology, sched: TraceSchedule,
                    config: FluidConfig) -> TraceResult:
        """The no-contention ideal on packets: every job of `sched` where it sits, alone on
        the network (no other job's packets on any link it uses, nor waiting for anyone),
        from its ready time. Jobs that share no link run together in one ns-3 run (they
        cannot meet), so a placement costs a few runs, not one per job."""
        used: dict[str, set[frozenset[str]]] = {}
        for link, per in sched.traffic.items():
            a, b = link.split("->")
            for job in per:
                used.setdefault(job, set()).add(frozenset((a, b)))
        batches: list[tuple[list[str], set[frozenset[str]]]] = []
        for run in sched.jobs:
            mine = used.get(run.name, set())
            for names, links in batches:
                if not links & mine:
                    names.append(run.name)
                    links |= mine
                    break
            else:
                batches.append(([run.name], set(mine)))
        outcomes: dict[str, JobOutcome] = {}
        for names, _ in batches:
            keep = set(names)
            sub = TraceSchedule(
                sched.mode, tuple(replace(j, after=(), shifts=()) for j in sched.jobs
                                  if j.name in keep),
                {j: sched.placement[j] for j in keep},
                {link: {k: v for k, v in per.items() if k in keep}
                 for link, per in sched.traffic.items() if keep & set(per)},
                sched.capacity_gbps, sched.rounds)
            sub = replace(sub, capacity_gbps={link: sched.capacity_gbps[link]
                                              for link in sub.traffic})
            for o in self.trace(topology, sub, replace(config, realign_pct=None)).jobs:
                outcomes[o.name] = o
        jobs = tuple(outcomes[j.name] for j in sched.jobs)
        return TraceResult("ideal", jobs, 0.0, max((o.finish_ms for o in jobs), default=0.0))

    def plan(self, topology: Topology, plan: ClusterPlan, config: FluidConfig,
             only: set[str] | None = None, cache: Cache | None = None) -> FluidResult:
        """The plan on ns-3 (`only`: those jobs alone; nothing to cache: every run is
        measured afresh)."""
        run = run_of_plan(plan, only)
        hosts = sorted({h for hs in run.placement.values() for h in hs})
        return self.run(network_of(topology, hosts), run, config)

    def with_transport(self, transport: str) -> Ns3Engine:
        """The same runs with `transport` on every sender (checked here: one line)."""
        settings = replace(self.settings, transport=transport)
        settings.check()
        return replace(self, settings=settings)

    def link(self, jobs: Sequence[JobProfile], capacity_gbps: float,
             shifts_ms: Mapping[str, float], config: FluidConfig, label: str) -> FluidResult:
        network, run = link_run(jobs, capacity_gbps, shifts_ms, label)
        return self.run(network, run, config)


def check_available() -> str:
    """For doctor and the CLI: ns-3 present, g++ present, the program compiles; what was
    found, or InputError with the fix."""
    install = find_ns3()
    program = build_program(install)
    return f"ns-3 {NS3_VERSION} at {install.lib.parent}; cassini-sim at {program}"
