"""Intent: workloads, routing, SOAR trees and per-switch entries, all pure and checked."""

from __future__ import annotations

import json
import random
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from innet import routing
from innet.aggpacket import DEFAULT_JOB_SLOTS, SLOTS
from innet.errors import InputError
from innet.p4rt import entities as en
from innet.plan import intent as it
from innet.plan import program as pg
from innet.soar.baselines import STRATEGIES
from innet.topology import Topology, load_topology, topology_from_dict

ROOT = Path(__file__).resolve().parents[2]
BT15 = load_topology(ROOT / "topologies" / "bt15.json")
FAT = load_topology(ROOT / "topologies" / "fattree4.json")
LEAFSPINE = load_topology(ROOT / "topologies" / "leafspine24.json")


def wl(topo: Topology, workers: list[str], job: int = 1, **extra: Any) -> it.Workload:
    return it.workload_from_dict({"job": job, "workers": workers, **extra}, topo)


def all_workers(topo: Topology) -> list[str]:
    return [h for h in topo.hosts if h != topo.destination]


# ---------------------------------------------------------------------------------------------
# Workload files


def test_shipped_example_workloads_load(tmp_path: Path) -> None:
    for path in sorted((ROOT / "examples").glob("workload-*.json")):
        w = it.load_workload(path, BT15)
        assert w.destination == "h0" and w.workers


@pytest.mark.parametrize("data, message", [
    ([], "JSON object"),
    ({"job": 1, "workers": ["h1"], "extra": 1}, "unknown field"),
    ({"job": -1, "workers": ["h1"]}, "job must be"),
    ({"job": 70000, "workers": ["h1"]}, "job must be"),
    ({"job": True, "workers": ["h1"]}, "job must be"),
    ({"job": 1, "workers": []}, "non-empty"),
    ({"job": 1, "workers": ["h1", "h99"]}, "unknown host 'h99'"),
    ({"job": 1, "workers": ["h1", "h1"]}, "listed twice"),
    ({"job": 1, "workers": ["h0", "h1"]}, "'h0' is the destination"),
    ({"job": 1, "workers": ["h1"], "destination": "s1"}, "unknown host 's1'"),
    ({"job": 1, "workers": ["h1"], "vector_len": 33}, "vector_len"),
])
def test_bad_workloads_name_the_problem_and_the_file(tmp_path: Path, data: Any,
                                                     message: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as exc:
        it.load_workload(path, BT15)
    assert str(path) in str(exc.value)


def test_workload_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        it.load_workload(tmp_path / "missing.json", BT15)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        it.load_workload(bad, BT15)


def test_destination_defaults_to_the_topology_and_is_required_without() -> None:
    assert wl(BT15, ["h1"]).destination == "h0"
    data = BT15.to_dict()
    del data["aggregation"]
    topo = topology_from_dict(data)
    with pytest.raises(InputError, match="no destination"):
        wl(topo, ["h1"])
    assert wl(topo, ["h1"], destination="h2").destination == "h2"


def test_at_most_32_workers() -> None:
    data: dict[str, Any] = {"name": "star", "hosts": {}, "switches": {"s1": {}}, "links": []}
    for i in range(34):
        data["hosts"][f"h{i}"] = {"ip": f"10.0.1.{i + 1}", "mac": f"08:00:00:00:01:{i:02x}"}
        data["links"].append([f"h{i}", f"s1-p{i + 1}"])
    topo = topology_from_dict(data)
    assert len(wl(topo, [f"h{i}" for i in range(1, 33)], destination="h0").workers) == 32
    with pytest.raises(InputError, match="at most 32"):
        wl(topo, [f"h{i}" for i in range(1, 34)], destination="h0")


# ---------------------------------------------------------------------------------------------
# Routing


def _bfs_dist(topo: Topology, start: str) -> dict[str, int]:
    links = {s: [f for _, f in topo.neighbours(s) if f.node in topo.switches]
             for s in topo.switches}
    dist = {start: 0}
    q = deque([start])
    while q:
        s = q.popleft()
        for far in links[s]:
            if far.node not in dist:
                dist[far.node] = dist[s] + 1
                q.append(far.node)
    return dist


@pytest.mark.parametrize("topo", [BT15, FAT, LEAFSPINE], ids=lambda t: t.name)
def test_routes_are_shortest_and_lead_to_the_host(topo: Topology) -> None:
    table = it.routes(topo)
    port_to = {(s, e.port): far.node for s in topo.switches
               for link, far in topo.neighbours(s) for e in [link.end(s)]}
    for h, host in topo.hosts.items():
        edge, _ = topo.host_switch(h)
        dist = _bfs_dist(topo, edge)
        for s in topo.switches:
            route = next(r for r in table[s] if r.host == h)
            assert (route.ip, route.prefix_len, route.mac) == (host.ip, 32, host.mac)
            node, hops = s, 0
            while node != h:  # follow the routes hop by hop
                r = next(r for r in table[node] if r.host == h)
                node = port_to[(node, r.port)]
                hops += 1
                assert hops <= len(topo.switches) + 1, "routing loop"
            assert hops == dist[s] + 1  # shortest: switch hops plus the host link


def test_ties_go_to_the_first_name_in_natural_order_then_the_lowest_port() -> None:
    topo = topology_from_dict({
        "hosts": {"h0": {"ip": "10.0.0.1", "mac": "08:00:00:00:00:01"},
                  "h1": {"ip": "10.0.0.2", "mac": "08:00:00:00:00:02"}},
        "switches": {"s1": {}, "s10": {}, "s9": {}, "s4": {}},
        "links": [["h0", "s1-p1"], ["s1-p2", "s10-p1"], ["s1-p3", "s9-p1"],
                  ["s10-p2", "s4-p1"], ["s9-p2", "s4-p2"], ["s9-p3", "s4-p5"],
                  ["s9-p4", "s4-p3"], ["h1", "s4-p4"]]})
    hops = routing.next_hops(topo, "h0")
    assert hops["s4"].neighbour == "s9"  # s9 < s10 naturally, though "s10" < "s9" as text
    assert hops["s4"].port == 2          # of the three links s4-s9, the lowest port
    assert (hops["s1"].neighbour, hops["s1"].port) == ("h0", 1)
    w = wl(topo, ["h1"], destination="h0")
    tree, _ = it.aggregation_tree(topo, w)
    assert tree.ids[tree.parent[tree.index["s4"]]] == "s9"
    assert "s10" not in tree.index  # not on any worker's path


# ---------------------------------------------------------------------------------------------
# SOAR trees and expected contributions


def test_bt15_tree_is_the_routing_tree_toward_h0() -> None:
    tree, at = it.aggregation_tree(BT15, wl(BT15, all_workers(BT15)))
    assert tree.root == "h0" and tree.n == 16
    parent = {tree.ids[v]: tree.ids[tree.parent[v]] for v in range(1, tree.n)}
    assert parent["s1"] == "h0" and parent["s2"] == parent["s3"] == "s1"
    assert parent["s8"] == "s4" and parent["s15"] == "s7"
    loads = {tree.ids[v]: int(tree.load[v]) for v in range(tree.n)}
    assert all(loads[f"s{i}"] == 2 for i in range(8, 16))
    assert all(loads[f"s{i}"] == 0 for i in range(1, 8))
    assert at["s8"] == ("h1", "h2")


def test_uplink_rates_come_from_the_links() -> None:
    data = BT15.to_dict()
    data["links"] = [{"a": ln[0], "b": ln[1], "rate": 4} if ln[:2] == ["s2-p1", "s1-p2"]
                     else ln for ln in data["links"]]
    topo = topology_from_dict(data)
    tree, _ = it.aggregation_tree(topo, wl(topo, all_workers(topo)))
    assert tree.rate[tree.index["s2"]] == 4.0 and tree.rate[tree.index["s3"]] == 1.0


def _simulate(jp: it.JobPlan, topo: Topology) -> dict[str, list[int]]:
    """Independently of SOAR's formulas: send each worker's packet up its route; a blue switch
    absorbs what reaches it and, once everything from below is in, sends one packet with the
    OR of the bitmaps. Returns, per blue switch, the bitmaps of the packets that reach it."""
    hops = routing.next_hops(topo, jp.workload.destination)
    blue = set(jp.blue)
    arrived: dict[str, list[int]] = {b: [] for b in blue}

    def climb(node: str, bitmap: int) -> None:
        while node != jp.workload.destination:
            if node in blue:
                arrived[node].append(bitmap)
                return
            node = hops[node].neighbour

    # deepest blue switches first, so a blue switch's inputs are complete when it emits
    for w in jp.workload.workers:
        climb(topo.host_switch(w)[0], jp.workload.bit(w))
    for b in sorted(blue, key=lambda s: -int(jp.tree.depth[jp.tree.index[s]])):
        if arrived[b]:
            merged = 0
            for m in arrived[b]:
                merged |= m
            climb(hops[b].neighbour, merged)
    return arrived


@pytest.mark.parametrize("topo", [BT15, FAT, LEAFSPINE], ids=lambda t: t.name)
def test_expected_bitmaps_and_fan_in_match_a_packet_simulation(topo: Topology) -> None:
    rng = random.Random(7)
    hosts = sorted(topo.hosts)
    for trial in range(12):
        dest = rng.choice(hosts)
        others = [h for h in hosts if h != dest]
        workers = rng.sample(others, rng.randint(1, min(20, len(others))))
        w = wl(topo, workers, job=trial + 1, destination=dest)
        strategy = rng.choice([s for s in STRATEGIES if s != "all-red"])
        jp = it.plan_job(topo, w, strategy, rng.randint(0, 6), seed=trial)
        intent = it.network_intent(topo, [jp])
        arrived = _simulate(jp, topo)
        roles = {s: si.aggregations for s, si in intent.switches.items()}
        for s, rs in roles.items():
            if s not in jp.tree.index:
                assert rs == (), (s, jp.blue)
                continue
            (role,) = rs  # every switch of the tree counts first transmissions
            below = [x for x in w.workers if s in routing.host_path(topo, x, dest)]
            if s not in jp.blue:
                assert not role.blue
                assert role.expected == sum(w.bit(x) for x in below)
                assert role.workers == tuple(below)
                continue
            assert role.blue and arrived[s]
            merged = 0
            for m in arrived[s]:
                assert not merged & m, "a contributor reached a blue switch twice"
                merged |= m
            assert role.expected == merged
            assert role.fan_in == len(arrived[s])  # L(v) + sum of msgs(c)
            assert role.workers == tuple(x for x in w.workers if merged & w.bit(x))


def test_the_tree_holds_only_switches_on_worker_paths_and_plans_stay_on_it() -> None:
    w = wl(BT15, ["h1", "h2"])
    jp = it.plan_job(BT15, w, blue=["s8"])
    assert set(jp.tree.ids) == {"h0", "s1", "s2", "s4", "s8"}
    assert it.network_intent(BT15, [jp]).switches["s8"].aggregations[0].expected == 0b11
    with pytest.raises(InputError, match="'s3' is not on job 1's tree"):
        it.plan_job(BT15, w, blue=["s3"])
    with pytest.raises(InputError, match="unknown strategy"):
        it.plan_job(BT15, w, "nope", 2)


# ---------------------------------------------------------------------------------------------
# Network intent and entries


def test_soar_on_bt15_with_k4_aggregates_at_the_four_middle_switches() -> None:
    intent = it.derive(BT15, [wl(BT15, all_workers(BT15))], "soar", 4)
    (jp,) = intent.jobs
    assert jp.blue == ("s4", "s5", "s6", "s7")
    s4 = intent.switches["s4"].aggregations[0]
    assert (s4.job, s4.expected, s4.slot_base, s4.fan_in) == (1, 0b1111, 0, 4)
    assert jp.msgs["s1"] == 4 and jp.msgs["s4"] == 1 and jp.msgs["s8"] == 2


def test_entries_of_a_switch() -> None:
    intent = it.derive(BT15, [wl(BT15, all_workers(BT15))], "soar", 4, ecn_threshold=30)
    entries = intent.entries()["s4"]
    routes = [e for e in entries if e.table == pg.T_ROUTES and e.action == pg.A_FORWARD]
    assert len(routes) == len(BT15.hosts)
    # the job's results: one route to its group address, copied toward s8 (h1, h2: port 2)
    # and s9 (h3, h4: port 3), never back up toward the destination (port 1)
    results = [e for e in entries if e.table == pg.T_ROUTES and e.action == pg.A_MULTICAST]
    assert results == [en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 0xEF010001, 32),),
                                pg.A_MULTICAST, (("group", 1),))]
    assert intent.replication()["s4"] == (en.MulticastGroup(1, (en.Replica(2),
                                                                en.Replica(3))),)
    # the root copies to both halves of the tree; a leaf to its two workers' ports
    assert intent.replication()["s1"] == (en.MulticastGroup(1, (en.Replica(2),
                                                                en.Replica(3))),)
    assert [r.port for r in intent.replication()["s8"][0].replicas] == [2, 3]
    h1 = next(e for e in routes if e.match[0].value == 0x0A000003)
    assert h1.match == (en.Match("dst_addr", 0x0A000003, 32),)
    assert h1.params == (("dst_mac", 0x080000000002), ("port", 2))
    agg = [e for e in entries if e.table == pg.T_AGG]
    assert agg == [en.Entry(pg.T_AGG, (en.Match("job", 1),), pg.A_AGGREGATE,
                            (("expected", 0xF), ("slot_base", 0), ("slots", 16)))]
    assert entries[-2] == en.Entry(pg.T_ECN, (), pg.A_ECN_ON, (("threshold", 30),),
                                   default=True)
    assert entries[-1] == en.Entry(pg.T_FAULT, (), pg.A_NO_FAULT, (), default=True)
    assert it.derive(BT15, [wl(BT15, ["h1"])], ecn_threshold=None).entries()["s1"][-2] \
        == en.Entry(pg.T_ECN, (), pg.A_ECN_OFF, (), default=True)


def test_several_jobs_get_their_own_slots() -> None:
    jobs = [it.plan_job(BT15, wl(BT15, ["h1", "h2", "h3"], job=j), blue=["s4"])
            for j in (9, 3, 5)]
    intent = it.network_intent(BT15, jobs)
    roles = intent.switches["s4"].aggregations
    n = DEFAULT_JOB_SLOTS
    assert [(r.job, r.slot_base, r.slots) for r in roles] == [(3, 0, n), (5, n, n),
                                                              (9, 2 * n, n)]
    with pytest.raises(InputError, match="job 9 appears twice"):
        it.network_intent(BT15, [*jobs, jobs[0]])
    many = [it.plan_job(BT15, wl(BT15, ["h1"], job=j), blue=["s4"])
            for j in range(SLOTS // n + 1)]
    with pytest.raises(InputError, match=r"switch s1: job 16 needs 16 slots but the pool of "
                                         r"256 has 0 free"):
        it.network_intent(BT15, many)
    with pytest.raises(InputError, match="ECN threshold"):
        it.network_intent(BT15, jobs[:1], ecn_threshold=1 << 19)
    with pytest.raises(InputError, match="drop probability"):
        it.network_intent(BT15, jobs[:1], drop_probability=1.5)


def test_slot_bases_do_not_move_when_jobs_come_and_go() -> None:
    def plan(j: int, slots: int = DEFAULT_JOB_SLOTS) -> it.JobPlan:
        w = it.workload_from_dict({"job": j, "workers": ["h1", "h2"], "slots": slots}, BT15)
        return it.plan_job(BT15, w, blue=["s4"])

    def bases(intent: it.NetworkIntent) -> dict[int, tuple[int, int]]:
        return it.held_slots(intent.entries())["s4"]

    first = it.network_intent(BT15, [plan(5), plan(7), plan(9)])
    assert bases(first) == {5: (0, 16), 7: (16, 16), 9: (32, 16)}
    # job 7 leaves, job 2 (a lower id: it would take rank 0) and job 3 with 8 cells come
    second = it.network_intent(BT15, [plan(5), plan(9), plan(2), plan(3, 8)],
                               held=it.held_slots(first.entries()))
    assert bases(second) == {5: (0, 16), 9: (32, 16), 2: (16, 16), 3: (48, 8)}
    # without what the switch holds, first fit by job id would move job 5 and job 9
    assert it.network_intent(BT15, [plan(5), plan(9), plan(2)]).switches["s4"] \
        .aggregations[0].slot_base == 0
    third = it.network_intent(BT15, [plan(9), plan(3, 8)], held=it.held_slots(second.entries()))
    assert bases(third) == {9: (32, 16), 3: (48, 8)}
    assert third.switches["s4"].pool_use() == 24
    # a job whose size changes is moved to a range that fits
    fourth = it.network_intent(BT15, [plan(9, 32)], held=it.held_slots(third.entries()))
    assert bases(fourth) == {9: (0, 32)}
    # a job that cannot fit anywhere is refused with the pool's state
    with pytest.raises(InputError, match="switch s1: job 4 needs 256 slots but the pool of 256 "
                                         "has 240 free and no free range that long"):
        it.network_intent(BT15, [plan(9), plan(4, 256)], held=it.held_slots(third.entries()))


def test_fault_injection_entry() -> None:
    jp = it.plan_job(BT15, wl(BT15, ["h1"]), blue=[])
    e = it.network_intent(BT15, [jp], drop_probability=0.05).entries()["s1"][-1]
    assert e == en.Entry(pg.T_FAULT, (), pg.A_DROP, (("share", 3277),), default=True)
    assert pg.describe(e) == "fault injection: drop 5.00% of aggregation packets"


def test_describe_reads_well() -> None:
    intent = it.derive(BT15, [wl(BT15, all_workers(BT15))], "soar", 4)
    text = [pg.describe(e) for e in intent.entries()["s4"]]
    assert "route 10.0.0.3/32 -> port 2 (dst mac 08:00:00:00:00:02)" in text
    assert "aggregate job 1: wait for bitmap 0xf (4 workers), slots 0..15" in text
    assert text[-2] == "ECN: mark CE at queue depth >= 20"
    assert text[-1] == "fault injection: off"
    other = en.Entry("t", (en.Match("f", 10),), "a", (("x", 1),))
    assert pg.describe(other) == "t [f=0xa] -> a(x=1)"


def test_equal_cost_next_hops_spread_over_the_spines() -> None:
    topo = load_topology(Path(__file__).resolve().parents[2] / "topologies" /
                         "leafspine24.json")
    spines = {routing.next_hops(topo, h)["l1"].neighbour for h in topo.hosts
              if topo.host_switch(h)[0] != "l1"}
    assert spines == {"sp1", "sp2"}
    # destination-based: from every leaf, a host's traffic takes that host's one spine
    for h in topo.hosts:
        hops = routing.next_hops(topo, h)
        firsts = {hops[leaf].neighbour for leaf in ("l1", "l2", "l3", "l4", "l5", "l6")
                  if leaf != topo.host_switch(h)[0]}
        assert len(firsts) == 1
    assert routing.host_path(topo, "h1", "h5")[0] == "h1"
    assert routing.host_path(topo, "h1", "h5")[-1] == "h5"
