"""The reliable aggregation protocol as pure state machines: switch, worker, destination.

No sockets and no clocks here: every method takes the time and the packets it is given and
returns the packets to send, so the same code runs on hosts (controller/innet/emulation/agghost.py
wraps it in sockets), in the property test (tests/test_aggproto.py drives it through a
simulated lossy network) and, for the switch, as the reference the P4 program is compared
with (tests/bmv2/test_bmv2_faults.py sends one packet sequence to both). The protocol itself is
written down in docs/aggregation-protocol.md.

`SwitchModel` is p4src/aggregate.p4 line by line: a pool of cells, each holding the owner job,
the chunk, the bitmap of contributors merged, their count, the sums and two flags (overflow,
CE), and in egress the contributors already sent per cell, which tells a chunk's first
transmission on the uplink from a packet sent again. `Worker` streams chunks under a window
and retransmits with backoff until the destination's result comes back; `Destination` sums
what arrives (partial aggregates from blue switches, single contributions through red ones)
and answers every worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from innet.aggpacket import (
    EVENT_NAMES,
    FLAG_MERGED,
    FLAG_OVERFLOW,
    FLAG_RESENT,
    FLAG_RESULT,
    SLOTS,
    VECTOR_LEN,
    AggPacket,
    add_checked,
    contribution,
    result_packet,
)

_MASK32 = 0xFFFFFFFF
_OWNED = 0x10000   # owner register: job | _OWNED, so 0 means "never used"
_CELL_CE = 0x80    # cell flag: some contribution arrived CE-marked (never on the wire)

ZERO = (0,) * VECTOR_LEN
_MAX_BACKOFF_STEPS = 64  # backoff ** 64 is past any ceiling (1.5 ** 64 = 1.8e11)


def newer(a: int, b: int) -> bool:
    """Chunk a comes after chunk b in 32-bit serial-number order (RFC 1982)."""
    d = (a - b) & _MASK32
    return d != 0 and d < 1 << 31


# ---------------------------------------------------------------------------------------------
# The switch


@dataclass(frozen=True, slots=True)
class JobEntry:
    """The agg_job table entry: wait for `expected`, cells base .. base + slots - 1. `blue`
    False is the `track` action: forward, only count first transmissions."""

    expected: int
    base: int
    slots: int
    blue: bool = True


@dataclass(slots=True)
class Cell:
    owner: int = 0
    chunk: int = 0
    bitmap: int = 0
    count: int = 0
    flags: int = 0
    values: tuple[int, ...] = ZERO


@dataclass(slots=True)
class SentCell:
    """Egress: the chunk a cell tracks and the contributors sent for it on the uplink."""

    owner: int = 0
    chunk: int = 0
    bitmap: int = 0


@dataclass(frozen=True, slots=True)
class Out:
    """What a switch does with one packet: the event counted and the packet sent on (or
    None: dropped), with its CE mark; `first`: the packet left as its chunk's first
    transmission of those contributors (True), as a repeat (False), or untracked (None)."""

    event: str | None
    packet: AggPacket | None
    ce: bool
    first: bool | None = None


@dataclass
class SwitchModel:
    entries: dict[int, JobEntry] = field(default_factory=dict)
    pool: int = SLOTS
    cells: list[Cell] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_NAMES, 0))
    sent: list[SentCell] = field(default_factory=list)
    first: int = 0   # agg_first on the uplink
    repeat: int = 0  # agg_repeat on the uplink

    def __post_init__(self) -> None:
        if not self.cells:
            self.cells = [Cell() for _ in range(self.pool)]
        if not self.sent:
            self.sent = [SentCell() for _ in range(self.pool)]

    def _count(self, event: str, pkt: AggPacket | None, ce: bool) -> Out:
        self.events[event] += 1
        return Out(event, pkt, ce)

    def process(self, pkt: AggPacket, ce: bool = False) -> Out:
        """One aggregation packet in, what leaves (aggregate.p4's apply block, then AggFirst
        in egress)."""
        if pkt.flags & FLAG_RESULT:
            return self._count("result", pkt, ce)
        entry = self.entries.get(pkt.job)
        if entry is None:  # not on this job's tree: plain forwarding
            return Out(None, pkt, ce)
        index = entry.base + pkt.slot
        if (pkt.slot >= entry.slots or index >= self.pool or pkt.bitmap == 0
                or pkt.bitmap & ~entry.expected):
            return self._count("malformed", None, ce)
        out = self._aggregate(pkt, ce, entry, index) if entry.blue else Out(None, pkt, ce)
        if out.packet is None:
            return out
        return replace(out, first=self._egress(out.packet, index))

    def _egress(self, pkt: AggPacket, index: int) -> bool:
        """AggFirst: does `pkt` carry a contributor this switch has not sent for its chunk?"""
        cell = self.sent[index]
        owner = pkt.job | _OWNED
        late = False
        if cell.owner != owner or newer(pkt.chunk, cell.chunk):
            cell.owner, cell.chunk, cell.bitmap = owner, pkt.chunk, 0
        elif cell.chunk != pkt.chunk:
            late = True
        if not late and pkt.bitmap & ~cell.bitmap:
            cell.bitmap |= pkt.bitmap
            self.first += 1
            return True
        self.repeat += 1
        return False

    def _aggregate(self, pkt: AggPacket, ce: bool, entry: JobEntry, index: int) -> Out:
        """A blue switch's cell life cycle (Aggregate's cell branch)."""
        cell = self.cells[index]
        owner = pkt.job | _OWNED
        if cell.owner != owner or newer(pkt.chunk, cell.chunk):
            # a new chunk takes the cell: whatever it held (another job's, or this job's
            # chunk - slots, which every worker has finished) is cleaned first
            cell.owner, cell.chunk = owner, pkt.chunk
            cell.bitmap, cell.count, cell.flags, cell.values = 0, 0, 0, ZERO
        elif cell.chunk != pkt.chunk:
            return self._count("stale", None, ce)
        if cell.bitmap & pkt.bitmap:
            if cell.bitmap != entry.expected:
                return self._count("duplicate", None, ce)
            # the chunk finished here: answer with the stored sum (shadow copy)
            out = replace(pkt, bitmap=cell.bitmap, count=cell.count, values=cell.values,
                          flags=pkt.flags | FLAG_MERGED | FLAG_RESENT
                          | (cell.flags & FLAG_OVERFLOW))
            return self._count("resent", out, bool(cell.flags & _CELL_CE))
        sums, overflow = add_checked(cell.values, pkt.values)
        cell.values = sums
        cell.bitmap |= pkt.bitmap
        cell.count = (cell.count + pkt.count) & 0xFFFF
        cell.flags |= (pkt.flags & FLAG_OVERFLOW) | (FLAG_OVERFLOW if overflow else 0) \
            | (_CELL_CE if ce else 0)
        if overflow:
            self.events["overflow"] += 1
        if cell.bitmap != entry.expected:
            return self._count("held", None, ce)
        out = replace(pkt, bitmap=cell.bitmap, count=cell.count, values=sums,
                      flags=pkt.flags | FLAG_MERGED | (cell.flags & FLAG_OVERFLOW))
        return self._count("emitted", out, bool(cell.flags & _CELL_CE))


# ---------------------------------------------------------------------------------------------
# The worker


@dataclass
class Worker:
    """One worker's stream: chunks `first_chunk + i`, at most `window` unacknowledged ahead of
    the oldest one, each retransmitted when its timer fires (the timer doubles per try, up to
    `max_rto`); the destination's RESULT for a chunk acknowledges it."""

    job: int
    index: int
    chunks: Sequence[Sequence[int]]
    window: int
    slots: int
    first_chunk: int = 0
    rto: float = 0.5       # retransmission timeout, seconds (learnt from round trips)
    min_rto: float = 0.05
    max_rto: float = 2.0
    backoff: float = 2.0   # the timer grows by this factor per retransmission of a chunk
    results: dict[int, AggPacket] = field(default_factory=dict)
    retransmissions: int = 0
    sent: int = 0
    _next: int = 0
    _low: int = 0
    _deadline: dict[int, float] = field(default_factory=dict)
    _sent_at: dict[int, float] = field(default_factory=dict)
    _tries: dict[int, int] = field(default_factory=dict)
    _srtt: float | None = None
    _rttvar: float = 0.0
    _cwnd: float = 2.0
    max_rtt: float = 0.0

    def __post_init__(self) -> None:
        if not self.window >= 1 or 2 * self.window > self.slots:
            raise ValueError(f"the window ({self.window}) must be 1..slots/2 "
                             f"({self.slots // 2}): each chunk in flight keeps a shadow cell")
        if self.first_chunk + len(self.chunks) > _MASK32:
            raise ValueError("the stream's chunk numbers must fit in 32 bits")

    @property
    def done(self) -> bool:
        return self._low >= len(self.chunks)

    def packet(self, i: int) -> AggPacket:
        return contribution(self.job, self.first_chunk + i, self.index, self.chunks[i],
                            self.slots)

    def poll(self, now: float) -> list[AggPacket]:
        """Packets due at `now`: retransmissions whose timer fired, then new chunks the
        window admits."""
        out = []
        for i, when in sorted(self._deadline.items()):
            if when <= now:
                tries = self._tries[i] = self._tries[i] + 1
                # the exponent is capped: 1.5 ** 1750 overflows a float, and a chunk that
                # heavy loss keeps unanswered does get there
                grown = self.rto * self.backoff ** min(tries, _MAX_BACKOFF_STEPS)
                self._deadline[i] = now + min(self.max_rto, grown)
                self.retransmissions += 1
                out.append(self.packet(i))
        limit = self._low + min(self.window, int(self._cwnd))
        while self._next < len(self.chunks) and self._next < limit:
            i = self._next
            self._next += 1
            self._deadline[i] = now + self.rto
            self._sent_at[i] = now
            self._tries[i] = 0
            out.append(self.packet(i))
        self.sent += len(out)
        return out

    def receive(self, pkt: AggPacket, now: float) -> None:
        i = (pkt.chunk - self.first_chunk) & _MASK32
        if (not pkt.result or pkt.job != self.job or i >= len(self.chunks)
                or i in self.results or i >= self._next):
            return
        self.results[i] = pkt
        # the window opens by about one chunk per round trip (TCP's congestion avoidance),
        # so the queues grow slowly enough for the timer's estimate to follow them: a burst
        # of the whole window would time out on its own queueing delay
        self._cwnd = min(float(self.window), self._cwnd + 1 / self._cwnd)
        if self._tries.get(i) == 0:  # Karn: only unambiguous samples
            self._sample(now - self._sent_at[i])
        self._deadline.pop(i, None)
        while self._low in self.results:
            self._low += 1

    @property
    def srtt(self) -> float | None:
        return self._srtt

    def _sample(self, rtt: float) -> None:
        """TCP's estimator (RFC 6298): smoothed round trip plus four deviations, between
        min_rto and max_rto. The ceiling matters under loss: a chunk's answer often waits for
        another worker's retransmission, those long samples widen the deviation, and an
        unbounded timer would stall the window."""
        self.max_rtt = max(self.max_rtt, rtt)
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        self.rto = min(self.max_rto, max(self.min_rto, self._srtt + 4 * self._rttvar))

    def retransmitted_chunks(self) -> list[int]:
        """Indices of the chunks sent more than once (for reports)."""
        return sorted(i for i, t in self._tries.items() if t > 0)

    def next_deadline(self) -> float | None:
        return min(self._deadline.values(), default=None)


# ---------------------------------------------------------------------------------------------
# The destination


@dataclass
class ChunkState:
    bitmap: int = 0
    count: int = 0
    values: tuple[int, ...] = ZERO
    overflow: bool = False
    ce: bool = False
    packets: int = 0


@dataclass
class Destination:
    """Sums what arrives per chunk; when every worker's bit is in, sends the RESULT to every
    worker, and answers a packet of a finished chunk (a retransmission the switches passed
    on) by sending the RESULT again to the workers it names, at most once per `holdoff`
    seconds for one (chunk, bitmap): the workers below one blue switch time out together,
    and their retransmissions each bring the switch's whole aggregate back."""

    job: int
    workers: int                # how many: the full bitmap is (1 << workers) - 1
    chunks: int
    first_chunk: int = 0
    state: dict[int, ChunkState] = field(default_factory=dict)
    complete: int = 0
    duplicates: int = 0
    resent: int = 0
    holdoff: float = 0.1
    _answered: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def full(self) -> int:
        return (1 << self.workers) - 1

    @property
    def done(self) -> bool:
        return self.complete == self.chunks

    def receive(self, pkt: AggPacket, ce: bool = False, now: float | None = None
                ) -> list[tuple[int, AggPacket]]:
        """(worker index, packet) pairs to send. `now`: the time, for the hold-off (None:
        answer every duplicate)."""
        i = (pkt.chunk - self.first_chunk) & _MASK32
        if pkt.job != self.job or pkt.result or i >= self.chunks or pkt.bitmap & ~self.full:
            return []
        st = self.state.setdefault(i, ChunkState())
        st.packets += 1
        if st.bitmap & pkt.bitmap:
            self.duplicates += 1
            if st.bitmap == self.full:
                key = (i, pkt.bitmap)
                if now is not None and now - self._answered.get(key, -1e18) < self.holdoff:
                    return []
                if now is not None:
                    self._answered[key] = now
                self.resent += 1
                return self._answer(pkt, st, pkt.bitmap)
            return []
        st.values, ovf = add_checked(st.values, pkt.values)
        st.overflow |= ovf or pkt.overflow
        st.ce |= ce
        st.bitmap |= pkt.bitmap
        st.count += pkt.count
        if st.bitmap != self.full:
            return []
        self.complete += 1
        return self._answer(pkt, st, self.full)

    def _answer(self, pkt: AggPacket, st: ChunkState, bitmap: int) -> list[tuple[int,
                                                                             AggPacket]]:
        res = result_packet(pkt, st.bitmap, st.count, st.values, st.overflow)
        return [(w, res) for w in range(self.workers) if bitmap >> w & 1]

    def sums(self) -> list[tuple[int, ...]]:
        """Every chunk's sum, in order (complete or not)."""
        return [self.state.get(i, ChunkState()).values for i in range(self.chunks)]
