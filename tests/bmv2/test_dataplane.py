"""The P4 program on a real BMv2 switch, driven by the controller, with hosts in namespaces.

One switch s1; h0 (the destination) on port 1, workers h1, h2, h3 on ports 2-4. Hosts are
network namespaces with a veth each, made and removed here (no Mininet). Skipped, with the
reason, unless run as root with simple_switch_grpc and simple_switch_CLI on PATH.
"""

from __future__ import annotations

import dataclasses
import os
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from innet import aggpacket as ap
from innet.bmv2.thrift import QueueSetting, run_cli, set_queues
from innet.p4rt.client import SwitchClient
from innet.p4rt.deploy import DeployResult, deploy
from innet.p4rt.encode import normalise
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import (
    BMv2Switch,
    HostNs,
    host_namespaces,
    in_netns,
    missing_tools,
    start_switch,
)
from innet.topology import Topology, topology_from_dict

_missing = missing_tools("simple_switch_grpc", "simple_switch_CLI", "ip", "sysctl")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(os.geteuid() != 0, reason="BMv2 tests make namespaces and veths: root"),
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
]

PIPE = load_pipeline()
WAIT_S = 60.0  # what a packet may take through a busy machine before the test gives up
HOSTS = {f"h{i}": (f"10.0.0.{i + 2}", f"08:00:00:00:00:{i + 1:02x}") for i in range(4)}
WORKERS = ["h1", "h2", "h3"]
OTHER_PORT = 40000  # plain UDP, not aggregation


@dataclass
class Net:
    topo: Topology
    switch: BMv2Switch
    hosts: dict[str, HostNs]

    def deploy(self, blue: bool, *, threshold: int | None = it.DEFAULT_ECN_THRESHOLD,
               fresh: bool = False) -> DeployResult:
        """s1 blue (aggregates job 1) or red. `fresh`: first load the program under another
        cookie, as another build would be, so that the deploy loads it again: that clears every
        register, and a test starts with free slots whatever ran before."""
        if fresh:
            with SwitchClient(self.switch.address, PIPE.schema) as c:
                c.set_pipeline(dataclasses.replace(PIPE, cookie=PIPE.cookie ^ 1))
        w = it.workload_from_dict({"job": 1, "workers": WORKERS}, self.topo)
        jp = it.plan_job(self.topo, w, blue=["s1"] if blue else [])
        entries = it.network_intent(self.topo, [jp], threshold).entries()
        return deploy({"s1": self.switch.address}, entries, PIPE, sideband=run_cli)

    def counters(self, name: str) -> dict[int, tuple[int, int]]:
        with SwitchClient(self.switch.address, PIPE.schema, writer=False) as c:
            return c.read_counters(name)

    def packets_in(self) -> int:
        return sum(p for p, _ in self.counters("port_in").values())

    def socket(self, host: str, *, receiver: bool = False, port: int = ap.AGG_UDP_PORT,
               tos: int = 0) -> socket.socket:
        with in_netns(self.hosts[host].netns):
            return ap.receiver_socket("0.0.0.0", port) if receiver else ap.sender_socket(tos)


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    data = {"name": "one", "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac) in HOSTS.items()},
            "switches": {"s1": {}},
            "links": [[h, f"s1-p{i + 1}"] for i, h in enumerate(HOSTS)],
            "aggregation": {"destination": "h0"}}
    topo = topology_from_dict(data)
    run = tmp_path_factory.mktemp("bmv2")
    with host_namespaces(HOSTS, f"{os.getpid() % 100000}") as hosts:
        ports = {i + 1: hosts[h].switch_intf for i, h in enumerate(HOSTS)}
        sw = start_switch("s1", run, interfaces=ports)
        try:
            yield Net(topo, sw, hosts)
        finally:
            sw.stop()


def drain(sock: socket.socket, expect: int, quiet: float = 0.3) -> list[bytes]:
    """The `expect` packets the test knows are coming, however long a busy machine takes,
    then anything more that follows within `quiet` seconds (which the test then sees)."""
    out = []
    while len(out) < expect and select.select([sock], [], [], WAIT_S)[0]:
        out.append(sock.recv(65535))
    while select.select([sock], [], [], quiet)[0]:
        out.append(sock.recv(65535))
    return out


def vectors() -> dict[str, list[int]]:
    return {"h1": [1, -2, 2**31 - 1, 7] + [i for i in range(28)],
            "h2": [10, -20, 1, 0] + [1000 * i for i in range(28)],
            "h3": [100, -200, 5, -7] + [-i for i in range(28)]}


def send_round(net: Net, round_: int, order: list[str],
               vecs: dict[str, list[int]]) -> list[ap.AggPacket]:
    """Each packet is sent once s1 has counted the one before in ingress: BMv2 reads each port
    in its own thread, so only that keeps the test's order on a busy machine."""
    sent = []
    for h in order:
        before = net.packets_in()
        with net.socket(h) as s:
            sent.append(ap.send_contribution(net.hosts["h0"].ip, 1, round_, WORKERS.index(h),
                                             vecs[h], sock=s))
        deadline = time.monotonic() + WAIT_S
        while net.packets_in() == before:
            assert time.monotonic() < deadline, f"s1 never took {h}'s packet"
            time.sleep(0.005)
    return sent


def test_pipeline_loads_and_entries_read_back_as_written(net: Net) -> None:
    first = net.deploy(blue=True, fresh=True)
    assert first.pipelines == 1 and first.switches["s1"].diff.insert  # routes, aggregation
    with SwitchClient(net.switch.address, PIPE.schema, writer=False) as c:
        assert c.pipeline_cookie() == PIPE.cookie
        held = set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES))
    w = it.workload_from_dict({"job": 1, "workers": WORKERS}, net.topo)
    want = it.network_intent(net.topo, [it.plan_job(net.topo, w, blue=["s1"])]).entries()["s1"]
    assert held == {normalise(PIPE.schema, e) for e in want}
    again = net.deploy(blue=True)
    assert again.writes == 0 and again.pipelines == 0
    print(f"\nBMv2: first deploy {first.seconds * 1000:.0f} ms ({first.writes} writes, program "
          f"loaded), no-change redeploy {again.seconds * 1000:.0f} ms")


def test_counters_count_packets_and_bytes(net: Net) -> None:
    net.deploy(blue=False)
    before_in, before_out = net.counters("port_in"), net.counters("port_out")
    payload = b"x" * 100
    with net.socket("h0", receiver=True, port=OTHER_PORT) as rx, net.socket("h2") as tx:
        for _ in range(20):
            tx.sendto(payload, (net.hosts["h0"].ip, OTHER_PORT))
        got = drain(rx, 20)
    assert got == [payload] * 20
    frame = 14 + 20 + 8 + len(payload)
    after_in, after_out = net.counters("port_in"), net.counters("port_out")
    assert (after_in[3][0] - before_in[3][0], after_in[3][1] - before_in[3][1]) == (20, 20 * frame)
    assert (after_out[1][0] - before_out[1][0], after_out[1][1] - before_out[1][1]) == \
        (20, 20 * frame)


def test_a_blue_switch_sends_the_exact_sum_in_one_packet(net: Net) -> None:
    net.deploy(blue=True, fresh=True)
    vecs = vectors()
    with net.socket("h0", receiver=True) as rx:
        sent = send_round(net, 1, WORKERS, vecs)
        got = [ap.decode(p) for p in drain(rx, 1)]
    assert len(got) == 1, got
    (pkt,) = got
    assert pkt.merged and pkt.bitmap == 0b111 and pkt.count == 3 and pkt.chunk == 1
    assert pkt.values == ap.wrap_sum(vecs.values())
    assert pkt.values[2] == -(2**31) + 5  # 2^31-1 + 1 + 5 wrapped around: flagged
    assert pkt.overflow
    events = net.counters("agg_events")
    assert [events[i][0] for i in range(7)] == [2, 1, 0, 0, 0, 0, 1]
    assert len(sent) == 3


def test_a_red_switch_passes_the_three_packets_unchanged(net: Net) -> None:
    net.deploy(blue=False, fresh=True)
    vecs = vectors()
    with net.socket("h0", receiver=True) as rx:
        sent = send_round(net, 2, WORKERS, vecs)
        got = [ap.decode(p) for p in drain(rx, 3)]
    assert sorted(got, key=lambda p: p.bitmap) == sent
    assert not any(p.merged for p in got)
    assert all(n == 0 for n, _ in net.counters("agg_events").values())


def test_a_duplicate_contribution_is_not_added_twice(net: Net) -> None:
    net.deploy(blue=True, fresh=True)
    vecs = vectors()
    with net.socket("h0", receiver=True) as rx:
        send_round(net, 3, ["h1", "h1", "h2", "h1", "h3"], vecs)
        got = [ap.decode(p) for p in drain(rx, 1)]
        assert len(got) == 1 and got[0].count == 3
        assert got[0].values == ap.wrap_sum(vecs.values())
        # a retransmission after the chunk finished gets the stored sum (shadow copy)
        send_round(net, 3, ["h2"], vecs)
        (again,) = [ap.decode(p) for p in drain(rx, 1)]
        assert again.values == got[0].values and again.flags & ap.FLAG_RESENT
        # the next chunks (the same cell again at chunk 3 + 16) aggregate normally
        for r in (4, 3 + ap.DEFAULT_JOB_SLOTS):
            send_round(net, r, ["h3", "h2", "h1"], vecs)
            (nxt,) = [ap.decode(p) for p in drain(rx, 1)]
            assert (nxt.chunk, nxt.count, nxt.values) == (r, 3, ap.wrap_sum(vecs.values()))
    events = net.counters("agg_events")
    assert [events[i][0] for i in range(6)] == [6, 3, 2, 0, 0, 1]


def _receive_tos(sock: socket.socket, expect: int) -> list[int]:
    """TOS byte of each of the `expect` packets the switch sent, however long they take."""
    out = []
    while len(out) < expect and select.select([sock], [], [], WAIT_S)[0]:
        _, anc, _, _ = sock.recvmsg(2048, socket.CMSG_SPACE(4))
        tos = [data[0] for level, kind, data in anc
               if level == socket.IPPROTO_IP and kind == socket.IP_TOS]
        out.append(tos[0] if tos else -1)
    return out


def _paced(sock: socket.socket, dest: tuple[str, int], pps: int, seconds: float) -> int:
    """Send at about `pps` for `seconds` (a few packets per millisecond, not one burst that
    the switch's capture would drop before its queue)."""
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic() - start) < seconds:
        while sent < now * pps:
            sock.sendto(b"p" * 64, dest)
            sent += 1
        time.sleep(0.001)
    return sent


def test_ce_marks_appear_once_the_queue_rate_is_below_the_offered_load(net: Net) -> None:
    net.deploy(blue=False, threshold=20)
    dest = (net.hosts["h0"].ip, OTHER_PORT)
    try:
        with net.socket("h0", receiver=True, port=OTHER_PORT) as rx, \
                net.socket("h1", tos=0x02) as tx:  # ECT(0)
            rx.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            marked0 = net.counters("ecn_marked").get(1, (0, 0))[0]
            for _ in range(200):  # 1,000 packets/s: far below what the switch drains
                tx.sendto(b"p" * 64, dest)
                time.sleep(0.001)
            calm = _receive_tos(rx, 200)
            assert len(calm) == 200 and all(t & 3 == 2 for t in calm)
            assert net.counters("ecn_marked").get(1, (0, 0))[0] == marked0
            set_queues(net.switch.address, [QueueSetting(rate_pps=500, depth=100, port=1)])
            out0 = net.counters("port_out").get(1, (0, 0))[0]
            sent = _paced(tx, dest, pps=2000, seconds=1.0)  # four times the queue rate
            # the queue drains at 500/s (what overflowed it is dropped uncounted): read
            # exactly what left once port 1 has sent nothing for a second
            left, last = -1, time.monotonic()
            while time.monotonic() - last < 1.0:
                now = net.counters("port_out").get(1, (0, 0))[0] - out0
                if now != left:
                    left, last = now, time.monotonic()
                time.sleep(0.05)
            busy = _receive_tos(rx, left)
        ce = sum(1 for t in busy if t & 3 == 3)
        marked = net.counters("ecn_marked").get(1, (0, 0))[0] - marked0
        print(f"\nECN: {sent} packets offered at 2000/s to a 500/s queue: {len(busy)} "
              f"delivered, {ce} CE-marked at the receiver, {marked} counted by the switch")
        assert ce > len(busy) // 2 and marked == ce
        assert all(t & 3 in (2, 3) for t in busy)
    finally:
        set_queues(net.switch.address, [QueueSetting(rate_pps=1_000_000, depth=64, port=1)])
