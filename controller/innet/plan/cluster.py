"""Admission: one joint plan for a job arriving on a running network, as a pure function.

`admit(state, request, policy, settings)` takes the cluster's state (the topology, the
running jobs with their hosts, plans, slot ranges and shifts) and a new job, and returns its
`Admission` (hosts, destination, blue switches and SOAR plan, a slot base per switch, its
shift, the links it shares and with whom) or a `Wait` that says why (docs/cluster-planner.md).

Hosts: a job of w workers takes w + 1 free hosts; the first of the placement (the rack the
base scheduler fills first) is the destination (the parameter server, where the sums end),
the others are the workers in the placement's order (bit i = workers[i]).

Pools: every switch of the job's tree takes `slots` cells of its 256-cell pool (blue ones
aggregate there, red ones count first transmissions there, "track"); running jobs' ranges
never move (`intent.allocate_slots` with what they hold). A switch without a free range of
that length can never turn blue (SOAR's online setting: Lambda = the switches with room); by
default it also refuses the placement (the job's red range cannot be tracked there), with
`untracked_red` it stays red with no range of its own. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from innet.aggpacket import DEFAULT_JOB_SLOTS, MAX_WORKERS, SLOTS
from innet.cassini.model.profiles import JOB_NAME, JOB_NAME_RULE, JobProfile
from innet.cassini.placement.candidates import themis_candidates
from innet.cassini.placement.cluster import Cluster, LinkKey
from innet.cassini.placement.scheduler import PlannerSettings
from innet.errors import InputError, quote
from innet.names import natural_key
from innet.plan.intent import JobPlan, Workload, allocate_slots, plan_job
from innet.plan.linkdemand import (
    Demand,
    SharedUse,
    choose_shift,
    link_messages,
    unit_profile,
    unscored_links,
)
from innet.soar.model import check_k
from innet.topology import Topology

POLICIES = ("base", "cassini", "soar", "soar+cassini")
MAX_JOB_ID = (1 << 16) - 1


@dataclass(frozen=True)
class JobRequest:
    """A job asking to run: its profile's shape, w workers, how long and how much it sends.

    `values`: gradient values per iteration (32 a chunk); `slots`: cells of each switch's
    pool on its tree (a window of slots / 2 chunks); `k`: at most k blue switches (SOAR
    policies); `hosts`: pin it there (destination first, then the workers) instead of
    asking the base scheduler."""

    name: str
    profile: JobProfile
    workers: int
    iterations: int
    values: int
    slots: int = DEFAULT_JOB_SLOTS
    k: int = 4
    hosts: tuple[str, ...] | None = None

    def check(self, topo: Topology) -> None:
        """Refuse what no state of the network could ever admit, naming the field."""
        where = f"job {quote(self.name)}: "
        if not JOB_NAME.fullmatch(self.name):
            raise InputError(f"job name must be {JOB_NAME_RULE}, got {quote(self.name)}")
        for name, value, low, high in (("workers", self.workers, 1, MAX_WORKERS),
                                       ("iterations", self.iterations, 1, None),
                                       ("values", self.values, 1, None),
                                       ("slots", self.slots, 2, SLOTS)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low or (
                    high is not None and value > high):
                bound = f"in {low}..{high}" if high is not None else f">= {low}"
                raise InputError(f"{where}{name} must be an integer {bound}, got "
                                 f"{quote(value)}")
        check_k(self.k)
        if self.workers + 1 > len(topo.hosts):
            raise InputError(f"{where}needs {self.workers + 1} hosts ({self.workers} workers "
                             f"and a destination); the network has {len(topo.hosts)}")
        if self.hosts is not None:
            self.check_hosts(topo, where)

    def check_hosts(self, topo: Topology, where: str) -> None:
        assert self.hosts is not None
        if len(self.hosts) != self.workers + 1:
            raise InputError(f"{where}hosts lists {len(self.hosts)} host(s) for "
                             f"{self.workers} workers and a destination")
        for h in self.hosts:
            if h not in topo.hosts:
                raise InputError(f"{where}hosts: unknown host {quote(h)}")
        if len(set(self.hosts)) != len(self.hosts):
            raise InputError(f"{where}hosts: a host is listed twice")


@dataclass(frozen=True, eq=False)
class Admission:
    """The plan of an admitted job: where, which switches aggregate, which cells, when.

    `slot_bases`: switch -> first cell of the job's range (every switch of its tree but the
    `untracked` ones); `shift_ms`: when its iterations start after the common epoch;
    `shared`: the links it shares with running jobs, with whom and their scores."""

    request: JobRequest
    job: int
    policy: str
    plan: JobPlan
    slot_bases: Mapping[str, int]
    shift_ms: float
    shared: tuple[SharedUse, ...]
    untracked: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def workload(self) -> Workload:
        return self.plan.workload

    @property
    def destination(self) -> str:
        return self.plan.workload.destination

    @property
    def workers(self) -> tuple[str, ...]:
        return self.plan.workload.workers

    @property
    def hosts(self) -> tuple[str, ...]:
        """Destination first, then the workers."""
        return (self.destination, *self.workers)

    @property
    def blue(self) -> tuple[str, ...]:
        return self.plan.blue

    @property
    def phi(self) -> float:
        """SOAR's cost of the plan: messages per chunk on each uplink over its rate."""
        return self.plan.plan.cost

    def to_dict(self) -> dict[str, Any]:
        """What `job list --json` will show of the plan (strict JSON: no NaN)."""
        return {"name": self.name, "job": self.job, "policy": self.policy,
                "destination": self.destination, "workers": list(self.workers),
                "blue": list(self.blue), "phi": self.phi, "slot_bases": dict(self.slot_bases),
                "untracked": list(self.untracked), "shift_ms": self.shift_ms,
                "shared": [{"link": u.link, "jobs": list(u.jobs),
                            "capacity_gbps": u.capacity_gbps, "score": u.score}
                           for u in self.shared]}

    def demand(self, topo: Topology) -> Demand:
        return Demand(self.name, unit_profile(self.request.profile, self.request.values),
                      self.shift_ms, link_messages(topo, self.plan))


@dataclass(frozen=True)
class Wait:
    """The job cannot start now; `reason` says why, in words a user reads in `job list`."""

    request: JobRequest
    policy: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.request.name, "policy": self.policy, "why": self.reason}


@dataclass(frozen=True, eq=False)
class ClusterState:
    """The running network as the planner sees it: topology, running jobs, pool size, and
    the last job id given (ids go up, so a late packet of a job that left is never taken
    for a new job's)."""

    topology: Topology
    running: tuple[Admission, ...] = ()
    pool: int = SLOTS
    last_job: int = 0

    def busy_hosts(self) -> dict[str, str]:
        """host -> the running job that holds it."""
        return {h: a.name for a in self.running for h in a.hosts}

    def held(self) -> dict[str, dict[int, tuple[int, int]]]:
        """switch -> job id -> (slot base, cells): what the running jobs' ranges hold."""
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for a in self.running:
            for s, base in a.slot_bases.items():
                out.setdefault(s, {})[a.job] = (base, a.request.slots)
        return out

    def next_job_id(self) -> int:
        """The first id after the last one given that no running job has, wrapping to 1
        (0 is not a multicast group, and the id is also the job's group)."""
        used = {a.job for a in self.running}
        order = [*range(self.last_job + 1, MAX_JOB_ID + 1), *range(1, self.last_job + 1)]
        free: int | None = next((i for i in order if i not in used), None)
        if free is None:
            raise InputError(f"every job id 1..{MAX_JOB_ID} is in use")
        return free

    def with_job(self, admission: Admission) -> ClusterState:
        return replace(self, running=(*self.running, admission), last_job=admission.job)

    def without(self, name: str) -> ClusterState:
        """The state once job `name` has left (its hosts and cells free again)."""
        if name not in {a.name for a in self.running}:
            raise InputError(f"no running job {quote(name)}")
        return replace(self, running=tuple(a for a in self.running if a.name != name))


@dataclass(frozen=True)
class ClusterSettings:
    """How admission plans: the base's candidates and the shift search (`planner`: its
    candidates, precision_deg and seed; no fluid check here), and whether a switch of the
    tree with no room for the job's range may stay red without one (`untracked_red`)."""

    planner: PlannerSettings = field(default_factory=lambda: PlannerSettings(checked=0))
    untracked_red: bool = False


def slot_base(held: Mapping[int, tuple[int, int]], job: int, slots: int, switch: str,
              pool: int) -> int | str:
    """Where `job`'s range of `slots` cells goes on one switch (running ranges stay where
    they are), or the reason it has no room."""
    demand = {j: n for j, (_, n) in held.items()}
    demand[job] = slots
    try:
        return allocate_slots(demand, held, switch=switch, pool=pool)[job]
    except InputError as exc:
        return str(exc)


def rooms(state: ClusterState, tree_switches: Sequence[str], job: int, slots: int
          ) -> tuple[dict[str, int], dict[str, str]]:
    """Per switch of a tree: the job's slot base where there is room, the reason where not."""
    held = state.held()
    bases: dict[str, int] = {}
    full: dict[str, str] = {}
    for s in tree_switches:
        got = slot_base(held.get(s, {}), job, slots, s, state.pool)
        if isinstance(got, int):
            bases[s] = got
        else:
            full[s] = got
    return bases, full


def free_cluster(state: ClusterState) -> Cluster:
    """The free hosts as the base scheduler's racks (one slot per host: a host is one worker
    of the aggregation protocol), with the links' Gbps where the topology gives them."""
    topo = state.topology
    busy = state.busy_hosts()
    racks: dict[str, list[str]] = {}
    for h in sorted(topo.hosts, key=natural_key):
        if h not in busy:
            racks.setdefault(topo.host_switch(h)[0], []).append(h)
    ordered = sorted(racks.items(), key=lambda kv: natural_key(kv[0]))
    return Cluster(topo, tuple((s, tuple(hs)) for s, hs in ordered), link_capacity(topo))


def link_capacity(topo: Topology) -> dict[LinkKey, float]:
    """Gbps of every directed link whose Mbps the topology gives (BMv2's often have none)."""
    capacity: dict[LinkKey, float] = {}
    for link in topo.links:
        if link.mbps is not None:
            capacity[(link.a.node, link.b.node)] = link.mbps / 1000.0
            capacity[(link.b.node, link.a.node)] = link.mbps / 1000.0
    return capacity


def placements(state: ClusterState, request: JobRequest, cluster: Cluster,
               settings: ClusterSettings) -> tuple[tuple[str, ...], ...] | str:
    """The candidate host sets (destination first), the base's own pick first; or why
    there are none."""
    busy = state.busy_hosts()
    if request.hosts is not None:
        taken = [h for h in request.hosts if h in busy]
        if taken:
            return f"host {taken[0]} is busy (job {quote(busy[taken[0]])})"
        return (request.hosts,)
    need = request.workers + 1
    if cluster.gpus < need:
        return (f"no free hosts: needs {need} ({request.workers} workers and a "
                f"destination), {cluster.gpus} free")
    job = replace(request.profile, name=request.name, gpus=need, hosts=None)
    planner = settings.planner
    proposal = themis_candidates(cluster, [job], planner.candidates, planner.seed)
    return tuple(p.hosts[request.name] for p in proposal.candidates)


def plan_placement(state: ClusterState, request: JobRequest, hosts: tuple[str, ...], job: int,
                   policy: str, settings: ClusterSettings) -> Admission | str:
    """The job on these hosts under `policy`: its tree, pools, blue switches and shift; or
    the reason this placement cannot be taken (a switch of its tree without room)."""
    topo = state.topology
    workload = Workload(job=job, destination=hosts[0], workers=hosts[1:], slots=request.slots)
    red = plan_job(topo, workload, blue=())
    bases, full = rooms(state, red.tree.ids[1:], job, request.slots)
    if full and not settings.untracked_red:
        return full[min(full, key=red.tree.index.__getitem__)]
    jp = red
    if "soar" in policy:
        jp = plan_job(topo, workload, "soar", request.k, seed=settings.planner.seed,
                      available=bases)
    untracked = tuple(sorted(full, key=natural_key))
    new = Demand(request.name, unit_profile(request.profile, request.values), 0.0,
                 link_messages(topo, jp))
    running = [a.demand(topo) for a in state.running]
    capacity = link_capacity(topo)
    precision = settings.planner.precision_deg
    if "cassini" in policy:
        choice = choose_shift(new, running, capacity, precision_deg=precision)
        shift, shared = choice.shift_ms, choice.shared
    else:
        shift, shared = 0.0, unscored_links(new, running, capacity, precision_deg=precision)
    return Admission(request, job, policy, jp, bases, shift, shared, untracked)


def mean_score(admission: Admission) -> float:
    """CASSINI's rank of a placement: the mean score of its shared links (1: none)."""
    scores = [s.score for s in admission.shared if s.score is not None]
    return sum(scores) / len(scores) if scores else 1.0


def admit(state: ClusterState, request: JobRequest, policy: str = "soar+cassini",
          settings: ClusterSettings | None = None) -> Admission | Wait:
    """The new job's joint plan on the running network, or why it waits.

    Placement: the base's candidates among the free hosts; `base` and `soar` take the
    first (the base's own pick first) whose tree fits the pools, `cassini` and
    `soar+cassini` the one of best mean score on the links shared with the running jobs at
    the new job's best shift (then fewer shared links, then the base's order). Blue
    switches: none (`base`, `cassini`), or SOAR's at most k among the tree's switches with
    room (`soar`, `soar+cassini`). Shift: 0, or the best against the running jobs' fixed
    shifts (`cassini`, `soar+cassini`)."""
    settings = settings or ClusterSettings()
    if policy not in POLICIES:
        raise InputError(f"unknown policy {quote(policy)}; choose from {', '.join(POLICIES)}")
    settings.planner.check()
    request.check(state.topology)
    if request.name in {a.name for a in state.running}:
        raise InputError(f"job {quote(request.name)} is already running")
    candidates = placements(state, request, free_cluster(state), settings)
    if isinstance(candidates, str):
        return Wait(request, policy, candidates)
    job = state.next_job_id()
    admitted: list[Admission] = []
    refused: list[str] = []
    for hosts in candidates:
        got = plan_placement(state, request, hosts, job, policy, settings)
        if isinstance(got, str):
            refused.append(got)
        elif "cassini" not in policy:
            return got
        else:
            admitted.append(got)
    if not admitted:
        more = f" ({len(refused)} placements tried)" if len(refused) > 1 else ""
        return Wait(request, policy, f"no pool room: {refused[0]}{more}")
    order = {id(a): i for i, a in enumerate(admitted)}
    return min(admitted, key=lambda a: (-mean_score(a), len(a.shared), order[id(a)]))
