"""`innet pcap summary` on captures the test writes: counts, CE marks, timeline, streaming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import PcapNgWriter, PcapWriter

from innet.cli import main
from innet.cli.pcap import summarise


def write_capture(path: Path, ng: bool = False) -> None:
    writer = (PcapNgWriter if ng else PcapWriter)(str(path))
    t = 1000.0
    for i in range(100):  # flow A: ECT(0), the second half marked CE
        tos = 0x03 if i >= 50 else 0x02
        pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", tos=tos) / UDP(sport=4000,
                                                                           dport=5000) / (b"x" * 58)
        pkt.time = t + i * 0.01
        writer.write(pkt)
    for i in range(10):  # flow B: TCP, not ECN-capable
        pkt = Ether() / IP(src="10.0.0.3", dst="10.0.0.2") / TCP(sport=80, dport=9999)
        pkt.time = t + i * 0.1
        writer.write(pkt)
    arp = Ether() / ARP()
    arp.time = t
    writer.write(arp)
    writer.close()


@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_flows_marks_and_timeline(tmp_path: Path, ng: bool) -> None:
    path = tmp_path / "c.pcap"
    write_capture(path, ng)
    s = summarise(path, bins=10)
    a = s.flows[("10.0.0.1", "10.0.0.2", 17, 4000, 5000)]
    assert (a.packets, a.ect, a.ce) == (100, 50, 50)
    assert a.bytes == 100 * (14 + 20 + 8 + 58)
    b = s.flows[("10.0.0.3", "10.0.0.2", 6, 80, 9999)]
    assert (b.packets, b.ce, b.ect) == (10, 0, 0)
    assert s.other_packets == 1
    assert sum(s.timeline_packets) == 110
    assert sum(s.timeline_ce) == 50
    # marks start halfway through: none in the first bins, all in the later ones
    assert s.timeline_ce[0] == 0 and s.timeline_ce[-1] > 0


def test_cli_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.pcap"
    write_capture(path)
    assert main(["pcap", "summary", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["packets"] == 111 and d["flows"][0]["ce"] == 50
    png = tmp_path / "t.png"
    assert main(["pcap", "summary", str(path), "--plot", str(png)]) == 0
    assert "50" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_captures_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pcap", "summary", str(tmp_path / "missing.pcap")]) == 2
    assert "missing.pcap: cannot read capture file: No such file" in capsys.readouterr().err
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture")
    assert main(["pcap", "summary", str(junk)]) == 2
    assert "not a pcap" in capsys.readouterr().err


def test_damaged_pcapng_blocks_are_named_not_raised(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A section header block of length 12 (shorter than its own fields) and an interface
    option whose length runs past its block: one line each, exit 2, no traceback."""
    import struct

    shb = struct.pack("<II", 0x0A0D0D0A, 12) + struct.pack("<I", 0x1A2B3C4D)
    short = tmp_path / "short-shb.pcapng"
    short.write_bytes(shb)
    assert main(["pcap", "summary", str(short)]) == 2
    err = capsys.readouterr().err
    assert "length 12 is not a valid block length" in err and "Traceback" not in err
    good_shb = struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
    # an interface block whose if_tsresol option claims 8 bytes where the block has 0
    body = struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HH", 9, 8)
    idb = struct.pack("<II", 1, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    over = tmp_path / "option-past-block.pcapng"
    over.write_bytes(good_shb + idb)
    assert main(["pcap", "summary", str(over)]) == 2
    err = capsys.readouterr().err
    assert "option 9 (8 bytes) runs past the block" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _raw_pcap(path: Path, packets: int) -> None:
    """A classic pcap of `packets` identical UDP frames, written with struct (fast)."""
    import struct

    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2", tos=3) / UDP() / (b"y" * 100))
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        record = struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame
        for i in range(packets):
            f.write(struct.pack("<II", 10 + i // 1000, (i % 1000) * 1000) + record[8:])


def test_memory_does_not_grow_with_the_capture(tmp_path: Path) -> None:
    import tracemalloc

    peaks = []
    for n in (2_000, 40_000):
        path = tmp_path / f"{n}.pcap"
        _raw_pcap(path, n)
        tracemalloc.start()
        s = summarise(path, bins=50)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert sum(s.timeline_ce) == n
    # 20x the packets, about the same memory: nothing is held per packet
    assert peaks[1] < 2 * peaks[0] + 200_000
