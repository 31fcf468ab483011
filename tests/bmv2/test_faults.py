"""The aggregation protocol's faults on real BMv2 switches, one test per fault of issue 10.

    h0 - s1 -+- s2 - h1, h2
             +- s3 - h3, h4

h0 is the destination; the test plays the workers (sockets in their namespaces) and reads
what reaches h0, so each fault is produced exactly (a packet not sent is a packet lost; the
data-plane fault injection drops what passes a switch). Each packet is sent once the one
before has met its fate in the switches' counters (sent on, or dropped and counted), so the
order of packets is the order of the test however busy the machine is, and h0 is read for
exactly the packets s1 sent it. The last tests run the hosts' own
state machines (controller/innet/aggproto.py) over the switches with random loss, and replay one
random packet sequence through a switch and through the Python model of the P4 control.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import select
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from bmv2_three import EDGE, HOSTS, WORKERS, three_switch_tree

from innet import aggpacket as ap
from innet.aggproto import Destination, JobEntry, SwitchModel, Worker
from innet.bmv2.thrift import run_cli
from innet.p4rt.client import SwitchAddress, SwitchClient
from innet.p4rt.deploy import deploy
from innet.plan import intent as it
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, in_netns, missing_tools
from innet.topology import Topology

_missing = missing_tools("simple_switch_grpc", "ip", "sysctl")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(os.geteuid() != 0, reason="BMv2 tests make namespaces and veths: root"),
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
]

PIPE = load_pipeline()
DEST = HOSTS["h0"][0]
SETTLE_S = 60.0  # a packet's fate is known within this, however busy the machine is
# what the switches count: each port's packets in and out, and the drops of the aggregation
DROPS = [ap.EVENT_NAMES.index(n) for n in ("held", "duplicate", "stale", "malformed",
                                          "fault_drop", "nack_held", "ask_held")]
LINKS = (("s1", 2, "s2", 1), ("s1", 3, "s3", 1))  # switch, port, switch, port
H0_PORT = EDGE["h0"][1]
SPREAD = [ap.EVENT_NAMES.index(n) for n in ("nack_spread", "result_spread")]


@dataclass(frozen=True)
class Job:
    job: int
    workers: tuple[str, ...]
    blue: tuple[str, ...]
    slots: int = ap.DEFAULT_JOB_SLOTS


@dataclass
class Tree:
    topo: Topology
    switches: dict[str, BMv2Switch]
    netns: dict[str, str]
    rx: socket.socket
    held: it.Held | None = None
    # per switch, the copies its multicast group makes of a request it spreads (one job)
    fanout: dict[str, int] = dataclasses.field(default_factory=dict)
    sent: int = 0   # packets the hosts sent into the switches since the counters were zeroed
    taken: int = 0  # packets read from h0's socket since then

    @property
    def addresses(self) -> dict[str, SwitchAddress]:
        return {n: s.address for n, s in self.switches.items()}

    def reset(self) -> None:
        """Load the program again (under another cookie first): every register is cleared."""
        for sw in self.switches.values():
            with SwitchClient(sw.address, PIPE.schema) as c:
                c.set_pipeline(dataclasses.replace(PIPE, cookie=PIPE.cookie ^ 1))
        self.held = None
        self.sent = self.taken = 0  # a program load zeroes the counters too
        drain(self.rx, 0.05)

    def _counts(self) -> dict[str, dict[str, dict[int, int]]]:
        out = {}
        for n, sw in self.switches.items():
            with SwitchClient(sw.address, PIPE.schema, writer=False) as c:
                out[n] = {name: {i: p for i, (p, _) in c.read_counters(name).items()}
                          for name in ("port_in", "port_out", "agg_events")}
        return out

    def settle(self) -> dict[str, dict[str, dict[int, int]]]:
        """Wait until every packet sent has met its fate: the host-facing ports took all the
        hosts sent, every switch sent on or dropped (and counted) all it received, and each
        link between switches delivered all it carried. Returns the counters."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            c = self._counts()
            arrived = sum(c[s]["port_in"].get(p, 0) for s, p in EDGE.values())
            inside = all(sum(c[s]["port_in"].values()) + self._copies(s, c[s])
                         == sum(c[s]["port_out"].values())
                         + sum(c[s]["agg_events"].get(e, 0) for e in DROPS) for s in c)
            links = all(c[a]["port_out"].get(pa, 0) == c[b]["port_in"].get(pb, 0)
                        and c[b]["port_out"].get(pb, 0) == c[a]["port_in"].get(pa, 0)
                        for a, pa, b, pb in LINKS)
            if arrived == self.sent and inside and links:
                return c
            assert time.monotonic() < deadline, f"the switches did not settle: {c}"
            time.sleep(0.01)

    def _copies(self, switch: str, counts: dict[str, dict[int, int]]) -> int:
        """Packets the switch sent beyond one per packet in: a request or an answer copied
        below."""
        spread = sum(counts["agg_events"].get(e, 0) for e in SPREAD)
        return spread * (self.fanout.get(switch, 1) - 1)

    def deploy(self, jobs: Sequence[Job], drop: float = 0.0) -> it.NetworkIntent:
        plans = []
        for j in jobs:
            w = it.workload_from_dict({"job": j.job, "workers": list(j.workers),
                                       "slots": j.slots}, self.topo)
            plans.append(it.plan_job(self.topo, w, blue=list(j.blue)))
        intent = it.network_intent(self.topo, plans, held=self.held, drop_probability=drop)
        replication = intent.replication()
        deploy(self.addresses, intent.entries(), PIPE, sideband=run_cli,
               replication=replication)
        self.held = it.held_slots(intent.entries())
        self.fanout = {s: max((len(g.replicas) for g in groups), default=1)
                       for s, groups in replication.items()}
        return intent

    def set_drop(self, switch: str, share: float) -> None:
        with SwitchClient(self.addresses[switch], PIPE.schema) as c:
            c.write("modify", [it.fault_entry(share)])

    def send(self, host: str, pkt: ap.AggPacket, tos: int = 0, raw: bytes | None = None
             ) -> None:
        with in_netns(self.netns[host]), ap.sender_socket(tos) as s:
            s.sendto(ap.encode(pkt) if raw is None else raw, (DEST, ap.AGG_UDP_PORT))
        self.sent += 1
        self.settle()

    def contribute(self, host: str, job: Job, chunk: int, values: Sequence[int],
                   tos: int = 0) -> ap.AggPacket:
        pkt = ap.contribution(job.job, chunk, job.workers.index(host), values, job.slots)
        self.send(host, pkt, tos)
        return pkt

    def received(self) -> list[tuple[ap.AggPacket, int]]:
        """(packet, TOS) of every packet s1 sent h0 since the last call, once the switches
        have settled: exactly those, however long their way through the kernel takes."""
        want = self.settle()["s1"]["port_out"].get(H0_PORT, 0) - self.taken
        out = []
        for _ in range(want):
            assert select.select([self.rx], [], [], SETTLE_S)[0], "s1 sent h0 more than it got"
            data, _, tos = ap.recv_with_tos(self.rx)
            out.append((ap.decode(data), tos))
        self.taken += want
        return out

    def uplink(self, switch: str, counter: str) -> int:
        """Packets `counter` counted on the switch's port toward h0 (port 1 on each)."""
        with SwitchClient(self.addresses[switch], PIPE.schema, writer=False) as c:
            return c.read_counters(counter).get(1, (0, 0))[0]

    def events(self, switch: str) -> dict[str, int]:
        with SwitchClient(self.addresses[switch], PIPE.schema, writer=False) as c:
            got = c.read_counters("agg_events")
        return {n: got.get(i, (0, 0))[0] for i, n in enumerate(ap.EVENT_NAMES)}


def drain(sock: socket.socket, quiet: float) -> None:
    while select.select([sock], [], [], quiet)[0]:
        sock.recv(65535)


@pytest.fixture(scope="module")
def tree_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    with three_switch_tree(tmp_path_factory.mktemp("bmv2faults"), tos=True) as net:
        yield Tree(net.topo, net.switches, net.netns, net.rx)


@pytest.fixture
def tree(tree_net: Tree) -> Tree:
    tree_net.reset()
    return tree_net


ALL = Job(1, tuple(WORKERS), ("s1", "s2", "s3"))


def vec(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(-(10**6), 10**6) for _ in range(ap.VECTOR_LEN)]


def total(*vs: Sequence[int]) -> tuple[int, ...]:
    return ap.wrap_sum(vs)


def only(got: list[tuple[ap.AggPacket, int]]) -> ap.AggPacket:
    assert len(got) == 1, got
    return got[0][0]


def test_lost_contribution_is_recovered_by_the_retransmission(tree: Tree) -> None:
    tree.deploy([ALL])
    v = {h: vec(i) for i, h in enumerate(WORKERS)}
    for h in ("h1", "h3", "h4"):  # h2's contribution is "lost": not sent
        tree.contribute(h, ALL, 0, v[h])
    assert tree.received() == []
    tree.contribute("h1", ALL, 0, v["h1"])  # h1 times out too: a duplicate at s2
    tree.contribute("h2", ALL, 0, v["h2"])  # h2's retransmission completes the chunk
    pkt = only(tree.received())
    assert (pkt.bitmap, pkt.count, pkt.values) == (0b1111, 4, total(*v.values()))
    assert tree.events("s2")["duplicate"] == 1


def test_lost_aggregate_between_blue_switches_is_sent_again_from_the_shadow_copy(
        tree: Tree) -> None:
    tree.deploy([ALL])
    v = {h: vec(10 + i) for i, h in enumerate(WORKERS)}
    tree.set_drop("s1", 1.0)  # s2's aggregate dies at s1
    tree.contribute("h1", ALL, 3, v["h1"])
    tree.contribute("h2", ALL, 3, v["h2"])
    tree.set_drop("s1", 0.0)
    assert tree.events("s1")["fault_drop"] == 1
    tree.contribute("h3", ALL, 3, v["h3"])
    tree.contribute("h4", ALL, 3, v["h4"])
    assert tree.received() == []
    tree.contribute("h2", ALL, 3, v["h2"])  # h2 (no result) retransmits: s2 answers for both
    pkt = only(tree.received())
    assert (pkt.bitmap, pkt.count, pkt.values) == (0b1111, 4, total(*v.values()))
    assert tree.events("s2")["resent"] == 1 and tree.events("s1")["emitted"] == 1


def test_lost_aggregate_to_the_destination_is_sent_again(tree: Tree) -> None:
    tree.deploy([ALL])
    v = {h: vec(20 + i) for i, h in enumerate(WORKERS)}
    for h in WORKERS:
        tree.contribute(h, ALL, 7, v[h])
    first = only(tree.received())  # now "lose" it: h0 forgets what it got
    tree.contribute("h3", ALL, 7, v["h3"])  # h3 retransmits: s3 and s1 answer from their cells
    again = only(tree.received())
    assert again.values == first.values == total(*v.values())
    assert again.flags & ap.FLAG_RESENT and again.bitmap == 0b1111 and again.count == 4
    assert tree.events("s3")["resent"] == tree.events("s1")["resent"] == 1


def test_first_transmissions_are_counted_apart_on_every_uplink(tree: Tree) -> None:
    """s2 blue, s1 and s3 red (track): a contribution lost below red s3 leaves only its
    retransmission, which is then the first transmission above s3; the copies sent again
    (a duplicate through s3, the stored sum s2 re-emits) are counted apart on every uplink
    they cross, and a late copy of a chunk whose cell was reused is never first."""
    job = Job(1, tuple(WORKERS), ("s2",), slots=2)
    intent = tree.deploy([job])
    assert [(r.blue, r.expected) for r in intent.switches["s3"].aggregations] == \
        [(False, 0b1100)]
    v = {h: vec(60 + i) for i, h in enumerate(WORKERS)}
    tree.contribute("h1", job, 0, v["h1"])
    tree.contribute("h2", job, 0, v["h2"])  # s2 complete: its sum goes up, first on s2 and s1
    tree.contribute("h4", job, 0, v["h4"])  # h3's first copy is "lost" on its way to s3
    tree.contribute("h3", job, 0, v["h3"])  # its retransmission is the first transmission
    tree.contribute("h4", job, 0, v["h4"])  # h4's timer fired too: a repeat on s3 and s1
    tree.contribute("h1", job, 0, v["h1"])  # h1 too: s2 re-emits its stored sum (a repeat)
    got = [p for p, _ in tree.received()]
    assert len(got) == 5 and all(p.chunk == 0 for p in got)
    tree.contribute("h1", job, 2, v["h1"])  # chunk 2 takes chunk 0's cell at s2 ...
    tree.contribute("h3", job, 2, v["h3"])  # ... and at s3 and s1
    tree.contribute("h4", job, 0, v["h4"])  # a late copy of chunk 0: h4 is new to chunk 2
    assert [p.chunk for p, _ in tree.received()] == [2, 0]
    first = {s: tree.uplink(s, "agg_first") for s in ("s1", "s2", "s3")}
    again = {s: tree.uplink(s, "agg_repeat") for s in ("s1", "s2", "s3")}
    # chunk 0: phi's one message from s2, two from s3, three from s1; chunk 2: h3's so far
    assert first == {"s2": 1, "s3": 3, "s1": 4}, (first, again)
    assert again == {"s2": 1, "s3": 2, "s1": 3}, (first, again)


def test_a_result_passes_every_switch_untouched(tree: Tree) -> None:
    tree.deploy([ALL])
    res = ap.result_packet(ap.contribution(1, 7, 0, [1]), 0b1111, 4, vec(1), False)
    tree.send("h2", res)  # toward h0, through s2 and s1, both blue for job 1
    pkt = only(tree.received())
    assert pkt == res and tree.events("s2")["result"] == tree.events("s1")["result"] == 1


@contextlib.contextmanager
def listening(tree: Tree, hosts: Sequence[str]) -> Iterator[Listeners]:
    """What the switches send down to `hosts`, read off each host's interface (a packet
    socket), so that copies to a job's group address are read too without joining the group
    (a join would send IGMP reports into the switches, which the tests count). An
    aggregation socket on each host takes the unicast ones, as a worker would."""
    socks: dict[str, socket.socket] = {}
    frames: dict[str, socket.socket] = {}
    try:
        for h in hosts:
            with in_netns(tree.netns[h]):
                socks[h] = ap.receiver_socket()
                frames[h] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                          socket.htons(ETH_P_IP))
                frames[h].bind(("eth0", ETH_P_IP))
        yield Listeners(tree, frames, dict.fromkeys(hosts, 0))
    finally:
        for sock in (*socks.values(), *frames.values()):
            sock.close()


ETH_P_IP = 0x0800


def aggregation_payload(frame: bytes) -> ap.AggPacket:
    """The aggregation packet in an Ethernet frame (IPv4, UDP), once its UDP checksum is one
    the host's kernel accepts (it drops the others before any socket sees them; a packet
    socket does not check)."""
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    udp = ip[ihl:ihl + int.from_bytes(ip[ihl + 4:ihl + 6], "big")]
    if udp[6:8] != b"\0\0":  # 0: no checksum (RFC 768)
        pseudo = ip[12:20] + bytes([0, 17]) + len(udp).to_bytes(2, "big")
        assert ones_complement_sum(pseudo + udp) == 0xFFFF, "bad UDP checksum"
    return ap.decode(udp[8:])


def ones_complement_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


@dataclass
class Listeners:
    tree: Tree
    frames: dict[str, socket.socket]
    taken: dict[str, int]

    def ask(self, job: Job, chunk: int, *workers: str) -> None:
        """The destination's request (NACK) for the contributions of `workers` to `chunk`,
        from h0, addressed to the first of them (the lowest: as the destination sends it)."""
        bits = sum(1 << job.workers.index(w) for w in workers)
        assert job.workers.index(workers[0]) == min(job.workers.index(w) for w in workers)
        self.send_down(workers[0], ap.nack_packet(job.job, chunk, bits, job.slots))

    def send_down(self, worker: str, pkt: ap.AggPacket) -> None:
        """`pkt` from h0 to `worker`, as the destination sends its requests."""
        self.tree.rx.sendto(ap.encode(pkt), (HOSTS[worker][0], ap.AGG_UDP_PORT))
        self.tree.sent += 1

    def received(self) -> dict[str, list[ap.AggPacket]]:
        """What each host got since the last call, once the switches have settled: exactly
        the packets its switch sent it (counted), however slow the kernel is."""
        c = self.tree.settle()
        got: dict[str, list[ap.AggPacket]] = {}
        for h, sock in self.frames.items():
            s_, p_ = EDGE[h]
            want = c[s_]["port_out"].get(p_, 0) - self.taken[h]
            self.taken[h] += want
            got[h] = []
            while len(got[h]) < want:
                assert select.select([sock], [], [], SETTLE_S)[0], f"{h}: counted, not read"
                frame, (_, _, kind, _, _) = sock.recvfrom(65535)
                if kind == socket.PACKET_OUTGOING:  # the host's own packets pass here too
                    continue
                # a frame to another host's MAC: the interface takes it, the kernel drops it
                assert kind != socket.PACKET_OTHERHOST, f"{h}: a frame to another MAC"
                got[h].append(aggregation_payload(frame))
        return got


def test_a_request_for_a_contribution_a_blue_switch_holds_goes_no_further(tree: Tree) -> None:
    """h2's contribution is lost below s2: the destination asks h1 and h2, each alone. s2
    holds h1's contribution, so h1's request ends there (h1 would send a duplicate) and h2's
    reaches h2."""
    tree.deploy([ALL])
    v = {h: vec(40 + i) for i, h in enumerate(WORKERS)}
    with listening(tree, ("h1", "h2")) as hosts:
        tree.contribute("h1", ALL, 5, v["h1"])
        hosts.ask(ALL, 5, "h1")
        hosts.ask(ALL, 5, "h2")
        got = hosts.received()
        assert got["h1"] == [] and [(p.chunk, p.bitmap, p.nack) for p in got["h2"]] == \
            [(5, 0b10, True)]
        assert tree.events("s2")["nack_held"] == 1 and tree.events("s1")["result"] == 2
        for h in ("h2", "h3", "h4"):  # h2 answers its request: the chunk completes
            tree.contribute(h, ALL, 5, v[h])
        assert only(tree.received()).values == total(*v.values())


def test_a_complete_cell_answers_the_destinations_request_with_its_stored_sum(
        tree: Tree) -> None:
    """s2's aggregate of chunk 6 dies at s1: the destination asks h1 and h2. s2's cell is
    complete, so it answers h1's request (its lowest contributor's) with the stored sum, sent
    back up as the lost aggregate went, and drops h2's: neither worker hears of it. s1 merges
    the sum and completes the chunk with h3's and h4's contributions."""
    tree.deploy([ALL])
    v = {h: vec(70 + i) for i, h in enumerate(WORKERS)}
    with listening(tree, ("h1", "h2")) as hosts:
        tree.set_drop("s1", 1.0)
        tree.contribute("h1", ALL, 6, v["h1"])
        tree.contribute("h2", ALL, 6, v["h2"])
        tree.set_drop("s1", 0.0)
        hosts.ask(ALL, 6, "h2")  # the order does not matter: h1's request is the answered one
        hosts.ask(ALL, 6, "h1")
        assert hosts.received() == {"h1": [], "h2": []}
        assert tree.received() == []  # s1 holds the sum: it waits on h3 and h4
        s2 = tree.events("s2")
        assert (s2["nack_held"], s2["resent"]) == (1, 1)
        assert (tree.uplink("s2", "agg_first"), tree.uplink("s2", "agg_repeat")) == (1, 1)
        assert tree.events("s1")["held"] == 1
        tree.contribute("h3", ALL, 6, v["h3"])
        tree.contribute("h4", ALL, 6, v["h4"])
        pkt = only(tree.received())
        assert (pkt.bitmap, pkt.count, pkt.values) == (0b1111, 4, total(*v.values()))


def test_one_request_for_a_blue_switchs_workers_reaches_only_those_it_lacks(
        tree: Tree) -> None:
    """The destination asks once for both of s2's workers, addressed to h1. Chunk 5: s2 holds
    h2's contribution, so the request goes on to h1 alone, naming h1 alone. Chunk 6: s2 holds
    h1's, so the request names h2 alone and goes to the job's group address, which s2's
    multicast group copies to h1 and h2 (h1, not named, ignores it)."""
    pair = Job(2, ("h1", "h2"), ("s2",))
    tree.deploy([pair])
    with listening(tree, ("h1", "h2")) as hosts:
        tree.contribute("h2", pair, 5, vec(1))
        hosts.ask(pair, 5, "h1", "h2")
        got = hosts.received()
        assert {h: [(p.chunk, p.bitmap, p.nack) for p in got[h]] for h in got} == \
            {"h1": [(5, 0b01, True)], "h2": []}
        tree.contribute("h1", pair, 6, vec(2))
        hosts.ask(pair, 6, "h1", "h2")
        got = hosts.received()
        assert {h: [(p.chunk, p.bitmap, p.nack) for p in got[h]] for h in got} == \
            {"h1": [(6, 0b10, True)], "h2": [(6, 0b10, True)]}
        ev = tree.events("s2")
        assert (ev["nack_spread"], ev["result"], ev["nack_held"]) == (1, 1, 0)
        tree.contribute("h1", pair, 5, vec(3))  # each named worker answers: both complete
        tree.contribute("h2", pair, 6, vec(4))
        assert sorted((p.chunk, p.values) for p, _ in tree.received()) == \
            [(5, total(vec(1), vec(3))), (6, total(vec(2), vec(4)))]


def test_a_request_copied_below_nested_blue_switches_repairs_both_losses(tree: Tree) -> None:
    """s1, s2 and s3 are all blue. s2's aggregate of chunk 7 dies at s1, and h4's
    contribution is lost: s1 has nothing of the chunk. The destination asks once for all
    four workers; s1 lacks them all and copies the request below. s2's cell is complete: its
    copy goes on naming h1 alone, whose contribution s2 answers with the stored sum. s3
    holds h3's: its copy names h4 alone. Two packets come back up, and the sum is exact."""
    tree.deploy([ALL])
    v = {h: vec(90 + i) for i, h in enumerate(WORKERS)}
    with listening(tree, WORKERS) as hosts:
        tree.set_drop("s1", 1.0)
        tree.contribute("h1", ALL, 7, v["h1"])
        tree.contribute("h2", ALL, 7, v["h2"])
        tree.set_drop("s1", 0.0)
        tree.contribute("h3", ALL, 7, v["h3"])
        hosts.ask(ALL, 7, *WORKERS)
        got = hosts.received()
        assert {h: [(p.chunk, p.bitmap) for p in got[h]] for h in got} == \
            {"h1": [(7, 0b0001)], "h2": [(7, 0b0001)], "h3": [(7, 0b1000)],
             "h4": [(7, 0b1000)]}
        assert [tree.events(s)["nack_spread"] for s in ("s1", "s2", "s3")] == [1, 1, 1]
        tree.contribute("h1", ALL, 7, v["h1"])  # the named workers send again
        tree.contribute("h4", ALL, 7, v["h4"])
        assert tree.events("s2")["resent"] == 1
        pkt = only(tree.received())
        assert (pkt.bitmap, pkt.count, pkt.values) == (0b1111, 4, total(*v.values()))


def test_requests_for_a_lost_result_are_held_below_and_the_answer_copied_to_them(
        tree: Tree) -> None:
    """The RESULT of chunk 5 is lost above s2: h1 and h2 both ask the destination for it.
    h1's request passes s2; h2's is held there. h1 asks again (its request or the answer was
    lost): that passes. The destination's answer, unicast to h1, is copied by s2 to h1 and
    h2 through the job's group; a later answer, with nobody held, goes to h1 alone. A request
    without COPY (results sent unicast: no group to copy to) is never held."""
    pair = Job(2, ("h1", "h2"), ("s2",))
    tree.deploy([pair])
    ask = {h: ap.nack_packet(2, 5, 1 << i, pair.slots, ask=True, copy=True)
           for i, h in enumerate(pair.workers)}
    with listening(tree, ("h1", "h2")) as hosts:
        tree.send("h1", ask["h1"])
        tree.send("h2", ask["h2"])
        tree.send("h1", ask["h1"])
        assert [(p.chunk, p.bitmap, p.ask) for p, _ in tree.received()] == \
            [(5, 0b01, True), (5, 0b01, True)]
        assert tree.events("s2")["ask_held"] == 1
        res = ap.result_packet(ask["h1"], 0b11, 2, vec(5), False)
        answer = dataclasses.replace(res, slot=ask["h1"].slot,
                                     flags=res.flags | ap.FLAG_COPY)
        hosts.send_down("h1", answer)
        assert hosts.received() == {"h1": [answer], "h2": [answer]}
        hosts.send_down("h1", answer)
        assert hosts.received() == {"h1": [answer], "h2": []}
        assert tree.events("s2")["result_spread"] == 1
        tree.send("h1", ap.nack_packet(2, 6, 0b01, pair.slots, ask=True))
        tree.send("h2", ap.nack_packet(2, 6, 0b10, pair.slots, ask=True))
        assert len(tree.received()) == 2 and tree.events("s2")["ask_held"] == 1


def test_a_late_copy_after_the_slot_was_reused_is_dropped_as_stale(tree: Tree) -> None:
    job = Job(2, ("h1", "h2"), ("s2",), slots=2)
    tree.deploy([job])
    tree.contribute("h1", job, 0, vec(1))
    tree.contribute("h2", job, 0, vec(2))
    assert only(tree.received()).values == total(vec(1), vec(2))
    tree.contribute("h1", job, 2, vec(3))  # chunk 2 takes chunk 0's cell
    tree.contribute("h2", job, 0, vec(2))  # a late copy of chunk 0
    assert tree.received() == [] and tree.events("s2")["stale"] == 1
    tree.contribute("h2", job, 2, vec(4))
    pkt = only(tree.received())
    assert (pkt.chunk, pkt.values) == (2, total(vec(3), vec(4)))


def test_duplicates_are_added_once_at_every_level(tree: Tree) -> None:
    tree.deploy([ALL])
    v = {h: vec(30 + i) for i, h in enumerate(WORKERS)}
    tree.contribute("h1", ALL, 1, v["h1"])
    tree.contribute("h1", ALL, 1, v["h1"])      # duplicated on the wire: s2 drops it
    tree.contribute("h2", ALL, 1, v["h2"])      # s2 complete: its aggregate to s1
    tree.contribute("h1", ALL, 1, v["h1"])      # s2 sends its aggregate again: s1 drops it
    tree.contribute("h3", ALL, 1, v["h3"])
    tree.contribute("h4", ALL, 1, v["h4"])
    pkt = only(tree.received())
    assert (pkt.count, pkt.values) == (4, total(*v.values()))
    assert tree.events("s2")["duplicate"] == 1 and tree.events("s1")["duplicate"] == 1


def test_reordered_chunks_each_sum_right(tree: Tree) -> None:
    tree.deploy([ALL])
    chunks = [4, 5, 6, 7]
    orders = {h: random.Random(i).sample(chunks, len(chunks)) for i, h in enumerate(WORKERS)}
    for step in range(len(chunks)):
        for h in WORKERS:
            c = orders[h][step]
            tree.contribute(h, ALL, c, vec(100 * c + WORKERS.index(h)))
    got = {p.chunk: p for p, _ in tree.received()}
    assert sorted(got) == chunks
    for c in chunks:
        assert got[c].values == total(*(vec(100 * c + i) for i in range(4)))


def test_a_worker_that_stalls_and_resumes_completes_the_chunks_held_for_it(tree: Tree) -> None:
    tree.deploy([ALL])
    for c in range(4):
        for h in ("h1", "h2", "h3"):
            tree.contribute(h, ALL, c, vec(10 * c + WORKERS.index(h)))
    assert tree.received() == []  # h4 stalls: nothing completes, nothing is lost
    for c in range(4):
        tree.contribute("h4", ALL, c, vec(10 * c + 3))
    got = sorted((p.chunk, p.values) for p, _ in tree.received())
    assert got == [(c, total(*(vec(10 * c + i) for i in range(4)))) for c in range(4)]


def test_short_and_malformed_packets_are_dropped_and_leave_the_cells_alone(tree: Tree) -> None:
    tree.deploy([ALL])
    good = ap.contribution(1, 2, 0, vec(1))
    raw = ap.encode(good)
    tree.send("h1", good, raw=raw[:20])            # cut inside the values
    tree.send("h1", good, raw=raw[:10])            # cut inside the header
    tree.send("h1", good, raw=raw + b"\x00" * 4)   # too long
    tree.send("h1", dataclasses.replace(good, slot=ap.DEFAULT_JOB_SLOTS))  # beyond the job
    tree.send("h1", dataclasses.replace(good, bitmap=0b100))  # h3's bit does not pass s2
    tree.send("h1", dataclasses.replace(good, bitmap=0))
    assert tree.received() == []
    assert tree.events("s2")["malformed"] == 6
    assert tree.events("s2")["held"] == 0  # not a register touched
    v = {h: vec(50 + i) for i, h in enumerate(WORKERS)}
    for h in WORKERS:
        tree.contribute(h, ALL, 2, v[h])
    pkt = only(tree.received())
    assert (pkt.count, pkt.values) == (4, total(*v.values()))


def test_two_jobs_at_once_with_different_workers(tree: Tree) -> None:
    a = Job(5, ("h1", "h3"), ("s1", "s2", "s3"))
    b = Job(6, ("h2", "h4"), ("s1", "s2", "s3"))
    intent = tree.deploy([a, b])
    roles = {r.job: r.slot_base for r in intent.switches["s1"].aggregations}
    assert roles[5] != roles[6]
    for c in range(3):
        for job in (a, b):
            for h in job.workers:
                tree.contribute(h, job, c, vec(1000 * job.job + 10 * c + job.workers.index(h)))
    got = {(p.job, p.chunk): p for p, _ in tree.received()}
    assert sorted(got) == [(j, c) for j in (5, 6) for c in range(3)]
    for (j, c), p in got.items():
        assert p.values == total(vec(1000 * j + 10 * c), vec(1000 * j + 10 * c + 1))
        assert p.count == 2


def test_admitting_and_releasing_jobs_while_one_streams(tree: Tree) -> None:
    a = Job(1, ("h1", "h2"), ("s2",))
    tree.deploy([a])
    base_a = tree.held["s2"][1] if tree.held else None
    tree.contribute("h1", a, 0, vec(1))  # job 1 half way through chunk 0
    b = Job(2, ("h1", "h2"), ("s2",))
    tree.deploy([b, a])                  # job 2 admitted (a lower rank would have moved 1)
    assert tree.held and tree.held["s2"][1] == base_a
    base_b = tree.held["s2"][2]
    tree.contribute("h2", b, 9, vec(7))  # job 2 leaves a half-filled cell behind ...
    tree.deploy([a])                     # ... when it is released
    tree.contribute("h2", a, 0, vec(2))  # job 1's chunk completes in cells that did not move
    assert only(tree.received()).values == total(vec(1), vec(2))
    c = Job(3, ("h1", "h2"), ("s2",))
    tree.deploy([a, c])                  # job 3 gets job 2's old cells
    assert tree.held["s2"][3] == base_b
    tree.contribute("h1", c, 9, vec(3))  # the cell job 2 left at chunk 9: cleaned first
    tree.contribute("h2", c, 9, vec(4))
    pkt = only(tree.received())
    assert (pkt.job, pkt.values, pkt.count) == (3, total(vec(3), vec(4)), 2)


def test_overflow_is_flagged_not_silent(tree: Tree) -> None:
    tree.deploy([ALL])
    big = [2**31 - 1] + [0] * 31
    for h, v in zip(WORKERS, (big, [1], [0], [0]), strict=True):
        tree.contribute(h, ALL, 0, v)
    pkt = only(tree.received())
    assert pkt.overflow and pkt.values[0] == -(2**31)
    assert tree.events("s2")["overflow"] == 1 and tree.events("s1")["overflow"] == 0
    ok = [2**29] + [0] * 31  # 2^29 + 2^29: far from 2^31
    for h in WORKERS[:2]:
        tree.contribute(h, ALL, 1, ok)
    for h in WORKERS[2:]:
        tree.contribute(h, ALL, 1, [0])
    assert not only(tree.received()).overflow


def test_the_aggregate_carries_the_or_of_its_contributors_ce_marks(tree: Tree) -> None:
    tree.deploy([ALL])
    for c, marked in ((0, "h3"), (1, None)):
        for h in WORKERS:
            tree.contribute(h, ALL, c, vec(c), tos=0x03 if h == marked else 0x02)
        (pkt, tos), = tree.received()
        assert pkt.chunk == c and (tos & 3) == (3 if marked else 2)


def test_fault_injection_drops_the_share_it_is_set_to(tree: Tree) -> None:
    tree.deploy([], drop=0.5)
    red = Job(9, ("h1",), ())
    n = 300
    with in_netns(tree.netns["h1"]), ap.sender_socket() as s:
        for c in range(n):
            s.sendto(ap.encode(ap.contribution(red.job, c, 0, [c])), (DEST, ap.AGG_UDP_PORT))
            if c % 4 == 3:
                time.sleep(0.002)  # BMv2's packet capture drops long bursts
    tree.sent += n
    got = len(tree.received())
    dropped = tree.events("s2")["fault_drop"] + tree.events("s1")["fault_drop"]
    assert got + dropped == n
    assert 0.65 * n < dropped < 0.85 * n  # two switches at 50%: 75% expected
    tree.deploy([])  # off again by default
    tree.contribute("h1", red, 0, [5])
    assert len(tree.received()) == 1


def test_hosts_stream_through_lossy_switches_and_every_sum_is_exact(tree: Tree) -> None:
    """The hosts' state machines over BMv2 with 10% of aggregation packets dropped at every
    switch: contributions, aggregates and results are all lost now and then."""
    window, slots, n = 4, 8, 48
    job = Job(1, tuple(WORKERS), ("s2", "s3"), slots)
    tree.deploy([job], drop=0.1)
    rng = random.Random(5)
    data = {h: [[rng.randint(-(10**6), 10**6) for _ in range(32)] for _ in range(n)]
            for h in WORKERS}
    workers = {h: Worker(1, i, data[h], window, slots, rto=0.3, min_rto=0.1, max_rto=0.5)
               for i, h in enumerate(WORKERS)}
    dest = Destination(1, len(WORKERS), n)
    socks: dict[str, socket.socket] = {}
    for h in WORKERS:
        with in_netns(tree.netns[h]):
            socks[h] = ap.receiver_socket()
    ips = [HOSTS[h][0] for h in WORKERS]
    try:
        deadline = time.monotonic() + 120
        while not all(w.done for w in workers.values()):
            assert time.monotonic() < deadline, "the stream did not complete"
            now = time.monotonic()
            for h, w in workers.items():
                for pkt in w.poll(now):
                    socks[h].sendto(ap.encode(pkt), (DEST, ap.AGG_UDP_PORT))
            ready = select.select([tree.rx, *socks.values()], [], [], 0.01)[0]
            for s in ready:
                data_, _, tos = ap.recv_with_tos(s)
                pkt = ap.decode(data_)
                if s is tree.rx:
                    for wi, res in dest.receive(pkt, tos & 3 == 3, time.monotonic()):
                        tree.rx.sendto(ap.encode(res), (ips[wi], ap.AGG_UDP_PORT))
                else:
                    h = next(k for k, v in socks.items() if v is s)
                    workers[h].receive(pkt, time.monotonic())
    finally:
        for s in socks.values():
            s.close()
    for c in range(n):
        want = total(*(data[h][c] for h in WORKERS))
        assert all(w.results[c].values == want and w.results[c].count == 4
                   for w in workers.values())
    retx = sum(w.retransmissions for w in workers.values())
    drops = sum(tree.events(s)["fault_drop"] for s in tree.switches)
    assert retx > 0 and drops > 0
    print(f"\n{n} chunks x 4 workers through 10% loss per switch: {drops} packets dropped, "
          f"{retx} retransmissions")


def test_the_switch_does_what_the_python_model_does(tree: Tree) -> None:
    """One random sequence (duplicates, late copies, reordering, other jobs, bad slots, the
    destination's requests) into s2 alone; s2's output and counters against SwitchModel's on
    the same sequence. Contributions come up from h1 and h2, requests down from h0: what s2
    sends up reaches h0, the requests it passes reach the worker they name."""
    job = Job(4, ("h1", "h2"), ("s2",), slots=4)
    intent = tree.deploy([job])
    (role,) = intent.switches["s2"].aggregations
    model = SwitchModel({4: JobEntry(role.expected, role.slot_base, role.slots)})
    assert role.blue
    rng = random.Random(16)  # a sequence in which every outcome asserted below occurs
    sent: list[ap.AggPacket] = []
    for step in range(120):
        chunk = rng.randint(max(0, step // 6 - 3), step // 6 + 1)
        w = rng.randint(0, 1)
        pkt = ap.contribution(4, chunk, w, vec(chunk * 2 + w), 4)
        kind = rng.random()
        if kind < 0.2:  # the destination's request for it: held, passed or answered
            pkt = ap.nack_packet(4, chunk, rng.choice([1 << w, 0b11]), 4)
        elif kind < 0.3:  # worker w's request for the chunk's lost RESULT: passed or held
            pkt = ap.nack_packet(4, chunk, 1 << w, 4, ask=True, copy=True)
        elif kind < 0.36:  # the destination's answer to it, unicast to w: copied or not
            res = ap.result_packet(pkt, 1 << w, 2, vec(chunk), False)
            pkt = dataclasses.replace(res, slot=chunk % 4, flags=res.flags | ap.FLAG_COPY)
        if rng.random() < 0.05:
            pkt = dataclasses.replace(pkt, slot=5)  # malformed
        sent.append(pkt)
    up: list[ap.AggPacket] = []
    down: dict[str, list[ap.AggPacket]] = {"h1": [], "h2": []}
    with listening(tree, ("h1", "h2")) as hosts:
        for pkt in sent:
            worker = job.workers[(pkt.bitmap & -pkt.bitmap).bit_length() - 1] \
                if pkt.bitmap else "h1"
            going_down = pkt.flags & ap.FLAG_RESULT and not pkt.ask
            if going_down:
                hosts.send_down(worker, pkt)
                tree.settle()
            else:
                tree.send(worker, pkt)
            out = model.process(pkt)
            if out.packet is None:
                continue
            if going_down and out.event == "result":
                down[worker].append(out.packet)
            elif out.event in ("nack_spread", "result_spread"):  # s2 copies it to both
                for h in down:
                    down[h].append(out.packet)
            else:
                up.append(out.packet)
        assert hosts.received() == down
    assert [p for p, _ in tree.received()] == up
    ev = tree.events("s2")
    assert {k: ev[k] for k in model.events} == model.events
    assert (tree.uplink("s2", "agg_first"), tree.uplink("s2", "agg_repeat")) == \
        (model.first, model.repeat)
    assert model.first > 0 and model.repeat > 0
    answered = sum(1 for p in up if p.flags & ap.FLAG_RESENT and not p.nack)
    assert model.events["nack_held"] > 0 and model.events["result"] > 0
    assert model.events["nack_spread"] > 0
    assert model.events["ask_held"] > 0 and model.events["result_spread"] > 0
    print(f"\n{len(sent)} packets into s2: {model.events['nack_held']} requests held, "
          f"{model.events['result']} passed, {model.events['nack_spread']} copied below, "
          f"{model.events['resent']} stored sums sent, {model.events['ask_held']} requests "
          f"for a result held, {model.events['result_spread']} answers copied below")
    assert answered > 0
