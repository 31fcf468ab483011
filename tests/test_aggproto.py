"""The protocol's state machines (controller/innet/aggproto.py) through a simulated lossy network.

An independent oracle: the exact per-chunk sum computed here from the workers' vectors. The
network drops, duplicates (some copies very late, after the slot was reused) and reorders
packets on every hop, a worker may stall and resume, and the tree mixes blue and red
switches, several blue ones on one path. Whatever happens, every worker ends with every
chunk's exact sum counted once per worker, and the run completes.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from innet import aggpacket as ap
from innet.aggproto import (
    Destination,
    JobEntry,
    Out,
    SwitchModel,
    Worker,
    newer,
)

JOB = 7


@dataclass
class Topo:
    parent: dict[int, int]      # switch -> parent switch (-1: the destination is above it)
    attach: list[int]           # worker -> its switch
    blue: set[int]

    def path_up(self, s: int) -> list[int]:
        out = [s]
        while self.parent[out[-1]] != -1:
            out.append(self.parent[out[-1]])
        return out

    def subtree_workers(self, s: int) -> int:
        return ap.worker_bitmap(w for w, a in enumerate(self.attach) if s in self.path_up(a))

    def messages(self, s: int) -> int:
        """SOAR's msgs(s), from the tree alone: a blue switch with load below sends one
        aggregate per chunk, a red one its own workers' packets and its children's."""
        if not self.subtree_workers(s):
            return 0
        if s in self.blue:
            return 1
        return self.attach.count(s) + sum(self.messages(c) for c, p in self.parent.items()
                                          if p == s)


@dataclass
class Net:
    topo: Topo
    rng: random.Random
    loss: float
    dup: float
    late: float
    switches: dict[int, SwitchModel]
    heap: list[tuple[float, int, tuple[object, ...]]] = field(default_factory=list)
    seq: int = 0
    delivered: int = 0

    def hop(self, now: float, target: tuple[object, ...]) -> None:
        """One link: lost, delayed with jitter (reordering), sometimes duplicated (a copy
        may be very late)."""
        if self.rng.random() < self.loss:
            return
        copies = [now + 0.001 + self.rng.random() * 0.004]
        if self.rng.random() < self.dup:
            extra = self.rng.random() * (self.late if self.rng.random() < 0.3 else 0.01)
            copies.append(copies[0] + extra)
        for t in copies:
            self.seq += 1
            heapq.heappush(self.heap, (t, self.seq, target))


def simulate(topo: Topo, n_chunks: int, window: int, loss: float, dup: float, seed: int,
             stall: tuple[int, float, float] | None, grouped: bool = False
             ) -> tuple[list[Worker], Destination, dict[int, SwitchModel], list[list[int]]]:
    rng = random.Random(seed)
    n = len(topo.attach)
    slots = 2 * window
    first = rng.choice([0, 2**32 - 10 * n_chunks - 1, rng.randrange(1 << 31)])
    vectors = [[[rng.randint(-1000, 1000) for _ in range(ap.VECTOR_LEN)]
                for _ in range(n_chunks)] for _ in range(n)]
    switches = {}
    base = 0
    for s in topo.parent:
        entries = {}
        if topo.subtree_workers(s):  # on the tree: aggregate where blue, track where red
            base = (base + 37) % (ap.SLOTS - slots)
            entries[JOB] = JobEntry(topo.subtree_workers(s), base, slots, s in topo.blue)
        switches[s] = SwitchModel(entries)
    workers = [Worker(JOB, i, vectors[i], window, slots, first, rto=0.2, min_rto=0.05,
                      max_rto=1.0, reorder_s=0.05, grouped=grouped) for i in range(n)]
    # reorder_s above the network's reordering (at most 4 ms of jitter a hop, 7 hops): in a
    # clean network no NACK is ever sent
    dest = Destination(JOB, n, n_chunks, first, slots, reorder_s=0.05, group_requests=grouped)
    net = Net(topo, rng, loss, dup, late=0.5, switches=switches)
    now = 0.0
    poll_at: dict[int, float] = {}

    def schedule(i: int, t: float) -> None:
        """One pending poll per worker: the earliest one wins, stale ones are skipped."""
        if i not in poll_at or t < poll_at[i]:
            poll_at[i] = t
            net.seq += 1
            heapq.heappush(net.heap, (t, net.seq, ("poll", i, t)))

    dest_poll: list[float] = []

    def schedule_dest() -> None:
        nxt = dest.next_deadline()
        if nxt is not None and (not dest_poll or nxt < dest_poll[-1]):
            dest_poll.append(nxt)
            net.seq += 1
            heapq.heappush(net.heap, (max(nxt, now), net.seq, ("dpoll", nxt)))

    def send_down(answers: list[tuple[int, ap.AggPacket]]) -> None:
        for wi, res in answers:
            net.hop(now, ("down", wi, topo.path_up(topo.attach[wi])[::-1], 0, res))

    def copy_below(s: int, pkt: ap.AggPacket) -> None:
        """Switch s's multicast group for the job: every switch below on the job's tree and
        every worker attached."""
        for c, p in topo.parent.items():
            if p == s and topo.subtree_workers(c):
                net.hop(now, ("copy", c, pkt))
        for wi, a in enumerate(topo.attach):
            if a == s:
                net.hop(now, ("down", wi, (), 0, pkt))

    for w in workers:
        schedule(w.index, 0.0)
    steps = 0
    while net.heap and not (all(w.done for w in workers) and dest.done):
        steps += 1
        assert steps < 2_000_000, "the simulation does not converge"
        now, _, ev = heapq.heappop(net.heap)
        kind = ev[0]
        if kind == "poll":
            i = int(ev[1])  # type: ignore[call-overload]
            if poll_at.get(i) != ev[2]:
                continue
            del poll_at[i]
            w = workers[i]
            if stall and stall[0] == i and stall[1] <= now < stall[2]:
                schedule(i, stall[2])
                continue
            for pkt in w.poll(now):
                net.hop(now, ("up", topo.attach[i], pkt))
            nxt = w.next_deadline()
            if nxt is not None and not w.done:
                schedule(i, max(nxt, now + 1e-4))
        elif kind == "up":
            s, pkt = ev[1], ev[2]
            out = switches[s].process(pkt)  # type: ignore[index, arg-type]
            if out.packet is not None:
                p = topo.parent[s]  # type: ignore[index]
                net.hop(now, ("up", p, out.packet) if p != -1 else ("dest", out.packet))
        elif kind == "dest":
            send_down(dest.receive(ev[1], now=now))  # type: ignore[arg-type]
            schedule_dest()
        elif kind == "copy":  # a request, or a RESULT, a blue switch above copied below
            out = switches[ev[1]].process(ev[2], to_group=True)  # type: ignore[index, arg-type]
            if out.packet is None:
                assert out.event == "nack_held"
                continue
            assert out.packet == ev[2] if out.packet.result else (  # type: ignore[attr-defined]
                out.packet.nack and out.packet.bitmap & ~ev[2].bitmap == 0)  # type: ignore[attr-defined]
            copy_below(ev[1], out.packet)  # type: ignore[arg-type]
        elif kind == "dpoll":
            if dest_poll and dest_poll[-1] == ev[1]:
                dest_poll.clear()
            send_down(dest.poll(now))
            schedule_dest()
        elif kind == "down":
            wi, path, k, pkt = ev[1], ev[2], ev[3], ev[4]
            if k < len(path):  # type: ignore[arg-type]
                out = switches[path[k]].process(pkt)  # type: ignore[index]
                if out.packet is None:  # a request for a contribution a blue switch holds
                    assert out.event == "nack_held" and pkt.nack  # type: ignore[attr-defined]
                    continue
                if out.event == "resent":  # a complete cell answered the request: back up
                    assert pkt.nack and not out.packet.flags & ap.FLAG_RESULT  # type: ignore[attr-defined]
                    p = topo.parent[path[k]]  # type: ignore[index]
                    net.hop(now, ("up", p, out.packet) if p != -1 else ("dest", out.packet))
                    continue
                if out.event == "nack_spread":  # to the job's group address: copied below
                    assert out.packet.bitmap & ~pkt.bitmap == 0  # type: ignore[attr-defined]
                    copy_below(path[k], out.packet)  # type: ignore[arg-type]
                    continue
                if out.event == "result_spread":  # an answer some held requests wait for
                    assert out.packet == pkt and pkt.flags & ap.FLAG_COPY  # type: ignore[attr-defined]
                    copy_below(path[k], out.packet)  # type: ignore[arg-type]
                    continue
                # results pass every switch unchanged; a request may be narrowed to the
                # workers a blue switch's cell lacks
                assert out.packet == pkt or (pkt.nack  # type: ignore[attr-defined]
                                             and out.packet.bitmap & ~pkt.bitmap == 0)
                net.hop(now, ("down", wi, path, k + 1, out.packet))  # type: ignore[operator]
            else:
                w = workers[wi]  # type: ignore[call-overload]
                w.receive(pkt, now)  # type: ignore[arg-type]
                schedule(wi, now)  # type: ignore[arg-type]
    assert all(w.done for w in workers) and dest.done, "the stream did not complete"
    exact = [list(ap.wrap_sum(vectors[i][c] for i in range(n))) for c in range(n_chunks)]
    return workers, dest, switches, exact


@st.composite
def topologies(draw: st.DrawFn) -> Topo:
    n_sw = draw(st.integers(1, 6))
    parent = {0: -1}
    for s in range(1, n_sw):
        parent[s] = draw(st.integers(0, s - 1))
    n_workers = draw(st.integers(1, 6))
    attach = [draw(st.integers(0, n_sw - 1)) for _ in range(n_workers)]
    blue = set(draw(st.lists(st.integers(0, n_sw - 1), max_size=n_sw)))
    return Topo(parent, attach, blue)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topo=topologies(), n_chunks=st.integers(1, 24), window=st.integers(1, 4),
       loss=st.sampled_from([0.0, 0.05, 0.2, 0.4]), dup=st.sampled_from([0.0, 0.1, 0.4]),
       seed=st.integers(0, 2**20), stall=st.booleans(), grouped=st.booleans())
def test_every_chunk_completes_with_the_exact_sum_counted_once(
        topo: Topo, n_chunks: int, window: int, loss: float, dup: float, seed: int,
        stall: bool, grouped: bool) -> None:
    stalled = (0, 0.01, 0.5) if stall else None
    workers, dest, switches, exact = simulate(topo, n_chunks, window, loss, dup, seed, stalled,
                                              grouped)
    n = len(topo.attach)
    full = (1 << n) - 1
    for c in range(n_chunks):
        st_ = dest.state[c]
        assert (st_.bitmap, st_.count, list(st_.values)) == (full, n, exact[c])
        for w in workers:
            r = w.results[c]
            assert (r.bitmap, r.count, list(r.values), r.overflow) == (full, n, exact[c], False)
    # whatever was lost, duplicated, late or sent again, every uplink counts exactly SOAR's
    # messages per chunk as first transmissions (the measured cost is phi), the rest apart
    for s, sw in switches.items():
        assert sw.first == n_chunks * topo.messages(s), (s, sw.first, sw.repeat)
    if loss == 0 and dup == 0 and not stall:
        # a clean network: nothing retransmitted, nothing asked for, nothing stale, every
        # blue switch emits once per chunk (timers are far above the simulated round trip)
        assert all(w.retransmissions == 0 for w in workers) and dest.nacks == 0
        for s, sw in switches.items():
            assert sw.repeat == 0, s
            if sw.entries and sw.entries[JOB].blue:
                assert sw.events["emitted"] == n_chunks, s
                assert sw.events["duplicate"] == sw.events["stale"] == 0


def test_lossless_is_exactly_one_message_per_uplink_per_chunk() -> None:
    topo = Topo({0: -1, 1: 0, 2: 0}, [1, 1, 2, 2, 0], {1, 2})
    _workers, dest, switches, _exact = simulate(topo, 10, 3, 0.0, 0.0, 1, None)
    assert dest.state[0].packets == 3  # s1's sum, s2's sum, the worker on s0 through red s0
    assert switches[1].events["emitted"] == switches[2].events["emitted"] == 10
    assert switches[0].events["result"] == 50  # 10 results to each of 5 workers


def _entry(expected: int = 0b11) -> SwitchModel:
    return SwitchModel({1: JobEntry(expected, 4, 4)})


def test_switch_model_shadow_copy_and_late_copy() -> None:
    sw = _entry()
    a, b = ap.contribution(1, 5, 0, [1] * 32, 4), ap.contribution(1, 5, 1, [2] * 32, 4)
    assert sw.process(a).event == "held"
    done = sw.process(b)
    assert done.event == "emitted" and done.packet is not None
    assert done.packet.values == (3,) * 32 and done.packet.merged
    again = sw.process(a)  # a retransmission of a finished chunk: the stored sum again
    assert again.event == "resent" and again.packet is not None
    assert again.packet.values == (3,) * 32 and again.packet.flags & ap.FLAG_RESENT
    nxt = ap.contribution(1, 9, 0, [10] * 32, 4)  # same slot, chunk + slots: reuse
    assert sw.process(nxt).event == "held"
    assert sw.process(b).event == "stale"  # a late copy of chunk 5 starts nothing
    fin = sw.process(ap.contribution(1, 9, 1, [20] * 32, 4))
    assert fin.packet is not None and fin.packet.values == (30,) * 32


def test_switch_model_overflow_ce_and_malformed() -> None:
    sw = _entry()
    big = ap.contribution(1, 0, 0, [2**31 - 1] + [0] * 31, 4)
    assert sw.process(big, ce=True).event == "held"
    out = sw.process(ap.contribution(1, 0, 1, [1] + [0] * 31, 4))
    assert out.packet is not None and out.packet.overflow and out.ce
    assert out.packet.values[0] == -(2**31) and sw.events["overflow"] == 1
    bad_slot = ap.AggPacket(1, 4, 4, 1, 1, (0,) * 32)  # slot beyond the job's 4
    foreign = ap.contribution(1, 1, 2, [0], 4)          # worker 2 is not expected here
    empty = ap.AggPacket(1, 1, 1, 0, 0, (0,) * 32)
    assert [sw.process(p).event for p in (bad_slot, foreign, empty)] == ["malformed"] * 3
    assert sw.process(ap.contribution(2, 0, 0, [5], 4)).event is None  # red for job 2


def test_a_blue_switch_drops_a_request_for_a_contribution_it_holds() -> None:
    """A chunk waits on worker 1 (its packet was lost below): the destination asks workers 0
    and 1, each alone. The cell holds worker 0's contribution, so its request stops here
    (worker 0 would only send a duplicate); worker 1's goes on. For another chunk, a job the
    switch is red for, requests pass, as results do (a complete cell: the next test)."""
    sw = _entry()
    assert sw.process(ap.contribution(1, 5, 0, [1] * 32, 4)).event == "held"
    ask0, ask1 = ap.nack_packet(1, 5, 0b01, 4), ap.nack_packet(1, 5, 0b10, 4)
    assert ask0.slot == 1
    assert (sw.process(ask0).event, sw.process(ask0).packet) == ("nack_held", None)
    assert sw.process(ask1) == Out("result", ask1, False)
    assert sw.process(ap.nack_packet(1, 1, 0b01, 4)).packet is not None  # chunk 1's cell
    red = SwitchModel({1: JobEntry(0b11, 4, 4, blue=False)})
    red.process(ap.contribution(1, 5, 0, [1] * 32, 4))
    assert red.process(ask0).packet == ask0
    assert sw.events["nack_held"] == 2


def test_a_request_for_a_blue_switchs_workers_goes_on_naming_only_those_its_cell_lacks(
        ) -> None:
    """The destination asks once for all of a blue switch's workers, addressed to the lowest.
    The cell lacks the addressee alone: the request goes on to it, naming it alone. It lacks
    another worker: the request names that one and goes to the group address, which the
    switch copies to every port below (nack_spread). It lacks them all (nothing of the chunk
    came): all stay named, copied below."""
    sw = SwitchModel({1: JobEntry(0b111, 4, 4)})
    sw.process(ap.contribution(1, 5, 1, [1] * 32, 4))
    sw.process(ap.contribution(1, 5, 2, [1] * 32, 4))
    group = ap.nack_packet(1, 5, 0b111, 4)
    assert sw.process(group) == Out("result", replace(group, bitmap=0b001), False)
    sw.process(ap.contribution(1, 6, 0, [1] * 32, 4))
    sw.process(ap.contribution(1, 6, 2, [1] * 32, 4))
    group6 = ap.nack_packet(1, 6, 0b111, 4)
    assert sw.process(group6) == Out("nack_spread", replace(group6, bitmap=0b010), False)
    group7 = ap.nack_packet(1, 7, 0b111, 4)
    assert sw.process(group7) == Out("nack_spread", group7, False)
    assert sw.events["nack_spread"] == 2 and sw.events["result"] == 1


def test_a_request_copied_from_a_blue_switch_above_is_narrowed_again_below() -> None:
    """A blue switch above copied the request to its group address, naming workers 0-3;
    this one waits for workers 1 and 2. Of the named, it keeps those its cell lacks and
    copies the request below; it drops a copy naming none of its workers, or only workers it
    holds while it waits. Its cell complete (its aggregate was lost above): the copy goes on
    naming its lowest worker alone, whose copy the cell answers with the stored sum (a copy
    has no worker's address to turn back from)."""
    sw = SwitchModel({1: JobEntry(0b0110, 4, 4)})
    sw.process(ap.contribution(1, 5, 1, [1] * 32, 4))
    copy = ap.nack_packet(1, 5, 0b1111, 4)
    assert sw.process(copy, to_group=True) == Out("nack_spread", replace(copy, bitmap=0b0100),
                                                  False)
    assert sw.process(ap.nack_packet(1, 5, 0b1001, 4), to_group=True).event == "nack_held"
    assert sw.process(ap.nack_packet(1, 5, 0b0010, 4), to_group=True).event == "nack_held"
    sw.process(ap.contribution(1, 5, 2, [1] * 32, 4))
    assert sw.process(copy, to_group=True) == Out("nack_spread", replace(copy, bitmap=0b0010),
                                                  False)
    assert sw.process(ap.contribution(1, 5, 1, [1] * 32, 4)).event == "resent"


def test_the_destination_asks_once_per_blue_switch_it_learnt_from_the_aggregates() -> None:
    """Workers 0-2 are below one blue switch (its aggregates name all three), worker 3 is
    not. Chunk 0 lacks everything: with group requests, one request names 0-2 (addressed to
    worker 0) and one names worker 3; without, each worker is asked alone."""
    def asked(grouped: bool) -> list[tuple[int, int]]:
        d = Destination(JOB, 4, 3, reorder_s=0.0, group_requests=grouped)
        merged = replace(ap.contribution(JOB, 1, 0, [1] * 32, 8), bitmap=0b0111, count=3,
                         flags=ap.FLAG_MERGED)
        d.receive(merged, now=0.0)
        d.receive(ap.contribution(JOB, 1, 3, [1] * 32, 8), now=0.0)
        return [(w, pkt.bitmap) for w, pkt in d.poll(1.0)]

    assert asked(True) == [(0, 0b0111), (3, 0b1000)]
    assert asked(False) == [(0, 0b0001), (1, 0b0010), (2, 0b0100), (3, 0b1000)]


def test_a_complete_cell_answers_the_destinations_request_with_its_stored_sum() -> None:
    """The chunk is complete here, so what the destination lacks is this switch's aggregate,
    lost above it: the request of the lowest contributor comes back as the stored sum (MERGED
    | RESENT, no RESULT: it travels up like the lost aggregate, a repeat on the uplink), the
    others are dropped, and a worker's request for a RESULT (ASK) passes untouched."""
    sw = _entry()
    sw.process(ap.contribution(1, 5, 0, [1] * 32, 4))
    assert sw.process(ap.contribution(1, 5, 1, [2] * 32, 4), ce=True).event == "emitted"
    ask0, ask1 = ap.nack_packet(1, 5, 0b01, 4), ap.nack_packet(1, 5, 0b10, 4)
    assert sw.process(ask1) == Out("nack_held", None, False)
    out = sw.process(ask0)
    assert out.event == "resent" and out.ce and out.first is False
    assert out.packet == ap.AggPacket(1, 1, 5, 0b11, 2, (3,) * 32,
                                      ap.FLAG_MERGED | ap.FLAG_RESENT)
    worker_ask = ap.nack_packet(1, 5, 0b01, 4, ask=True)
    assert worker_ask.ask and sw.process(worker_ask) == Out("result", worker_ask, False)
    # another chunk's request, or a cell that a newer chunk took: nothing stored to answer
    assert sw.process(ap.nack_packet(1, 6, 0b01, 4)).event == "result"
    sw.process(ap.contribution(1, 9, 0, [1] * 32, 4))  # chunk 9 takes chunk 5's cell
    assert sw.process(ask0).event == "result"
    assert sw.events["resent"] == 1 and sw.events["nack_held"] == 1


def test_another_jobs_cell_is_cleaned_before_reuse() -> None:
    sw = SwitchModel({1: JobEntry(0b11, 0, 4)})
    assert sw.process(ap.contribution(1, 100, 0, [9] * 32, 4)).event == "held"
    sw.entries = {2: JobEntry(0b1, 0, 4)}  # job 1 released, job 2 admitted on its cells
    out = sw.process(ap.contribution(2, 0, 0, [1] * 32, 4))
    assert out.event == "emitted" and out.packet is not None
    assert out.packet.values == (1,) * 32  # nothing of job 1's half-sum is left


def test_serial_order_and_window_limits() -> None:
    assert newer(1, 0) and not newer(0, 1) and newer(0, 2**32 - 1) and not newer(5, 5)
    with pytest.raises(ValueError, match="window"):
        Worker(1, 0, [[0]], window=3, slots=4)


def test_a_chunk_retransmitted_thousands_of_times_keeps_its_timer_at_the_ceiling() -> None:
    """Heavy loss once made backoff ** tries overflow a float (OverflowError) after ~1,750
    tries of one chunk; the timer stays at max_rto however many tries there are."""
    w = Worker(JOB, 0, [[1] * ap.VECTOR_LEN], window=1, slots=2, rto=0.1, min_rto=0.05,
               max_rto=1.0)
    now = 0.0
    assert len(w.poll(now)) == 1
    for _ in range(3000):
        now += 2.0
        assert len(w.poll(now)) == 1  # the answer never comes: sent again each time
        deadline = w.next_deadline()
        assert deadline is not None and now < deadline <= now + 1.0
    assert w.next_deadline() == now + 1.0 and w.retransmissions == 3000


def test_a_lost_contribution_is_asked_of_its_worker_only() -> None:
    """FIFO links, one contribution lost: once a later chunk completes, the destination asks
    the one worker whose bit is missing, and nobody else sends anything again (before, every
    worker of the chunk timed out and sent it again)."""
    n, chunks = 4, 3
    workers = [Worker(JOB, i, [[i + 1] * ap.VECTOR_LEN] * chunks, window=4, slots=8, rto=1.0,
                      min_rto=0.5, max_rto=2.0) for i in range(n)]
    dest = Destination(JOB, n, chunks, slots=8, reorder_s=0.002)
    answers = []
    for w in workers:
        w.cwnd = 4.0  # the whole window at once
        for pkt in w.poll(0.0):
            if not (w.index == 2 and pkt.chunk == 0):  # lost on the way
                answers += dest.receive(pkt, now=0.01)
    assert dest.complete == 2 and dest.poll(0.011) == []  # still within the reordering allowance
    for wi, res in answers:
        workers[wi].receive(res, 0.02)
    nacks = dest.poll(0.013)
    assert [(wi, p.chunk, p.bitmap, p.nack, p.result) for wi, p in nacks] == [
        (2, 0, 0b100, True, False)]
    for w in workers:
        w.receive(nacks[0][1], 0.02)
    again = {w.index: w.poll(0.02) for w in workers}
    assert {i: [p.chunk for p in pkts] for i, pkts in again.items()} == {0: [], 1: [], 2: [0],
                                                                          3: []}
    done = dest.receive(again[2][0], now=0.03)
    assert dest.done and len(done) == n and all(r.result for _, r in done)
    for wi, res in done:
        workers[wi].receive(res, 0.04)
    assert all(w.done for w in workers) and dest.poll(10.0) == []
    assert [w.retransmissions for w in workers] == [0, 0, 1, 0] and workers[2].nacked == 1
    assert dest.nacks == 1


def test_an_unanswered_request_is_repeated_on_its_timer_and_a_nack_is_never_a_result(
) -> None:
    """A request's repeats keep the learnt timer (a lost request is random loss on a path
    that works); only the sixth try and later grow the backoff that Karn's rule needs."""
    dest = Destination(JOB, 2, 2, reorder_s=0.0, nack_rto=0.1)
    w0 = Worker(JOB, 0, [[1] * ap.VECTOR_LEN] * 2, window=2, slots=4)
    w0.cwnd = 2.0
    sent = w0.poll(0.0)
    dest.receive(sent[0], now=0.0)  # chunk 0: only worker 0 arrives
    dest.receive(sent[1], now=0.0)
    dest.receive(ap.contribution(JOB, 1, 1, [1] * ap.VECTOR_LEN, 4), now=0.0)  # 1 completes
    first = dest.poll(0.0)
    assert [(wi, p.bitmap) for wi, p in first] == [(1, 0b10)]
    assert dest.poll(0.09) == []            # the request's timer has not fired
    now = 0.1
    for _ in range(4):                      # tries 2..5, each after one learnt timer
        assert len(dest.poll(now)) == 1
        assert dest.next_deadline() == pytest.approx(now + 0.1)
        now += 0.1
    assert len(dest.poll(now)) == 1         # the sixth try ...
    assert dest.next_deadline() == pytest.approx(now + 0.15)  # ... grows the backoff 1.5x
    w0.receive(first[0][1], 0.1)            # a NACK for another worker: ignored
    w0.receive(ap.nack_packet(JOB, 0, 0b01), 0.1)
    assert not w0.results                   # a NACK is never taken for the sum
    assert [p.chunk for p in w0.poll(0.1)] == [0]


def test_a_result_lost_on_the_way_down_is_asked_for_by_that_worker_alone() -> None:
    """RESULTs say how far behind the destination's oldest incomplete chunk is: a worker
    that lacks the result of an older, complete chunk lost it, and asks again at once
    (after the reordering allowance), long before any timer; the destination answers it."""
    n, chunks = 3, 3
    workers = [Worker(JOB, i, [[i + 1] * ap.VECTOR_LEN] * chunks, window=4, slots=8, rto=1.0,
                      min_rto=0.5, max_rto=2.0, reorder_s=0.002) for i in range(n)]
    dest = Destination(JOB, n, chunks)
    results: dict[int, ap.AggPacket] = {}
    for w in workers:
        w.cwnd = 4.0
        for pkt in w.poll(0.0):
            for _, res in dest.receive(pkt, now=0.01):
                results[res.chunk] = res
    assert dest.done and [results[c].slot for c in range(chunks)] == [0, 0, 0]
    for w in workers:
        for c in range(chunks):
            if not (w.index == 1 and c == 0):  # worker 1's copy of RESULT 0 is lost
                w.receive(results[c], 0.02)
    assert [w.done for w in workers] == [True, False, True]
    assert workers[1].poll(0.021) == []                # within the reordering allowance
    again = workers[1].poll(0.023)
    assert [(p.chunk, p.nack, p.bitmap) for p in again] == [(0, True, 0b10)]  # a request
    assert workers[1].lost_results == workers[1].result_requests == 1
    answers = dest.receive(again[0], now=0.03)          # a finished chunk: answered ...
    assert [(wi, p.chunk, p.result) for wi, p in answers] == [(1, 0, True)]  # ... to it alone
    workers[1].receive(answers[0][1], 0.04)
    assert workers[1].done and workers[1].timeouts == 0 and dest.nacks == 0


def test_a_result_lost_is_known_from_the_next_result_sent_to_every_worker() -> None:
    """Each RESULT names the one the destination sent to every worker before it: a worker
    that has the later one and not that one lost it, and asks at once, even while the
    destination's oldest incomplete chunk (`behind`) is too far back to say."""
    n, chunks = 2, 3
    workers = [Worker(JOB, i, [[i + 1] * ap.VECTOR_LEN] * chunks, window=4, slots=8, rto=1.0,
                      min_rto=0.5, max_rto=2.0, reorder_s=0.002) for i in range(n)]
    dest = Destination(JOB, n, chunks)
    sent = [w.poll(0.0) for w in workers]
    for w in workers:
        w.cwnd = 4.0
        sent[w.index] += w.poll(0.0)
    assert [len(s) for s in sent] == [3, 3]
    # chunk 0 waits on worker 1's lost contribution; 2 completes, then 1
    dest.receive(sent[0][0], now=0.01)
    results = []
    for c in (2, 1):
        for w in range(n):
            results += dest.receive(sent[w][c], now=0.01)
    res2, res1 = results[0][1], results[n][1]
    assert (res2.chunk, res2.previous, res1.chunk, res1.previous) == (2, 0, 1, -1)
    assert res1.slot == 1                  # behind: chunk 0 is not complete
    back = ap.decode(ap.encode(res1))
    assert back.previous == -1             # a signed byte on the wire
    w = workers[0]
    w.receive(back, 0.02)                  # RESULT 2 was lost on the way to worker 0
    assert w.poll(0.021) == []             # within the reordering allowance
    again = w.poll(0.023)
    assert [(p.chunk, p.nack, p.ask) for p in again] == [(2, True, True)]
    answer = dest.receive(again[0], now=0.03)
    assert [(wi, p.chunk, p.previous) for wi, p in answer] == [(0, 2, 0)]


def test_a_lost_results_request_keeps_its_timer_and_karns_backoff_is_shared() -> None:
    """The request for a lost RESULT is repeated after the learnt round trip of such
    requests, not 1.5x longer per try; from a request's sixth try the shared backoff grows
    (a timer shorter than the round trip would otherwise never see a clean sample), and a
    request answered at its first try resets it and is the only kind of sample."""
    w = Worker(JOB, 0, [[1] * ap.VECTOR_LEN] * 8, window=4, slots=8, rto=1.0, min_rto=0.01,
               max_rto=2.0, reorder_s=0.0)
    w.cwnd = 4.0
    pkts = w.poll(0.0)
    assert [p.chunk for p in pkts] == [0, 1, 2, 3]
    w.repair_rto = 0.02
    # RESULT 1 comes saying chunk 0 is complete (behind 0): RESULT 0 was lost
    w.receive(ap.result_packet(pkts[1], 1, 1, pkts[1].values, False, behind=0), 0.01)
    now, deadlines = 0.01, []
    for _ in range(7):
        asks = w.poll(now)
        assert [(p.chunk, p.ask) for p in asks] == [(0, True)]
        deadlines.append(round(w.next_deadline() - now, 6))
        now = w.next_deadline()
    assert deadlines == [0.02] * 5 + [0.03, 0.045]
    # the answer to a repeated request is no sample (Karn) and leaves the backoff
    w.receive(ap.result_packet(pkts[0], 1, 1, pkts[0].values, False, behind=0), now + 0.001)
    assert w.repair_rto == 0.02
    w.receive(ap.result_packet(pkts[3], 1, 1, pkts[3].values, False, behind=0), now + 0.002)
    later = w.poll(now + 0.002)            # RESULT 2 lost: asked with the grown backoff
    assert [(p.chunk, p.ask) for p in later if p.ask] == [(2, True)]
    assert w._deadline[2] == pytest.approx(now + 0.002 + 0.045)
    w.receive(ap.result_packet(pkts[2], 1, 1, pkts[2].values, False, behind=0), now + 0.012)
    assert w.repair_rto == pytest.approx(0.01 * 3)  # first sample: srtt + 4 x srtt / 2
    assert w._repair_backoff == 1.0


def test_a_chunk_waiting_on_another_workers_repair_does_not_hold_an_in_flight_slot() -> None:
    """Once the RESULT of chunk j has come, this worker's packets of every older chunk have
    left the FIFO network: an older chunk still unanswered waits on someone else's repair,
    so new chunks go out in its place, up to the in-flight limit, within the window."""
    w = Worker(JOB, 0, [[1] * ap.VECTOR_LEN] * 40, window=16, slots=32, inflight=4, rto=1.0,
               min_rto=0.5, max_rto=2.0)
    w.cwnd = 4.0
    first = w.poll(0.0)
    assert [p.chunk for p in first] == [0, 1, 2, 3] and w.in_flight == 4
    # chunk 0 waits on another worker's lost contribution; 1..3 complete (behind: the
    # destination's oldest incomplete chunk is still 0)
    for c in (1, 2, 3):
        w.receive(ap.result_packet(first[c], 1, 1, first[c].values, False, behind=c), 0.01)
    assert w.in_flight == 0
    # four new chunks go, although chunk 0 is unanswered (the unanswered count, 1 + 4, would
    # have held one back)
    assert [p.chunk for p in w.poll(0.011)] == [4, 5, 6, 7] and w.in_flight == 4
    assert w.poll(0.012) == []                          # the limit holds for what is in flight
    # the window still bounds the span: chunk 0 unanswered stops the stream at 0 + 16
    for c in range(4, 16):
        pkt = w.packet(c)
        w.receive(ap.result_packet(pkt, 1, 1, pkt.values, False, behind=c), 0.02)
        w.poll(0.02)
    assert w._next == 16 and w.poll(0.03) == []


def answer(w: Worker, pkts: list[ap.AggPacket], now: float, ece: bool) -> None:
    """The destination's RESULT for each of a lone worker's packets, echoing a mark or not."""
    for p in pkts:
        dest = Destination(JOB, 1, p.chunk + 1)
        [(_, res)] = dest.receive(p, ce=ece, now=now)
        w.receive(ap.decode(ap.encode(res)), now)


def test_the_destination_echoes_a_ce_mark_in_the_chunks_result_only() -> None:
    """The switches OR the marks of what they merge into the aggregate's IP header; the
    destination turns the mark it sees into the RESULT's ECE flag, which survives the wire,
    for that chunk only."""
    d = Destination(JOB, 2, 2)
    a = ap.contribution(JOB, 0, 0, [1] * ap.VECTOR_LEN)
    b = ap.contribution(JOB, 0, 1, [2] * ap.VECTOR_LEN)
    assert d.receive(a, ce=True, now=0.0) == []
    [(_, r0), (_, r1)] = d.receive(b, ce=False, now=0.0)
    assert r0 is r1 and ap.decode(ap.encode(r0)).ece and r0.result
    c = ap.contribution(JOB, 1, 0, [1] * ap.VECTOR_LEN)
    d.receive(c, now=0.0)
    [(_, clean), _] = d.receive(ap.contribution(JOB, 1, 1, [1] * ap.VECTOR_LEN), now=0.0)
    assert not clean.ece


def test_echoed_marks_cut_the_window_and_clean_results_open_it() -> None:
    """DCTCP's reaction on the chunk window: results without marks open it to the cap (and
    let alpha decay); a window with a marked result cuts it by alpha / 2, once per window of
    results; marks on every result drive alpha toward 1 and hold the window near its floor
    (a chunk of growth a window against a halving: about two chunks, of the cap's eight)."""
    chunks = [[1] * ap.VECTOR_LEN] * 400
    w = Worker(JOB, 0, chunks, window=8, slots=16)
    now = 0.0
    while w.cwnd < 8:
        now += 0.01
        answer(w, w.poll(now), now, ece=False)
    assert w.cwnd == 8 and w.marks == w.cuts == 0
    now += 0.01
    sent = w.poll(now)
    answer(w, sent[:1], now, ece=True)
    assert w.marks == 1 and w.cuts == 0  # a window is 8 results: no decision yet
    alpha = w.alpha
    answer(w, sent[1:], now, ece=False)
    assert w.cuts == 1 and w.alpha < alpha and w.cwnd <= 8 * (1 - w.alpha / 2) + 1
    while w.cuts < 40:
        now += 0.01
        answer(w, w.poll(now), now, ece=True)
    assert 1.0 <= w.cwnd < 2.5 and w.marks > 40 and w.alpha > 0.9


def test_a_timer_shorter_than_the_round_trip_backs_off_until_it_learns_the_round_trip(
) -> None:
    """Karn's rule keeps the backed-off timer until a clean sample (RFC 6298 5.5): a worker
    whose timer had learnt 30 ms, when the queues hold every packet 600 ms, once sent each
    chunk ~5 times before its RESULT came, never sampled a round trip (every chunk was sent
    again before it was answered) and so never learnt it; on BMv2 that stream's repeats kept
    the queues that long (a lossless run of 4,096 chunks collapsed to 773 values/s with
    212,854 timeouts). The quiet time the stream's timer waits for now backs off per expiry
    (from the second) until a chunk sent once is answered, and from then on nothing is sent
    twice."""
    delay = 0.3  # each way
    w = Worker(JOB, 0, [[1] * ap.VECTOR_LEN] * 200, window=8, slots=16, rto=0.03,
               min_rto=0.005, max_rto=2.0)
    dest = Destination(JOB, 1, 200)
    wire: list[tuple[float, int, ap.AggPacket]] = []  # (arrival, order sent, packet)
    now, seq = 0.0, 0
    timeouts_at_half = None
    while not w.done and now < 120:
        for p in w.poll(now):
            heapq.heappush(wire, (now + delay, seq, p))
            seq += 1
        while wire and wire[0][0] <= now + 1e-9:
            _, _, p = heapq.heappop(wire)
            if p.result:
                w.receive(p, now)
                continue
            for _, res in dest.receive(p, now=now):
                heapq.heappush(wire, (now + delay, seq, res))
                seq += 1
        if timeouts_at_half is None and w._low >= 100:
            timeouts_at_half = w.timeouts
        now = round(now + 0.001, 6)
    assert w.done and timeouts_at_half is not None
    assert w.srtt is not None and w.srtt == pytest.approx(2 * delay, abs=0.01)
    assert w.timeouts == timeouts_at_half  # the second half: not one chunk sent twice
    assert w.timeouts < 20
