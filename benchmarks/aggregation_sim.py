"""The reliable aggregation protocol's repairs under loss, without BMv2: where a stream waits.

    .venv/bin/python benchmarks/aggregation_sim.py [--loss 0 0.01 0.02 0.05] [--seeds 8 9 10 11]
        [--chunks 1024] [--hop-ms 2] [--jitter-ms 0.5]

Runs the protocol's own state machines (innet.aggproto: Worker, Destination, and SwitchModel,
the P4 control in Python) on bt15's tree (16 workers under 8 leaf switches of a binary tree of
15, SOAR's k = 4 plan: blue at the four switches of level 2) with links of equal delay plus
jitter, each hop losing a packet with the given probability; the destination's RESULT is copied
down the tree as the switches' multicast groups copy it, and a request narrowed by a blue switch
is copied below it, as is the answer to requests for a lost RESULT that a blue switch held.
Switches and hosts cost nothing here, so the figures are the protocol's:
chunks per second, the backstop timer's retransmissions, the requests for lost RESULTs, the
packets that reached a switch per chunk (what BMv2 spends its CPU on), and the gaps of over
100 ms between two chunks completing at the destination (a stream stalled). BMv2
(benchmarks/aggregation_bench.py) is what measures goodput; this is what shows why it waits.
Prints one line per loss, the mean over the seeds (each seed a fresh stream and loss pattern).
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from innet import aggpacket as ap
from innet.aggproto import Destination, JobEntry, SwitchModel, Worker

JOB = 7
WORKERS = 16
PARENT = {0: -1, **{s: (s - 1) // 2 for s in range(1, 15)}}  # bt15: switch -> parent
ATTACH = [7 + w // 2 for w in range(WORKERS)]                 # worker -> its leaf switch
BLUE = {3, 4, 5, 6}                                           # SOAR k = 4 on bt15


def _path_up(s: int) -> list[int]:
    out = [s]
    while PARENT[out[-1]] != -1:
        out.append(PARENT[out[-1]])
    return out


def _below(s: int) -> int:
    return ap.worker_bitmap(w for w, a in enumerate(ATTACH) if s in _path_up(a))


@dataclass
class Stream:
    """One stream: the event queue, the hosts and the switches."""
    loss: float
    rng: random.Random
    hop_s: float
    jitter_s: float
    workers: list[Worker]
    dest: Destination
    switches: dict[int, SwitchModel]
    heap: list[tuple[float, int, tuple[Any, ...]]] = field(default_factory=list)
    seq: int = 0
    now: float = 0.0
    poll_at: dict[Any, float] = field(default_factory=dict)
    completions: list[float] = field(default_factory=list)
    switch_packets: int = 0  # packets that reached a switch (what BMv2 spends its CPU on)

    def at(self, t: float, ev: tuple[Any, ...]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, ev))

    def hop(self, ev: tuple[Any, ...]) -> None:
        """One link: lost with probability `loss`, else there one hop (plus jitter) later."""
        if self.rng.random() >= self.loss:
            self.at(self.now + self.hop_s + self.rng.random() * self.jitter_s, ev)
            self.switch_packets += ev[0] in ("up", "copy") or (ev[0] == "down"
                                                                and ev[3] < len(ev[2]))

    def schedule(self, who: Any, t: float | None) -> None:
        """One pending poll per host (a worker's index, or "d"): the earliest wins."""
        if t is not None and (who not in self.poll_at or t < self.poll_at[who]):
            self.poll_at[who] = max(t, self.now)
            self.at(self.poll_at[who], ("poll", who, self.poll_at[who]))

    def copy_below(self, s: int, pkt: ap.AggPacket) -> None:
        for c, p in PARENT.items():
            if p == s:
                self.hop(("copy", c, pkt))
        for w, a in enumerate(ATTACH):
            if a == s:
                self.hop(("down", w, (), 0, pkt))

    def from_dest(self, answers: list[tuple[int, ap.AggPacket]]) -> None:
        if len(answers) == WORKERS:  # a chunk completed: one RESULT, copied down the tree
            self.completions.append(self.now)
            self.hop(("copy", 0, answers[0][1]))
            return
        for w, pkt in answers:
            self.hop(("down", w, tuple(_path_up(ATTACH[w])[::-1]), 0, pkt))

    def up(self, s: int, pkt: ap.AggPacket) -> None:
        """`pkt` leaves switch s toward the destination."""
        self.hop(("up", PARENT[s], pkt) if PARENT[s] != -1 else ("dest", pkt))


def _new_stream(loss: float, seed: int, chunks: int, hop_s: float, jitter_s: float,
                window: int = 128, inflight: int = 16) -> Stream:
    rng = random.Random(seed)
    slots = 2 * window
    vectors = [[[rng.randint(-9, 9)] * ap.VECTOR_LEN for _ in range(chunks)]
               for _ in range(WORKERS)]
    switches = {s: SwitchModel({JOB: JobEntry(_below(s), 0, slots, s in BLUE)}) for s in PARENT}
    workers = [Worker(JOB, i, vectors[i], window, slots, 0, rto=0.2, min_rto=0.005,
                      max_rto=1.0, inflight=inflight, grouped=True) for i in range(WORKERS)]
    dest = Destination(JOB, WORKERS, chunks, 0, slots, group_requests=True)
    return Stream(loss, rng, hop_s, jitter_s, workers, dest, switches)


def _step(st: Stream, ev: tuple[Any, ...]) -> None:
    kind = ev[0]
    if kind == "poll":
        if st.poll_at.get(ev[1]) != ev[2]:
            return
        del st.poll_at[ev[1]]
        if ev[1] == "d":
            st.from_dest(st.dest.poll(st.now))
            st.schedule("d", st.dest.next_deadline())
            return
        w = st.workers[ev[1]]
        for pkt in w.poll(st.now):
            st.hop(("up", ATTACH[w.index], pkt))
        if not w.done:
            st.schedule(w.index, w.next_deadline())
    elif kind == "up":
        out = st.switches[ev[1]].process(ev[2])
        if out.packet is not None:
            st.up(ev[1], out.packet)
    elif kind == "dest":
        st.from_dest(st.dest.receive(ev[1], now=st.now))
        st.schedule("d", st.dest.next_deadline())
    elif kind == "copy":  # the RESULT, or a request a blue switch above copied below
        out = st.switches[ev[1]].process(ev[2], to_group=not ev[2].result)
        if out.packet is not None:
            st.copy_below(ev[1], out.packet)
    else:
        _down(st, *ev[1:])


def _down(st: Stream, w: int, path: tuple[int, ...], k: int, pkt: ap.AggPacket) -> None:
    """A unicast packet from the destination toward worker w, at path[k] (or at w)."""
    if k == len(path):
        st.workers[w].receive(pkt, st.now)
        st.schedule(w, st.now)
        return
    out = st.switches[path[k]].process(pkt)
    if out.packet is None:
        return
    if out.event == "resent":      # a complete cell answered the request: back up
        st.up(path[k], out.packet)
    elif out.event in ("nack_spread", "result_spread"):  # to the group: copied below
        st.copy_below(path[k], out.packet)
    else:
        st.hop(("down", w, path, k + 1, out.packet))


def run(loss: float, seed: int, chunks: int, hop_s: float, jitter_s: float
        ) -> dict[str, float]:
    """One stream to its end: its figures."""
    st = _new_stream(loss, seed, chunks, hop_s, jitter_s)
    for w in st.workers:
        st.schedule(w.index, 0.0)
    while st.heap and not (st.dest.done and all(w.done for w in st.workers)):
        st.now, _, ev = heapq.heappop(st.heap)
        _step(st, ev)
    if not (st.dest.done and all(w.done for w in st.workers)):
        raise RuntimeError(f"loss {loss}, seed {seed}: the stream did not complete")
    gaps = [b - a for a, b in zip([0.0, *st.completions], st.completions, strict=False)]
    return {"chunks/s": chunks / st.now,
            "backstop retransmissions": sum(w.timeouts for w in st.workers),
            "requests for lost results": sum(w.result_requests for w in st.workers),
            "destination's requests": st.dest.nacks,
            "switch packets per chunk": st.switch_packets / chunks,
            "stalls > 100 ms": sum(g > 0.1 for g in gaps),
            "longest stall ms": 1000 * max(gaps)}


def main(argv: list[str] | None = None) -> int:
    ap_ = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap_.add_argument("--loss", type=float, nargs="+", default=[0, 0.01, 0.02, 0.05],
                     help="loss per hop, one line each (default 0 0.01 0.02 0.05)")
    ap_.add_argument("--seeds", type=int, nargs="+", default=[8, 9, 10, 11],
                     help="one stream per seed, figures averaged (default 8 9 10 11; "
                          "the repair timers were chosen on seeds 1-7)")
    ap_.add_argument("--chunks", type=int, default=1024, help="chunks per stream (default 1024)")
    ap_.add_argument("--hop-ms", type=float, default=2.0, help="delay per hop (default 2)")
    ap_.add_argument("--jitter-ms", type=float, default=0.5,
                     help="extra delay per hop, uniform up to this (default 0.5)")
    args = ap_.parse_args(argv)
    print(f"bt15, SOAR k = 4, {args.chunks} chunks, seeds {args.seeds}, "
          f"hop {args.hop_ms} ms + up to {args.jitter_ms} ms")
    for loss in args.loss:
        runs = [run(loss, s, args.chunks, args.hop_ms / 1000, args.jitter_ms / 1000)
                for s in args.seeds]
        figures = {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
        print(f"loss {loss:.0%}: " + ", ".join(f"{k} {v:,.1f}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
