"""Captures of a training job's traffic, written with scapy, for the tests that profile them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import PcapNgWriter, PcapWriter

T0 = 1_700_000_000.0


def write_bursts(path: Path, *, period_ms: float, on_ms: float, iterations: int,
                 gap_us: float = 500.0, size: int = 1000, noise: bool = True,
                 ng: bool = False) -> None:
    """A job's traffic: a burst of UDP packets every period (one packet every gap_us while
    on), plus a trickle from another host that must not matter once filtered out."""
    writer = PcapNgWriter(str(path)) if ng else PcapWriter(str(path), sync=True)
    rng = np.random.default_rng(0)
    for it in range(iterations):
        start = T0 + it * period_ms / 1e3
        for k in range(int(on_ms * 1e3 / gap_us)):
            pkt = (Ether() / IP(src="10.0.0.2", dst="10.0.0.3") / UDP(sport=5000, dport=5001)
                   / Raw(b"x" * (size - 42)))
            pkt.time = start + k * gap_us / 1e6 + rng.uniform(0, 20e-6)
            writer.write(pkt)
        if noise:
            other = Ether() / IP(src="10.0.0.9", dst="10.0.0.3") / UDP() / Raw(b"y" * 200)
            other.time = start + rng.uniform(0, period_ms / 1e3)
            writer.write(other)
    writer.close()
