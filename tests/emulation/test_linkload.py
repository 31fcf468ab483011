"""A run's link loads from two readings of the switches' port counters (pure)."""

from __future__ import annotations

from innet.emulation.linkload import link_totals
from innet.plan.program import C_ECN_MARKED, C_PORT_IN, C_PORT_OUT
from innet.topology import topology_from_dict

# h1 - s1 (p1) ; s1 (p2) - s2 (p1) ; s2 (p2) - h2
TOPO = topology_from_dict({
    "hosts": {"h1": {"ip": "10.0.0.2", "mac": "08:00:00:00:00:01"},
              "h2": {"ip": "10.0.0.3", "mac": "08:00:00:00:00:02"}},
    "switches": {"s1": {}, "s2": {}},
    "links": [["h1", "s1-p1"], ["s1-p2", "s2-p1"], ["s2-p2", "h2"]]})


def counts(s1: dict[str, dict[int, int]], s2: dict[str, dict[int, int]]
           ) -> dict[str, dict[str, dict[int, int]]]:
    empty = {C_PORT_OUT: {}, C_PORT_IN: {}, C_ECN_MARKED: {}}
    return {"s1": {**empty, **s1}, "s2": {**empty, **s2}}


def test_each_direction_is_counted_where_it_leaves_a_switch_or_enters_one_from_a_host() -> None:
    before = counts({C_PORT_IN: {1: 100}, C_PORT_OUT: {2: 50, 1: 7}},
                    {C_PORT_OUT: {2: 40, 1: 3}, C_ECN_MARKED: {1: 2}})
    after = counts({C_PORT_IN: {1: 400}, C_PORT_OUT: {2: 340, 1: 17}, C_ECN_MARKED: {2: 9}},
                   {C_PORT_OUT: {2: 330, 1: 13}, C_PORT_IN: {2: 1000}, C_ECN_MARKED: {1: 5}})
    rows = {(r["a"], r["b"]): r for r in link_totals(TOPO, before, after)}
    # h1 -> s1 from s1's ingress (a host counts nothing), s1 -> h1 from s1's egress port 1
    assert rows[("h1", "s1")] == {"a": "h1", "b": "s1", "packets_ab": 300, "packets_ba": 10,
                                  "marks_ab": 0, "marks_ba": 0}
    assert rows[("s1", "s2")] == {"a": "s1", "b": "s2", "packets_ab": 290, "packets_ba": 10,
                                  "marks_ab": 9, "marks_ba": 3}
    # s2 -> h2 leaves s2's port 2; h2 -> s2 enters s2's port 2 (counted from 0: never read)
    assert rows[("s2", "h2")]["packets_ab"] == 290
    assert rows[("s2", "h2")]["packets_ba"] == 1000


def test_a_switch_that_counts_backwards_or_was_not_read_gives_no_number() -> None:
    before = counts({C_PORT_OUT: {2: 500}}, {})
    after = counts({C_PORT_OUT: {2: 20}}, {})  # s1 restarted: its counters began again
    del after["s2"]
    rows = {(r["a"], r["b"]): r for r in link_totals(TOPO, before, after)}
    assert rows[("s1", "s2")]["packets_ab"] is None
    assert rows[("s1", "s2")]["packets_ba"] is None  # s2 not read afterwards
    assert rows[("h1", "s1")]["packets_ab"] == 0
