"""The aggregation packet: one format in Python, the same in the P4 program and its JSON."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from innet import aggpacket as ap

P4SRC = Path(__file__).resolve().parent.parent / "p4src"


def _defines() -> dict[str, int]:
    text = (P4SRC / "headers.p4").read_text()
    return {m[1]: int(m[2], 0) for m in re.finditer(r"^#define (\w+) (0x[0-9a-fA-F]+|\d+)",
                                                    text, re.M)}


def test_constants_match_the_p4_source() -> None:
    d = _defines()
    assert d["AGG_UDP_PORT"] == ap.AGG_UDP_PORT
    assert d["AGG_VECTOR_LEN"] == ap.VECTOR_LEN
    assert d["AGG_SLOTS"] == ap.SLOTS
    assert d["AGG_UDP_LEN"] == 8 + ap.PAYLOAD_BYTES
    for name in ("MERGED", "RESULT", "OVERFLOW", "RESENT", "NACK", "ECE", "ASK", "COPY"):
        assert d[f"AGG_FLAG_{name}"] == getattr(ap, f"FLAG_{name}")
    events = {k[len("AGG_EV_"):].lower(): v for k, v in d.items() if k.startswith("AGG_EV_")}
    assert events == {n: i for i, n in enumerate(ap.EVENT_NAMES)}
    assert d["AGG_EVENTS"] >= ap.EVENTS


def test_header_layout_matches_the_compiled_program() -> None:
    bmv2 = json.loads((P4SRC / "innet.json").read_text())
    types = {t["name"]: t["fields"] for t in bmv2["header_types"]}
    agg = [(f[0], f[1]) for f in types["agg_t"]]
    assert agg == [("job", 16), ("slot", 16), ("chunk", 32), ("bitmap", 32), ("count", 16),
                   ("flags", 8), ("reserved", 8)]
    assert sum(w for _, w in agg) // 8 == ap.HEADER_BYTES
    vec = [(f[0], f[1]) for f in types["vec_t"]]
    assert vec == [(f"v{i}", 32) for i in range(ap.VECTOR_LEN)]
    # the parser branches to the aggregation header on our UDP port
    values = [t.get("value") for p in bmv2["parsers"] for s in p["parse_states"]
              for t in s["transitions"] if s["name"] == "parse_udp"]
    assert f"{ap.AGG_UDP_PORT:#06x}" in values


def test_encode_decode_round_trip_with_signed_values() -> None:
    values = [0, 1, -1, 2**31 - 1, -(2**31), 123456789]
    pkt = ap.contribution(9, 70000, 3, values, slots=16)
    assert (pkt.chunk, pkt.slot, pkt.bitmap, pkt.count) == (70000, 70000 % 16, 8, 1)
    raw = ap.encode(pkt)
    assert len(raw) == ap.PAYLOAD_BYTES == 16 + 4 * 32
    assert raw[:16] == bytes.fromhex("0009" "0000" "00011170" "00000008" "0001" "00" "00")
    back = ap.decode(raw)
    assert back == pkt
    assert back.values[:6] == tuple(values) and back.values[6:] == (0,) * 26
    assert not back.merged and not back.result and not back.overflow


def test_checked_sum_flags_what_wraps() -> None:
    s, ovf = ap.add_checked([2**31 - 1, -5, 7], [1, -(2**31), 3])
    assert s == (-(2**31), 2**31 - 5, 10) and ovf
    assert ap.add_checked([5, -5], [-7, 7]) == ((-2, 2), False)
    assert ap.wrap_sum([[2**31 - 1], [1]])[0] == -(2**31)


def _wrap(v: int) -> int:
    """The switch's register semantics, written independently of aggpacket."""
    return (v + 2**31) % 2**32 - 2**31


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**33), 2**33), min_size=32, max_size=32),
       st.lists(st.integers(-(2**31), 2**31 - 1), min_size=32, max_size=32))
def test_fast_paths_hold_the_registers_semantics(a: list[int], b: list[int]) -> None:
    """Hosts skip the wrap per value when nothing can wrap: whatever the values (some beyond
    32 bits), a contribution holds them wrapped, the wire carries their 32 bits, and a sum
    wraps and flags exactly as the registers do."""
    pkt = ap.contribution(1, 5, 0, a)
    assert pkt.values == tuple(_wrap(v) for v in a)
    raw = ap.encode(pkt)
    assert raw[16:] == b"".join((v % 2**32).to_bytes(4, "big") for v in a)
    assert ap.decode(raw) == pkt
    unwrapped = ap.encode(ap.AggPacket(1, 0, 5, 1, 1, tuple(a)))  # values never wrapped
    assert unwrapped[16:] == raw[16:]
    sums = [x + y for x, y in zip(pkt.values, b, strict=True)]
    assert ap.add_checked(pkt.values, b) == (tuple(_wrap(v) for v in sums),
                                             any(_wrap(v) != v for v in sums))


def test_fixed_point_scale_cannot_overflow_the_sum() -> None:
    for workers in (1, 3, 16, 32):
        for max_abs in (1e-3, 0.5, 1.0, 123.4):
            scale = ap.fixed_point_scale(max_abs, workers)
            worst = ap.to_fixed([max_abs], scale)[0] * workers
            assert worst <= ap.INT32_MAX
            assert round(max_abs * 2 * scale) * workers > ap.INT32_MAX - workers  # the largest
    fx = ap.to_fixed([0.5, -0.25, 1.0], 2.0**20)
    assert fx == [2**19, -(2**18), 2**20] and ap.from_fixed(fx, 2.0**20) == [0.5, -0.25, 1.0]
    with pytest.raises(ValueError, match="outside 32 bits"):
        ap.to_fixed([1.0], 2.0**31)
    with pytest.raises(ValueError, match="max_abs"):
        ap.fixed_point_scale(0.0, 2)
    chunks = ap.chunked(list(range(70)))
    assert len(chunks) == 3 and chunks[2] == tuple(range(64, 70)) + (0,) * 26


def test_bad_packets_and_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="worker index"):
        ap.contribution(1, 0, 32, [1])
    with pytest.raises(ValueError, match="at most 32"):
        ap.contribution(1, 0, 0, [0] * 33)
    with pytest.raises(ValueError, match="payload"):
        ap.decode(b"\x00" * 20)
    with pytest.raises(ValueError, match="payload"):
        ap.decode(ap.encode(ap.contribution(1, 0, 0, [1])) + b"\x00")
    with pytest.raises(ValueError, match="16 bits"):
        ap.encode(ap.AggPacket(70000, 0, 0, 1, 1, (0,) * 32))
    assert ap.worker_bitmap([0, 2, 31]) == (1 << 31) | 5


def test_send_and_receive_over_loopback_with_tos() -> None:
    with ap.receiver_socket("127.0.0.1", 0, tos=True) as rx:
        port = rx.getsockname()[1]
        with ap.sender_socket(tos=0x03) as tx:
            pkt = ap.contribution(5, 1, 0, [1, 2])
            tx.sendto(ap.encode(pkt), ("127.0.0.1", port))
        rx.settimeout(2)
        data, _, tos = ap.recv_with_tos(rx)
    assert ap.decode(data) == pkt and tos & 3 == 3
    assert isinstance(socket.SOCK_DGRAM, int)
