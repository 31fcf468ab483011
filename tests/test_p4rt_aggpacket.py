"""The aggregation packet: one format in Python, the same in the P4 program and its JSON."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from controller import aggpacket as ap

P4SRC = Path(__file__).resolve().parent.parent / "p4src"


def _defines() -> dict[str, int]:
    text = (P4SRC / "headers.p4").read_text()
    return {m[1]: int(m[2], 0) for m in re.finditer(r"^#define (\w+) (0x[0-9a-fA-F]+|\d+)",
                                                    text, re.M)}


def test_constants_match_the_p4_source() -> None:
    d = _defines()
    assert d["AGG_UDP_PORT"] == ap.AGG_UDP_PORT
    assert d["AGG_VECTOR_LEN"] == ap.VECTOR_LEN
    assert d["AGG_SLOTS_PER_JOB"] == ap.SLOTS_PER_JOB
    assert d["AGG_SLOTS"] == ap.SLOTS
    assert d["AGG_FLAG_MERGED"] == ap.FLAG_MERGED


def test_header_layout_matches_the_compiled_program() -> None:
    bmv2 = json.loads((P4SRC / "innet.json").read_text())
    types = {t["name"]: t["fields"] for t in bmv2["header_types"]}
    agg = [(f[0], f[1]) for f in types["agg_t"]]
    assert agg == [("job", 16), ("round", 16), ("bitmap", 32), ("count", 16), ("flags", 8),
                   ("reserved", 8)]
    assert sum(w for _, w in agg) // 8 == ap.HEADER_BYTES
    vec = [(f[0], f[1]) for f in types["vec_t"]]
    assert vec == [(f"v{i}", 32) for i in range(ap.VECTOR_LEN)]
    # the parser branches to the aggregation header on our UDP port
    values = [t.get("value") for p in bmv2["parsers"] for s in p["parse_states"]
              for t in s["transitions"] if s["name"] == "parse_udp"]
    assert f"{ap.AGG_UDP_PORT:#06x}" in values


def test_encode_decode_round_trip_with_signed_values() -> None:
    values = [0, 1, -1, 2**31 - 1, -(2**31), 123456789]
    pkt = ap.contribution(9, 70000, 3, values)
    assert pkt.round == 70000 % 65536 and pkt.bitmap == 8 and pkt.count == 1
    raw = ap.encode(pkt)
    assert len(raw) == ap.PAYLOAD_BYTES == 12 + 4 * 32
    assert raw[:12] == bytes.fromhex("0009" "1170" "00000008" "0001" "00" "00")
    back = ap.decode(raw)
    assert back == pkt
    assert back.values[:6] == tuple(values) and back.values[6:] == (0,) * 26
    assert not back.merged


def test_wraparound_sum_is_what_32_bit_registers_compute() -> None:
    a = [2**31 - 1, -5, 7]
    b = [1, -(2**31), 3]
    s = ap.wrap_sum([a, b])
    assert s[:3] == (-(2**31), 2**31 - 5, 10)
    assert all(-(2**31) <= v < 2**31 for v in s)
    # the same as adding the unsigned encodings mod 2^32
    ua = [v & 0xFFFFFFFF for v in ap.contribution(1, 0, 0, a).values]
    ub = [v & 0xFFFFFFFF for v in ap.contribution(1, 0, 1, b).values]
    assert [ap.wrap32(x + y) for x, y in zip(ua, ub, strict=True)] == list(s)


def test_bad_packets_and_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="worker index"):
        ap.contribution(1, 0, 32, [1])
    with pytest.raises(ValueError, match="at most 32"):
        ap.contribution(1, 0, 0, [0] * 33)
    with pytest.raises(ValueError, match="payload"):
        ap.decode(b"\x00" * 20)
    with pytest.raises(ValueError, match="16 bits"):
        ap.encode(ap.AggPacket(70000, 0, 1, 1, (0,) * 32))
    assert ap.worker_bitmap([0, 2, 31]) == (1 << 31) | 5


def test_send_and_collect_over_loopback() -> None:
    """The socket helpers as hosts use them: duplicates and other rounds are not summed."""
    with ap.receiver_socket("127.0.0.1", 0) as rx:
        port = rx.getsockname()[1]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for pkt in (ap.contribution(5, 1, 0, [1, 2]), ap.contribution(5, 0, 0, [100]),
                        ap.contribution(5, 1, 0, [1, 2]), ap.contribution(4, 1, 1, [7]),
                        ap.contribution(5, 1, 1, [10, -20])):
                tx.sendto(ap.encode(pkt), ("127.0.0.1", port))
        res = ap.collect_round(rx, 5, 1, expected=0b11, timeout=2.0)
    assert res.complete and res.bitmap == 0b11 and res.count == 2
    assert res.values[:3] == (11, -18, 0)
    assert len(res.packets) == 3  # the duplicate was seen, not summed


def test_collect_round_times_out_incomplete() -> None:
    with ap.receiver_socket("127.0.0.1", 0) as rx:
        res = ap.collect_round(rx, 1, 0, expected=0b1, timeout=0.05)
    assert not res.complete and res.packets == ()
