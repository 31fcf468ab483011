"""The live view's state, built from a network that is up over a stand-in controller: the
levels that lay the topology out, link rates from two counter samples, blue switches per job
before and after a live deploy, admitted jobs, and the log of what changed."""

from __future__ import annotations

from typing import Any

from view_fakes import BT15, ROOT, WORKLOAD, FakeControlled, fake_up

from innet.emulation.control import LiveNetwork
from innet.p4rt.controller import DOWN
from innet.plan.intent import IntentOptions
from innet.plan.program import C_ECN_MARKED, C_PORT_IN, C_PORT_OUT
from innet.topology import load_topology
from innet.view.state import PortSample, Watcher, levels, link_rates, read_switch


def fake(live: LiveNetwork) -> FakeControlled:
    assert isinstance(live.cn, FakeControlled)
    return live.cn


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in rows}


def test_levels_count_hops_from_the_hosts() -> None:
    topo = load_topology(BT15)
    level = levels(topo)
    assert {level[h] for h in topo.hosts if h != "h0"} == {0}
    assert level["s8"] == 1 and level["s4"] == 2 and level["s2"] == 3 and level["s1"] == 4
    # h0, the destination, hangs off the root: drawn above it, not counted as a source
    assert topo.destination == "h0" and level["h0"] == 5
    leafspine = load_topology(ROOT / "topologies" / "leafspine24.json")
    assert set(levels(leafspine).values()) == {0, 1, 2}


def test_link_rates_are_counter_differences_per_second() -> None:
    topo = load_topology(BT15)
    s4_s8 = next(link for link in topo.links if {link.a.node, link.b.node} == {"s4", "s8"})
    h1 = next(link for link in topo.links if "h1" in (link.a.node, link.b.node))
    p4, p8 = s4_s8.end("s4").port, s4_s8.end("s8").port
    ph1 = h1.end(h1.other("h1").node).port
    before = PortSample(10.0, {"s4": {C_PORT_OUT: {p4: 100}, C_ECN_MARKED: {p4: 0}},
                               "s8": {C_PORT_OUT: {p8: 50}, C_ECN_MARKED: {p8: 1},
                                      C_PORT_IN: {ph1: 7}}})
    after = PortSample(12.0, {"s4": {C_PORT_OUT: {p4: 300}, C_ECN_MARKED: {p4: 10}},
                              "s8": {C_PORT_OUT: {p8: 40}, C_ECN_MARKED: {p8: 1},
                                     C_PORT_IN: {ph1: 27}}})
    rows = {(r["a"], r["b"]): r for r in link_rates(topo, before, after)}
    row = rows.get(("s4", "s8")) or rows[("s8", "s4")]
    forward = "ab" if row["a"] == "s4" else "ba"
    back = "ba" if forward == "ab" else "ab"
    assert row[f"pps_{forward}"] == 100.0 and row[f"marks_{forward}"] == 5.0
    assert row[f"pps_{back}"] is None  # s8 counts less than before: it restarted
    host_row = next(r for r in rows.values() if "h1" in (r["a"], r["b"]))
    up = "ab" if host_row["a"] == "h1" else "ba"
    assert host_row[f"pps_{up}"] == 10.0 and host_row[f"marks_{up}"] == 0.0  # s8's ingress
    assert all(r["pps_ab"] is None for r in link_rates(topo, None, after))


def test_the_state_shows_blue_switches_and_follows_a_live_deploy() -> None:
    live = fake_up(options=IntentOptions(workloads=(WORKLOAD,), k=4))
    watcher = Watcher(live)
    first = watcher.sample()
    assert len(first["switches"]) == 15 and len(first["hosts"]) == 17
    blue = {s["name"]: s["aggregates_for"] for s in first["switches"] if s["aggregates_for"]}
    assert blue == {s: [1] for s in ("s4", "s5", "s6", "s7")}
    assert by_name(first["hosts"])["h1"]["switch"] == "s8"
    assert all(r["pps_ab"] is None for r in first["links"])  # one sample: no rate yet
    (plan,) = first["plan"]
    assert plan["destination"] == "h0" and len(plan["workers"]) == 16 and plan["k"] == 4
    assert ["s8", "s4"] in plan["tree"] and sorted(plan["blue"]) == ["s4", "s5", "s6", "s7"]
    assert "watching" in first["events"][0]["text"]
    with live.lock:
        live.deploy(IntentOptions(workloads=(WORKLOAD,), k=2))
    fake(live).states["s9"] = DOWN
    second = watcher.sample()
    blue = {s["name"] for s in second["switches"] if s["aggregates_for"]}
    assert blue == {"s2", "s3"}
    assert by_name(second["switches"])["s9"]["state"] == DOWN
    texts = [e["text"] for e in second["events"]]
    assert "job 1: blue s2, s3" in texts and "switch s9: primary -> down" in texts
    # the links of s9 have no rate (it was not read); the others have 0 pps
    rates = [r for r in second["links"] if "s9" not in (r["a"], r["b"])]
    assert all(r["pps_ab"] == 0.0 for r in rates)
    assert all(r["pps_ab"] is None for r in second["links"] if r["a"] == "s9" or r["b"] == "s9")


def test_admitted_jobs_are_listed_with_their_figures() -> None:
    live = fake_up()
    with live.lock:
        live.handle({"op": "job_submit",
                     "job": {"name": "a", "model": "VGG19", "workers": 6, "iterations": 20}})
    state = Watcher(live).sample()
    (row,) = state["jobs"]
    assert row["name"] == "a" and row["state"] == "running" and row["iterations_done"] == 3
    (plan,) = state["plan"]
    assert plan["job"] == row["job"] and plan["blue"] == row["blue"]
    blue = {s["name"] for s in state["switches"] if row["job"] in s["aggregates_for"]}
    assert blue == set(row["blue"])


def test_a_switch_in_words() -> None:
    live = fake_up(options=IntentOptions(workloads=(WORKLOAD,), k=4))
    s4 = read_switch(live, "s4")
    assert s4 is not None and s4["state"] == "primary" and s4["entries"]
    assert any(line.startswith("port_out") for line in s4["counters"])
    assert read_switch(live, "s99") is None
    fake(live).states["s4"] = DOWN
    down = read_switch(live, "s4")
    assert down is not None and down["state"] == DOWN and "no session" in down["read_error"]
