"""A job profile measured from a packet capture of its traffic.

The capture is read one packet at a time (scapy's raw reader: no dissection, no list of
packets), so only the per-bin byte counts are kept in memory: a capture far larger than
memory works. The iteration time is the lag of the strongest autocorrelation peak of the
demand series past the first zero crossing (the shortest lag that comes within 10% of it, so
a multiple of the period is not taken for it), read off the furthest multiple of it that
fits to get it to a fraction of a bin. The profile is the demand folded onto that period and
averaged over all iterations in the capture: a jobs-file entry with a `demand_gbps` curve.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from controller.cassini.profiles import JobProfile, jobs_from_data
from controller.errors import InputError

FloatArray = npt.NDArray[np.float64]

MIN_CONFIDENCE = 0.3
# 8M bins (2.3 hours at 1 ms): the autocorrelation's FFT then takes about 0.5 GB
MAX_BINS = 1 << 23
_IP_OFFSET = {1: 14, 101: 0, 228: 0, 113: 16, 276: 20}  # Ethernet, raw IP, IPv4, SLL, SLL2


@dataclass(frozen=True)
class CaptureProfile:
    source: str
    packets: int
    bytes: int
    duration_ms: float
    bin_ms: float
    period_ms: float
    iterations: int  # whole periods in the capture
    confidence: float  # autocorrelation at the period, 0..1
    demand_gbps: tuple[float, ...]  # one value per bin over one period

    def to_job_dict(self, name: str, gpus: int = 2) -> dict[str, Any]:
        return {"name": name, "iteration_ms": round(self.period_ms, 3), "gpus": gpus,
                "demand_gbps": [round(v, 6) for v in self.demand_gbps]}

    def job(self, name: str, gpus: int = 2) -> JobProfile:
        return jobs_from_data({"jobs": [self.to_job_dict(name, gpus)]}, source=self.source)[0]


def bin_capture(path: str | Path, bin_ms: float,
                host: str | None = None) -> tuple[FloatArray, int, int, float]:
    """Bytes per time bin from the first packet on (wire length, so snapped captures count
    fully); with `host`, only IPv4 packets from or to it. Returns (bins, packets, bytes,
    duration in ms)."""
    from controller.capture import read_records

    if not (bin_ms > 0 and math.isfinite(bin_ms)):
        raise InputError(f"--bin-ms must be a finite number > 0, got {bin_ms!r}")
    want: bytes | None = None
    if host is not None:
        try:
            want = ipaddress.IPv4Address(host).packed
        except ValueError:
            raise InputError(f"--host must be an IPv4 address, got {host!r}") from None
    source = str(path)
    bins = np.zeros(1 << 12)
    packets = total = 0
    first: float | None = None
    last = 0.0
    for rec in read_records(source):
        data = rec.data
        if want is not None:
            offset = _IP_OFFSET.get(rec.linktype, 14)
            ip = data[offset:offset + 20]
            if len(ip) < 20 or ip[0] >> 4 != 4 or want not in (ip[12:16], ip[16:20]):
                continue
        ts = rec.time
        if first is None:
            first = ts
        rel = max(0.0, (ts - first) * 1e3)
        i = int(rel // bin_ms)
        if i >= MAX_BINS:
            raise InputError(f"the capture spans at least {rel:.6g} ms: at --bin-ms {bin_ms:g} "
                             f"that is more than {MAX_BINS} bins (the most the period search "
                             "can take); give a larger --bin-ms", source=source)
        if i >= len(bins):
            bins = np.concatenate([bins, np.zeros(max(len(bins), i + 1 - len(bins)))])
        size = rec.wirelen
        bins[i] += size
        packets += 1
        total += size
        last = max(last, rel)
    if packets == 0:
        raise InputError("no packets" + (f" from or to {host}" if host else ""), source=source)
    used = int(last // bin_ms) + 1
    return bins[:used], packets, total, last


def autocorrelation(series: FloatArray) -> FloatArray:
    """Normalised, unbiased autocorrelation for lags 0..n-1 (by FFT: O(n log n))."""
    x = series - series.mean()
    n = len(x)
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    raw = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n]
    if raw[0] <= 0:
        return np.zeros(n)
    acf: FloatArray = (raw / (n - np.arange(n))) / (raw[0] / n)
    return acf


def find_period(series: FloatArray, bin_ms: float, min_ms: float | None = None,
                max_ms: float | None = None) -> tuple[float, float]:
    """(period in ms, autocorrelation there). At least two periods must fit the series."""
    n = len(series)
    acf = autocorrelation(series)
    lo = max(2, math.ceil((min_ms or 2 * bin_ms) / bin_ms))
    hi = min(n // 2, math.floor(max_ms / bin_ms) if max_ms else n // 2)
    if hi <= lo:
        raise InputError(f"the capture ({n * bin_ms:g} ms) is too short to find a period: it "
                         "needs at least two iterations")
    # the main lobe around lag 0 is not a period: start past the first zero crossing
    crossing = np.flatnonzero(acf[1:] <= 0)
    if len(crossing) == 0:
        raise InputError("no repeating pattern in the capture (the demand never decorrelates)")
    lo = max(lo, int(crossing[0]) + 1)
    if hi <= lo:
        raise InputError(f"the capture ({n * bin_ms:g} ms) is too short to find a period: it "
                         "needs at least two iterations")
    window = acf[lo - 1:hi + 2]
    inner = window[1:-1]
    peaks = np.flatnonzero((inner >= window[:-2]) & (inner > window[2:])) + lo
    if len(peaks) == 0:
        raise InputError("no repeating pattern in the capture (the autocorrelation has no peak)")
    # noise alone reaches about 1/sqrt(pairs) at a lag: a peak must stand well above that
    bar = np.maximum(MIN_CONFIDENCE, 4.0 / np.sqrt(n - peaks))
    strong = peaks[acf[peaks] >= bar]
    if len(strong) == 0:
        top = int(peaks[np.argmax(acf[peaks])])
        raise InputError(f"no repeating pattern in the capture (autocorrelation peak "
                         f"{acf[top]:.2f} at {top * bin_ms:g} ms is within noise)")
    peaks = strong
    best = float(acf[peaks].max())
    lag = int(peaks[np.argmax(acf[peaks] >= 0.9 * best)])
    # the m-th peak sits at m x the period: reading the period off the furthest one that
    # fits divides the bin's rounding error by m
    m = max(1, hi // lag)
    reach = max(1, (m + 1) // 2)
    far = m * lag
    window = acf[max(1, far - reach):min(n, far + reach + 1)]
    at = max(1, far - reach) + int(np.argmax(window))
    return at / m * bin_ms, float(acf[lag])


def fold(series: FloatArray, bin_ms: float, period_ms: float) -> tuple[FloatArray, int]:
    """Average demand per bin of one period over the whole periods of the series."""
    width = max(1, round(period_ms / bin_ms))
    whole = int(len(series) * bin_ms // period_ms)
    usable = min(len(series), round(whole * period_ms / bin_ms))
    phase = (np.arange(usable) * bin_ms % period_ms) / period_ms * width
    index = np.minimum(np.floor(phase + 1e-9).astype(np.int64), width - 1)
    sums = np.bincount(index, weights=series[:usable], minlength=width)
    counts = np.bincount(index, minlength=width)
    folded: FloatArray = sums / np.maximum(counts, 1)
    return folded, whole


def profile_capture(path: str | Path, *, bin_ms: float = 1.0, host: str | None = None,
                    min_period_ms: float | None = None,
                    max_period_ms: float | None = None) -> CaptureProfile:
    bins, packets, total, duration = bin_capture(path, bin_ms, host)
    gbps = bins * 8 / (bin_ms * 1e-3) / 1e9
    period, confidence = find_period(gbps, bin_ms, min_period_ms, max_period_ms)
    folded, whole = fold(gbps, bin_ms, period)
    return CaptureProfile(str(path), packets, total, duration, bin_ms, period, whole,
                          confidence, tuple(float(v) for v in folded))
