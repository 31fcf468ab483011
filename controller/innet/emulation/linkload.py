"""What each link carried during a run, read off the switches' port counters before and after.

A run's link loads are counted by the data plane itself (innet.plan.program's C_PORT_OUT and
C_ECN_MARKED per egress port, C_PORT_IN per ingress port for what a host sends), never by the
agents: the numbers `innet view` draws on a finished run's links are the switches' own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from innet.plan.program import C_ECN_MARKED, C_PORT_IN, C_PORT_OUT
from innet.topology import Topology

# switch -> counter name -> port -> packets
PortCounts = dict[str, dict[str, dict[int, int]]]
PORT_COUNTERS = (C_PORT_OUT, C_PORT_IN, C_ECN_MARKED)


def read_port_counts(session: Callable[[str], Any], switches: Iterable[str]) -> PortCounts:
    """Every port counter of every switch, through `session(switch)` (the controller's
    current session: it changes when a switch reconnects)."""
    return {s: {name: {i: pkts for i, (pkts, _) in session(s).read_counters(name).items()}
                for name in PORT_COUNTERS}
            for s in switches}


def _delta(before: PortCounts, after: PortCounts, switch: str, counter: str, port: int
           ) -> int | None:
    try:
        b, a = before[switch][counter].get(port, 0), after[switch][counter].get(port, 0)
    except KeyError:
        return None
    return a - b if a >= b else None  # a restarted switch counts from zero again


def link_totals(topo: Topology, before: PortCounts, after: PortCounts
                ) -> list[dict[str, Any]]:
    """Every link with the packets and CE marks it carried each way between two readings:
    `{"a", "b", "packets_ab", "packets_ba", "marks_ab", "marks_ba"}` (None where a switch was
    not read or restarted in between; marks 0 from a host, whose sending nothing marks)."""
    ends = topo.counting_ports()
    rows = []
    for link in topo.links:
        a, b = link.a.node, link.b.node
        row: dict[str, Any] = {"a": a, "b": b}
        for suffix, (x, y) in (("ab", (a, b)), ("ba", (b, a))):
            switch, port = ends[(x, y)]
            egress = x in topo.switches
            row[f"packets_{suffix}"] = _delta(before, after, switch,
                                              C_PORT_OUT if egress else C_PORT_IN, port)
            row[f"marks_{suffix}"] = (_delta(before, after, switch, C_ECN_MARKED, port)
                                      if egress else 0)
        rows.append(row)
    return rows
