"""The aggregation packet, in one place: constants, encoding, fixed point, plain sockets.

The P4 program (p4src/headers.p4) declares the same layout; a test compares the two. A packet
is UDP to `AGG_UDP_PORT` carrying a 16-byte header and `VECTOR_LEN` 32-bit values:

    job u16 | slot u16 | chunk u32 | bitmap u32 | count u16 | flags u8 | previous i8 |
    values 32 x i32

`chunk` numbers the pieces of one stream (a tensor cut into VECTOR_LEN values each); `slot` is
`chunk mod slots(job)`, the cell of the job's pool at every blue switch (in a RESULT, which
no switch stores, it says instead how far behind the destination's oldest incomplete chunk
is: `BEHIND_UNKNOWN` or the number of chunks before this one not all complete, and `previous`,
which the switches never read and P4 calls `reserved`, how far back the RESULT sent before
it is, so that a worker lacking that one knows at once that it lost it; docs/
aggregation-protocol.md explains why a pool of 2W cells serves a window of W chunks, with a
shadow copy of each finished chunk). Worker i of a job (its position in the workload's worker
list) sets bit i of the bitmap; a packet merged by a switch carries the OR of its contributors
and how many it merged. Values are 32-bit two's complement; a switch that sees a sum wrap sets
FLAG_OVERFLOW instead of wrapping silently.

Senders disable the UDP checksum (SO_NO_CHECK): switches rewrite the payload of merged packets
and send them with checksum 0 anyway, and a zero checksum cannot be broken by the checksum
offload of veth pairs in emulated networks.
"""

from __future__ import annotations

import math
import socket
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

AGG_UDP_PORT = 50000
VECTOR_LEN = 32
SLOTS = 256               # register cells of the pool of every switch (all jobs)
DEFAULT_JOB_SLOTS = 16    # cells one job gets by default: a window of 8 chunks
MAX_WORKERS = 32
ECT0 = 0x02  # the IPv4 TOS byte's ECN field saying "ECN-capable" (RFC 3168's ECT(0))

FLAG_MERGED = 0x01    # a switch emitted it as the sum of several contributions
FLAG_RESULT = 0x02    # the destination's final sum, sent to the workers: switches forward it
FLAG_OVERFLOW = 0x04  # some element of the sum wrapped (set by a switch or the destination)
FLAG_RESENT = 0x08    # a switch answered a retransmission with the stored sum (shadow copy)
# With RESULT: not a sum but the destination's request that the workers in `bitmap` send the
# chunk again (their contributions are missing); switches forward it as they do a RESULT
FLAG_NACK = 0x10
# With RESULT: some contribution of the chunk reached the destination CE-marked (the switches
# OR the marks of what they merge into the aggregate): the ECN echo the workers' congestion
# window reacts to, as a TCP receiver's ECE does. Hosts set and read it; switches pass it on.
FLAG_ECE = 0x20
# With RESULT | NACK: a worker's request for a RESULT it lost (the chunk is complete at the
# destination), on its way up; switches pass it untouched. Without it, RESULT | NACK is the
# destination's request for contributions, on its way down, which a blue switch may answer.
FLAG_ASK = 0x40
# With RESULT | NACK | ASK: the job's RESULTs go to its group address, so the blue switch above
# the worker may hold its other workers' requests for the chunk and copy the answer below.
# With RESULT alone: the destination's answer to such a request, whose slot field is the
# chunk's cell (as in the request), not how far behind (aggregate.p4 AggResultRepair)
FLAG_COPY = 0x80
# A RESULT's slot field: every chunk more than `slot` chunks before this one is complete at
# the destination, so a worker that lacks the result of one of them lost it; this value: the
# destination's oldest incomplete chunk is too far behind to say
BEHIND_UNKNOWN = 0xFFFF
# A RESULT's last header byte: how far back (signed, in chunks) the RESULT the destination
# sent to every worker before this one is. Every chunk is sent by every worker within its
# window of at most SLOTS / 2 = 128 chunks, so two chunks completed one after the other are
# less than 128 apart and the offset fits a signed byte
PREVIOUS_SPAN = 128

# Indices of the switch counter `agg_events` (p4src/headers.p4 AGG_EV_*), and their names.
EVENT_NAMES = ("held", "emitted", "duplicate", "stale", "malformed", "resent", "overflow",
               "fault_drop", "result", "nack_held", "nack_spread",
               "ask_held", "result_spread")
EVENTS = len(EVENT_NAMES)

_HEADER = struct.Struct("!HHIIHBB")
_VECTOR = struct.Struct(f"!{VECTOR_LEN}I")
# the same 32 words read and written as signed: what the switch's registers hold, without a
# Python-level wrap per value (hosts handle every chunk: this is most of their CPU)
_SIGNED = struct.Struct(f"!{VECTOR_LEN}i")
_INT32_MIN = -(1 << 31)
HEADER_BYTES = _HEADER.size
PAYLOAD_BYTES = _HEADER.size + _VECTOR.size

_MASK32 = 0xFFFFFFFF
ZERO_VECTOR = (0,) * VECTOR_LEN
_SO_NO_CHECK = 11  # Linux: send UDP over IPv4 without a checksum
INT32_MAX = 2**31 - 1


def wrap32(value: int) -> int:
    """A Python int as the switch holds it: 32-bit two's complement, read back signed."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def add_checked(a: Sequence[int], b: Sequence[int]) -> tuple[tuple[int, ...], bool]:
    """Element-wise 32-bit sum as a switch computes it, and whether any element wrapped."""
    sums = [x + y for x, y in zip(a, b, strict=True)]
    if min(sums, default=0) >= _INT32_MIN and max(sums, default=0) <= INT32_MAX:
        return tuple(sums), False  # nothing wrapped: the common case, without a wrap per value
    wrapped = tuple(wrap32(s) for s in sums)
    return wrapped, wrapped != tuple(sums)


def wrap_sum(vectors: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """Element-wise sum with 32-bit wraparound: what registers hold after adding them all."""
    total = [0] * VECTOR_LEN
    for vec in vectors:
        padded = pad(vec)
        for i in range(VECTOR_LEN):
            total[i] += padded[i]
    return tuple(wrap32(v) for v in total)


def pad(values: Sequence[int]) -> tuple[int, ...]:
    if len(values) > VECTOR_LEN:
        raise ValueError(f"a vector holds at most {VECTOR_LEN} values, got {len(values)}")
    return tuple(values) + (0,) * (VECTOR_LEN - len(values))


@dataclass(frozen=True, slots=True)
class AggPacket:
    job: int
    slot: int
    chunk: int
    bitmap: int
    count: int
    values: tuple[int, ...]
    flags: int = 0
    # In a RESULT (the header's last byte, which no switch reads): this chunk minus the chunk
    # whose RESULT the destination sent to every worker just before this one's, -127..127; 0
    # when none. The RESULTs to every worker leave in that order down FIFO paths, so a worker
    # that has this one and not that one lost that one (module docstring)
    previous: int = 0

    @property
    def merged(self) -> bool:
        """True when a switch emitted it as the sum of several contributions."""
        return bool(self.flags & FLAG_MERGED)

    @property
    def result(self) -> bool:
        """The destination's sum for the chunk (not a NACK)."""
        return self.flags & (FLAG_RESULT | FLAG_NACK) == FLAG_RESULT

    @property
    def nack(self) -> bool:
        return self.flags & (FLAG_RESULT | FLAG_NACK) == FLAG_RESULT | FLAG_NACK

    @property
    def overflow(self) -> bool:
        return bool(self.flags & FLAG_OVERFLOW)

    @property
    def ask(self) -> bool:
        """A worker's request for a RESULT it lost (not the destination's for a chunk)."""
        return self.nack and bool(self.flags & FLAG_ASK)

    @property
    def ece(self) -> bool:
        """A RESULT whose chunk met a congested queue on its way up."""
        return bool(self.flags & FLAG_ECE)


def contribution(job: int, chunk: int, worker: int, values: Sequence[int],
                 slots: int = DEFAULT_JOB_SLOTS) -> AggPacket:
    """Worker `worker`'s (index in the workload) vector for one chunk; short vectors pad 0."""
    if not 0 <= worker < MAX_WORKERS:
        raise ValueError(f"worker index must be in 0..{MAX_WORKERS - 1}, got {worker}")
    if not 1 <= slots < 1 << 16:
        raise ValueError(f"a job has 1..65535 slots, got {slots}")
    chunk &= _MASK32
    vec = pad(values)
    if not (min(vec) >= _INT32_MIN and max(vec) <= INT32_MAX):
        vec = tuple(wrap32(v) for v in vec)
    return AggPacket(job, chunk % slots, chunk, 1 << worker, 1, vec)


def result_packet(pkt: AggPacket, bitmap: int, count: int, values: Sequence[int],
                  overflow: bool, behind: int = BEHIND_UNKNOWN, ece: bool = False,
                  previous: int = 0) -> AggPacket:
    """The destination's answer for `pkt`'s chunk: the full sum, flagged RESULT; `behind`
    goes in the slot field (`BEHIND_UNKNOWN` beyond 16 bits); `ece`: echo a CE mark;
    `previous`: the offset back to the RESULT sent to every worker before this chunk's."""
    if not -PREVIOUS_SPAN < previous < PREVIOUS_SPAN:
        raise ValueError(f"previous must be within +-{PREVIOUS_SPAN - 1}, got {previous}")
    flags = FLAG_RESULT | (FLAG_OVERFLOW if overflow else 0) | (FLAG_ECE if ece else 0)
    return replace(pkt, slot=min(behind, BEHIND_UNKNOWN), bitmap=bitmap, count=count,
                   values=tuple(values), flags=flags, previous=previous)


def nack_packet(job: int, chunk: int, missing: int, slots: int = DEFAULT_JOB_SLOTS,
                ask: bool = False, copy: bool = False) -> AggPacket:
    """The destination's request for chunk `chunk` from the workers of bitmap `missing` (one
    request per worker, each naming that worker alone). It carries RESULT so that switches
    forward it, NACK so that no worker takes it for the sum, and the chunk's slot (as a
    contribution would, with the job's `slots`) so that a blue switch on the way can look at
    the chunk's cell (aggregate.p4): one that holds the contribution asked for while it waits
    on another worker drops the request, since that worker's copy would be a duplicate
    there; one whose cell is complete answers the request of its lowest contributor with the
    stored sum, sent back up to the destination, and drops the others, since the loss was its
    aggregate's, above it, and one packet repairs it. `ask`: a worker's request for a RESULT
    it lost, the same packet on its way up, flagged ASK so that switches pass it untouched;
    `copy` (with `ask`: the job's RESULTs go to its group): flagged COPY, so that the blue
    switch above the worker may hold the requests of its other workers for the chunk and copy
    the answer below."""
    if not 1 <= slots < 1 << 16:
        raise ValueError(f"a job has 1..65535 slots, got {slots}")
    chunk &= _MASK32
    return AggPacket(job, chunk % slots, chunk, missing, 0, ZERO_VECTOR,
                     FLAG_RESULT | FLAG_NACK | (FLAG_ASK if ask else 0)
                     | (FLAG_COPY if ask and copy else 0))


def encode(pkt: AggPacket) -> bytes:
    """UDP payload bytes of a packet."""
    if not 0 <= pkt.job < 1 << 16:
        raise ValueError(f"job must fit in 16 bits, got {pkt.job}")
    if len(pkt.values) != VECTOR_LEN:
        raise ValueError(f"a packet carries exactly {VECTOR_LEN} values, got {len(pkt.values)}")
    head = _HEADER.pack(pkt.job, pkt.slot & 0xFFFF, pkt.chunk & _MASK32, pkt.bitmap & _MASK32,
                        pkt.count & 0xFFFF, pkt.flags & 0xFF, pkt.previous & 0xFF)
    try:
        return head + _SIGNED.pack(*pkt.values)
    except struct.error:  # a value outside the signed range: the same 32 bits, unsigned
        return head + _VECTOR.pack(*(v & _MASK32 for v in pkt.values))


def decode(payload: bytes) -> AggPacket:
    """Parse a UDP payload; ValueError when it is not an aggregation packet."""
    if len(payload) != PAYLOAD_BYTES:
        raise ValueError(f"aggregation payload is {PAYLOAD_BYTES} bytes, got {len(payload)}")
    job, slot, chunk, bitmap, count, flags, last = _HEADER.unpack_from(payload, 0)
    values = _SIGNED.unpack_from(payload, HEADER_BYTES)
    return AggPacket(job, slot, chunk, bitmap, count, values, flags,
                     last - 256 if last >= 128 else last)


def worker_bitmap(indices: Iterable[int]) -> int:
    """Bitmap of several workers (their indices in the workload)."""
    out = 0
    for i in indices:
        out |= 1 << i
    return out


# ---------------------------------------------------------------------------------------------
# Fixed point: floats travel as integers the switches can add


def fixed_point_scale(max_abs: float, workers: int) -> float:
    """The largest power of two s such that `workers` values of magnitude <= max_abs, each
    rounded to round(x * s), sum to at most INT32_MAX in magnitude: the sum cannot overflow
    (SwitchML's rule). A power of two keeps the conversion back exact."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not max_abs > 0 or math.isinf(max_abs):
        raise ValueError(f"max_abs must be a positive finite number, got {max_abs}")
    # round() may add 1/2 per worker: keep that margin
    exp = math.floor(math.log2((INT32_MAX - workers) / (workers * max_abs)))
    return float(2.0**exp)


def to_fixed(values: Sequence[float], scale: float) -> list[int]:
    out = [round(v * scale) for v in values]
    bad = next((v for v in out if not -(2**31) <= v <= INT32_MAX), None)
    if bad is not None:
        raise ValueError(f"a value scales to {bad}, outside 32 bits: scale {scale} too large")
    return out


def from_fixed(values: Sequence[int], scale: float) -> list[float]:
    return [v / scale for v in values]


def chunked(values: Sequence[int]) -> list[tuple[int, ...]]:
    """A stream cut into packets of VECTOR_LEN values, the last one padded with zeros."""
    return [pad(values[i:i + VECTOR_LEN]) for i in range(0, len(values), VECTOR_LEN)]


# ---------------------------------------------------------------------------------------------
# Plain sockets: what a worker and the destination run


def sender_socket(tos: int = 0) -> socket.socket:
    """A UDP socket that sends without checksum (see the module docstring) and with `tos`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, _SO_NO_CHECK, 1)
    if tos:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    return sock


def send_packet(sock: socket.socket, dest_ip: str, pkt: AggPacket) -> None:
    sock.sendto(encode(pkt), (dest_ip, AGG_UDP_PORT))


def send_contribution(dest_ip: str, job: int, chunk: int, worker: int, values: Sequence[int],
                      *, slots: int = DEFAULT_JOB_SLOTS,
                      sock: socket.socket | None = None) -> AggPacket:
    """Send one chunk's vector of one worker toward the destination; returns what was sent."""
    pkt = contribution(job, chunk, worker, values, slots)
    s = sender_socket() if sock is None else sock
    try:
        send_packet(s, dest_ip, pkt)
    finally:
        if sock is None:
            s.close()
    return pkt


def receiver_socket(bind_ip: str = "0.0.0.0", port: int = AGG_UDP_PORT,
                    *, tos: bool = False, send_tos: int = 0) -> socket.socket:
    """A host's aggregation socket (large buffer so a burst is not lost here). Also sends
    without checksum, with `send_tos` (ECT0: the switches may mark it CE instead of letting
    the queue grow). `tos`: deliver each packet's TOS byte (recvmsg), to see CE marks."""
    sock = sender_socket(send_tos)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    if tos:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind((bind_ip, port))
    return sock


RESULT_GROUP_PREFIX = (239, 1)  # administratively scoped IPv4 multicast (RFC 2365)


def result_group_ip(job: int) -> str:
    """The address a job's RESULT packets go to: the switches replicate them down the job's
    tree (one multicast group per job and switch), every worker of the job listens on it."""
    if not 0 <= job < 1 << 16:
        raise ValueError(f"a job is 16 bits, got {job}")
    return f"{RESULT_GROUP_PREFIX[0]}.{RESULT_GROUP_PREFIX[1]}.{job >> 8}.{job & 0xFF}"


def join_result_group(sock: socket.socket, job: int, local_ip: str) -> None:
    """Receive the job's multicast RESULTs on the interface of `local_ip`."""
    mreq = socket.inet_aton(result_group_ip(job)) + socket.inet_aton(local_ip)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)


def multicast_from(sock: socket.socket, local_ip: str, ttl: int = 64) -> None:
    """Send multicast out of the interface of `local_ip`, with a TTL that crosses the tree
    (the kernel's default of 1 would be dropped by the first switch)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local_ip))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)


def recv_with_tos(sock: socket.socket) -> tuple[bytes, tuple[str, int], int]:
    """One datagram, its sender and its TOS byte (-1 when the socket does not report it)."""
    data, anc, _, addr = sock.recvmsg(65535, socket.CMSG_SPACE(4))
    tos = [d[0] for level, kind, d in anc if level == socket.IPPROTO_IP
           and kind == socket.IP_TOS]
    return data, addr, tos[0] if tos else -1
