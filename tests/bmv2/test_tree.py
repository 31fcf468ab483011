"""Aggregation over a tree of three BMv2 switches, plans deployed and changed by the controller.

    h0 - s1 -+- s2 - h1, h2
             +- s3 - h3, h4

Merged packets from blue children are merged again by a blue parent (bitmaps OR, counts add),
and moving from one plan to another rewrites only the entries that differ.
"""

from __future__ import annotations

import os
import re
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from bmv2_three import HOSTS, WORKERS, three_switch_tree
from p4rt_helpers import eventually

from innet import aggpacket as ap
from innet.bmv2.thrift import run_cli
from innet.p4rt import entities as en
from innet.p4rt.client import SwitchAddress, SwitchClient
from innet.p4rt.deploy import DeployResult, deploy
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, in_netns, missing_tools
from innet.topology import Topology

_missing = missing_tools("simple_switch_grpc", "simple_switch_CLI", "ip", "sysctl")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(os.geteuid() != 0, reason="BMv2 tests make namespaces and veths: root"),
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
]

PIPE = load_pipeline()


@dataclass
class Tree:
    topo: Topology
    switches: dict[str, BMv2Switch]
    rx: socket.socket
    netns: dict[str, str]

    @property
    def addresses(self) -> dict[str, SwitchAddress]:
        return {n: s.address for n, s in self.switches.items()}

    def deploy(self, blue: list[str]) -> DeployResult:
        w = it.workload_from_dict({"job": 4, "workers": WORKERS}, self.topo)
        jp = it.plan_job(self.topo, w, blue=blue)
        return deploy(self.addresses, it.network_intent(self.topo, [jp]).entries(), PIPE,
                      sideband=run_cli)

    def events(self, name: str) -> list[int]:
        with SwitchClient(self.addresses[name], PIPE.schema, writer=False) as c:
            got = c.read_counters("agg_events")
        return [got[i][0] for i in range(5)]

    def round(self, r: int, vecs: dict[str, list[int]], expect: int) -> list[ap.AggPacket]:
        """Every worker sends chunk r; what h0 gets: `expect` packets, however long a busy
        machine takes (up to 30 s), and anything more that follows within 0.3 s."""
        for h in WORKERS:
            with in_netns(self.netns[h]):
                ap.send_contribution(HOSTS["h0"][0], 4, r, WORKERS.index(h), vecs[h])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < expect and select.select([self.rx], [], [],
                                                  max(0.0, deadline - time.monotonic()))[0]:
            out.append(ap.decode(self.rx.recv(65535)))
        while select.select([self.rx], [], [], 0.3)[0]:
            out.append(ap.decode(self.rx.recv(65535)))
        return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    with three_switch_tree(tmp_path_factory.mktemp("bmv2tree")) as net:
        yield Tree(net.topo, net.switches, net.rx, net.netns)


VECS = {h: [(i + 1) * (k + 1) * (-1) ** k for k in range(32)] for i, h in enumerate(WORKERS)}


def test_blue_children_and_a_blue_parent_deliver_one_packet(tree: Tree) -> None:
    first = tree.deploy(["s1", "s2", "s3"])
    assert first.pipelines == 3
    got = tree.round(1, VECS, 1)
    assert len(got) == 1, got
    (pkt,) = got
    assert (pkt.bitmap, pkt.count, pkt.merged) == (0b1111, 4, True)
    assert pkt.values == ap.wrap_sum(VECS.values())
    # s2, s3: two workers each; s1: the two merged packets of its children
    assert tree.events("s1")[:2] == tree.events("s2")[:2] == tree.events("s3")[:2] == [1, 1]


def test_a_new_plan_rewrites_only_what_differs_and_still_sums(tree: Tree) -> None:
    tree.deploy(["s1", "s2", "s3"])
    moved = tree.deploy(["s2", "s3"])  # s1 turns red: aggregate -> track, nothing else
    assert moved.writes == 1 and moved.pipelines == 0
    assert [(old.action if old else None, new.action)
            for old, new in moved.switches["s1"].diff.modify] == [(pg.A_AGGREGATE, pg.A_TRACK)]
    got = tree.round(2, VECS, 2)
    assert sorted((p.bitmap, p.count) for p in got) == [(0b0011, 2), (0b1100, 2)]
    assert ap.wrap_sum(p.values for p in got) == ap.wrap_sum(VECS.values())
    w = it.workload_from_dict({"job": 4, "workers": WORKERS}, tree.topo)
    assert it.plan_job(tree.topo, w, "soar", 1).blue == ("s1",)
    back = tree.deploy(["s1"])
    assert back.writes == 3  # s1 track -> aggregate, s2 and s3 aggregate -> track
    got = tree.round(3, VECS, 1)
    assert [(p.bitmap, p.count) for p in got] == [(0b1111, 4)]
    assert got[0].values == ap.wrap_sum(VECS.values())


def _bitmap_cell(tree: Tree, switch: str, slot: int) -> int:
    out = run_cli(tree.addresses[switch], [f"register_read {BITMAP} {slot}"])
    return int(re.findall(r"=\s*(\d+)", out)[-1])


BITMAP = "InnetIngress.aggregation.agg_bitmap"


def test_a_changed_plan_zeroes_the_slots_of_the_old_entry(tree: Tree) -> None:
    tree.deploy(["s1", "s2", "s3"])
    # half a round on s2: h1 sent, h2 never does; s2 holds h1's bit in the round's slot
    with in_netns(tree.netns["h1"]):
        ap.send_contribution(HOSTS["h0"][0], 4, 9, WORKERS.index("h1"), VECS["h1"])
    slot = 9 % ap.DEFAULT_JOB_SLOTS  # job 4 is the only job: slot_base 0, cell = chunk % slots
    # s2 holds it (however long a busy machine takes), and nothing reached h0
    assert eventually(lambda: _bitmap_cell(tree, "s2", slot) == 0b0001, timeout=30)
    assert select.select([tree.rx], [], [], 0.2)[0] == []
    moved = tree.deploy(["s1", "s3"])  # s2 turns red: its entry and its slots go
    assert moved.switches["s2"].cleaned_slots == tuple(range(ap.DEFAULT_JOB_SLOTS))
    assert moved.switches["s1"].cleaned_slots == moved.switches["s3"].cleaned_slots == ()
    assert _bitmap_cell(tree, "s2", slot) == 0
    tree.deploy(["s1", "s2", "s3"])
    got = tree.round(10, VECS, 1)  # the slots start clean: the next round sums exactly
    assert [(p.bitmap, p.count) for p in got] == [(0b1111, 4)]
    assert got[0].values == ap.wrap_sum(VECS.values())


def test_one_result_reaches_every_worker_through_two_levels(tree: Tree) -> None:
    """The destination sends a chunk's RESULT once, to the job's group address: s1 copies it
    toward s2 and s3, each of them to its two workers. Every worker gets exactly one copy of
    the one packet that crossed h0's link."""
    w = it.workload_from_dict({"job": 4, "workers": WORKERS}, tree.topo)
    intent = it.network_intent(tree.topo, [it.plan_job(tree.topo, w, blue=["s2", "s3"])])
    done = deploy(tree.addresses, intent.entries(), PIPE, replication=intent.replication(),
                  sideband=run_cli)
    assert done.ok, done.failed
    with SwitchClient(tree.addresses["s1"], PIPE.schema, writer=False) as c:
        assert c.read_replication() == [en.MulticastGroup(4, (en.Replica(2), en.Replica(3)))]
        before = c.read_counters(pg.C_PORT_IN)
    group = ap.result_group_ip(4)
    socks: dict[str, socket.socket] = {}
    try:
        for h in WORKERS:
            with in_netns(tree.netns[h]):
                socks[h] = ap.receiver_socket()
            ap.join_result_group(socks[h], 4, HOSTS[h][0])
        values = [k - 16 for k in range(32)]
        res = ap.result_packet(ap.contribution(4, 77, 0, values), 0xF, 4, values, False)
        with in_netns(tree.netns["h0"]):
            tx = ap.sender_socket()
        with tx:
            ap.multicast_from(tx, HOSTS["h0"][0])
            ap.send_packet(tx, group, res)
        got: dict[str, list[ap.AggPacket]] = {h: [] for h in WORKERS}
        deadline = time.monotonic() + 30  # a busy machine
        while any(not v for v in got.values()) and time.monotonic() < deadline:
            for s in select.select(list(socks.values()), [], [], 0.2)[0]:
                h = next(k for k, v in socks.items() if v is s)
                got[h].append(ap.decode(s.recv(65535)))
        for s in select.select(list(socks.values()), [], [], 0.5)[0]:  # nothing more comes
            h = next(k for k, v in socks.items() if v is s)
            got[h].append(ap.decode(s.recv(65535)))
    finally:
        for s in socks.values():
            s.close()
    assert {h: len(v) for h, v in got.items()} == {h: 1 for h in WORKERS}
    sent = ap.decode(ap.encode(res))
    assert all(v[0].result and v[0].chunk == 77 and v[0].values == sent.values
               for v in got.values())
    with SwitchClient(tree.addresses["s1"], PIPE.schema, writer=False) as c:
        after = c.read_counters(pg.C_PORT_IN)
    assert after[1][0] - before.get(1, (0, 0))[0] == 1  # one packet from h0 for four workers
