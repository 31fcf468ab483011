"""Profiles from captures: the period is found and the on/off shape comes back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from captures import T0, write_bursts
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import PcapWriter

from innet.cassini.model.pcap_profile import (
    SIGNIFICANCE,
    find_period,
    profile_capture,
    significance,
)
from innet.errors import InputError


def test_period_and_shape_are_found(tmp_path: Path) -> None:
    path = tmp_path / "job.pcap"
    write_bursts(path, period_ms=80, on_ms=30, iterations=25)
    prof = profile_capture(path, host="10.0.0.2")
    assert prof.period_ms == pytest.approx(80.0, abs=0.5)
    assert prof.iterations >= 23 and prof.confidence > 0.8
    demand = np.array(prof.demand_gbps)
    on = demand > 0.5 * demand.max()
    assert on.sum() == pytest.approx(30, abs=2)  # 30 one-ms bins on
    # 1000 bytes every 500 us = 16 Mbit/s
    assert demand[on].mean() == pytest.approx(0.016, rel=0.1)
    job = prof.job("measured")
    assert job.iteration_ms == pytest.approx(prof.period_ms, abs=1e-3)  # 3 decimals kept
    assert job.volume_mbit == pytest.approx(30 * 0.016, rel=0.15)


def test_pcapng_and_unfiltered_captures_work(tmp_path: Path) -> None:
    path = tmp_path / "job.pcapng"
    write_bursts(path, period_ms=120, on_ms=50, iterations=12, ng=True)
    assert profile_capture(path).period_ms == pytest.approx(120.0, abs=1.0)


def test_a_capture_without_a_pattern_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "noise.pcap"
    writer = PcapWriter(str(path), sync=True)
    rng = np.random.default_rng(1)
    for t in np.sort(rng.uniform(0, 2.0, 1500)):
        pkt = Ether() / IP(src="10.0.0.2", dst="10.0.0.3") / UDP() / Raw(b"z" * 500)
        pkt.time = T0 + t
        writer.write(pkt)
    writer.close()
    with pytest.raises(InputError, match="no repeating pattern"):
        profile_capture(path)


def test_bad_captures_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        profile_capture(tmp_path / "missing.pcap")
    text = tmp_path / "notes.pcap"
    text.write_text("not a capture at all\n" * 10)
    with pytest.raises(InputError, match="not a pcap"):
        profile_capture(text)
    short = tmp_path / "short.pcap"
    write_bursts(short, period_ms=100, on_ms=1, iterations=1, noise=False)
    with pytest.raises(InputError, match="too short"):
        profile_capture(short)
    once = tmp_path / "once.pcap"
    write_bursts(once, period_ms=100, on_ms=30, iterations=1, noise=False)
    with pytest.raises(InputError, match="no repeating pattern"):
        profile_capture(once)
    path = tmp_path / "job.pcap"
    write_bursts(path, period_ms=80, on_ms=30, iterations=5)
    with pytest.raises(InputError, match=r"no packets from or to 10\.9\.9\.9"):
        profile_capture(path, host="10.9.9.9")
    with pytest.raises(InputError, match="--host must be an IPv4"):
        profile_capture(path, host="h1")
    with pytest.raises(InputError, match="--bin-ms"):
        profile_capture(path, bin_ms=0)


def test_find_period_prefers_the_period_to_its_multiples() -> None:
    t = np.arange(2000)
    series = ((t % 50) < 20).astype(float) + 0.01 * np.random.default_rng(2).random(2000)
    period, confidence = find_period(series, 1.0)
    assert period == pytest.approx(50.0, abs=0.2) and confidence > 0.9


def comb(period_ms: float, on_ms: float, gap_ms: float, iterations: int = 20,
         jitter_ms: float = 0.0, seed: int = 0) -> np.ndarray:  # type: ignore[type-arg]
    """Packets every gap_ms during each Up phase, counted in 1 ms bins."""
    rng = np.random.default_rng(seed)
    t = np.concatenate([i * period_ms + 150.0 + np.arange(0, on_ms, gap_ms)
                        for i in range(iterations)])
    t = t + rng.uniform(0, jitter_ms, len(t))
    return np.bincount(t.astype(np.int64)).astype(float)


@pytest.mark.parametrize("gap_ms", [0.5, 1.0, 1.25, 1.5, 2.5])
@pytest.mark.parametrize("period_ms", [180.0, 240.0, 300.0])
def test_fine_packet_spacing_does_not_fool_the_period(gap_ms: float, period_ms: float) -> None:
    """A comb of packets leaves ripple peaks in the autocorrelation a few ms either side of
    the period (a 240 ms job at 1.25 ms spacing used to come out 235.6 ms)."""
    period, confidence = find_period(comb(period_ms, 90.0, gap_ms), 1.0)
    assert period == pytest.approx(period_ms, abs=0.1)
    assert confidence > 0.9


def test_the_240_ms_job_from_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "vgg19.pcap"
    write_bursts(path, period_ms=240, on_ms=90, iterations=12, gap_us=1250, noise=False)
    prof = profile_capture(path)
    assert prof.period_ms == pytest.approx(240.0, abs=0.1) and prof.confidence > 0.8


def test_confidence_falls_when_the_capture_is_ambiguous() -> None:
    clean = find_period(comb(240.0, 90.0, 1.0), 1.0)[1]
    jittery = find_period(comb(240.0, 90.0, 1.0, jitter_ms=30.0), 1.0)[1]
    # two jobs of different periods in one capture: neither period explains it all
    mixed_series = comb(240.0, 90.0, 1.0, iterations=25)
    other = comb(170.0, 60.0, 1.0, iterations=35)
    size = min(len(mixed_series), len(other))
    mixed = find_period(mixed_series[:size] + other[:size], 1.0)[1]
    assert clean > 0.95
    assert jittery < clean - 0.1
    assert mixed < clean - 0.1


# --------------------------------------------------------------- the test of significance


def _binned(times_ms: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    return np.bincount(np.floor(times_ms).astype(np.int64)).astype(float)


def _random_on_off(seed: int, on_ms: float, off_ms: float,
                   span_ms: float = 5000.0) -> np.ndarray:  # type: ignore[type-arg]
    """Packets every 0.5 ms during Up phases of random (exponential) lengths: no period."""
    rng = np.random.default_rng(seed)
    t, up, times = 0.0, False, []
    while t < span_ms:
        length = rng.exponential(on_ms if up else off_ms)
        if up:
            times.extend(np.arange(t, min(t + length, span_ms), 0.5))
        t += length
        up = not up
    return _binned(np.array(times))


def _p_value(series: np.ndarray) -> float:  # type: ignore[type-arg]
    """The significance of the period find_period picks; 1 when it finds none at all."""
    try:
        period, _ = find_period(series, 1.0)
    except InputError:
        return 1.0
    return significance(series, 1.0, period)[0]


@pytest.mark.parametrize("seed", range(10))
def test_streams_without_a_period_are_not_significant(seed: int) -> None:
    rng = np.random.default_rng(seed)
    steady = _binned(np.arange(5000) + np.clip(rng.normal(0.5, 0.3, 5000), 0, 0.999))
    poisson = _binned(np.sort(rng.uniform(0, 5000, 5000)))
    for series in (steady, poisson, _random_on_off(seed, 30, 30),
                   _random_on_off(seed, 100, 50), _random_on_off(seed, 10, 200, 20000)):
        assert _p_value(series) > SIGNIFICANCE


@pytest.mark.parametrize("gap_ms", [0.5, 1.25, 2.5])
@pytest.mark.parametrize("period_ms", [180.0, 240.0, 300.0])
def test_the_shipped_periodic_streams_are_significant(gap_ms: float, period_ms: float) -> None:
    assert _p_value(comb(period_ms, 90.0, gap_ms)) < 1e-30
    t = np.arange(2000)
    square = ((t % 50) < 20).astype(float) + 0.01 * np.random.default_rng(2).random(2000)
    assert _p_value(square) < 1e-30
    assert _p_value(comb(240.0, 90.0, 1.0, jitter_ms=30.0)) < 1e-30


def test_steady_poisson_and_on_off_captures_are_refused(tmp_path: Path) -> None:
    from inputs_helpers import write_pcap

    rng = np.random.default_rng(3)
    steady = [T0 + i * 1e-3 for i in range(5000)]  # an epoch's float rounding: once 23 ms
    jittered = [T0 + i * 1e-3 + rng.normal(0, 2e-4) for i in range(5000)]
    poisson = list(T0 + np.sort(rng.uniform(0, 5.0, 5000)))
    on_off = np.flatnonzero(_random_on_off(7, 100, 50)) / 1e3 + T0
    for name, times in (("steady", steady), ("jittered", jittered), ("poisson", poisson),
                        ("on-off", list(on_off))):
        path = Path(write_pcap(tmp_path / f"{name}.pcap", sorted(times)))
        with pytest.raises(InputError, match=r"no clear iteration time|no repeating pattern"):
            profile_capture(path)
