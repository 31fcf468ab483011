"""What each switch must hold, as plain data derived by pure functions.

Inputs: a topology, workloads (a job, its workers and destination) and, per workload, a plan
(SOAR's blue switches). Outputs: per switch, its routes, its aggregation roles and its ECN
threshold, and the table entries that express them (`Entry`, by names, no protobuf).

Routing is shortest path by hop count between switches; among equal next hops the one whose
name sorts first (naturally: s2 before s10) wins, and among parallel links the lowest port.
The SOAR tree of a workload is that same routing toward its destination host d: the root is d,
each switch on a worker's path hangs below its next hop toward d, its uplink rate is the rate
of that link, and its load L(s) is the number of the job's workers attached to it. So the plan
SOAR optimises is the one the routes actually carry.

Expected contributions: a blue switch v waits for the OR of the bits of the workers whose path
passes through v. That is the same set as its fan-in L(v) + sum over children c of msgs(c)
(soar.md): red children forward their workers' packets one by one, blue children send one
packet carrying the OR of theirs. Bitmaps make duplicates detectable by overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.aggpacket import MAX_JOBS, MAX_WORKERS, SLOTS_PER_JOB, VECTOR_LEN
from controller.errors import InputError, read_json
from controller.p4rt.schema import int_to_ip, int_to_mac, ip_to_int, mac_to_int
from controller.routing import next_hops
from controller.soar.baselines import run_strategy
from controller.soar.model import Plan, Tree, check_k, make_plan, messages, natural_key
from controller.topology import Topology

# Names in the P4 program (p4src/innet.p4) the intent is written in.
T_ROUTES, A_FORWARD = "ipv4_lpm", "ipv4_forward"
T_AGG, A_AGGREGATE = "agg_job", "aggregate"
T_ECN, A_ECN_ON, A_ECN_OFF = "ecn_config", "set_ecn_threshold", "ecn_off"
MANAGED_TABLES = (T_ROUTES, T_AGG)    # the controller owns every entry of these
DEFAULT_TABLES = (T_ECN,)             # the controller sets their default action

DEFAULT_ECN_THRESHOLD = 20  # packets of enq_qdepth; what the measurements here used


# ---------------------------------------------------------------------------------------------
# Table entries by name


@dataclass(frozen=True, slots=True, order=True)
class Match:
    """One match field: exact when prefix_len is None, else longest-prefix."""

    field: str
    value: int
    prefix_len: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A table entry (or a table's default action when `default`), names and integers only."""

    table: str
    match: tuple[Match, ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()
    default: bool = False

    @property
    def key(self) -> tuple[str, tuple[Match, ...], bool]:
        """What identifies the entry on the switch: two entries with one key are one entry."""
        return (self.table, self.match, self.default)

    def param(self, name: str) -> int:
        return dict(self.params)[name]


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
    unknown = set(data) - {"job", "destination", "workers", "vector_len", "comment"}
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(sorted(unknown))}", source=source)
    job = data.get("job")
    if isinstance(job, bool) or not isinstance(job, int) or not 0 <= job < 1 << 16:
        raise InputError(f"job must be an integer in 0..65535, got {job!r}", source=source)
    destination = data.get("destination", topology.destination)
    if destination is None:
        raise InputError("no destination: give one here or as aggregation.destination in "
                         "the topology", source=source)
    if destination not in topology.hosts:
        raise InputError(f"destination: unknown host {destination!r}", source=source)
    workers = data.get("workers")
    if not isinstance(workers, list) or not workers:
        raise InputError("workers must be a non-empty list of hosts", source=source)
    seen: set[str] = set()
    for w in workers:
        if not isinstance(w, str) or w not in topology.hosts:
            raise InputError(f"workers: unknown host {w!r}", source=source)
        if w == destination:
            raise InputError(f"workers: {w!r} is the destination", source=source)
        if w in seen:
            raise InputError(f"workers: {w!r} is listed twice", source=source)
        seen.add(w)
    if len(workers) > MAX_WORKERS:
        raise InputError(f"workers: at most {MAX_WORKERS} per job (the contributor bitmap has "
                         f"{MAX_WORKERS} bits), got {len(workers)}", source=source)
    vlen = data.get("vector_len", VECTOR_LEN)
    if isinstance(vlen, bool) or not isinstance(vlen, int) or not 1 <= vlen <= VECTOR_LEN:
        raise InputError(f"vector_len must be an integer in 1..{VECTOR_LEN} (packets carry "
                         f"{VECTOR_LEN} values), got {vlen!r}", source=source)
    return Workload(job, destination, tuple(workers), vlen, source)


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
    """Switch is blue for `job`: it waits for `expected` (bitmap), `fan_in` packets a round."""

    job: int
    expected: int
    slot_base: int
    fan_in: int
    workers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SwitchIntent:
    switch: str
    routes: tuple[Route, ...]
    aggregations: tuple[AggRole, ...]
    ecn_threshold: int | None

    def entries(self) -> tuple[Entry, ...]:
        """The table entries that hold this intent (routes, aggregation, ECN default)."""
        out = [Entry(T_ROUTES, (Match("dst_addr", ip_to_int(r.ip), r.prefix_len),), A_FORWARD,
                     (("dst_mac", mac_to_int(r.mac)), ("port", r.port)))
               for r in self.routes]
        out += [Entry(T_AGG, (Match("job", a.job),), A_AGGREGATE,
                      (("expected", a.expected), ("slot_base", a.slot_base)))
                for a in self.aggregations]
        out.append(ecn_entry(self.ecn_threshold))
        return tuple(out)


def ecn_entry(threshold: int | None) -> Entry:
    if threshold is None:
        return Entry(T_ECN, (), A_ECN_OFF, (), default=True)
    return Entry(T_ECN, (), A_ECN_ON, (("threshold", threshold),), default=True)


@dataclass(frozen=True, eq=False)
class NetworkIntent:
    """Per switch what it must hold, and the job plans it came from."""

    switches: Mapping[str, SwitchIntent]
    jobs: tuple[JobPlan, ...]

    def entries(self) -> dict[str, tuple[Entry, ...]]:
        return {s: i.entries() for s, i in self.switches.items()}


def slot_bases(jobs: Iterable[int]) -> dict[int, int]:
    """Register slots per job: jobs in increasing id, SLOTS_PER_JOB each, the same on every
    switch (so a job's slots read the same everywhere)."""
    ordered = sorted(set(jobs))
    if len(ordered) > MAX_JOBS:
        raise InputError(f"at most {MAX_JOBS} jobs at once (register slots), got "
                         f"{len(ordered)}")
    return {job: i * SLOTS_PER_JOB for i, job in enumerate(ordered)}


def network_intent(topo: Topology, jobs: Sequence[JobPlan],
                   ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD) -> NetworkIntent:
    """Routes for all hosts everywhere; an aggregation entry where a job's plan is blue."""
    seen: dict[int, str | None] = {}
    for jp in jobs:
        if jp.workload.job in seen:
            raise InputError(f"job {jp.workload.job} appears twice", source=jp.workload.source)
        seen[jp.workload.job] = jp.workload.source
    if ecn_threshold is not None and not 0 <= ecn_threshold < 1 << 19:
        raise InputError(f"ECN threshold must be in 0..{(1 << 19) - 1} packets, got "
                         f"{ecn_threshold}")
    bases = slot_bases(seen)
    all_routes = routes(topo)
    roles: dict[str, list[AggRole]] = {s: [] for s in topo.switches}
    for jp in jobs:
        for b in jp.blue:
            workers = jp.subtree_workers(b)
            if not workers:  # a blue switch with no load below sends nothing: no entry
                continue
            roles[b].append(AggRole(jp.workload.job, sum(jp.workload.bit(w) for w in workers),
                                    bases[jp.workload.job], jp.fan_in(b), workers))
    switches = {
        s: SwitchIntent(s, all_routes[s], tuple(sorted(roles[s], key=lambda a: a.job)),
                        ecn_threshold)
        for s in sorted(topo.switches, key=natural_key)
    }
    return NetworkIntent(switches, tuple(jobs))


def derive(topo: Topology, workloads: Sequence[Workload], strategy: str = "soar",
           k: int | None = None, *, ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD,
           seed: int = 0) -> NetworkIntent:
    """One call from files to intent: plan every workload with `strategy`, then the entries."""
    return network_intent(topo, [plan_job(topo, w, strategy, k, seed=seed) for w in workloads],
                          ecn_threshold)


def describe(entry: Entry) -> str:
    """One readable line for an entry of our tables (errors and the deploy/status listings)."""
    p = dict(entry.params)
    if entry.table == T_ROUTES and entry.action == A_FORWARD and len(entry.match) == 1:
        m = entry.match[0]
        return (f"route {int_to_ip(m.value)}/{m.prefix_len} -> port {p.get('port')} "
                f"(dst mac {int_to_mac(p.get('dst_mac', 0))})")
    if entry.table == T_AGG and entry.action == A_AGGREGATE and len(entry.match) == 1:
        expected = p.get("expected", 0)
        base = p.get("slot_base", 0)
        return (f"aggregate job {entry.match[0].value}: wait for bitmap {expected:#x} "
                f"({bin(expected).count('1')} workers), slots {base}..{base + SLOTS_PER_JOB - 1}")
    if entry.table == T_ECN and entry.default:
        if entry.action == A_ECN_ON:
            return f"ECN: mark CE at queue depth >= {p.get('threshold')}"
        if entry.action == A_ECN_OFF:
            return "ECN: off"
    match = ", ".join(f"{m.field}={m.value:#x}" + (f"/{m.prefix_len}" if m.prefix_len is not None
                                                    else "") for m in entry.match)
    args = ", ".join(f"{k}={v}" for k, v in entry.params)
    where = "default" if entry.default else f"[{match}]"
    return f"{entry.table} {where} -> {entry.action}({args})"
