"""The fluid model's prediction of a live cluster run: the same jobs, on the same hosts, with
the same joint plans and start times, in CASSINI's fluid engine (a pure function).

What BMv2 runs and what the model is given must be the same experiment:
- Units. BMv2's egress queues each drain `capacity_pps` packets/s (on the jobs' clock) and
  a job's gradient is chunks of one packet each; so every link with a switch's egress queue
  gets `capacity_pps` packets' worth of capacity, and each job's profile carries one message
  per chunk (`linkdemand.unit_profile`), times the messages per chunk its aggregation plan
  puts on the link. A worker's own uplink (host to switch) has no queue in the emulation and
  is left out, as it is left unlimited there.
- Times. Arrivals and start times are the run's, measured on the jobs' clock from the run's
  epoch (the grid's origin), so a job's shift means the same in both.
- Agents. Policies with CASSINI's shifts have agents (they wait for their grid and
  re-align when that costs at most 10% of the period, `cassini evaluate`'s default);
  `base` and `soar` start when their hosts are ready and never wait.
- Marks. The fluid queue marks above `threshold` packets of a `queue_depth` buffer: the
  switches' ECN threshold and queue depth, in the chunk's wire bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from innet.cassini.placement.cluster import link_name
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.trace import TraceJobRun, TraceResult, TraceSchedule, simulate_trace
from innet.plan.cluster import Admission, ClusterSettings, ClusterState, JobRequest, admit
from innet.plan.linkdemand import CHUNK_WIRE_BYTES, link_messages, unit_profile
from innet.topology import Topology

REALIGN_BUDGET_PCT = 10.0  # as the job agents' (innet.emulation.jobagent)


@dataclass(frozen=True)
class RanJob:
    """One job of a run as the model needs it: its plan, when it arrived and when its first
    iteration began (ms on the jobs' clock from the run's epoch), and what it trained."""

    admission: Admission
    arrival_ms: float
    ready_ms: float
    iterations: int


@dataclass(frozen=True)
class LinkBound:
    """The emulation's links: packets/s per egress queue (jobs' clock), queue and marks."""

    capacity_pps: float
    queue_depth: int
    ecn_threshold: int

    @property
    def capacity_gbps(self) -> float:
        return self.capacity_pps * CHUNK_WIRE_BYTES * 8 / 1e9

    def config(self, agents: bool) -> FluidConfig:
        kb = CHUNK_WIRE_BYTES / 1000
        return FluidConfig(threshold_kb=max(self.ecn_threshold, 1) * kb,
                           buffer_kb=max(self.queue_depth, self.ecn_threshold + 1) * kb,
                           packet_bytes=CHUNK_WIRE_BYTES, realign_pct=5.0 if agents else None,
                           realign_budget_pct=REALIGN_BUDGET_PCT)


def cluster_schedule(topo: Topology, ran: Sequence[RanJob], policy: str, bound: LinkBound
                     ) -> TraceSchedule:
    """The run as a fluid trace schedule: each job's unit profile, its links' messages per
    chunk, every switch egress link at the emulation's capacity."""
    agents = "cassini" in policy
    traffic: dict[str, dict[str, int]] = {}
    jobs = []
    for r in ran:
        a = r.admission
        for key, messages in link_messages(topo, a.plan).items():
            if key[0] in topo.switches:  # an egress queue of a switch
                traffic.setdefault(link_name(key), {})[a.name] = messages
        profile = replace(unit_profile(a.request.profile, a.request.values), name=a.name)
        jobs.append(TraceJobRun(profile, r.arrival_ms, r.ready_ms, (), r.iterations,
                                ((0.0, a.shift_ms),) if agents else ()))
    capacity = {link: bound.capacity_gbps for link in traffic}
    return TraceSchedule(policy, tuple(jobs), {r.admission.name: r.admission.hosts for r in ran},
                         traffic, capacity, rounds=1)


def predict(topo: Topology, ran: Sequence[RanJob], policy: str, bound: LinkBound
            ) -> TraceResult:
    """What the fluid model says the run's jobs do: iteration times, JCTs, marks."""
    sched = cluster_schedule(topo, ran, policy, bound)
    return simulate_trace(sched, bound.config(sched.agents), label=policy)


@dataclass(frozen=True)
class Arrival:
    """A job of a trace as the planner takes it: its request and arrival (jobs' clock)."""

    request: JobRequest
    arrival_ms: float


def first_grid_point(admission: Admission, at_ms: float) -> float:
    """When a job admitted at `at_ms` starts: the first point of shift + m T at or after it
    (the agents start on the grid, whatever the policy; jobrun.RunScale.timing)."""
    period = admission.request.profile.iteration_ms
    m = max(0, math.ceil((at_ms - admission.shift_ms) / period - 1e-9))
    return admission.shift_ms + m * period


def replay_trace(topo: Topology, arrivals: Sequence[Arrival], policy: str, bound: LinkBound,
                 start_margin_ms: float, settings: ClusterSettings | None = None
                 ) -> tuple[list[RanJob], TraceResult]:
    """The trace as the live cluster would run it, in the fluid model alone: each job is
    admitted (innet.plan.cluster.admit) at its arrival, or when a job that leaves makes room
    (queued jobs in arrival order), and starts on its grid `start_margin_ms` later; jobs
    leave when the model says their last iteration ends. Returns the jobs as they ran and
    the model's result (every job, or those that could ever be placed)."""
    pending = sorted(arrivals, key=lambda a: a.arrival_ms)
    state = ClusterState(topo)
    queue: list[Arrival] = []
    ran: list[RanJob] = []
    left: set[str] = set()
    result = TraceResult(policy, (), 0.0, 0.0)
    while pending or queue:
        ends = {j.name: j.finish_ms for j in result.jobs if j.name not in left}
        next_end = min(ends.values(), default=math.inf)
        if pending and pending[0].arrival_ms <= next_end:
            now, arrived = pending[0].arrival_ms, pending.pop(0)
            queue.append(arrived)
        elif ends:
            now = next_end
            gone = min(ends, key=lambda n: ends[n])
            left.add(gone)
            state = state.without(gone)
        else:  # nothing runs and nothing arrives: the queue can never be placed
            break
        admitted = False
        for waiting in list(queue):
            got = admit(state, waiting.request, policy, settings)
            if isinstance(got, Admission):
                state = state.with_job(got)
                queue.remove(waiting)
                ran.append(RanJob(got, waiting.arrival_ms,
                                  first_grid_point(got, now + start_margin_ms),
                                  waiting.request.iterations))
                admitted = True
        if admitted:
            result = predict(topo, ran, policy, bound)
    return ran, result
