"""`innet run aggregation`: SOAR's plans deployed on BMv2 in Mininet, tensors streamed.

One network is started; each strategy's plan is deployed in turn (the controller writes only
the difference from the previous plan, and jobs keep their slot ranges). The workers stream
a tensor of --values floats each, in fixed point, with the reliable protocol of
docs/aggregation-protocol.md (window, timeouts with backoff, the destination's result as the
acknowledgement); the switches drop --loss of the aggregation packets they receive (data-plane
fault injection). Every worker's result and the destination's sums are checked against the
host-side fixed-point sum (a digest each), and the switches' egress counters give the messages
on every uplink. Every switch of a job's tree tells a chunk's first transmission of its
contributors on the uplink (agg_first) from everything sent again (agg_repeat:
retransmissions, re-emitted stored sums, duplicates), so the measured cost = sum over the
trees' uplinks of first transmissions per chunk / rate equals the phi SOAR predicted whatever
was lost; the overhead of the losses is reported beside it (every packet on the uplinks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.aggpacket import EVENT_NAMES, SLOTS, VECTOR_LEN
from innet.bmv2.thrift import QueueSetting, queue_commands
from innet.emulation.agghost import DestinationJob, expected_digest
from innet.emulation.experiment import (
    ControlledNetwork,
    controlled_network,
    prepare_run_folder,
)
from innet.errors import InputError
from innet.plan.intent import (
    Held,
    JobPlan,
    Workload,
    held_slots,
    load_workload,
    network_intent,
    plan_job,
)
from innet.plan.program import C_AGG_EVENTS, C_AGG_FIRST, C_AGG_REPEAT, C_PORT_IN
from innet.routing import next_hops
from innet.topology import Topology, load_topology

DEFAULT_STRATEGIES = ("soar", "top", "max", "level", "random", "all-red", "all-blue")
DEFAULT_VALUES = 32 * 1024  # 1,024 chunks
# The window: how far ahead of its oldest unanswered chunk a worker may go (a job takes 2 x
# window cells of every switch's pool: one job alone may take the whole pool), wide so that
# the stream goes on while a chunk is repaired. The chunks in flight: how many a worker keeps
# past its newest RESULT, so that the busiest uplink's queue holds about QUEUE_BUDGET packets
# (workers x in flight chunks, each bringing that uplink's messages per chunk / workers):
# 16 for SOAR k=4 on bt15 (4 messages per chunk through the root), 8 for all-red (16).
# SOAR with 16 instead of 8: +27% lossless goodput (alternating runs at 262,144 values);
# all-red with 16: 150,000 packets lost in BMv2's queues at 0% injected loss, at 2^20 values.
DEFAULT_WINDOW = 128
DEFAULT_INFLIGHT = 16   # at most
QUEUE_BUDGET = 128      # packets the busiest uplink's queue may hold for one chunk window
QUEUE_DEPTH = 1024  # packets per egress queue: a window's burst is never tail-dropped
# The controller's periodic check during a stream: every pass reads each switch's entries,
# which cost the controller's process 0.093 of the machine's 2 cores at the default 2 s,
# 0.028 at 60 s (SOAR k=4 on bt15, 262,144 values), CPU the switches need. A restarted
# switch is seen at once (its stream ends) whatever the interval; only a change made behind
# the controller's back waits for the check.
RECONCILE_S = 10.0


@dataclass(frozen=True)
class Timers:
    """The workers' retransmission timer: RFC 6298 from measured round trips, kept between a
    floor and a ceiling; `initial_s` until the first sample."""

    floor_s: float = 0.005
    ceiling_s: float = 1.0
    initial_s: float = 0.2

    @property
    def first_s(self) -> float:
        """The timer before the first sample: `initial_s` within the floor and ceiling."""
        return min(max(self.initial_s, self.floor_s), self.ceiling_s)

    def check(self) -> None:
        if not 0.001 <= self.floor_s <= self.ceiling_s <= 60.0:
            raise InputError(f"the retransmission timer's floor ({self.floor_s * 1e3:g} ms) "
                             f"and ceiling ({self.ceiling_s * 1e3:g} ms) must satisfy "
                             "1 ms <= floor <= ceiling <= 60 s")


@dataclass(frozen=True)
class AggregationRunOptions:
    """What one `innet run aggregation` runs, built once by its caller (the front end, the
    demo, a benchmark, a test) and passed whole. `window` None: as wide as the switches'
    pool allows the jobs, up to DEFAULT_WINDOW; `inflight` None: each plan's
    `default_inflight`; `workload` None: `default_workload`; `multicast`: the destination
    sends each result once for the switches to copy down the tree; `link_pps`: the
    link-bound regime's fastest link (None: no rates, the CPU-bound regime)."""

    topology: str
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    k: int = 4
    values: int = DEFAULT_VALUES
    loss: float = 0.0
    window: int | None = None
    inflight: int | None = None
    jobs: int = 1
    workload: str | None = None
    seed: int = 0
    pcap: bool = False
    progress: bool = True
    timers: Timers = field(default_factory=Timers)
    multicast: bool = True
    link_pps: int | None = None
    tls: bool = False  # P4Runtime over TLS, certificates in the run folder

    def checked_window(self) -> int:
        """The window the run uses, once values, loss, window and chunks in flight are
        known to be within their bounds (an InputError naming the first that is not)."""
        if self.values < 1:
            raise InputError(f"--values must be >= 1, got {self.values}")
        if not 0.0 <= self.loss < 1.0:
            raise InputError(f"--loss must be in [0, 1), got {self.loss}")
        window = self.window
        if window is None:  # as wide as the pool allows the jobs, up to the default
            window = max(1, min(DEFAULT_WINDOW, SLOTS // (2 * self.jobs)))
        if not 1 <= window <= 128:
            raise InputError(f"--window must be in 1..128 (a job takes 2 x window slots of a "
                             f"switch's pool), got {window}")
        if self.inflight is not None and not 1 <= self.inflight <= window:
            raise InputError(f"--inflight must be in 1..--window ({window}), got "
                             f"{self.inflight}")
        return window

    def check_link_pps(self) -> None:
        if self.link_pps is not None and not 1 <= self.link_pps <= 100_000:
            raise InputError(f"--link-pps must be in 1..100000 packets/s, got {self.link_pps}")


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    k: int
    blue: tuple[str, ...]
    rounds: int  # chunks per worker (the packets each uplink count is divided by)
    predicted_cost: float
    measured_cost: float  # first transmissions on the uplinks: SOAR's phi, measured
    sums_exact: bool
    writes: int
    link_packets: dict[str, int]  # switch -> first transmissions on its uplink (the stream)
    predicted_msgs: dict[str, int]  # switch -> messages per chunk predicted (all jobs)
    values: int = 0
    chunks: int = 0
    jobs: int = 1
    loss: float = 0.0
    window: int = 0
    inflight: int = 0
    retransmissions: int = 0
    duration_s: float = 0.0
    goodput_values_per_s: float = 0.0
    events: dict[str, int] = field(default_factory=dict)
    ce_marked: int = 0
    # everything else on the uplinks (retransmissions, stored sums re-emitted, duplicates):
    # switch -> packets, and the cost of every packet on the uplinks, first or not
    link_repeats: dict[str, int] = field(default_factory=dict)
    total_cost: float = 0.0
    # every packet every switch received during the stream (ports' ingress counters): the
    # load the emulated network carried, to hold against its plain forwarding capacity
    switch_packets: int = 0
    multicast_results: int = 0  # RESULTs the destination sent once for the switches to copy
    # of the retransmissions, those the destination asked for (NACKs: only the workers whose
    # contributions were missing), the rest are the workers' timers
    asked: int = 0
    nacks: int = 0  # NACK packets the destination sent
    # the link-bound regime (None: CPU-bound): the fastest link's rate in packets/s; the
    # plans' busiest uplink, its packets/s, and the share of the stream it was busy
    link_pps: int | None = None
    bottleneck_switch: str = ""
    bottleneck_load: float = 0.0
    bottleneck_messages: int = 0
    bottleneck_pps: int = 0
    bottleneck_use: float = 0.0

    @property
    def switch_pps(self) -> float:
        return self.switch_packets / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "switch_pps": self.switch_pps}

    @property
    def cost_matches(self) -> bool:
        return abs(self.predicted_cost - self.measured_cost) < 1e-9 * max(1.0,
                                                                          self.predicted_cost)


def link_rates_pps(topo: Topology, link_pps: int) -> dict[str, dict[int, int]]:
    """The link-bound regime's queue rates: switch -> port -> packets/s. Every link drains
    `link_pps` x its rate / the fastest link's rate, in both directions (the rate in SOAR's
    cost, so that the plans' phi and the network agree on what a link carries)."""
    fastest = max((link.rate for link in topo.links), default=1.0)
    out: dict[str, dict[int, int]] = {}
    for link in topo.links:
        pps = max(1, round(link_pps * link.rate / fastest))
        for end in (link.a, link.b):
            if end.port is not None and end.node in topo.switches:
                out.setdefault(end.node, {})[end.port] = pps
    return out


def switch_setup(topo: Topology, link_pps: int | None) -> dict[str, tuple[str, ...]]:
    """Every switch's queue commands: deep queues (a window's burst is never tail-dropped),
    and in the link-bound regime each port's drain rate."""
    rates = link_rates_pps(topo, link_pps) if link_pps else {}
    return {sw: queue_commands([QueueSetting(depth=QUEUE_DEPTH),
                                *(QueueSetting(rate_pps=pps, port=port)
                                  for port, pps in sorted(rates.get(sw, {}).items()))])
            for sw in topo.switches}


@dataclass(frozen=True)
class Bottleneck:
    """The busiest uplink of the plans: messages per chunk over it / its rate (SOAR's
    weight). A link-bound stream's goodput is set by this maximum, as phi is set by the sum."""

    switch: str
    messages: int       # per chunk, every job's on this uplink
    load: float         # messages / rate


def bottleneck(jps: list[JobPlan]) -> Bottleneck:
    msgs: dict[str, int] = {}
    weight: dict[str, float] = {}
    for jp in jps:
        for v in range(1, jp.tree.n):
            s = jp.tree.ids[v]
            weight[s] = float(jp.tree.weight[v])
            msgs[s] = msgs.get(s, 0) + jp.msgs.get(s, 0)
    s = max(sorted(msgs), key=lambda x: msgs[x] * weight[x])
    return Bottleneck(s, msgs[s], msgs[s] * weight[s])


def default_inflight(jps: list[JobPlan], window: int) -> int:
    """Chunks in flight per worker when none is asked for: the busiest uplink (most messages
    per chunk, every job's) then holds about QUEUE_BUDGET packets, within 2..DEFAULT_INFLIGHT
    and the window. A plan that sends more messages through one link gets fewer chunks in
    flight, as a congestion window would settle to, without waiting for losses to say so."""
    busiest = 0
    totals: dict[str, int] = {}
    for jp in jps:
        for s, m in jp.msgs.items():
            totals[s] = totals.get(s, 0) + m
            busiest = max(busiest, totals[s])
    return max(1, min(window, DEFAULT_INFLIGHT, max(2, QUEUE_BUDGET // max(1, busiest))))


def default_workload(topo: Topology) -> Workload:
    """Every host but the destination is a worker (job 1)."""
    if topo.destination is None:
        raise InputError("the topology names no aggregation destination "
                         '(add "aggregation": {"destination": HOST}) and no --workload was '
                         "given", source=topo.source)
    workers = tuple(h for h in topo.hosts if h != topo.destination)
    return Workload(1, topo.destination, workers)


def split_workload(base: Workload, jobs: int, slots: int) -> list[Workload]:
    """`jobs` concurrent jobs 1..J over disjoint, contiguous blocks of the workers."""
    n = len(base.workers)
    if not 1 <= jobs <= n:
        raise InputError(f"--concurrent-jobs must be in 1..{n} (one worker at least per job), "
                         f"got {jobs}")
    out = []
    for j in range(jobs):
        block = base.workers[j * n // jobs:(j + 1) * n // jobs]
        out.append(Workload(base.job + j, base.destination, block, base.vector_len,
                            base.source, slots))
    return out


def uplink_ports(topo: Topology, jp: JobPlan) -> dict[str, int]:
    """Each tree switch's port toward the destination (its uplink in SOAR's tree)."""
    hops = next_hops(topo, jp.workload.destination)
    return {s: hops[s].port for s in jp.tree.ids[1:]}


def measured_cost(jps: list[JobPlan], packets: dict[str, int], chunks: int) -> float:
    """Sum over the switches of any job's tree of uplink packets per chunk / rate (jobs that
    share a switch share its uplink: their messages add on it, as their phis add)."""
    weight: dict[str, float] = {}
    for jp in jps:
        for v in range(1, jp.tree.n):
            weight[jp.tree.ids[v]] = float(jp.tree.weight[v])
    return float(sum(packets[s] / chunks * w for s, w in weight.items()))


def _counters(session: Callable[[str], Any], switches: Iterable[str], name: str
              ) -> dict[str, dict[int, int]]:
    """Packets per index of counter `name` on every switch, read through `session(switch)`
    (the controller's current session: it changes when a switch reconnects)."""
    return {s: {i: pkts for i, (pkts, _) in session(s).read_counters(name).items()}
            for s in switches}


@dataclass(frozen=True)
class _Counters:
    """The counters a stream is measured by, on every switch at one moment."""

    first: dict[str, dict[int, int]]  # first transmissions, per egress port
    repeat: dict[str, dict[int, int]]  # everything sent again, per egress port
    events: dict[str, dict[int, int]]  # per EVENT_NAMES index
    port_in: dict[str, dict[int, int]]  # every packet received, per ingress port

    @staticmethod
    def read(session: Callable[[str], Any], switches: Iterable[str]) -> _Counters:
        switches = list(switches)
        return _Counters(*(_counters(session, switches, name)
                           for name in (C_AGG_FIRST, C_AGG_REPEAT, C_AGG_EVENTS, C_PORT_IN)))


@dataclass(frozen=True)
class _Traffic:
    """What the switches counted during one stream."""

    link_packets: dict[str, int]  # switch -> first transmissions on its uplink
    link_repeats: dict[str, int]  # switch -> packets sent again on its uplink
    events: dict[str, int]  # event name -> count, every switch's
    received: int  # every packet every switch received

    @property
    def every(self) -> dict[str, int]:
        """Switch -> every packet on its uplink, first or not."""
        return {s: self.link_packets[s] + self.link_repeats[s] for s in self.link_packets}

    @staticmethod
    def between(topo: Topology, jps: list[JobPlan], switches: Iterable[str],
                before: _Counters, after: _Counters) -> _Traffic:
        switches = list(switches)
        received = sum(n - before.port_in[s].get(p, 0) for s in switches
                       for p, n in after.port_in[s].items())
        link_packets: dict[str, int] = {}
        link_repeats: dict[str, int] = {}
        for jp in jps:
            for s, p in uplink_ports(topo, jp).items():
                link_packets[s] = after.first[s].get(p, 0) - before.first[s].get(p, 0)
                link_repeats[s] = after.repeat[s].get(p, 0) - before.repeat[s].get(p, 0)
        events = {n: sum(after.events[s].get(e, 0) - before.events[s].get(e, 0)
                         for s in switches) for e, n in enumerate(EVENT_NAMES)}
        return _Traffic(link_packets, link_repeats, events, received)


@dataclass(frozen=True)
class _Run:
    """What every strategy of one run shares: the options, the jobs' workloads, the
    window, each strategy's plans and every job's expected digest."""

    options: AggregationRunOptions
    topo: Topology
    workloads: tuple[Workload, ...]
    window: int
    chunks: int
    plans: dict[str, list[JobPlan]]
    expected: dict[int, str]

    @property
    def rates(self) -> dict[str, dict[int, int]]:
        """The link-bound regime's queue rates (empty in the CPU-bound regime)."""
        pps = self.options.link_pps
        return link_rates_pps(self.topo, pps) if pps else {}


def run_aggregation(options: AggregationRunOptions, out: Path, *,
                    before_plan: Callable[[Any, str], None] | None = None
                    ) -> list[StrategyRun]:
    """Run every strategy's plan in one network. `before_plan(network, strategy)` runs before
    each plan goes out (the tests restart a switch there)."""
    from innet.progress import bar as progress_bar

    run = _prepare(options, out)
    o, topo = options, run.topo
    results: list[StrategyRun] = []
    # the controller keeps every switch on the current plan (a switch that restarts mid-run
    # is restored, its queues too); each plan change waits until every switch holds it.
    # Jobs keep their slots from one plan to the next (held).
    first = next(iter(run.plans.values()))
    intent = network_intent(topo, first, drop_probability=o.loss)
    held: Held = held_slots(intent.entries())
    o.check_link_pps()
    setup = switch_setup(topo, o.link_pps)
    with controlled_network(topo, out, intent.entries(), replication=intent.replication(),
                            setup=setup, pcap=o.pcap, interval=RECONCILE_S,
                            tls=o.tls) as cn:
        bar = progress_bar(list(run.plans.items()), desc="strategies", unit="plan",
                           show=o.progress)
        for i, (name, jps) in enumerate(bar):
            bar.set_postfix_str(name)
            if before_plan is not None:
                before_plan(cn.network, name)
            if i > 0:
                intent = network_intent(topo, jps, held=held, drop_probability=o.loss)
                held = held_slots(intent.entries())
            applied = cn.set_intent(intent.entries(), intent.replication())
            writes = sum(d.writes for d in applied.values())
            stream = _Stream.of(run, name, jps, i, out / "logs")
            results.append(_run_strategy(cn, run, stream, writes))
            write_results(out, results, topo, list(run.workloads))  # a long run keeps it
    return results


def plan_document(o: AggregationRunOptions, workloads: list[Workload], window: int,
                  chunks: int, plans: dict[str, list[JobPlan]]) -> dict[str, Any]:
    """The run folder's plan.json: the jobs (their destination is where every tree's
    uplinks lead, which `innet view` needs to place link_packets on links), the settings
    and each strategy's plans."""
    return {
        "workloads": [{"job": w.job, "destination": w.destination, "workers": list(w.workers),
                       "slots": w.slots} for w in workloads],
        "k": o.k, "values": o.values, "chunks": chunks, "loss": o.loss, "window": window,
        "inflight": o.inflight,  # None: each plan's default_inflight (results.json has it)
        "plans": {s: [{"job": jp.workload.job, "blue": list(jp.blue),
                       "predicted_cost": jp.plan.cost, "messages": jp.msgs} for jp in jps]
                  for s, jps in plans.items()},
    }


def _prepare(options: AggregationRunOptions, out: Path) -> _Run:
    """Check the options, plan every strategy's jobs and write the run folder's inputs and
    plans, before anything starts."""
    o = options
    o.timers.check()
    topo = load_topology(o.topology)
    base = load_workload(o.workload, topo) if o.workload else default_workload(topo)
    window = o.checked_window()
    workloads = split_workload(base, o.jobs, 2 * window)
    chunks = -(-o.values // VECTOR_LEN)
    plans = {s: [plan_job(topo, w, s, o.k, seed=o.seed) for w in workloads]
             for s in o.strategies}
    prepare_run_folder(out, {"topology.json": o.topology},
                       plan_document(o, workloads, window, chunks, plans))
    expected = {w.job: expected_digest(o.seed, w.job, len(w.workers), o.values)
                for w in workloads}
    return _Run(o, topo, tuple(workloads), window, chunks, plans, expected)


def _run_strategy(cn: ControlledNetwork, run: _Run, stream: _Stream, writes: int
                  ) -> StrategyRun:
    """One strategy's stream, measured by the switches' counters before and after it."""
    session, switches = cn.controller.session, cn.addresses
    before = _Counters.read(session, switches)
    hosts = _stream(cn.network, stream)
    time.sleep(0.3)
    after = _Counters.read(session, switches)
    traffic = _Traffic.between(run.topo, stream.jps, switches, before, after)
    return _strategy_run(run, stream, writes, traffic, hosts)


def _strategy_run(run: _Run, stream: _Stream, writes: int, traffic: _Traffic,
                  hosts: tuple[list[dict[str, Any]], dict[str, Any]]) -> StrategyRun:
    """The figures of one strategy: the plans' predictions beside what the switches counted
    and what the hosts wrote."""
    o, jps, chunks = run.options, stream.jps, run.chunks
    workers_out, dest_out = hosts
    starts = [w["start"] for w in workers_out]
    ends = [w["end"] for w in workers_out]
    duration = max(ends) - min(starts) if starts else 0.0
    msgs: dict[str, int] = {}
    for jp in jps:
        for s, m in jp.msgs.items():
            msgs[s] = msgs.get(s, 0) + m
    neck = bottleneck(jps)
    neck_pps = 0
    if run.rates:  # the busiest uplink's rate, and how busy it was over the stream
        port = next(uplink_ports(run.topo, jp)[neck.switch] for jp in jps
                    if neck.switch in jp.tree.ids[1:])
        neck_pps = run.rates[neck.switch][port]
    every = traffic.every
    return StrategyRun(
        strategy=stream.label, k=o.k, blue=tuple(sorted({b for jp in jps for b in jp.blue})),
        rounds=chunks, predicted_cost=sum(jp.plan.cost for jp in jps),
        measured_cost=measured_cost(jps, traffic.link_packets, chunks),
        sums_exact=_exact(workers_out, dest_out, run.expected, chunks),
        writes=writes, link_packets=traffic.link_packets, predicted_msgs=msgs,
        values=o.values, chunks=chunks, jobs=len(run.workloads), loss=o.loss,
        window=run.window, inflight=stream.inflight,
        retransmissions=sum(w["retransmissions"] for w in workers_out),
        duration_s=duration,
        goodput_values_per_s=o.values * len(run.workloads) / duration if duration > 0
        else 0.0,
        events=traffic.events, ce_marked=int(dest_out.get("ce_marked", 0)),
        link_repeats=traffic.link_repeats, total_cost=measured_cost(jps, every, chunks),
        switch_packets=traffic.received,
        multicast_results=int(dest_out.get("multicast_results", 0)),
        asked=sum(int(w.get("nacked", 0)) for w in workers_out),
        nacks=sum(int(d.get("nacks", 0)) for d in dest_out.get("jobs", {}).values()),
        link_pps=o.link_pps, bottleneck_switch=neck.switch,
        bottleneck_load=neck.load, bottleneck_messages=neck.messages,
        bottleneck_pps=neck_pps,
        bottleneck_use=(every.get(neck.switch, 0) / (neck_pps * duration)
                        if neck_pps and duration > 0 else 0.0))


def _exact(workers_out: list[dict[str, Any]], dest_out: dict[str, Any],
           expected: dict[int, str], chunks: int) -> bool:
    """Every worker finished with the exact sum, and so did the destination, each chunk
    counted once per worker, nothing flagged as overflow."""
    if not workers_out or len(dest_out.get("jobs", {})) != len(expected):
        return False
    ok = all(w["done"] and w["digest"] == expected[w["job"]] and not w["overflow"]
             for w in workers_out)
    for job, d in dest_out["jobs"].items():
        ok &= (d["complete"] == chunks and d["counts_ok"] and not d["overflow"]
               and d["digest"] == expected[int(job)])
    return ok


@dataclass(frozen=True)
class _Stream:
    """One strategy's stream: its plans, where its chunks start (after the previous
    stream's) and where its hosts write."""

    run: _Run
    label: str
    jps: list[JobPlan]
    first_chunk: int
    logs: Path
    inflight: int  # chunks in flight per worker

    @staticmethod
    def of(run: _Run, label: str, jps: list[JobPlan], index: int, logs: Path) -> _Stream:
        """The stream of the `index`-th strategy: its chunks come after the previous
        stream's (a cell that kept a chunk of the last strategy sees the new ones as newer:
        docs, limits); in flight as asked, or what the plans' busiest uplink allows."""
        asked = run.options.inflight
        inflight = asked if asked is not None else default_inflight(jps, run.window)
        return _Stream(run, label, jps, index * (run.chunks + 1), logs, inflight)


def _stream(network: Any, stream: _Stream) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start the destination, let every worker stream its tensor, collect what they wrote.
    With the options' `multicast` the destination sends each completed chunk's RESULT once
    to the job's group address and the switches copy it down the tree (else one unicast per
    worker). The workers' timers come from their measured round trips (RFC 6298) between
    the timers' floor and ceiling: the switches count first transmissions apart, so a timer
    that fires early costs packets, never the measurement."""
    dest, dest_file = _start_destination(network, stream)
    procs = _start_workers(network, stream)
    workers_out = []
    try:
        for f, p in procs:
            # workers give up themselves when results stop for 2 minutes; this only guards
            # against a worker that hangs: generous, since a stream takes what it takes
            _, err = p.communicate(timeout=900 + stream.run.options.values / 20)
            if p.returncode != 0:
                raise RuntimeError(f"a worker failed: {err.decode(errors='replace')[-2000:]}")
            workers_out.append(json.loads(f.read_text()))
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        dest.terminate()
        try:
            dest.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dest.kill()
            dest.wait()
    dest_out = json.loads(dest_file.read_text()) if dest_file.exists() else {}
    return workers_out, dest_out


def _start_destination(network: Any, stream: _Stream) -> tuple[Any, Path]:
    """The destination's process, once its socket is bound, and the file it will write."""
    run, logs, label = stream.run, stream.logs, stream.label
    topo = run.topo
    dest_name = run.workloads[0].destination
    dest_file = logs / f"dest-{label}.json"
    ready = logs / f"dest-{label}.ready"
    ready.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "innet.cli.agghost", "dest", "--first-chunk",
           str(stream.first_chunk), "--ready", str(ready), "--out", str(dest_file)]
    for w in run.workloads:
        job = DestinationJob(w.job, tuple(topo.hosts[h].ip for h in w.workers), run.chunks,
                             w.slots)
        cmd += ["--job", job.spec()]
    if run.options.multicast:
        cmd += ["--multicast-from", topo.hosts[dest_name].ip]
    dest = network.host(dest_name).popen(cmd, stdout=subprocess.DEVNULL,
                                         stderr=(logs / f"dest-{label}.err").open("w"))
    waited = time.monotonic() + 20
    while not ready.exists():
        if dest.poll() is not None or time.monotonic() > waited:
            raise RuntimeError(f"the destination did not start: see {logs}/dest-{label}.err")
        time.sleep(0.05)
    return dest, dest_file


def _start_workers(network: Any, stream: _Stream) -> list[tuple[Path, Any]]:
    """Every worker's process, all told to start at one moment, and the file each writes."""
    run = stream.run
    o, topo = run.options, run.topo
    dest_ip = topo.hosts[run.workloads[0].destination].ip
    procs = []
    n_workers = sum(len(w.workers) for w in run.workloads)
    start_at = time.time() + 1.0 + 0.15 * n_workers  # after every process has started
    for w in run.workloads:
        for i, h in enumerate(w.workers):
            f = stream.logs / f"worker-{stream.label}-{w.job}-{h}.json"
            procs.append((f, network.host(h).popen(
                [sys.executable, "-m", "innet.cli.agghost", "worker", "--dest",
                 dest_ip, "--job", str(w.job), "--worker", str(i), "--workers",
                 str(len(w.workers)), "--values", str(o.values), "--seed", str(o.seed),
                 "--window", str(run.window), "--inflight", str(stream.inflight), "--slots",
                 str(w.slots), "--first-chunk",
                 str(stream.first_chunk), "--start-at", f"{start_at:.3f}",
                 "--rto", f"{o.timers.first_s:g}", "--min-rto", f"{o.timers.floor_s:g}",
                 "--max-rto", f"{o.timers.ceiling_s:g}",
                 *(["--local-ip", topo.hosts[h].ip] if o.multicast else []), "--out", str(f)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    return procs


def write_results(out: Path, results: list[StrategyRun], topo: Topology,
                   workloads: list[Workload]) -> None:
    """results.json, aggregation.png and summary.md, rewritten after every strategy."""
    (out / "results.json").write_text(json.dumps([r.to_dict() for r in results], indent=1))
    _plot(out / "aggregation.png", results, topo, workloads)
    lines = [*_summary(results, topo, workloads), *_link_bound_table(results)]
    lines += ["", _verdict(results), "", "![aggregation](aggregation.png)"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def _plot(path: Path, results: list[StrategyRun], topo: Topology,
          workloads: list[Workload]) -> None:
    """Predicted phi beside the measured cost per strategy, what was sent again on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.strategy for r in results]
    x = range(len(results))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([i - 0.2 for i in x], [r.predicted_cost for r in results], width=0.4,
           label="predicted phi (SOAR model)", color="tab:blue")
    ax.bar([i + 0.2 for i in x], [r.measured_cost for r in results], width=0.4,
           label="measured: first transmissions (BMv2 counters)", color="tab:orange")
    extra = [max(0.0, r.total_cost - r.measured_cost) for r in results]
    if any(extra):
        ax.bar([i + 0.2 for i in x], extra, width=0.4, bottom=[r.measured_cost for r in results],
               label="sent again (retransmissions, stored sums)", color="tab:red", alpha=0.5)
    ax.set_xticks(list(x), names)
    ax.set_ylabel("cost per chunk (messages / rate)")
    n_workers = sum(len(w.workers) for w in workloads)
    dest = workloads[0].destination
    r0 = results[0] if results else None
    ax.set_title(f"{topo.name}: {n_workers} workers, {len(workloads)} job(s) to {dest}, "
                 f"k = {r0.k if r0 else 0}, loss {r0.loss if r0 else 0:.0%}", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _summary(results: list[StrategyRun], topo: Topology, workloads: list[Workload]
             ) -> list[str]:
    """summary.md's heading, what ran, and one row per strategy."""
    n_workers = sum(len(w.workers) for w in workloads)
    dest = workloads[0].destination
    r0 = results[0] if results else None
    lines = [f"# Aggregation on {topo.name}", "",
             f"{n_workers} workers in {len(workloads)} job(s) stream "
             f"{r0.values if r0 else 0} values each ({r0.chunks if r0 else 0} chunks of "
             f"{VECTOR_LEN}) to {dest}, window {r0.window if r0 else 0}, switches dropping "
             f"{r0.loss if r0 else 0:.1%} of aggregation packets. Measured cost = sum over the "
             "trees' uplinks of first transmissions per chunk / rate, from the switches' "
             "egress counters (agg_first); with every packet (agg_first + agg_repeat: "
             "retransmissions, stored sums sent again) it is the cost with overhead.", "",
             "| strategy | blue | predicted phi | measured | equal | with overhead | "
             "retransmissions | duration s | values/s | sums exact |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.strategy} | {', '.join(r.blue) or '-'} | {r.predicted_cost:.4g} | "
                     f"{r.measured_cost:.4g} | {'yes' if r.cost_matches else 'NO'} | "
                     f"{r.total_cost:.4g} | {r.retransmissions} | {r.duration_s:.1f} | "
                     f"{r.goodput_values_per_s:.0f} | {'yes' if r.sums_exact else 'NO'} |")
    return lines


def _link_bound_table(results: list[StrategyRun]) -> list[str]:
    """In the link-bound regime, each strategy's busiest uplink and how busy it was (no
    lines in the CPU-bound regime)."""
    r0 = results[0] if results else None
    if r0 is None or not r0.link_pps:
        return []
    lines = ["", f"Link-bound regime: the fastest link drains {r0.link_pps} packets/s. "
             "Goodput is set by the plan's busiest uplink (messages per chunk / rate); "
             "the busiest link's use is its packets over its rate x the stream's "
             "duration.", "",
             "| strategy | busiest uplink | messages per chunk / rate | its pps | "
             "busy | values/s | its pps x 32 / messages |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        predicted = (r.bottleneck_pps * VECTOR_LEN * r.jobs / r.bottleneck_messages
                     if r.bottleneck_messages else 0.0)
        lines.append(f"| {r.strategy} | {r.bottleneck_switch} | {r.bottleneck_load:.4g} | "
                     f"{r.bottleneck_pps} | {r.bottleneck_use:.0%} | "
                     f"{r.goodput_values_per_s:.0f} | {predicted:.0f} |")
    return lines


def _verdict(results: list[StrategyRun]) -> str:
    ok = all(r.cost_matches and r.sums_exact for r in results)
    verdict = ("Every strategy's measured cost equals its predicted phi and every sum is "
               "exact." if ok else "Some measurement departs from the prediction: see the "
               "table and logs/.")
    if any(r.total_cost > r.measured_cost for r in results):
        verdict += " What was lost and sent again is the overhead beside it."
    return verdict
