"""The cluster a scheduler places jobs on: racks of GPU slots, link capacities, and the paths
a job's ring all-reduce takes.

A cluster is a `innet.topology.Topology` whose hosts carry GPUs (`gpus`, default 1);
a job gets one GPU slot per GPU it asks for. A job spanning several hosts runs a ring
all-reduce: host i sends to host i+1 (and the last to the first) at the rate of the job's Up
phase, along the path the switches forward on (`innet.routing`: shortest, equal-cost
choices spread by destination), so the links CASSINI plans for are the ones the data plane
loads. On a leaf-spine, the links shared by two or more jobs are the uplinks and downlinks
of racks that hold pieces of several jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from innet.errors import InputError
from innet.names import natural_key
from innet.routing import Hop, host_path, next_hops
from innet.topology import Topology

LinkKey = tuple[str, str]


def link_name(key: LinkKey) -> str:
    return f"{key[0]}->{key[1]}"





@dataclass(frozen=True)
class Cluster:
    """GPU slots grouped by the switch their host hangs from, and every directed link's Gbps."""

    topology: Topology
    racks: tuple[tuple[str, tuple[str, ...]], ...]  # (switch, one host name per GPU)
    capacity_gbps: Mapping[LinkKey, float]

    @property
    def gpus(self) -> int:
        return sum(len(slots) for _, slots in self.racks)

    def rack_of(self, host: str) -> str:
        return self.topology.host_switch(host)[0]


def cluster_from_topology(topology: Topology) -> Cluster:
    racks: dict[str, list[str]] = {}
    for host in sorted(topology.hosts.values(), key=lambda h: natural_key(h.name)):
        switch = topology.host_switch(host.name)[0]
        racks.setdefault(switch, []).extend([host.name] * host.gpus)
    capacity: dict[LinkKey, float] = {}
    for i, link in enumerate(topology.links):
        if link.mbps is None:
            raise InputError(f"links[{i}] ({link.a.node}-{link.b.node}) has no Mbps: CASSINI "
                             "needs every link's capacity", source=topology.source)
        capacity[(link.a.node, link.b.node)] = link.mbps / 1000.0
        capacity[(link.b.node, link.a.node)] = link.mbps / 1000.0
    ordered = sorted(racks.items(), key=lambda kv: natural_key(kv[0]))
    return Cluster(topology, tuple((s, tuple(h)) for s, h in ordered), capacity)


class Router:
    """Host-to-host paths as the switches forward them (`innet.routing`), cached per
    destination for the whole planning."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.hops: dict[str, dict[str, Hop]] = {}
        self.cache: dict[LinkKey, tuple[str, ...]] = {}

    def path(self, a: str, b: str) -> tuple[str, ...]:
        key = (a, b)
        if key not in self.cache:
            if b not in self.hops:
                self.hops[b] = next_hops(self.topology, b)
            self.cache[key] = host_path(self.topology, a, b, self.hops[b])
        return self.cache[key]


def ring_hops(hosts: Sequence[str]) -> list[LinkKey]:
    """Host pairs of a ring all-reduce; GPUs of one host talk inside it, not on the wire."""
    ring: list[str] = []
    for h in hosts:
        if not ring or ring[-1] != h:
            ring.append(h)
    if len(ring) > 1 and ring[0] == ring[-1]:
        ring.pop()
    if len(ring) < 2:
        return []
    return [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
