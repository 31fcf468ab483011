"""What a job's aggregation puts on each link, and the new job's time shift against the others.

CASSINI's ring model says a job's every hop carries its whole gradient. With in-network
aggregation that is not so: per chunk, a worker's access link carries one contribution, the
uplink of switch s carries msgs(s) messages (one aggregate above a blue switch, one per
worker below a red one: `JobPlan.msgs`), and every link of the tree carries one RESULT back
down (the destination sends it once, the switches multicast it). So a link's demand is
(messages per chunk on it) x (the chunk's bytes on the wire) x (chunks per iteration), spread
over the profile's communication phases in their own proportions (`unit_profile` carries one
message per chunk; the messages are the weight geometry's scores multiply it by).

The shift: the running jobs keep theirs (moving them would stall their streams); the new
job's is searched on a grid of its own iteration (precision degrees a step) for the best mean
compatibility (`geometry.score_at`) over the links it shares with them, in the middle of the
plateau of equally good shifts, as CASSINI's own search does. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from innet.aggpacket import PAYLOAD_BYTES, VECTOR_LEN
from innet.cassini.model.geometry import DEFAULT_PRECISION_DEG, check_precision, score_at
from innet.cassini.model.profiles import JobProfile, Phase
from innet.cassini.placement.cluster import LinkKey, link_name
from innet.errors import InputError
from innet.plan.intent import JobPlan
from innet.topology import Topology

# Ethernet (14) + IPv4 (20) + UDP (8) around the aggregation payload: one chunk's message
WIRE_OVERHEAD_BYTES = 42
CHUNK_WIRE_BYTES = PAYLOAD_BYTES + WIRE_OVERHEAD_BYTES

LinkMessages = Mapping[LinkKey, int]  # directed link -> messages per chunk


def link_messages(topo: Topology, jp: JobPlan) -> dict[LinkKey, int]:
    """Messages per chunk on every directed link a job's aggregation uses.

    Up: each worker's access link 1; each tree switch's uplink msgs(s) (its parent in the
    tree, the destination host above the top switch). Down: 1 on every one of those links
    the other way (the RESULT, multicast by the switches)."""
    tree = jp.tree
    out: dict[LinkKey, int] = {}
    for v in range(1, tree.n):
        s, parent = tree.ids[v], tree.ids[int(tree.parent[v])]
        out[(s, parent)] = jp.msgs[s]
        out[(parent, s)] = 1
    for w in jp.workload.workers:
        edge = topo.host_switch(w)[0]
        out[(w, edge)] = 1
        out[(edge, w)] = 1
    return out


def chunks_per_iteration(values: int) -> int:
    """Chunks of one iteration's gradient: VECTOR_LEN values a packet."""
    if values < 1:
        raise InputError(f"gradient values per iteration must be >= 1, got {values}")
    return math.ceil(values / VECTOR_LEN)


def unit_profile(profile: JobProfile, values: int) -> JobProfile:
    """The profile's phases rescaled to carry one message per chunk of `values` values per
    iteration: a link's demand is this times the messages per chunk on it."""
    mbit = chunks_per_iteration(values) * CHUNK_WIRE_BYTES * 8 / 1e6
    scale = mbit / profile.volume_mbit
    phases = tuple(Phase(p.start_ms, p.duration_ms, p.gbps * scale) for p in profile.phases)
    return replace(profile, phases=phases)


@dataclass(frozen=True)
class Demand:
    """One job as the shift search sees it: its name, unit profile, shift and messages."""

    name: str
    unit: JobProfile
    shift_ms: float
    messages: LinkMessages


@dataclass(frozen=True)
class SharedUse:
    """A directed link the new job shares: with whom, its Gbps, and its score at the shifts
    chosen (None when the link's capacity is unknown, so nothing could be scored)."""

    link: str
    jobs: tuple[str, ...]
    capacity_gbps: float | None
    score: float | None


@dataclass(frozen=True)
class ShiftChoice:
    """The new job's shift, the links it shares, and their mean score at it and at 0."""

    shift_ms: float
    shared: tuple[SharedUse, ...]
    score: float
    score_unshifted: float


def shared_links(new: Demand, running: Sequence[Demand]
                 ) -> list[tuple[LinkKey, tuple[Demand, ...]]]:
    """Links carrying the new job and at least one running job: (link, running jobs on it),
    in link order."""
    out = []
    for key in sorted(new.messages):
        if new.messages[key] <= 0:
            continue
        others = tuple(d for d in running if d.messages.get(key, 0) > 0)
        if others:
            out.append((key, others))
    return out


def link_score(key: LinkKey, members: Sequence[Demand], new_shift_ms: float,
               new: Demand, capacity_gbps: float, precision_deg: float) -> float:
    """Compatibility of one link with the running jobs at their shifts, the new one at
    `new_shift_ms`; each job weighs its messages per chunk on the link."""
    jobs = [*(d.unit for d in members), new.unit]
    shifts = [*(d.shift_ms for d in members), new_shift_ms]
    weights = [float(d.messages[key]) for d in (*members, new)]
    return score_at(jobs, shifts, capacity_gbps, weights=weights, precision_deg=precision_deg)


def capacity_of(key: LinkKey, capacity_gbps: Mapping[LinkKey, float]) -> float:
    if key not in capacity_gbps:
        raise InputError(f"link {link_name(key)} has no Mbps: the shift needs every shared "
                         "link's capacity")
    return capacity_gbps[key]


def shift_grid(iteration_ms: float, precision_deg: float) -> list[float]:
    """Shifts of the new job to try: [0, T) in steps of precision degrees of its circle."""
    steps = max(1, round(360.0 / check_precision(precision_deg)))
    return [i * iteration_ms / steps for i in range(steps)]


def most_robust(good: Sequence[bool]) -> int:
    """The index of a cyclic mask furthest from any index outside it (the first of equals;
    0 when every index is in it): a shift in the middle of its plateau of equally good ones
    keeps its score longest while the jobs drift."""
    n = len(good)
    if all(good):
        return 0
    bad = [i for i in range(n) if not good[i]]

    def room(i: int) -> int:
        return min(min((i - j) % n, (j - i) % n) for j in bad)

    return max((i for i in range(n) if good[i]), key=lambda i: (room(i), -i))


def choose_shift(new: Demand, running: Sequence[Demand],
                 capacity_gbps: Mapping[LinkKey, float], *,
                 precision_deg: float = DEFAULT_PRECISION_DEG) -> ShiftChoice:
    """The new job's shift of best mean score over its shared links, the one deepest inside
    its plateau of equals (0 when nothing is shared or no shift does better than another);
    the running jobs keep theirs."""
    links = shared_links(new, running)
    if not links:
        return ShiftChoice(0.0, (), 1.0, 1.0)
    caps = [capacity_of(key, capacity_gbps) for key, _ in links]
    grid = shift_grid(new.unit.iteration_ms, precision_deg)
    table = [[link_score(key, members, shift, new, cap, precision_deg)
              for (key, members), cap in zip(links, caps, strict=True)] for shift in grid]
    means = [sum(row) / len(row) for row in table]
    top = max(means)
    pick = most_robust([m >= top - 1e-9 for m in means])
    shared = tuple(SharedUse(link_name(key), tuple(d.name for d in members), cap, score)
                   for (key, members), cap, score in zip(links, caps, table[pick], strict=True))
    return ShiftChoice(grid[pick], shared, means[pick], means[0])


def unscored_links(new: Demand, running: Sequence[Demand],
                   capacity_gbps: Mapping[LinkKey, float], *, shift_ms: float = 0.0,
                   precision_deg: float = DEFAULT_PRECISION_DEG) -> tuple[SharedUse, ...]:
    """The shared links at a given shift (no search): scored where the capacity is known."""
    out = []
    for key, members in shared_links(new, running):
        cap = capacity_gbps.get(key)
        score = (None if cap is None else
                 link_score(key, members, shift_ms, new, cap, precision_deg))
        out.append(SharedUse(link_name(key), tuple(d.name for d in members), cap, score))
    return tuple(out)
