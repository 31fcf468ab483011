"""The aggregation packet, in one place: constants, encoding, and plain-socket send/receive.

The P4 program (p4src/headers.p4) declares the same layout; a test compares the two. A packet
is UDP to `AGG_UDP_PORT` carrying a 12-byte header and `VECTOR_LEN` 32-bit values:

    job u16 | round u16 | bitmap u32 | count u16 | flags u8 | reserved u8 | values 32 x u32

Worker i of a job (its position in the workload's worker list) sets bit i of the bitmap; a
packet merged by a switch carries the OR of its contributors and how many it merged. Values
are 32-bit two's complement and add with wraparound, as the switch's registers do.

Senders disable the UDP checksum (SO_NO_CHECK): switches rewrite the payload of merged packets
and send them with checksum 0 anyway, and a zero checksum cannot be broken by the checksum
offload of veth pairs in emulated networks.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

AGG_UDP_PORT = 50000
VECTOR_LEN = 32
SLOTS_PER_JOB = 4
SLOTS = 64
MAX_JOBS = SLOTS // SLOTS_PER_JOB
MAX_WORKERS = 32
FLAG_MERGED = 0x01

_HEADER = struct.Struct("!HHIHBB")
_VECTOR = struct.Struct(f"!{VECTOR_LEN}I")
HEADER_BYTES = _HEADER.size
PAYLOAD_BYTES = _HEADER.size + _VECTOR.size

_MASK32 = 0xFFFFFFFF
_SO_NO_CHECK = 11  # Linux: send UDP over IPv4 without a checksum


def wrap32(value: int) -> int:
    """A Python int as the switch holds it: 32-bit two's complement, read back signed."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def wrap_sum(vectors: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """Element-wise sum with 32-bit wraparound: what a switch or receiver must produce."""
    total = [0] * VECTOR_LEN
    for vec in vectors:
        padded = _pad(vec)
        for i in range(VECTOR_LEN):
            total[i] += padded[i]
    return tuple(wrap32(v) for v in total)


def _pad(values: Sequence[int]) -> tuple[int, ...]:
    if len(values) > VECTOR_LEN:
        raise ValueError(f"a vector holds at most {VECTOR_LEN} values, got {len(values)}")
    return tuple(values) + (0,) * (VECTOR_LEN - len(values))


@dataclass(frozen=True, slots=True)
class AggPacket:
    job: int
    round: int
    bitmap: int
    count: int
    values: tuple[int, ...]
    flags: int = 0

    @property
    def merged(self) -> bool:
        """True when a switch emitted it as the sum of several contributions."""
        return bool(self.flags & FLAG_MERGED)


def contribution(job: int, round_: int, worker: int, values: Sequence[int]) -> AggPacket:
    """Worker `worker`'s (index in the workload) vector for one round; short vectors pad 0."""
    if not 0 <= worker < MAX_WORKERS:
        raise ValueError(f"worker index must be in 0..{MAX_WORKERS - 1}, got {worker}")
    return AggPacket(job, round_ % (1 << 16), 1 << worker, 1,
                     tuple(wrap32(v) for v in _pad(values)))


def encode(pkt: AggPacket) -> bytes:
    """UDP payload bytes of a packet."""
    if not 0 <= pkt.job < 1 << 16:
        raise ValueError(f"job must fit in 16 bits, got {pkt.job}")
    if len(pkt.values) != VECTOR_LEN:
        raise ValueError(f"a packet carries exactly {VECTOR_LEN} values, got {len(pkt.values)}")
    head = _HEADER.pack(pkt.job, pkt.round & 0xFFFF, pkt.bitmap & _MASK32, pkt.count & 0xFFFF,
                        pkt.flags & 0xFF, 0)
    return head + _VECTOR.pack(*(v & _MASK32 for v in pkt.values))


def decode(payload: bytes) -> AggPacket:
    """Parse a UDP payload; ValueError when it is not an aggregation packet."""
    if len(payload) < PAYLOAD_BYTES:
        raise ValueError(f"aggregation payload is {PAYLOAD_BYTES} bytes, got {len(payload)}")
    job, round_, bitmap, count, flags, _ = _HEADER.unpack_from(payload, 0)
    values = tuple(wrap32(v) for v in _VECTOR.unpack_from(payload, HEADER_BYTES))
    return AggPacket(job, round_, bitmap, count, values, flags)


def worker_bitmap(indices: Iterable[int]) -> int:
    """Bitmap of several workers (their indices in the workload)."""
    out = 0
    for i in indices:
        out |= 1 << i
    return out


# ---------------------------------------------------------------------------------------------
# Plain sockets: what a worker and the destination run


def sender_socket(tos: int = 0) -> socket.socket:
    """A UDP socket that sends without checksum (see the module docstring) and with `tos`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, _SO_NO_CHECK, 1)
    if tos:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    return sock


def send_contribution(dest_ip: str, job: int, round_: int, worker: int, values: Sequence[int],
                      *, sock: socket.socket | None = None) -> AggPacket:
    """Send one round's vector of one worker toward the destination; returns what was sent."""
    pkt = contribution(job, round_, worker, values)
    own = sock is None
    s = sender_socket() if sock is None else sock
    try:
        s.sendto(encode(pkt), (dest_ip, AGG_UDP_PORT))
    finally:
        if own:
            s.close()
    return pkt


def receiver_socket(bind_ip: str = "0.0.0.0", port: int = AGG_UDP_PORT) -> socket.socket:
    """The destination's socket; a large buffer so a burst of red traffic is not lost here."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind((bind_ip, port))
    return sock


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What the destination got for one round: the sum and the packets that carried it."""

    job: int
    round: int
    values: tuple[int, ...]
    bitmap: int
    count: int
    packets: tuple[AggPacket, ...]
    complete: bool


def collect_round(sock: socket.socket, job: int, round_: int, expected: int,
                  timeout: float = 2.0) -> RoundResult:
    """Receive until the contributors in `expected` are all in (or timeout); sum what came.

    Packets of other jobs or rounds are skipped; a packet overlapping what was already summed
    is a duplicate and is kept in `packets` but not added.
    """
    deadline = time.monotonic() + timeout
    have = 0
    count = 0
    kept: list[AggPacket] = []
    summed: list[tuple[int, ...]] = []
    while have != expected:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            break
        data = sock.recv(65535)
        try:
            pkt = decode(data)
        except ValueError:
            continue
        if pkt.job != job or pkt.round != round_ % (1 << 16):
            continue
        kept.append(pkt)
        if pkt.bitmap & have:
            continue
        have |= pkt.bitmap
        count += pkt.count
        summed.append(pkt.values)
    return RoundResult(job, round_, wrap_sum(summed), have, count, tuple(kept), have == expected)


# ---------------------------------------------------------------------------------------------
# `python -m controller.aggpacket send|recv`: for hosts of an emulated network


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.aggpacket",
                                     description="send or receive aggregation packets")
    sub = parser.add_subparsers(dest="cmd", required=True)
    send = sub.add_parser("send", help="send one worker's vector for some rounds")
    send.add_argument("--dest", required=True, help="destination IPv4 address")
    send.add_argument("--job", type=int, required=True)
    send.add_argument("--worker", type=int, required=True, help="index in the workload")
    send.add_argument("--rounds", type=int, default=1)
    send.add_argument("--first-round", type=int, default=0)
    send.add_argument("--values", required=True, help="comma-separated integers")
    send.add_argument("--gap", type=float, default=0.0, help="seconds between rounds")
    recv = sub.add_parser("recv", help="collect rounds; prints one JSON object per round")
    recv.add_argument("--job", type=int, required=True)
    recv.add_argument("--expect", type=lambda s: int(s, 0), required=True,
                      help="bitmap of all workers (e.g. 0xffff)")
    recv.add_argument("--rounds", type=int, default=1)
    recv.add_argument("--first-round", type=int, default=0)
    recv.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.cmd == "send":
        values = [int(v) for v in args.values.split(",") if v.strip()]
        with sender_socket() as sock:
            for r in range(args.first_round, args.first_round + args.rounds):
                send_contribution(args.dest, args.job, r, args.worker, values, sock=sock)
                if args.gap:
                    time.sleep(args.gap)
        return 0
    with receiver_socket() as sock:
        for r in range(args.first_round, args.first_round + args.rounds):
            res = collect_round(sock, args.job, r, args.expect, args.timeout)
            print(json.dumps({"job": res.job, "round": res.round, "values": list(res.values),
                              "bitmap": res.bitmap, "count": res.count,
                              "packets": len(res.packets), "complete": res.complete}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
