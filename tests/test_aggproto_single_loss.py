"""What one lost packet costs the protocol, place by place (docs/aggregation-protocol.md,
"The cost of one loss").

The protocol's own state machines (controller/innet/aggproto.py) run on a small fixed tree
with FIFO links of equal delay and no jitter; the destination's RESULT is copied down the
tree as the switches' multicast groups copy it; everything else is unicast along the tree.
The stream runs once without loss and once with exactly one packet dropped at one place, and
the difference in packets sent onto links, by kind, is the repair's cost. The oracle is the
table worked out by hand from the protocol's rules, in the doc and below: a change to the
repairs changes the table, on purpose and visibly.

    d
    |
    s0 (red) --- w2
    |
    s1 (blue) --- w0, w1
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

import pytest

from innet import aggpacket as ap
from innet.aggproto import Destination, JobEntry, SwitchModel, Worker

JOB = 3
CHUNKS = 8
LOST_CHUNK = 2     # later chunks reveal its loss
WINDOW = 4
HOP_S = 0.001
# which switch each worker hangs off, and each switch's parent ("d": the destination)
ATTACH = {0: "s1", 1: "s1", 2: "s0"}
PARENT = {"s1": "s0", "s0": "d"}
BLUE = {"s1"}


def _below(switch: str) -> int:
    """The workers whose path to d crosses `switch`."""
    bits = 0
    for w, s in ATTACH.items():
        while s != "d":
            if s == switch:
                bits |= 1 << w
            s = PARENT[s]
    return bits


def _path_up(worker: int) -> list[str]:
    """Nodes from a worker's switch up to d."""
    out = [ATTACH[worker]]
    while out[-1] != "d":
        out.append(PARENT[out[-1]])
    return out


def kind(pkt: ap.AggPacket, down: bool) -> str:
    """What a packet on a link is, for the cost table."""
    if pkt.nack:
        return "request from d" if down else "request for a result"
    if pkt.result:
        return "result"
    if pkt.flags & ap.FLAG_RESENT:
        return "re-emitted sum"
    if pkt.merged:
        return "aggregate"
    return "contribution"


@dataclass(frozen=True)
class Arrive:
    """A packet reaches `node` going up (a switch, or "d")."""
    node: str
    pkt: ap.AggPacket


@dataclass(frozen=True)
class Copy:
    """The destination's RESULT reaches switch `node`, which copies it to every link below."""
    node: str
    pkt: ap.AggPacket


@dataclass(frozen=True)
class Down:
    """A unicast packet from d toward worker `w` reaches path[k] (path: d's side first)."""
    w: int
    path: tuple[str, ...]
    k: int
    pkt: ap.AggPacket


@dataclass(frozen=True)
class Deliver:
    w: int
    pkt: ap.AggPacket


@dataclass(frozen=True)
class PollWorker:
    w: int
    at: float


@dataclass(frozen=True)
class PollDest:
    at: float


Event = Arrive | Copy | Down | Deliver | PollWorker | PollDest


@dataclass
class Run:
    """One stream on the tree; `drop` names the link (from, to) and the kind of the one
    packet of LOST_CHUNK to lose there (its first crossing)."""

    drop: tuple[str, str, str] | None
    group_requests: bool = True
    sent: Counter[str] = field(default_factory=Counter)
    dropped: int = 0
    _heap: list[tuple[float, int, Event]] = field(default_factory=list)
    _seq: int = 0

    def _at(self, t: float, ev: Event) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, ev))

    def link(self, now: float, a: str, b: str, pkt: ap.AggPacket, down: bool,
             then: Event) -> None:
        """Put one packet on the link a -> b; it arrives one hop later (FIFO: equal delays,
        ties in sending order) unless it is the packet to lose."""
        what = kind(pkt, down)
        self.sent[what] += 1
        if (self.drop is not None and not self.dropped and self.drop == (a, b, what)
                and pkt.chunk == LOST_CHUNK):
            self.dropped += 1
            return
        self._at(now + HOP_S, then)

    def go(self) -> None:
        vectors = [[[(w + 1) * 1000 + c * 10 + e for e in range(ap.VECTOR_LEN)]
                    for c in range(CHUNKS)] for w in ATTACH]
        slots = 2 * WINDOW
        switches = {s: SwitchModel({JOB: JobEntry(_below(s), 16, slots, s in BLUE)})
                    for s in PARENT}
        # timers far above the tree's round trips (a few ms): repairs here are all driven by
        # what later packets reveal, never by a timer firing early
        workers = [Worker(JOB, w, vectors[w], WINDOW, slots, rto=0.5, min_rto=0.5,
                          max_rto=2.0, grouped=self.group_requests) for w in ATTACH]
        dest = Destination(JOB, len(ATTACH), CHUNKS, slots=slots,
                           group_requests=self.group_requests)
        polls: dict[int, float] = {}   # one pending poll per worker: the earliest
        dest_polls: set[float] = set()

        def poll_worker(w: int, t: float) -> None:
            if w not in polls or t < polls[w]:
                polls[w] = t
                self._at(t, PollWorker(w, t))

        def poll_dest(now: float) -> None:
            t = dest.next_deadline()
            if t is not None and t not in dest_polls:
                dest_polls.add(t)
                self._at(max(t, now), PollDest(t))

        def copy_below(now: float, s: str, pkt: ap.AggPacket) -> None:
            """Switch s's multicast group for the job: one copy on every link below."""
            for child in sorted(c for c, p in PARENT.items() if p == s):
                self.link(now, s, child, pkt, True, Copy(child, pkt))
            for w in sorted(w for w, a in ATTACH.items() if a == s):
                self.link(now, s, f"w{w}", pkt, True, Deliver(w, pkt))

        def send_down(now: float, answers: list[tuple[int, ap.AggPacket]],
                      multicast: bool) -> None:
            if multicast:  # one packet, copied by every switch toward the workers below it
                self.link(now, "d", "s0", answers[0][1], True, Copy("s0", answers[0][1]))
                return
            for w, pkt in answers:
                path = tuple(_path_up(w)[::-1])  # d, ..., the worker's switch
                self.link(now, path[0], path[1], pkt, True, Down(w, path, 1, pkt))

        for w in ATTACH:
            poll_worker(w, 0.0)
        steps = 0
        while self._heap and not (all(w.done for w in workers) and dest.done):
            steps += 1
            assert steps < 100_000, "the stream does not converge"
            now, _, ev = heapq.heappop(self._heap)
            match ev:
                case PollWorker(w, at):
                    if polls.get(w) != at:
                        continue
                    del polls[w]
                    for pkt in workers[w].poll(now):
                        self.link(now, f"w{w}", ATTACH[w], pkt, False, Arrive(ATTACH[w], pkt))
                    nxt = workers[w].next_deadline()
                    if nxt is not None and not workers[w].done:
                        poll_worker(w, max(nxt, now + 1e-6))
                case Arrive("d", pkt):
                    before = dest.complete
                    answers = dest.receive(pkt, now=now)
                    if answers:
                        send_down(now, answers, multicast=dest.complete > before)
                    poll_dest(now)
                case Arrive(s, pkt):
                    out = switches[s].process(pkt)
                    if out.packet is not None:
                        self.link(now, s, PARENT[s], out.packet, False,
                                  Arrive(PARENT[s], out.packet))
                case PollDest(at):
                    dest_polls.discard(at)
                    send_down(now, dest.poll(now), multicast=False)
                    poll_dest(now)
                case Copy(s, pkt):
                    out = switches[s].process(pkt, to_group=True)
                    if out.packet is not None:  # a copied request may stop at a blue switch
                        copy_below(now, s, out.packet)
                case Down(w, path, k, pkt):
                    out = switches[path[k]].process(pkt)
                    if out.packet is None:  # a request for a contribution a blue switch holds
                        assert out.event == "nack_held"
                        continue
                    if out.event == "resent":  # a complete cell answered d's request: back up
                        s = path[k]
                        self.link(now, s, PARENT[s], out.packet, False,
                                  Arrive(PARENT[s], out.packet))
                        continue
                    if out.event in ("nack_spread", "result_spread"):  # copied below
                        copy_below(now, path[k], out.packet)
                        continue
                    pkt = out.packet  # a blue switch may have narrowed what it asks for
                    if k + 1 < len(path):
                        self.link(now, path[k], path[k + 1], pkt, True, Down(w, path, k + 1, pkt))
                    else:
                        self.link(now, path[k], f"w{w}", pkt, True, Deliver(w, pkt))
                case Deliver(w, pkt):
                    workers[w].receive(pkt, now)
                    poll_worker(w, now)
        assert all(w.done for w in workers) and dest.done, "the stream did not complete"
        if self.drop is not None:
            assert self.dropped == 1, f"no {self.drop[2]} crossed {self.drop[0]} -> {self.drop[1]}"
        for c in range(CHUNKS):
            exact = tuple(ap.wrap_sum(vectors[w][c] for w in ATTACH))
            assert all(tuple(w.results[c].values) == exact for w in workers)


def repair_cost(drop: tuple[str, str, str], group_requests: bool = True) -> dict[str, int]:
    """Packets sent onto links with the one loss, less without it, by kind."""
    clean = Run(None, group_requests)
    clean.go()
    lossy = Run(drop, group_requests)
    lossy.go()
    diff = Counter(lossy.sent)
    diff.subtract(clean.sent)
    return {k: v for k, v in diff.items() if v}


# The table of docs/aggregation-protocol.md, worked out by hand: the packets the loss adds
# (the lost packet was sent in both runs; what it would have carried further is not sent, so a
# kind can go negative). Hops: w0/w1 - s1 - s0 - d, w2 - s0 - d. d asks once per blue switch:
# the earlier chunks' aggregates showed it that w0 and w1 are below one (s1).
TABLE: dict[tuple[str, str, str], dict[str, int]] = {
    # d asks w0 and w1 in one request, addressed to w0 (2 hops to s1); s1 holds w1's
    # contribution and lacks w0's, the addressee's: the request goes on to w0 naming it alone
    # (1); w0 sends again (1); s1's aggregate then goes up as it would have
    ("w0", "s1", "contribution"): {"request from d": 3, "contribution": 1},
    # the same request; s1 lacks w1's, not the addressee's: it names w1 alone and goes to
    # the job's group address, copied to w0 (which is not named: ignores it) and w1 (2)
    ("w1", "s1", "contribution"): {"request from d": 4, "contribution": 1},
    # one request to s1 (2), whose cell is complete: the loss was its aggregate's; s1 answers
    # with its stored sum, sent back up (2) in place of the lost aggregate's remaining hop
    ("s1", "s0", "aggregate"): {"request from d": 2, "aggregate": -1, "re-emitted sum": 2},
    # the same repair; the lost aggregate had crossed both links
    ("s0", "d", "aggregate"): {"request from d": 2, "re-emitted sum": 2},
    # d asks w2 (2), w2 sends again (2) in place of the lost one's remaining hop (1)
    ("w2", "s0", "contribution"): {"request from d": 2, "contribution": 1},
    # the result lost before its first copy (4 links not crossed): the next result shows each
    # worker that the chunk is complete; w2 asks d (2); w0's request passes s1 (3) and w1's
    # is held there (1); d answers w2 (2) and w0 (2 to s1), and s1, which held a request,
    # copies that answer to w0 and w1 (2)
    ("d", "s0", "result"): {"request for a result": 6, "result": 2},
    # lost toward s1 (2 links below not crossed): w0 asks (3), w1's request is held at s1 (1);
    # d's answer to w0 (2) is copied below s1 (2)
    ("s0", "s1", "result"): {"request for a result": 4, "result": 2},
    # lost toward w0 alone: w0 asks (3), d answers (3), s1 passes it to w0 alone (none held)
    ("s1", "w0", "result"): {"request for a result": 3, "result": 3},
}

# Without the switches' multicast groups (results unicast), d asks each missing worker
# apart; where that differs from the table above:
PER_WORKER: dict[tuple[str, str, str], dict[str, int]] = {
    **TABLE,
    # nor does a blue switch hold the requests for a result: each worker asks d (3 + 3 + 2)
    # and d answers each (3 + 3 + 2)
    ("d", "s0", "result"): {"request for a result": 8, "result": 4},
    # w0 and w1 ask (3 + 3), d answers (3 + 3)
    ("s0", "s1", "result"): {"request for a result": 6, "result": 4},
    # d asks w0 (3 hops) and w1 (2: s1 holds w1's contribution and drops that request)
    ("w0", "s1", "contribution"): {"request from d": 5, "contribution": 1},
    # d asks w0 (2: dropped at s1) and w1 (3)
    ("w1", "s1", "contribution"): {"request from d": 5, "contribution": 1},
    # d asks w0 and w1 (2 + 2 to s1); s1 answers w0's, its lowest contributor's, and drops w1's
    ("s1", "s0", "aggregate"): {"request from d": 4, "aggregate": -1, "re-emitted sum": 2},
    ("s0", "d", "aggregate"): {"request from d": 4, "re-emitted sum": 2},
}


@pytest.mark.parametrize("place", list(TABLE), ids=lambda p: f"{p[2]} {p[0]}->{p[1]}")
def test_one_lost_packet_costs_what_the_table_says(place: tuple[str, str, str]) -> None:
    assert repair_cost(place) == TABLE[place]


@pytest.mark.parametrize("place", list(PER_WORKER), ids=lambda p: f"{p[2]} {p[0]}->{p[1]}")
def test_one_lost_packet_costs_what_the_table_says_when_d_asks_each_worker(
        place: tuple[str, str, str]) -> None:
    assert repair_cost(place, group_requests=False) == PER_WORKER[place]


def test_the_lossless_stream_sends_one_message_per_link_per_chunk() -> None:
    """The baseline the costs are counted from, per chunk: w0's and w1's contributions (one
    link each), w2's (w2-s0, s0-d), s1's aggregate (s1-s0, s0-d), and the result once on
    each link of the tree (d-s0, s0-s1, s0-w2, s1-w0, s1-w1)."""
    run = Run(None)
    run.go()
    assert dict(run.sent) == {"contribution": 4 * CHUNKS, "aggregate": 2 * CHUNKS,
                              "result": 5 * CHUNKS}
