"""The reliable aggregation protocol as pure state machines: switch, worker, destination.

No sockets and no clocks here: every method takes the time and the packets it is given and
returns the packets to send, so the same code runs on hosts (controller/innet/emulation/agghost.py
wraps it in sockets), in the property test (tests/test_aggproto.py drives it through a
simulated lossy network) and, for the switch, as the reference the P4 program is compared
with (tests/bmv2/test_faults.py sends one packet sequence to both). The protocol itself is
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
    BEHIND_UNKNOWN,
    DEFAULT_JOB_SLOTS,
    EVENT_NAMES,
    FLAG_ASK,
    FLAG_COPY,
    FLAG_MERGED,
    FLAG_NACK,
    FLAG_OVERFLOW,
    FLAG_RESENT,
    FLAG_RESULT,
    PREVIOUS_SPAN,
    SLOTS,
    VECTOR_LEN,
    AggPacket,
    add_checked,
    contribution,
    nack_packet,
    result_packet,
)

_MASK32 = 0xFFFFFFFF
_OWNED = 0x10000   # owner register: job | _OWNED, so 0 means "never used"
_CELL_CE = 0x80    # cell flag: some contribution arrived CE-marked (never on the wire)
# a request at a blue switch: forward, drop, answer (turn back), copy to every port below
_PASS, _HELD, _TURN, _SPREAD = 0, 1, 2, 3

ZERO = (0,) * VECTOR_LEN
_MAX_BACKOFF_STEPS = 64  # backoff ** 64 is past any ceiling (1.5 ** 64 = 1.8e11)
# The repair timers (a worker's request for a lost RESULT, the destination's for missing
# contributions) learn a round trip with no waiting in it and keep it for every repeat of
# one request: at 5% loss a request and its answer cross about 10 lossy hops and two in five
# are lost, so growing each request's timer 1.5x per repeat made the unlucky ones wait a
# second while the job's other workers stopped at their windows. Karn's rule still needs a
# backoff, or a round trip that outgrows the learnt timer would never be sampled again (every
# request repeated before its answer, no clean sample): it is shared by the requests, grown
# 1.5x by a request's sixth try and later (five losses in a row: 1% of requests at 5% loss;
# every request once the timer is short) and reset by a clean sample. Grown from the third
# try, it slowed a simulated 5% stream by a quarter (benchmarks/aggregation_sim.py).
_REPEATS_BEFORE_BACKOFF = 5
_REPAIR_BACKOFF_CAP = 1e6
# RFC 6298's clock granularity G, the least the timer exceeds the smoothed round trip by: a
# round trip that never varies (a window sent at once on a quiet network) drives the mean
# deviation to 0 and the timer to the round trip itself, so it fired as the answers came
_GRANULARITY_S = 0.002


def _shared_backoff(backoff: float, tries: int) -> float:
    """The repair timers' shared backoff once a request makes its `tries`-th try."""
    if tries > _REPEATS_BEFORE_BACKOFF:
        return min(_REPAIR_BACKOFF_CAP, backoff * 1.5)
    return backoff


def smoothed(srtt: float | None, rttvar: float, sample: float) -> tuple[float, float]:
    """TCP's round-trip estimator (RFC 6298): the smoothed value and its mean deviation
    after one more sample; the timer is srtt + 4 x rttvar."""
    if srtt is None:
        return sample, sample / 2
    return 0.875 * srtt + 0.125 * sample, 0.75 * rttvar + 0.25 * abs(srtt - sample)


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
class AskCell:
    """AggResultRepair: the chunk whose lost RESULT the workers below asked for, and who."""

    chunk: int = 0
    askers: int = 0


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
    asks: list[AskCell] = field(default_factory=list)
    first: int = 0   # agg_first on the uplink
    repeat: int = 0  # agg_repeat on the uplink

    def __post_init__(self) -> None:
        if not self.cells:
            self.cells = [Cell() for _ in range(self.pool)]
        if not self.sent:
            self.sent = [SentCell() for _ in range(self.pool)]
        if not self.asks:
            self.asks = [AskCell() for _ in range(self.pool)]

    def _count(self, event: str, pkt: AggPacket | None, ce: bool) -> Out:
        self.events[event] += 1
        return Out(event, pkt, ce)

    def process(self, pkt: AggPacket, ce: bool = False, to_group: bool = False) -> Out:
        """One aggregation packet in, what leaves (aggregate.p4's apply block, then AggFirst
        in egress). `to_group`: the packet is addressed to the job's group address (a RESULT,
        or a request a blue switch above copied below), not to one host."""
        entry = self.entries.get(pkt.job)
        if pkt.flags & FLAG_RESULT:
            answer, ask = (self._request(pkt, entry, to_group) if entry is not None
                           else (_PASS, pkt))
            repair = self._result_repair(pkt, entry)
            if repair == _HELD:
                return self._count("ask_held", None, ce)
            if repair == _SPREAD and not to_group:
                return self._count("result_spread", pkt, ce)
            if answer == _HELD:
                return self._count("nack_held", None, ce)
            if answer == _PASS:
                return self._count("result", ask, ce)
            if answer == _SPREAD:
                return self._count("nack_spread", ask, ce)
            assert entry is not None
            return self._turn_back(pkt, entry.base + pkt.slot)
        if entry is None:  # not on this job's tree: plain forwarding
            return Out(None, pkt, ce)
        index = entry.base + pkt.slot
        if not self._addressed(pkt, entry):
            return self._count("malformed", None, ce)
        out = self._aggregate(pkt, ce, entry, index) if entry.blue else Out(None, pkt, ce)
        if out.packet is None:
            return out
        return replace(out, first=self._egress(out.packet, index))

    def _addressed(self, pkt: AggPacket, entry: JobEntry) -> bool:
        """The packet names a cell of the job's and bits this switch expects."""
        return (pkt.slot < entry.slots and entry.base + pkt.slot < self.pool
                and pkt.bitmap != 0 and not pkt.bitmap & ~entry.expected)

    def _request(self, pkt: AggPacket, entry: JobEntry, to_group: bool
                 ) -> tuple[int, AggPacket]:
        """What a blue switch does with the destination's request (NACK) for contributions
        of its workers, on its way to the lowest worker it names (or copied to every port
        below by a blue switch above: `to_group`). The workers asked for what the cell holds
        would only send duplicates: while the chunk waits on another worker, drop it
        (_HELD): that one is asked too. When the cell is complete, its aggregate was lost
        above: answer the request of the lowest contributor with the stored sum, back up
        (_TURN), and drop the others (one packet repairs the loss, whichever of the requests
        arrives); a copy, which has no worker's address to answer from, goes on naming the
        lowest contributor alone (_SPREAD), whose copy the cell answers (shadow copy). A
        request naming workers the cell lacks goes on naming only those: to its addressee
        when that one alone is lacking (_PASS), else to the job's group address, copied to
        every port below (_SPREAD), so that d asks once per blue switch. Anything else
        passes as it came."""
        if (pkt.ask or not pkt.nack or not entry.blue or pkt.slot >= entry.slots
                or entry.base + pkt.slot >= self.pool or not pkt.bitmap
                or (not to_group and pkt.bitmap & ~entry.expected)):
            return _PASS, pkt
        asked = pkt.bitmap & entry.expected
        lowest = asked & -asked
        cell = self.cells[entry.base + pkt.slot]
        have = cell.bitmap if cell.owner == pkt.job | _OWNED and cell.chunk == pkt.chunk else 0
        lacking = asked & ~have
        if not asked:
            return _HELD, pkt  # a copy for the workers below other switches
        if lacking:
            narrowed = replace(pkt, bitmap=lacking)
            return (_SPREAD if to_group or lacking != lowest else _PASS), narrowed
        if have != entry.expected:
            return _HELD, pkt
        if to_group:
            return _SPREAD, replace(pkt, bitmap=lowest)
        return (_TURN if lowest == have & -have else _HELD), pkt

    def _result_repair(self, pkt: AggPacket, entry: JobEntry | None) -> int:
        """AggResultRepair at a blue switch: a worker's request for a lost RESULT (RESULT |
        NACK | ASK | COPY) is held (_HELD) while another worker's request for the chunk is on
        its way, unless this worker asked before (it asks again: its request or the answer
        was lost); the answer (RESULT | COPY) is copied below (_SPREAD) when any was held,
        which only a unicast answer needs (a copy from a switch above is already copied).
        _PASS: anything else, or nothing to do."""
        repair = pkt.flags & (FLAG_NACK | FLAG_ASK | FLAG_COPY)
        if (entry is None or not entry.blue or pkt.slot >= entry.slots
                or entry.base + pkt.slot >= self.pool):
            return _PASS
        asking = repair == FLAG_NACK | FLAG_ASK | FLAG_COPY
        if not (repair == FLAG_COPY or (asking and pkt.bitmap
                                        and not pkt.bitmap & ~entry.expected)):
            return _PASS
        cell = self.asks[entry.base + pkt.slot]
        askers = cell.askers if cell.chunk == pkt.chunk else 0
        if asking:
            cell.chunk, cell.askers = pkt.chunk, askers | pkt.bitmap
            return _HELD if askers and not askers & pkt.bitmap else _PASS
        cell.askers = 0
        return _SPREAD if askers & (askers - 1) else _PASS

    def _turn_back(self, pkt: AggPacket, index: int) -> Out:
        """The request, answered: the cell's stored sum, on its way back up to the
        destination as the aggregate it lost (egress counts it a repeat there)."""
        cell = self.cells[index]
        answer = _stored_sum(pkt, cell, 0)
        out = self._count("resent", answer, bool(cell.flags & _CELL_CE))
        return replace(out, first=self._egress(answer, index))

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
            return self._count("resent", _stored_sum(pkt, cell, pkt.flags),
                               bool(cell.flags & _CELL_CE))
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


def _lowest(bitmap: int) -> int:
    """The index of the lowest bit set (-1 for none)."""
    return (bitmap & -bitmap).bit_length() - 1


def _stored_sum(pkt: AggPacket, cell: Cell, flags: int) -> AggPacket:
    """`pkt` carrying a complete cell's stored sum (aggregate.p4's load, then send_sums), as
    a retransmission's answer or a turned-back request: `flags` | MERGED | RESENT and the
    cell's overflow."""
    return replace(pkt, bitmap=cell.bitmap, count=cell.count, values=cell.values,
                   flags=flags | FLAG_MERGED | FLAG_RESENT | (cell.flags & FLAG_OVERFLOW))


# ---------------------------------------------------------------------------------------------
# The worker


@dataclass
class Worker:
    """One worker's stream: chunks `first_chunk + i`, none further than `window` ahead of the
    oldest unanswered one (the span the job's 2 x window cells keep safe), at most `inflight`
    of them unanswered (None: `window`); the destination's RESULT for a chunk acknowledges
    it. Two limits because they do two jobs: the in-flight one keeps BMv2's queues short,
    the span lets the stream go on past a chunk under repair."""

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
    inflight: int | None = None
    # the job's RESULTs come to its group address: a request for a lost one is flagged COPY,
    # so the blue switch above holds the other workers' requests and copies the answer below
    grouped: bool = False
    reorder_s: float = 0.002  # how long results may arrive out of order (FIFO links: ~0)
    results: dict[int, AggPacket] = field(default_factory=dict)
    retransmissions: int = 0
    nacked: int = 0        # of the retransmissions, those the destination asked for
    lost_results: int = 0  # RESULTs a later one showed lost on the way here (asks)
    timeouts: int = 0      # ... and those the stream's timer sent
    # RESULTs asked of the destination (one a later RESULT showed lost on the way here): a
    # request flagged RESULT | NACK | ASK, which switches forward untouched, not a contribution
    # that every blue switch on the way would answer with its stored sum again
    result_requests: int = 0
    sent: int = 0
    _next: int = 0
    _low: int = 0
    _deadline: dict[int, float] = field(default_factory=dict)
    _sent_at: dict[int, float] = field(default_factory=dict)
    _tries: dict[int, int] = field(default_factory=dict)
    _asked: set[int] = field(default_factory=set)
    _lost: dict[int, int] = field(default_factory=dict)  # chunk: asks for its lost RESULT
    _progress_at: float = -1e18  # when the last new RESULT came
    # the round trip of a request for a lost RESULT (asked of the destination, answered by
    # it): no waiting on other workers in it, so it is learnt apart from the stream's timer,
    # and only from those requests: a retransmission the destination asked for is answered
    # when its chunk completes, which may wait on other workers' repairs (such samples made
    # this timer 4-8 round trips long at 5% loss). A worker whose window waits on a lost
    # RESULT holds up every worker of the job, so a repeat does not grow this timer for its
    # chunk; Karn's backoff is shared by the requests instead (_REPEATS_BEFORE_BACKOFF)
    repair_rto: float = 0.05
    _repair_srtt: float | None = None
    _repair_var: float = 0.0
    _repair_backoff: float = 1.0
    _repaired: dict[int, tuple[float, bool]] = field(default_factory=dict)
    latency: dict[int, float] = field(default_factory=dict)  # chunk: first send to RESULT
    _first_at: dict[int, float] = field(default_factory=dict)
    _srtt: float | None = None
    _rttvar: float = 0.0
    # Karn's backed-off timer (RFC 6298 5.5): how long the stream must be quiet before its timer
    # fires again, grown by `backoff` per expiry from the second with no clean sample between (a
    # chunk sent once, answered), which resets the count of expiries. A timer that had learnt 30 ms
    # while the queues held packets 600 ms sent every chunk about five times before its RESULT came
    # (each chunk's own backoff started again from the short timer), so no sample was ever clean and
    # it never learnt: on BMv2 those repeats kept the queues long (a lossless stream of 4,096 chunks
    # ran at 773 values/s with 212,854 timeouts, a twelfth of its speed). The first expiry does not
    # grow it: at 5% loss one usually repairs a real stall and a clean sample follows; growing it
    # there too cost a simulated 5% stream 2% (benchmarks/aggregation_sim.py, seeds 1-7 and 12-31),
    # on BMv2 about 7%
    _unsampled_fires: int = 0
    # the congestion window: chunks in flight at most (up to `inflight`); it opens by about
    # one chunk per round trip and, on ECN echoes, is cut DCTCP-style once per window of
    # results by alpha / 2, alpha the smoothed share of echoed results (`ecn_gain` a window;
    # 1.0 at first, as Linux's DCTCP starts, so the first mark halves it). Public, so a
    # stream that goes on in a new Worker (the next iteration) keeps what it learnt.
    cwnd: float = 2.0
    alpha: float = 1.0
    ecn_gain: float = 1.0 / 16
    marks: int = 0         # RESULTs that echoed a CE mark
    cuts: int = 0          # windows that ended with a cut
    _window_results: int = 0
    _window_marked: int = 0
    # the newest chunk answered: by FIFO, every older chunk's packet from this worker has
    # left the network (merged, or lost and to be asked for), so only newer ones are in flight
    _newest: int = -1
    _repairing: set[int] = field(default_factory=set)  # asked for: not counted in flight
    max_rtt: float = 0.0

    def __post_init__(self) -> None:
        if not self.window >= 1 or 2 * self.window > self.slots:
            raise ValueError(f"the window ({self.window}) must be 1..slots/2 "
                             f"({self.slots // 2}): each chunk in flight keeps a shadow cell")
        if self.inflight is not None and not 1 <= self.inflight <= self.window:
            raise ValueError(f"the chunks in flight ({self.inflight}) must be 1..window "
                             f"({self.window})")
        if self.first_chunk + len(self.chunks) > _MASK32:
            raise ValueError("the stream's chunk numbers must fit in 32 bits")

    @property
    def done(self) -> bool:
        return self._low >= len(self.chunks)

    @property
    def in_flight(self) -> int:
        """The chunks whose packet may still be in the network: those sent after the newest
        one answered (links are FIFO: the RESULT of chunk j shows this worker's packets of
        every older chunk have left the queues, merged or lost), less those being repaired.
        An older chunk still unanswered waits on another worker's repair, not on the queues:
        counting it, as the unanswered count did, let every repair anywhere in the job hold
        a slot of all 16 workers for a repair's round trip, and loss stalled the stream on
        the limit rather than on the network."""
        newer = self._next - 1 - self._newest
        return newer - sum(1 for c in self._repairing if c > self._newest)

    def _backed_off(self, steps: int) -> float:
        """The stream's timer grown `steps` times by `backoff` (none below 1); the exponent
        is capped: 1.5 ** 1750 overflows a float, and a chunk that heavy loss keeps
        unanswered does get there."""
        return self.rto * self.backoff ** min(max(0, steps), _MAX_BACKOFF_STEPS)

    def packet(self, i: int) -> AggPacket:
        return contribution(self.job, self.first_chunk + i, self.index, self.chunks[i],
                            self.slots)

    def poll(self, now: float) -> list[AggPacket]:
        """Packets due at `now`: the chunks asked for (by the destination, or because a later
        RESULT showed this one's was lost), retransmissions the stream's timer sent, then
        new chunks the window admits."""
        out = self._send_asked(now)
        # one timer for the stream, restarted by every new RESULT (RFC 6298 5.3): a chunk
        # waits on the other workers too, so its own round trip says little; while results
        # come, the destination's requests and the results' `behind` repair what was lost.
        # When it fires, every chunk due goes: nothing came for a whole timeout, so the
        # chunks in flight are stuck, and when a blue switch aggregates everything above them
        # (the root of a `top` plan) no packet of a stuck chunk reaches the destination to
        # reveal the loss. (Sending only the oldest, as TCP's RTO does, moved such a stream
        # one chunk per timeout at 5% loss.)
        timer = min(self.max_rto, self._backed_off(self._unsampled_fires - 1))
        quiet = self._progress_at + timer
        fired = False
        for i, when in sorted(self._deadline.items()):
            if when > now:
                continue
            if i in self._lost:  # a RESULT known lost: ask again, whatever else comes
                self._lost[i] += 1
                self._repair_backoff = _shared_backoff(self._repair_backoff, self._lost[i])
                self.lost_results += 1
                self._asked.add(i)
            elif quiet > now:
                self._deadline[i] = quiet
            else:
                tries = self._tries[i] = self._tries[i] + 1
                self._deadline[i] = now + min(self.max_rto, self._backed_off(tries))
                self._sent_at[i] = now
                self.retransmissions += 1
                self.timeouts += 1
                fired = True
                out.append(self.packet(i))
        self._unsampled_fires += fired
        out += self._send_asked(now)
        limit = self._low + self.window
        while (self._next < len(self.chunks) and self._next < limit
               and self.in_flight < int(self.cwnd)):
            i = self._next
            self._next += 1
            self._deadline[i] = now + self.rto
            self._sent_at[i] = now
            self._first_at[i] = now
            self._tries[i] = 0
            out.append(self.packet(i))
        self.sent += len(out)
        return out

    def receive(self, pkt: AggPacket, now: float) -> None:
        i = (pkt.chunk - self.first_chunk) & _MASK32
        if pkt.nack:
            if (pkt.job == self.job and i < self._next and i not in self.results
                    and pkt.bitmap >> self.index & 1):
                self.nacked += 1
                self._asked.add(i)
                self._repairing.add(i)
            return
        if (not pkt.result or pkt.job != self.job or i >= len(self.chunks)
                or i in self.results or i >= self._next):
            return
        self.results[i] = pkt
        self._progress_at = now
        self._lost.pop(i, None)
        self._repairing.discard(i)
        self.latency[i] = now - self._first_at.pop(i)
        repair = self._repaired.pop(i, None)
        if repair is not None and repair[1]:  # Karn: a RESULT asked for once
            self._repair_srtt, self._repair_var = smoothed(self._repair_srtt, self._repair_var,
                                                           now - repair[0])
            self.repair_rto = min(self.max_rto, max(self.min_rto, self._repair_srtt
                                                    + 4 * self._repair_var))
            self._repair_backoff = 1.0
        if not pkt.flags & FLAG_COPY:  # an answer's slot field is its cell, not `behind`
            self._lost_before(i, pkt.slot, now)
        if pkt.previous:
            self._suspect(i - pkt.previous, now)
        # the window opens by about one chunk per round trip (TCP's congestion avoidance),
        # so the queues grow slowly enough for the timer's estimate to follow them: a burst
        # of the whole window would time out on its own queueing delay
        self._newest = max(self._newest, i)
        cap = self.window if self.inflight is None else self.inflight
        self.cwnd = min(float(cap), self.cwnd + 1 / self.cwnd)
        self._react(pkt.ece)
        if self._tries.get(i) == 0:  # Karn: only unambiguous samples
            self._sample(now - self._sent_at[i])
            self._unsampled_fires = 0
        self._deadline.pop(i, None)
        while self._low in self.results:
            self._low += 1

    def _react(self, marked: bool) -> None:
        """DCTCP's reaction to the echoed marks: once a window's worth of results has come,
        fold its marked share into alpha and, if any was marked, cut the window by alpha/2."""
        self.marks += marked
        self._window_results += 1
        self._window_marked += marked
        if self._window_results < max(1, int(self.cwnd)):
            return
        share = self._window_marked / self._window_results
        self.alpha = (1 - self.ecn_gain) * self.alpha + self.ecn_gain * share
        if self._window_marked:
            self.cwnd = max(1.0, self.cwnd * (1 - self.alpha / 2))
            self.cuts += 1
        self._window_results = self._window_marked = 0

    def _send_asked(self, now: float) -> list[AggPacket]:
        """The chunks asked for go now; their timer restarts without backoff (a request says
        the path works and what is missing; a timeout says neither). A RESULT known lost is
        asked of the destination instead, and again after a request's round trip (times the
        shared backoff), since no new RESULT may come to reveal it again once the window has
        stalled."""
        out = []
        for i in sorted(self._asked):
            if i in self.results:
                continue
            self._tries[i] += 1
            lost = self._lost.get(i)
            self._deadline[i] = now + (self.rto if lost is None else min(
                self.max_rto, self.repair_rto * self._repair_backoff))
            self._sent_at[i] = now
            if lost is not None:
                self._repaired[i] = (now, i not in self._repaired)
            if lost is None:
                self.retransmissions += 1
                out.append(self.packet(i))
            else:  # the chunk is complete at the destination: ask it for the RESULT alone
                self.result_requests += 1
                out.append(nack_packet(self.job, self.first_chunk + i, 1 << self.index,
                                       self.slots, ask=True, copy=self.grouped))
        self._asked.clear()
        return out

    def _lost_before(self, i: int, behind: int, now: float) -> None:
        """RESULT i says every chunk before i - behind is complete at the destination: the
        ones this worker has no result for lost theirs on the way here (after `reorder_s`).
        Ask for them again: a retransmission the destination answers to this worker."""
        if behind == BEHIND_UNKNOWN:
            return
        for c in range(self._low, min(i - behind, self._next)):
            self._suspect(c, now)

    def _suspect(self, c: int, now: float) -> None:
        """Chunk c is complete at the destination (`behind` says so, or the RESULT sent to
        every worker after c's came): without its RESULT here, that RESULT was lost. It is
        asked for once what reordering could still bring has had time to come."""
        if (self._low <= c < self._next and c not in self.results and c not in self._asked
                and c not in self._lost):
            self._lost[c] = 0
            self._repairing.add(c)
            self._deadline[c] = now + self.reorder_s

    @property
    def srtt(self) -> float | None:
        return self._srtt

    def _sample(self, rtt: float) -> None:
        """TCP's estimator (RFC 6298): smoothed round trip plus four deviations, between
        min_rto and max_rto. The ceiling matters under loss: a chunk's answer often waits for
        another worker's retransmission, those long samples widen the deviation, and an
        unbounded timer would stall the window."""
        self.max_rtt = max(self.max_rtt, rtt)
        self._srtt, self._rttvar = smoothed(self._srtt, self._rttvar, rtt)
        self.rto = min(self.max_rto, max(self.min_rto,
                                         self._srtt + max(_GRANULARITY_S, 4 * self._rttvar)))

    def retransmitted_chunks(self) -> list[int]:
        """Indices of the chunks sent more than once (for reports)."""
        return sorted(i for i, t in self._tries.items() if t > 0)

    def next_deadline(self) -> float | None:
        if self._asked:
            return 0.0
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
    and their retransmissions each bring the switch's whole aggregate back.

    Loss recovery (given times, `now`): the links are FIFO, every worker sends its chunks in
    order and a blue switch emits them in order (it completes chunk h only after each of its
    workers' chunk h, each of which came after that worker's earlier chunks). So when a
    packet of chunk h carrying bitmap b arrives, every older chunk that still lacks some bits
    of b has lost the message that carried them (or one below it). After `reorder_s` (what
    reordering the network may still do), `poll` asks the workers of those bits, and only
    them, to send the chunk again (a NACK: TCP's fast retransmit, with the destination's
    knowledge of the bitmaps); a request that brings nothing is repeated after a timer learnt
    from how long requests take to be answered (RFC 6298 between `nack_floor_s` and
    `nack_ceiling_s`, times 1.5 per repeat). The workers' own timers stay the backstop: the
    stream's last chunks, whose loss no later packet reveals."""

    job: int
    workers: int                # how many: the full bitmap is (1 << workers) - 1
    chunks: int
    first_chunk: int = 0
    slots: int = DEFAULT_JOB_SLOTS  # the job's cells: a request names its chunk's slot
    state: dict[int, ChunkState] = field(default_factory=dict)
    complete: int = 0
    duplicates: int = 0
    resent: int = 0
    holdoff: float = 0.01
    nack: bool = True
    reorder_s: float = 0.002
    nack_rto: float = 0.05
    nack_floor_s: float = 0.005
    nack_ceiling_s: float = 1.0
    # ask once per group: a request naming every missing worker below one blue switch,
    # which that switch narrows to the workers its cell lacks and, when several, copies
    # below through the job's group address (so only with the switches' multicast groups)
    group_requests: bool = False
    nacks: int = 0              # NACK packets sent (one per worker asked, or per group)
    requests: int = 0           # workers' requests for a RESULT they lost, answered
    _answered: dict[tuple[int, int], float] = field(default_factory=dict)
    _low: int = 0               # the oldest chunk not complete
    _due: dict[int, float] = field(default_factory=dict)   # chunk -> when to ask for it
    _revealed: dict[int, int] = field(default_factory=dict)  # chunk -> bits seen lost
    _asked_bits: dict[int, int] = field(default_factory=dict)  # chunk -> bits asked for
    _asked_at: dict[int, float] = field(default_factory=dict)
    _asks: dict[int, int] = field(default_factory=dict)
    _groups: dict[int, int] = field(default_factory=dict)  # worker -> its blue switch's bits
    _last_done: int | None = None  # the chunk whose RESULT went to every worker last
    _previous: dict[int, int] = field(default_factory=dict)  # chunk -> its RESULT's previous
    _srtt: float | None = None
    _rttvar: float = 0.0
    _backoff: float = 1.0  # Karn's, shared by the requests (_REPEATS_BEFORE_BACKOFF)

    @property
    def full(self) -> int:
        return (1 << self.workers) - 1

    @property
    def done(self) -> bool:
        return self.complete == self.chunks

    def receive(self, pkt: AggPacket, ce: bool = False, now: float | None = None
                ) -> list[tuple[int, AggPacket]]:
        """(worker index, packet) pairs to send. `now`: the time, for the hold-off and the
        loss recovery (None: answer every duplicate, ask for nothing)."""
        i = (pkt.chunk - self.first_chunk) & _MASK32
        if pkt.job != self.job or i >= self.chunks or pkt.bitmap & ~self.full:
            return []
        if pkt.nack:  # a worker lost this chunk's RESULT: answer it if the chunk is complete
            st = self.state.get(i)
            if st is None or st.bitmap != self.full:
                return []
            self.requests += 1
            answers = self._answer(pkt, st, pkt.bitmap)
            if pkt.flags & FLAG_COPY:  # the blue switch above may copy it below: its cell
                return [(w, replace(res, slot=pkt.slot, flags=res.flags | FLAG_COPY))
                        for w, res in answers]
            return answers
        if pkt.flags & FLAG_RESULT:
            return []
        if pkt.merged and self._groups.get(_lowest(pkt.bitmap)) != pkt.bitmap:
            self._learn_group(pkt.bitmap)
        if now is not None and self.nack:
            self._reveal(i, pkt.bitmap, now)
            self._answered_request(i, pkt.bitmap, now)
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
        while self._low < self.chunks and self._is_complete(self._low):
            self._low += 1
        if now is not None:
            self._completed(i, now)
        if self._last_done is not None and abs(i - self._last_done) < PREVIOUS_SPAN:
            self._previous[i] = i - self._last_done
        self._last_done = i
        return self._answer(pkt, st, self.full)

    def _learn_group(self, bitmap: int) -> None:
        """An aggregate came with `bitmap`: those workers are below one blue switch, the
        highest on their path (its aggregates are all that reach d of them). A larger group
        seen later (a blue switch above, in another stream of the job) replaces a smaller."""
        if bitmap & (bitmap - 1) == 0:
            return
        for w in range(bitmap.bit_length()):
            if bitmap >> w & 1 and self._groups.get(w, 0) & ~bitmap == 0:
                self._groups[w] = bitmap

    def _completed(self, i: int, now: float) -> None:
        self._due.pop(i, None)
        self._revealed.pop(i, None)
        self._asked_bits.pop(i, None)
        self._asked_at.pop(i, None)

    def _answered_request(self, i: int, bitmap: int, now: float) -> None:
        """Bits asked for came: a request's round trip (Karn: only from a request sent once),
        not the chunk's completion, which may wait on other requests."""
        if bitmap & self._asked_bits.get(i, 0) and i in self._asked_at:
            asked = self._asked_at.pop(i)
            if self._asks.get(i) == 1:
                self._srtt, self._rttvar = smoothed(self._srtt, self._rttvar, now - asked)
                self.nack_rto = min(self.nack_ceiling_s,
                                    max(self.nack_floor_s, self._srtt + 4 * self._rttvar))
                self._backoff = 1.0

    def _reveal(self, h: int, bitmap: int, now: float) -> None:
        """A packet of chunk h with `bitmap` came: older chunks lacking those bits lost them."""
        for c in range(self._low, min(h, self.chunks)):
            st = self.state.get(c)
            have = st.bitmap if st is not None else 0
            lost = bitmap & ~have
            if lost and have != self.full:
                self._revealed[c] = self._revealed.get(c, 0) | lost
                soon = now + self.reorder_s
                if lost & ~self._asked_bits.get(c, 0):  # not asked for yet
                    self._due[c] = min(self._due.get(c, soon), soon)

    def _is_complete(self, i: int) -> bool:
        st = self.state.get(i)
        return st is not None and st.bitmap == self.full

    def poll(self, now: float) -> list[tuple[int, AggPacket]]:
        """The NACKs due at `now`: (worker index, packet), one per missing worker."""
        out: list[tuple[int, AggPacket]] = []
        for c, when in sorted(self._due.items()):
            if when > now:
                continue
            st = self.state.get(c)
            missing = self._revealed.get(c, 0) & ~(st.bitmap if st is not None else 0)
            if not missing:
                del self._due[c]
                continue
            # the backoff counts requests for bits already asked for; newly revealed bits are
            # a fresh request
            asked = self._asked_bits.get(c, 0)
            asks = self._asks[c] = self._asks.get(c, 0) + 1 if not missing & ~asked else 1
            self._backoff = _shared_backoff(self._backoff, asks)
            self._asked_bits[c] = asked | missing
            self._asked_at[c] = now
            self._due[c] = now + min(self.nack_ceiling_s, self.nack_rto * self._backoff)
            out += self._requests(c, missing)
        self.nacks += len(out)
        return out

    def _requests(self, c: int, missing: int) -> list[tuple[int, AggPacket]]:
        """The requests for chunk c's `missing` workers, each addressed to the lowest worker
        it names. One per worker naming it alone: a blue switch that holds that worker's
        contribution drops its request (the loss was a sibling's), so only the worker whose
        packet was lost sends again. With `group_requests`, one per blue switch (learnt from
        its aggregates) naming its missing workers: the switch narrows it to those its cell
        lacks, or answers it with its stored sum when its aggregate was lost above it."""
        out: list[tuple[int, AggPacket]] = []
        rest = missing
        while rest:
            w = _lowest(rest)
            bits = (self._groups.get(w, 0) if self.group_requests else 0) & rest or 1 << w
            out.append((w, nack_packet(self.job, self.first_chunk + c, bits, self.slots)))
            rest &= ~bits
        return out

    def next_deadline(self) -> float | None:
        """When `poll` has something to send next (None: nothing is suspected)."""
        return min(self._due.values(), default=None)

    def _answer(self, pkt: AggPacket, st: ChunkState, bitmap: int) -> list[tuple[int,
                                                                             AggPacket]]:
        i = (pkt.chunk - self.first_chunk) & _MASK32
        res = result_packet(pkt, st.bitmap, st.count, st.values, st.overflow,
                            behind=max(0, i - self._low), ece=st.ce,
                            previous=self._previous.get(i, 0))
        return [(w, res) for w in range(self.workers) if bitmap >> w & 1]

    def sums(self) -> list[tuple[int, ...]]:
        """Every chunk's sum, in order (complete or not)."""
        return [self.state.get(i, ChunkState()).values for i in range(self.chunks)]
