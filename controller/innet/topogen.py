"""Generators for the shipped topologies: binary tree, k-ary fat-tree, two-tier leaf-spine.

They write the same JSON format people edit by hand (`innet.topology`), so the shipped
files in topologies/ can be regenerated: `innet topo gen bt --depth 4 -o topologies/bt15.json`.
"""

from __future__ import annotations

import json
from typing import Any


def dumps_topology(data: dict[str, Any]) -> str:
    """JSON with one host, switch or link per line: diffable and easy to read."""
    lines = ["{"]
    keys = list(data)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = data[key]
        if isinstance(value, dict) and key in ("hosts", "switches") and value:
            items = [f'    {json.dumps(k)}: {json.dumps(v)}' for k, v in value.items()]
            lines.append(f'  {json.dumps(key)}: {{\n' + ",\n".join(items) + f"\n  }}{comma}")
        elif isinstance(value, list) and value:
            items = [f"    {json.dumps(v)}" for v in value]
            lines.append(f'  {json.dumps(key)}: [\n' + ",\n".join(items) + f"\n  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines)


class _Builder:
    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description
        self.hosts: dict[str, dict[str, Any]] = {}
        self.switches: dict[str, dict[str, Any]] = {}
        self.links: list[list[Any]] = []
        self.next_port: dict[str, int] = {}

    def switch(self, name: str) -> str:
        self.switches[name] = {}
        self.next_port[name] = 1
        return name

    def host(self, name: str, gpus: int = 1) -> str:
        i = len(self.hosts) + 1
        spec: dict[str, Any] = {"ip": f"10.0.{i // 250}.{i % 250 + 1}",
                                "mac": f"08:00:00:00:{i // 256:02x}:{i % 256:02x}"}
        if gpus != 1:
            spec["gpus"] = gpus
        self.hosts[name] = spec
        return name

    def port(self, node: str) -> str:
        if node in self.hosts:
            return node
        p = self.next_port[node]
        self.next_port[node] = p + 1
        return f"{node}-p{p}"

    def link(self, a: str, b: str, delay: str = "0ms", mbps: float | None = None) -> None:
        row: list[Any] = [self.port(a), self.port(b), delay]
        if mbps is not None:
            row.append(mbps)
        self.links.append(row)

    def result(self, **extra: Any) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "hosts": self.hosts,
                "switches": self.switches, "links": self.links, **extra}


def binary_tree_topology(depth: int = 4, hosts_per_leaf: int = 2) -> dict[str, Any]:
    """2^depth - 1 switches (s1 on top, heap numbering), workers on the leaves, h0 above s1.

    h0 is the aggregation destination (a parameter server or reducer).
    """
    n = 2**depth - 1
    b = _Builder(f"bt{n}", f"binary tree of {n} switches, {hosts_per_leaf} workers per leaf, "
                           "destination h0 above the top switch")
    for i in range(1, n + 1):
        b.switch(f"s{i}")
    b.host("h0")
    b.link("h0", "s1")
    for i in range(2, n + 1):
        b.link(f"s{i}", f"s{i // 2}")
    first_leaf = 2 ** (depth - 1)
    w = 1
    for leaf in range(first_leaf, n + 1):
        for _ in range(hosts_per_leaf):
            b.link(b.host(f"h{w}"), f"s{leaf}")
            w += 1
    return b.result(aggregation={"destination": "h0"})


def fat_tree_topology(k: int = 4, mbps: float | None = None) -> dict[str, Any]:
    """The k-ary fat-tree: (k/2)^2 core, k pods of k/2 aggregation and k/2 edge switches.
    `mbps` gives every link a rate (CASSINI's planning and the ns-3 engine need one);
    without it the links have none, as BMv2's emulation wants."""
    if k < 2 or k % 2:
        raise ValueError(f"fat-tree k must be even and >= 2, got {k}")
    half = k // 2
    b = _Builder(f"fattree{k}", f"k={k} fat-tree: {half * half} core, {k * half} aggregation, "
                                f"{k * half} edge switches, {k * half * half} hosts")
    cores = [b.switch(f"c{i + 1}") for i in range(half * half)]
    host_i = 1
    for pod in range(k):
        aggs = [b.switch(f"a{pod + 1}{j + 1}") for j in range(half)]
        edges = [b.switch(f"e{pod + 1}{j + 1}") for j in range(half)]
        for e in edges:
            for _ in range(half):
                b.link(b.host(f"h{host_i}"), e, mbps=mbps)
                host_i += 1
        for e in edges:
            for a in aggs:
                b.link(e, a, mbps=mbps)
        for j, a in enumerate(aggs):
            for c in range(half):
                b.link(a, cores[j * half + c], mbps=mbps)
    return b.result(aggregation={"destination": "h1"})


def leaf_spine_topology(leaves: int = 6, hosts_per_leaf: int = 4, spines: int = 2,
                        host_mbps: float = 50_000.0) -> dict[str, Any]:
    """Two tiers: every leaf to every spine. With 4 hosts and 2 spines per leaf at equal link
    speed, each leaf has half the capacity up that it has down: 2:1 oversubscribed, like
    CASSINI's testbed (24 servers)."""
    b = _Builder(f"leafspine{leaves * hosts_per_leaf}",
                 f"two-tier leaf-spine: {leaves} leaves x {hosts_per_leaf} servers, {spines} "
                 f"spines, all links {host_mbps:g} Mbps "
                 f"({hosts_per_leaf / spines:g}:1 oversubscribed)")
    spine_names = [b.switch(f"sp{i + 1}") for i in range(spines)]
    leaf_names = [b.switch(f"l{i + 1}") for i in range(leaves)]
    h = 1
    for leaf in leaf_names:
        for _ in range(hosts_per_leaf):
            b.link(b.host(f"h{h}"), leaf, mbps=host_mbps)
            h += 1
    for leaf in leaf_names:
        for sp in spine_names:
            b.link(leaf, sp, mbps=host_mbps)
    return b.result()
