"""The three-switch BMv2 tree that the aggregation tests share, built and always torn down.

    h0 - s1 -+- s2 - h1, h2
             +- s3 - h3, h4

h0 is the destination; h1..h4 are workers. Each test module wraps `three_switch_tree` in its
own fixture and keeps its own helpers (the tree tests deploy whole plans, the fault tests
play single packets).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from innet import aggpacket as ap
from innet.testing.bmv2 import BMv2Switch, host_namespaces, in_netns, start_switch, veth_links
from innet.topology import Topology, topology_from_dict

HOSTS = {f"h{i}": (f"10.0.0.{i + 2}", f"08:00:00:00:00:{i + 1:02x}") for i in range(5)}
WORKERS = ["h1", "h2", "h3", "h4"]
EDGE = {"h0": ("s1", 1), "h1": ("s2", 2), "h2": ("s2", 3), "h3": ("s3", 2), "h4": ("s3", 3)}


@dataclass(frozen=True)
class ThreeSwitches:
    topo: Topology
    switches: dict[str, BMv2Switch]
    netns: dict[str, str]  # host -> its network namespace
    rx: socket.socket  # h0's receiver on the aggregation port


def topology() -> Topology:
    return topology_from_dict({
        "name": "three", "switches": {"s1": {}, "s2": {}, "s3": {}},
        "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac) in HOSTS.items()},
        "links": [[h, f"{s}-p{p}"] for h, (s, p) in EDGE.items()]
        + [["s1-p2", "s2-p1"], ["s1-p3", "s3-p1"]],
        "aggregation": {"destination": "h0"}})


@contextlib.contextmanager
def three_switch_tree(run: Path, *, tos: bool = False) -> Iterator[ThreeSwitches]:
    """Hosts in namespaces, veths between the switches, three BMv2 switches on free ports;
    everything is removed on the way out, whatever happened."""
    tag = f"{os.getpid() % 100000}"
    switches: dict[str, BMv2Switch] = {}
    with host_namespaces(HOSTS, tag) as hosts, veth_links(2, tag) as links:
        ports: dict[str, dict[int, str]] = {"s1": {}, "s2": {}, "s3": {}}
        for h, (s, p) in EDGE.items():
            ports[s][p] = hosts[h].switch_intf
        (a12, b12), (a13, b13) = links
        ports["s1"][2], ports["s2"][1], ports["s1"][3], ports["s3"][1] = a12, b12, a13, b13
        try:
            for s in ("s1", "s2", "s3"):
                switches[s] = start_switch(s, run, interfaces=ports[s])
            with in_netns(hosts["h0"].netns):
                rx = ap.receiver_socket(tos=tos)
            with rx:
                yield ThreeSwitches(topology(), switches, {h: hosts[h].netns for h in hosts},
                                    rx)
        finally:
            for sw in switches.values():
                sw.stop()
