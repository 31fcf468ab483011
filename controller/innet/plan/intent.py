"""What each switch must hold, as plain data derived by pure functions.

Inputs: a topology, workloads (a job, its workers and destination) and, per workload, a plan
(SOAR's blue switches). Outputs: per switch, its routes, its aggregation roles and its ECN
threshold, and the table entries that express them (`Entry`, by names, no protobuf; the
names are innet.plan.program's).

Routing is shortest path by hop count between switches; among equal next hops the one whose
name sorts first (naturally: s2 before s10) wins, and among parallel links the lowest port.
The SOAR tree of a workload is that same routing toward its destination host d: the root is d,
each switch on a worker's path hangs below its next hop toward d, its uplink rate is the rate
of that link, and its load L(s) is the number of the job's workers attached to it. So the plan
SOAR optimises is the one the routes actually carry.

Expected contributions: a blue switch v waits for the OR of the bits of the workers whose path
passes through v. That is the same set as its fan-in L(v) + sum over children c of msgs(c)
(SOAR's model, `innet.soar.model.messages`): red children forward their workers' packets one
by one, blue children send one packet carrying the OR of theirs. Bitmaps make a contribution
that arrives twice detectable by overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from innet.aggpacket import DEFAULT_JOB_SLOTS, MAX_WORKERS, SLOTS, VECTOR_LEN, result_group_ip
from innet.errors import InputError, quote, read_json
from innet.names import natural_key
from innet.p4rt.entities import Entry, Match, MulticastGroup, Replica
from innet.p4rt.schema import ip_to_int, mac_to_int
from innet.plan.program import (
    A_AGGREGATE,
    A_DROP,
    A_ECN_OFF,
    A_ECN_ON,
    A_FORWARD,
    A_MULTICAST,
    A_NO_FAULT,
    A_TRACK,
    DROP_SCALE,
    T_AGG,
    T_ECN,
    T_FAULT,
    T_ROUTES,
)
from innet.routing import next_hops
from innet.soar.baselines import STRATEGIES, run_strategy
from innet.soar.model import Plan, Tree, check_k, make_plan, messages
from innet.topology import Topology, check_host

DEFAULT_ECN_THRESHOLD = 20  # packets of enq_qdepth; what the measurements here used


# ---------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True, slots=True)
class Workload:
    """One aggregation job: its workers (bit i = workers[i]) send to the destination."""

    job: int
    destination: str
    workers: tuple[str, ...]
    vector_len: int = VECTOR_LEN
    source: str | None = field(default=None, compare=False)
    slots: int = DEFAULT_JOB_SLOTS  # cells of every blue switch's pool: a window of slots / 2

    def bit(self, worker: str) -> int:
        return 1 << self.workers.index(worker)

    @property
    def bitmap(self) -> int:
        return (1 << len(self.workers)) - 1


def workload_from_dict(data: Any, topology: Topology, *, source: str | None = None) -> Workload:
    """Check a workload against the topology; every problem names the field."""
    if not isinstance(data, dict):
        raise InputError('a workload is a JSON object {"job", "workers", "destination"}',
                         source=source)
    unknown = set(data) - {"job", "destination", "workers", "vector_len", "slots", "comment"}
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(sorted(unknown))}", source=source)
    job = data.get("job")
    if isinstance(job, bool) or not isinstance(job, int) or not 0 <= job < 1 << 16:
        raise InputError(f"job must be an integer in 0..65535, got {quote(job)}", source=source)
    destination = data.get("destination", topology.destination)
    if destination is None:
        raise InputError("no destination: give one here or as aggregation.destination in "
                         "the topology", source=source)
    destination = check_host(destination, topology.hosts, "destination", source)
    workers = data.get("workers")
    if not isinstance(workers, list) or not workers:
        raise InputError("workers must be a non-empty list of hosts", source=source)
    seen: set[str] = set()
    for w in workers:
        check_host(w, topology.hosts, "workers", source)
        if w == destination:
            raise InputError(f"workers: {quote(w)} is the destination", source=source)
        if w in seen:
            raise InputError(f"workers: {quote(w)} is listed twice", source=source)
        seen.add(w)
    if len(workers) > MAX_WORKERS:
        raise InputError(f"workers: at most {MAX_WORKERS} per job (the contributor bitmap has "
                         f"{MAX_WORKERS} bits), got {len(workers)}", source=source)
    vlen = data.get("vector_len", VECTOR_LEN)
    if isinstance(vlen, bool) or not isinstance(vlen, int) or not 1 <= vlen <= VECTOR_LEN:
        raise InputError(f"vector_len must be an integer in 1..{VECTOR_LEN} (packets carry "
                         f"{VECTOR_LEN} values), got {quote(vlen)}", source=source)
    slots = data.get("slots", DEFAULT_JOB_SLOTS)
    if isinstance(slots, bool) or not isinstance(slots, int) or not 2 <= slots <= SLOTS:
        raise InputError(f"slots must be an integer in 2..{SLOTS} (a switch's pool), got "
                         f"{quote(slots)}", source=source)
    return Workload(job, destination, tuple(workers), vlen, source, slots)


def load_workload(path: str | Path, topology: Topology) -> Workload:
    return workload_from_dict(read_json(path), topology, source=str(path))


# ---------------------------------------------------------------------------------------------
# Routing


@dataclass(frozen=True, slots=True)
class Route:
    host: str
    ip: str
    prefix_len: int
    port: int
    mac: str


def routes(topo: Topology) -> dict[str, tuple[Route, ...]]:
    """Every switch's /32 route to every host it can reach, hosts in natural order."""
    table: dict[str, list[Route]] = {s: [] for s in topo.switches}
    for h in sorted(topo.hosts, key=natural_key):
        host = topo.hosts[h]
        for s, hop in next_hops(topo, h).items():
            table[s].append(Route(h, host.ip, 32, hop.port, host.mac))
    return {s: tuple(r) for s, r in table.items()}


# ---------------------------------------------------------------------------------------------
# The SOAR tree of a workload, and its plan


@dataclass(frozen=True, eq=False)
class JobPlan:
    """A workload, its SOAR tree (routing toward d), the chosen plan and what it implies."""

    workload: Workload
    tree: Tree
    plan: Plan
    workers_at: Mapping[str, tuple[str, ...]]  # switch -> workers attached to it
    msgs: Mapping[str, int]                    # switch -> messages on its uplink under plan

    @property
    def blue(self) -> tuple[str, ...]:
        return self.plan.blue

    def subtree_workers(self, switch: str) -> tuple[str, ...]:
        """Workers whose packets pass through `switch`, in workload order."""
        t = self.tree
        v = t.index[switch]
        inside = {v}
        for u in range(v + 1, t.n):  # BFS order: parents precede children
            if int(t.parent[u]) in inside:
                inside.add(u)
        attached = {w for u in inside for w in self.workers_at.get(t.ids[u], ())}
        return tuple(w for w in self.workload.workers if w in attached)

    def fan_in(self, switch: str) -> int:
        """Messages reaching `switch`: L(v) + sum over children of msgs(c)."""
        t = self.tree
        v = t.index[switch]
        return int(t.load[v]) + sum(self.msgs[t.ids[c]] for c in t.children[v])


def aggregation_tree(topo: Topology, workload: Workload, available: Iterable[str] | None = None
                     ) -> tuple[Tree, dict[str, tuple[str, ...]]]:
    """SOAR's tree for a workload: switches on the workers' paths, rooted at the destination.

    Returns the tree and, per switch, the workers attached to it (their load L).
    """
    d = workload.destination
    hops = next_hops(topo, d)
    workers_at: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    rate: dict[str, float] = {}
    for w in workload.workers:
        s, _ = topo.host_switch(w)
        if s not in hops:
            raise InputError(f"worker {w!r}: no path from its switch {s!r} to the destination "
                             f"{d!r}", source=workload.source)
        workers_at.setdefault(s, []).append(w)
        while s not in parent:
            hop = hops[s]
            parent[s] = hop.neighbour
            rate[s] = hop.rate
            if hop.neighbour == d:
                break
            s = hop.neighbour
    switches = sorted(parent, key=natural_key)
    ids = [d, *switches]
    pos = {name: i for i, name in enumerate(ids)}
    par = [-1] + [pos[parent[s]] for s in switches]
    rates = [1.0] + [rate[s] for s in switches]
    loads = [0] + [len(workers_at.get(s, ())) for s in switches]
    avail = None
    if available is not None:
        avail = [s for s in available if s in pos and s != d]
    tree = Tree.build(ids, par, rates, loads, avail, source=workload.source)
    return tree, {s: tuple(ws) for s, ws in workers_at.items()}


def job_plan(topo: Topology, workload: Workload, tree: Tree,
             workers_at: Mapping[str, tuple[str, ...]], plan: Plan) -> JobPlan:
    mask = np.zeros(tree.n, dtype=bool)
    for b in plan.blue:
        if b not in tree.index:
            raise InputError(f"plan: blue switch {b!r} is not on job {workload.job}'s tree")
        mask[tree.index[b]] = True
    msgs_arr = messages(tree, mask)
    msgs = {tree.ids[v]: int(msgs_arr[v]) for v in range(1, tree.n)}
    return JobPlan(workload, tree, plan, dict(workers_at), msgs)


def plan_job(topo: Topology, workload: Workload, strategy: str = "soar", k: int | None = None,
             *, seed: int = 0, available: Iterable[str] | None = None,
             blue: Sequence[str] | None = None) -> JobPlan:
    """Tree, plan (a strategy with budget k, default: every switch of the tree; or the given
    `blue` switches) and per-switch message counts of one workload."""
    tree, workers_at = aggregation_tree(topo, workload, available)
    if blue is not None:
        idx = [tree.index[b] for b in blue if b in tree.index]
        missing = [b for b in blue if b not in tree.index]
        if missing:
            raise InputError(f"blue switch {missing[0]!r} is not on job {workload.job}'s tree")
        plan = make_plan(tree, "given", len(idx), idx)
    else:
        kk = tree.n - 1 if k is None else check_k(k)
        plan = run_strategy(tree, strategy, kk, seed)
    return job_plan(topo, workload, tree, workers_at, plan)


# ---------------------------------------------------------------------------------------------
# Per-switch intent


@dataclass(frozen=True, slots=True)
class AggRole:
    """Switch is on `job`'s tree. Blue: it waits for `expected` (bitmap), `fan_in` packets a
    chunk, in cells slot_base .. slot_base + slots - 1 of its pool. Red (`blue` False): it
    forwards the job's packets and uses the same cells to count each chunk's first
    transmissions on its uplink apart from retransmissions (the measured cost)."""

    job: int
    expected: int
    slot_base: int
    fan_in: int
    workers: tuple[str, ...]
    slots: int = DEFAULT_JOB_SLOTS
    blue: bool = True
    result_ports: tuple[int, ...] = ()  # where the job's RESULTs go from here: toward workers


@dataclass(frozen=True, slots=True)
class SwitchIntent:
    switch: str
    routes: tuple[Route, ...]
    aggregations: tuple[AggRole, ...]
    ecn_threshold: int | None
    drop_probability: float = 0.0

    def entries(self) -> tuple[Entry, ...]:
        """The table entries that hold this intent (routes, aggregation, ECN default)."""
        out = [Entry(T_ROUTES, (Match("dst_addr", ip_to_int(r.ip), r.prefix_len),), A_FORWARD,
                     (("dst_mac", mac_to_int(r.mac)), ("port", r.port)))
               for r in self.routes]
        out += [Entry(T_AGG, (Match("job", a.job),), A_AGGREGATE if a.blue else A_TRACK,
                      (("expected", a.expected), ("slot_base", a.slot_base),
                       ("slots", a.slots)))
                for a in self.aggregations]
        out += [Entry(T_ROUTES, (Match("dst_addr", ip_to_int(result_group_ip(a.job)), 32),),
                      A_MULTICAST, (("group", a.job),))
                for a in self.aggregations if a.result_ports]
        out.append(ecn_entry(self.ecn_threshold))
        out.append(fault_entry(self.drop_probability))
        return tuple(out)

    def replication(self) -> tuple[MulticastGroup, ...]:
        """One multicast group per job (id = job): a copy of its RESULT out of every port
        toward its workers, so the destination sends each result once."""
        return tuple(MulticastGroup(a.job, tuple(Replica(p) for p in a.result_ports))
                     for a in self.aggregations if a.result_ports)

    def pool_use(self) -> int:
        """Cells of the switch's slot pool its aggregation entries hold."""
        return sum(a.slots for a in self.aggregations)


def ecn_entry(threshold: int | None) -> Entry:
    if threshold is None:
        return Entry(T_ECN, (), A_ECN_OFF, (), default=True)
    return Entry(T_ECN, (), A_ECN_ON, (("threshold", threshold),), default=True)


def fault_entry(probability: float) -> Entry:
    """agg_fault's default: drop this share of the aggregation packets (0: off)."""
    if not 0.0 <= probability <= 1.0:
        raise InputError(f"drop probability must be in 0..1, got {probability}")
    threshold = min(DROP_SCALE - 1, round(probability * DROP_SCALE))
    if threshold == 0:
        return Entry(T_FAULT, (), A_NO_FAULT, (), default=True)
    return Entry(T_FAULT, (), A_DROP, (("share", threshold),), default=True)


@dataclass(frozen=True, eq=False)
class NetworkIntent:
    """Per switch what it must hold, and the job plans it came from."""

    switches: Mapping[str, SwitchIntent]
    jobs: tuple[JobPlan, ...]

    def entries(self) -> dict[str, tuple[Entry, ...]]:
        return {s: i.entries() for s, i in self.switches.items()}

    def replication(self) -> dict[str, tuple[MulticastGroup, ...]]:
        return {s: i.replication() for s, i in self.switches.items()}


Held = Mapping[str, Mapping[int, tuple[int, int]]]  # switch -> job -> (slot_base, slots)


def held_slots(entries: Mapping[str, Iterable[Entry]]) -> dict[str, dict[int, tuple[int, int]]]:
    """What the switches' agg_job entries allocate now: the input that keeps bases stable."""
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for sw, es in entries.items():
        for e in es:
            if e.table == T_AGG and e.action in (A_AGGREGATE, A_TRACK) and len(e.match) == 1:
                p = dict(e.params)
                out.setdefault(sw, {})[e.match[0].value] = (p.get("slot_base", 0),
                                                           p.get("slots", DEFAULT_JOB_SLOTS))
    return out


def allocate_slots(demand: Mapping[int, int], held: Mapping[int, tuple[int, int]] | None = None,
                   *, switch: str = "?", pool: int = SLOTS) -> dict[int, int]:
    """Cells for each job on one switch: job -> slot_base, given job -> cells wanted.

    A job that already holds a range of the size it wants keeps it (its live cells never move
    when another job is admitted or released); the others, in job order, take the lowest free
    range that fits (first fit). A job that does not fit is refused with the pool's state.
    """
    held = held or {}
    bases: dict[int, int] = {}
    used: list[tuple[int, int]] = []
    for job in sorted(demand):
        h = held.get(job)
        if h is not None and h[1] == demand[job] and h[0] + h[1] <= pool and all(
                h[0] + h[1] <= b or b + n <= h[0] for b, n in used):
            bases[job] = h[0]
            used.append(h)
    for job in sorted(demand):
        if job in bases:
            continue
        need = demand[job]
        start = 0
        for b, n in sorted(used):
            if b - start >= need:
                break
            start = max(start, b + n)
        if start + need > pool:
            free = pool - sum(n for _, n in used)
            raise InputError(f"switch {switch}: job {job} needs {need} slots but the pool of "
                             f"{pool} has {free} free and no free range that long (jobs "
                             f"{', '.join(map(str, sorted(bases))) or 'none'} hold the rest)")
        bases[job] = start
        used.append((start, need))
    return bases


def result_ports(topo: Topology, jp: JobPlan, switch: str) -> tuple[int, ...]:
    """Ports of `switch` its job's RESULTs leave by: down the job's own tree, to its child
    switches and the workers attached to it. Not the unicast routes toward the workers: with
    several equal paths (two spines) the route to a worker may leave by another spine than
    the tree's, whose switch has no group for the job and drops the RESULT."""
    t = jp.tree
    down = {t.ids[c] for c in t.children[t.index[switch]]}
    down |= set(jp.workers_at.get(switch, ()))
    ports = {link.end(switch).port for link, far in topo.neighbours(switch) if far.node in down}
    return tuple(sorted(p for p in ports if p is not None))


def network_intent(topo: Topology, jobs: Sequence[JobPlan],
                   ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD, *,
                   held: Held | None = None, drop_probability: float = 0.0) -> NetworkIntent:
    """Routes for all hosts everywhere; an agg_job entry on every switch of a job's tree
    (aggregate where the plan is blue, track where it is red), its cells allocated per switch
    (`held`: what the switches hold now, kept where it is); `drop_probability`: the
    data-plane fault injection, for tests and experiments."""
    seen: dict[int, str | None] = {}
    for jp in jobs:
        if jp.workload.job in seen:
            raise InputError(f"job {jp.workload.job} appears twice", source=jp.workload.source)
        seen[jp.workload.job] = jp.workload.source
    if ecn_threshold is not None and not 0 <= ecn_threshold < 1 << 19:
        raise InputError(f"ECN threshold must be in 0..{(1 << 19) - 1} packets, got "
                         f"{ecn_threshold}")
    all_routes = routes(topo)
    roles: dict[str, list[AggRole]] = {s: [] for s in topo.switches}
    for jp in jobs:
        blue = set(jp.blue)
        for s in jp.tree.ids[1:]:
            workers = jp.subtree_workers(s)
            if not workers:  # a blue switch with no load below sends nothing: no entry
                continue
            roles[s].append(AggRole(jp.workload.job, sum(jp.workload.bit(w) for w in workers),
                                    0, jp.fan_in(s), workers, jp.workload.slots, s in blue,
                                    result_ports(topo, jp, s)))
    for s, rs in roles.items():
        bases = allocate_slots({r.job: r.slots for r in rs}, (held or {}).get(s), switch=s)
        roles[s] = [replace(r, slot_base=bases[r.job]) for r in rs]
    fault_entry(drop_probability)  # refuses a bad probability before anything is built
    switches = {
        s: SwitchIntent(s, all_routes[s], tuple(sorted(roles[s], key=lambda a: a.job)),
                        ecn_threshold, drop_probability)
        for s in sorted(topo.switches, key=natural_key)
    }
    return NetworkIntent(switches, tuple(jobs))


def derive(topo: Topology, workloads: Sequence[Workload], strategy: str = "soar",
           k: int | None = None, *, ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD,
           seed: int = 0, held: Held | None = None) -> NetworkIntent:
    """One call from files to intent: plan every workload with `strategy`, then the entries."""
    return network_intent(topo, [plan_job(topo, w, strategy, k, seed=seed) for w in workloads],
                          ecn_threshold, held=held)


# ---------------------------------------------------------------------------------------------
# The options an intent is made of


@dataclass(frozen=True, slots=True)
class IntentOptions:
    """What a plan of innet's program is made from, as plain data: the front ends build it
    once from their flags, and the control socket of a network that is up carries its JSON
    (`to_json`, `from_json`), so flag names are never a wire format.

    `ecn_threshold` None: never mark. `queue_rate`/`queue_depth` None: leave BMv2's queues as
    they are (the switches' side channel sets them; no entry depends on them).
    """

    workloads: tuple[str, ...] = ()
    strategy: str = "soar"
    k: int | None = None
    seed: int = 0
    ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD
    queue_rate: int | None = None
    queue_depth: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) if f != "workloads" else list(self.workloads)
                for f in self.__slots__}

    @classmethod
    def from_json(cls, data: Any, base: IntentOptions | None = None, *,
                  source: str | None = None) -> IntentOptions:
        """Options from their JSON; fields left out keep `base`'s (default: the defaults), so
        a request may change k alone and keep the jobs that run. Every field is checked by
        type here, before anything is planned, and a bad one is named."""
        if not isinstance(data, dict):
            raise InputError("intent options are a JSON object", source=source)
        unknown = set(data) - set(cls.__slots__)
        if unknown:
            raise InputError(f"unknown intent option(s) {', '.join(sorted(unknown))}; the "
                             f"options are {', '.join(cls.__slots__)}", source=source)
        merged = {**(base or cls()).to_json(), **data}
        workloads = merged["workloads"]
        if not isinstance(workloads, list | tuple) or not all(isinstance(w, str)
                                                                for w in workloads):
            raise InputError("workloads must be a list of file names", source=source)
        if merged["strategy"] not in STRATEGIES:
            raise InputError(f"unknown strategy {quote(merged['strategy'])}; choose from "
                             f"{', '.join(STRATEGIES)}", source=source)
        for name, low in (("k", 0), ("seed", 0), ("ecn_threshold", 0), ("queue_rate", 1),
                          ("queue_depth", 1)):
            value = merged[name]
            if (name == "seed" and value is None) or (value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < low)):
                raise InputError(f"{name} must be an integer >= {low}"
                                 + ("" if name == "seed" else " or null")
                                 + f", got {quote(value)}", source=source)
        return cls(**{**merged, "workloads": tuple(workloads)})


def build_intent(options: IntentOptions, topo: Topology, held: Held | None = None
                 ) -> NetworkIntent:
    """Every workload of `options` planned with its strategy, then the switches' intent.
    `held`: the slot ranges the switches' aggregation entries hold now; jobs that stay keep
    theirs (their cells may hold live sums)."""
    workloads = [load_workload(p, topo) for p in options.workloads]
    jobs = [plan_job(topo, w, options.strategy, options.k, seed=options.seed)
            for w in workloads]
    return network_intent(topo, jobs, options.ecn_threshold, held=held)
