"""Routing: the one path every part of innet assumes a packet takes.

Shortest path by hop count between switches. Where several next hops are equally short (the
spines of a leaf-spine, the cores of a fat-tree), the choice is spread by destination: the
candidates, in natural name order (s2 before s10) and then by port, are indexed by a CRC-32
of the destination host's name, as a per-destination ECMP hash would. It is deterministic,
it uses every spine, and it stays destination-based. The controller
installs these routes, SOAR's tree of a workload is these routes toward its destination, and
CASSINI counts which jobs share a link along these same paths, so the plans are about the
network the switches actually forward on. Destination-based: every switch has one next hop
per host, so the paths toward a host form a tree.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from innet.errors import InputError
from innet.names import natural_key
from innet.topology import Topology


@dataclass(frozen=True, slots=True)
class Hop:
    """How switch `switch` reaches a host: out of `port`, to `neighbour` (a switch or the host)."""

    switch: str
    port: int
    neighbour: str
    rate: float


def _switch_links(topo: Topology) -> dict[str, list[tuple[int, str, float]]]:
    """Per switch: (port, far switch, rate) of its switch-to-switch links."""
    out: dict[str, list[tuple[int, str, float]]] = {s: [] for s in topo.switches}
    for link in topo.links:
        a, b = link.a, link.b
        if a.node in topo.switches and b.node in topo.switches:
            assert a.port is not None and b.port is not None
            out[a.node].append((a.port, b.node, link.rate))
            out[b.node].append((b.port, a.node, link.rate))
    return out


def next_hops(topo: Topology, host: str) -> dict[str, Hop]:
    """For every switch that can reach `host`, its next hop toward it."""
    links = _switch_links(topo)
    edge, edge_port = topo.host_switch(host)
    host_rate = next(link.rate for link, far in topo.neighbours(host) if far.node == edge)
    dist = {edge: 0}
    frontier = [edge]
    while frontier:
        nxt: list[str] = []
        for s in frontier:
            for _, far, _ in links[s]:
                if far not in dist:
                    dist[far] = dist[s] + 1
                    nxt.append(far)
        frontier = nxt
    hops = {edge: Hop(edge, edge_port, host, host_rate)}
    for s, d in dist.items():
        if s == edge:
            continue
        closer = sorted(((p, f, r) for p, f, r in links[s] if dist.get(f) == d - 1),
                        key=lambda c: (natural_key(c[1]), c[0]))
        port, far, rate = closer[zlib.crc32(host.encode()) % len(closer)]
        hops[s] = Hop(s, port, far, rate)
    return hops


def host_path(topo: Topology, src: str, dst: str,
              hops: dict[str, Hop] | None = None) -> tuple[str, ...]:
    """The nodes a packet from host `src` to host `dst` crosses, both hosts included.

    `hops` is `next_hops(topo, dst)` when the caller already has it (planners ask for many
    paths toward the same host).
    """
    if src == dst:
        return (src,)
    if hops is None:
        hops = next_hops(topo, dst)
    switch, _ = topo.host_switch(src)
    path = [src, switch]
    while path[-1] != dst:
        hop = hops.get(path[-1])
        if hop is None:
            raise InputError(f"hosts {src!r} and {dst!r} are not connected", source=topo.source)
        path.append(hop.neighbour)
    return tuple(path)
