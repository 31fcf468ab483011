"""A job profile measured from a packet capture of its traffic.

The capture is read one packet at a time (scapy's raw reader: no dissection, no list of
packets), so only the per-bin byte counts are kept in memory: a capture far larger than
memory works. The iteration time is the lag of the strongest autocorrelation peak of the
demand series past the first zero crossing (the shortest lag that comes within 10% of it, so
a multiple of the period is not taken for it), found on a series smoothed just enough that
the comb of finely spaced packets does not leave ripple peaks, then refined on the raw
series by epoch folding to a fraction of a bin (`find_period`). The confidence is the share
of the capture's variance the folded profile explains. The profile is the demand folded
onto that period and averaged over all iterations in the capture: a jobs-file entry with a
`demand_gbps` curve.

The search is bounded before it starts (`search_cost`): one autocorrelation per smoothing
width and one fold of the whole series per candidate period, both linear in the series'
length, are counted from the number of bins alone; past `SEARCH_LIMIT_S` or the memory
available it is refused with the estimate (a larger --bin-ms shortens the series; --force
runs it anyway).

A stream without a period (steady, Poisson, random on/off) is refused by a test of
significance (`significance`, `check_period`), not by a share of variance: the periodogram's
power at the period found, against the spectrum's local level off the period's harmonics,
Bonferroni-corrected for the number of frequencies searched, at the level `SIGNIFICANCE`
(0.001). A local level, not the whole spectrum's, so that the low-frequency power of random
on/off traffic is not taken for a period (Fisher's g, against the whole spectrum, would).
A capture of too few iterations to measure that level is refused too. Times are binned to the
microsecond from the first packet: a float epoch time's rounding made a steady stream of one
packet per ms into a 23 ms "job" with confidence 0.63.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from innet.cassini.model.profiles import JOB_NAME, JobProfile, jobs_from_data
from innet.errors import InputError, quote
from innet.limits import check_memory, check_time, duration

FloatArray = npt.NDArray[np.float64]

MIN_CONFIDENCE = 0.3  # an autocorrelation peak below this is not taken for a period's
SIGNIFICANCE = 0.001  # the test's level: a stream without a period passes 1 time in 1000
MIN_LEVEL_BINS = 8  # periodogram ordinates off the harmonics to measure the level with
# 8M bins (2.3 hours at 1 ms): the autocorrelation's FFT then takes about 0.5 GB
MAX_BINS = 1 << 23
_IP_OFFSET = {1: 14, 101: 0, 228: 0, 113: 16, 276: 20}  # Ethernet, raw IP, IPv4, SLL, SLL2
SEARCH_LIMIT_S = 20.0
# measured here per bin of the series: one autocorrelation (FFT of twice its length), one
# smoothing (cumulative sums), one candidate period's fold (`explained`)
NS_ACF, NS_SMOOTH, NS_FOLD = 170.0, 20.0, 70.0
COARSE_CANDIDATES = 2001  # half-bin steps within 10% of the coarse lag, at most
FINE_CANDIDATES = 201  # steps of a fraction of a bin around the best coarse one, at most


def _widths(hi: int) -> list[int]:
    """The smoothing widths of the coarse search: 1, 3, 9, ... while 8 W fits the lags."""
    widths, w = [], 1
    while 8 * w <= hi:
        widths.append(w)
        w *= 3
    return widths or [1]


def _lag_range(n: int, bin_ms: float, min_ms: float | None,
               max_ms: float | None) -> tuple[int, int]:
    lo = max(2, math.ceil((min_ms or 2 * bin_ms) / bin_ms))
    hi = min(n // 2, math.floor(max_ms / bin_ms) if max_ms else n // 2)
    return lo, hi


def search_cost(n: int, bin_ms: float, min_ms: float | None = None,
                max_ms: float | None = None) -> tuple[float, float]:
    """(seconds, bytes) that `find_period` may take on a series of `n` bins, at most: every
    smoothing width's autocorrelation, and the folds of the longest lag's candidates."""
    hi = _lag_range(n, bin_ms, min_ms, max_ms)[1]
    widths = len(_widths(hi))
    coarse = min(COARSE_CANDIDATES, int(0.4 * max(hi, 1)) + 2)
    seconds = n * 1e-9 * (widths * (NS_ACF + NS_SMOOTH) + (coarse + FINE_CANDIDATES) * NS_FOLD)
    fft = 1 << max(1, 2 * n - 1).bit_length()
    return seconds, 64.0 * fft + 48.0 * n


def check_search(n: int, bin_ms: float, min_ms: float | None = None,
                 max_ms: float | None = None, *, force: bool = False) -> None:
    """Refuse a period search past SEARCH_LIMIT_S or the memory available, with the estimate
    and what shortens it."""
    seconds, nbytes = search_cost(n, bin_ms, min_ms, max_ms)
    what = (f"the period search over {n} bins of {bin_ms:g} ms "
            f"({duration(n * bin_ms / 1e3)} of capture)")
    check_time(what, seconds, SEARCH_LIMIT_S, force=force,
               flag="a larger --bin-ms (or --max-period-ms), or --force,")
    check_memory(what, nbytes, force=force)


def job_name(text: str) -> str:
    """A valid job name made from `text` (a capture's file name): every run of characters a
    name may not hold becomes '-', and what cannot start a name is dropped from the front;
    an InputError saying to use --name when nothing is left."""
    import re

    name = re.sub(r"[^A-Za-z0-9_.+-]+", "-", text)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:100]
    if not name or not JOB_NAME.fullmatch(name):
        raise InputError(f"cannot make a job name from {quote(text)}: give one with --name")
    return name


@dataclass(frozen=True)
class CaptureProfile:
    source: str
    packets: int
    bytes: int
    duration_ms: float
    bin_ms: float
    period_ms: float
    iterations: int  # whole periods in the capture
    confidence: float  # share of the variance the folded profile explains, 0..1
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
    from innet.capture import read_records

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
    bin_us = bin_ms * 1e3
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
        # to the microsecond: an epoch time as a float holds only about 0.24 us, so the raw
        # difference puts a steady stream's packets on either side of the bin edges in the
        # pattern of the float's rounding (a fake 23 ms period in one packet per ms)
        rel_us = max(0, round((ts - first) * 1e6))
        rel = rel_us / 1e3
        i = int(rel_us // bin_us)
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


def smooth(series: FloatArray, width: int) -> FloatArray:
    """The moving average np.convolve(series, ones(width) / width, "same") gives, from
    cumulative sums: linear in the series whatever the width (the convolution was
    series x width: 3^12 wide over 8 million bins ran for minutes)."""
    n = len(series)
    if width <= 1 or n == 0:
        return series
    width = min(width, n)
    c = np.concatenate([[0.0], np.cumsum(series)])
    i = np.arange(n)
    hi = np.minimum(n, i + (width - 1) // 2 + 1)
    lo = np.maximum(0, i + (width - 1) // 2 - width + 1)
    out: FloatArray = (c[hi] - c[lo]) / width
    return out


def _coarse_lag(acf: FloatArray, n: int, lo: int, hi: int) -> int:
    """The shortest strong autocorrelation peak within 10% of the strongest (so a multiple
    of the period is not taken for it); raises when there is none."""
    crossing = np.flatnonzero(acf[1:] <= 0)
    if len(crossing) == 0:
        raise InputError("no repeating pattern in the capture (the demand never decorrelates)")
    lo = max(lo, int(crossing[0]) + 1)
    if hi <= lo:
        raise InputError(f"the capture ({n} bins) is too short to find a period: it needs at "
                         "least two iterations")
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
                         f"{acf[top]:.2f} at lag {top} bins is within noise)")
    best = float(acf[strong].max())
    return int(strong[np.argmax(acf[strong] >= 0.9 * best)])


def explained(series: FloatArray, bin_ms: float, period_ms: float) -> float:
    """Share of the series' variance that the profile folded at `period_ms` explains: 1 for
    a pattern that repeats exactly, about 0 for noise; it drops when the period is off
    (folded iterations smear) or when the capture holds something else too."""
    folded, whole = fold(series, bin_ms, period_ms)
    usable = min(len(series), round(whole * period_ms / bin_ms))
    x = series[:usable]
    total = float(((x - x.mean()) ** 2).sum())
    if total <= 0 or whole < 2:
        return 0.0
    width = len(folded)
    phase = (np.arange(usable) * bin_ms % period_ms) / period_ms * width
    index = np.minimum(np.floor(phase + 1e-9).astype(np.int64), width - 1)
    residual = float(((x - folded[index]) ** 2).sum())
    return max(0.0, 1.0 - residual / total)


def find_period(series: FloatArray, bin_ms: float, min_ms: float | None = None,
                max_ms: float | None = None) -> tuple[float, float]:
    """(period in ms, confidence 0..1). At least two periods must fit the series.

    Packets sent at a fine, steady spacing leave a comb in the bins (a packet every 1.25 ms
    fills four 1 ms bins of five), and the autocorrelation of the comb has ripple peaks a
    few ms either side of the period, nearly as high as the period's own. So the coarse
    period comes from the autocorrelation of the series smoothed over W bins, with the
    largest W (1, 3, 9, ...) at which the period found is still long against W (8 W or
    more): a comb at the scale of the packet spacing is gone by then. The period is then
    refined on the raw series by epoch folding: the period whose folded profile explains
    most of the series' variance, searched within 10% of the coarse one, to a fraction of a
    bin. The confidence is that share of explained variance.
    """
    n = len(series)
    lo, hi = _lag_range(n, bin_ms, min_ms, max_ms)
    if hi <= lo:
        raise InputError(f"the capture ({n * bin_ms:g} ms) is too short to find a period: it "
                         "needs at least two iterations")
    lag: int | None = None
    first: tuple[int, int] | None = None
    error: InputError | None = None
    for width in (_widths(hi) if hi >= 8 else []):
        try:
            found = _coarse_lag(autocorrelation(smooth(series, width)), n, lo, hi)
        except InputError as exc:
            error = error or exc
            continue
        if first is None:
            first = (found, width)
        if found >= 8 * width:  # long against the smoothing: keep the smoothest such
            lag = found
    if lag is None:
        if first is None:
            if error is not None:
                raise error
            first = (_coarse_lag(autocorrelation(series), n, lo, hi), 1)
        lag = first[0]
    # refine by folding within 10% of the coarse lag: steps of half a bin (at most 2000 of
    # them), then steps of bin / iterations around the best
    reach = max(2.0, 0.1 * lag)
    coarse_step = max(0.5, 2 * reach / (COARSE_CANDIDATES - 1))
    candidates = np.arange(max(lo, lag - reach), min(hi, lag + reach) + coarse_step / 2,
                           coarse_step)
    scores = [explained(series, bin_ms, c * bin_ms) for c in candidates]
    best = float(candidates[int(np.argmax(scores))])
    # a fraction of a bin per iteration the capture holds, in at most FINE_CANDIDATES steps
    step = max(1.0 / max(2, n // max(1, round(best))),
               2 * coarse_step / (FINE_CANDIDATES - 1))
    fine = np.arange(max(lo, best - coarse_step), min(hi, best + coarse_step) + step / 2,
                     step)
    scores = [explained(series, bin_ms, c * bin_ms) for c in fine]
    k = int(np.argmax(scores))
    return float(fine[k]) * bin_ms, float(scores[k])


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


def significance(series: FloatArray, bin_ms: float, period_ms: float,
                 min_ms: float | None = None, max_ms: float | None = None) -> tuple[float, float]:
    """(p-value, power ratio) of the period against a stream without one.

    The test: the periodogram's power at the period's frequency, over the spectrum's level
    around it (the median of the ordinates within about half an octave that sit more than two
    bins from every harmonic of the period, / ln 2). Without a period the power at any one
    frequency is the local level times an exponential variable (a periodogram ordinate has two
    degrees of freedom), so P(ratio >= R) = exp(-R); the period was picked among the Fourier
    frequencies of the searched range, so that is multiplied by their number (Bonferroni).
    The level is local, not the whole spectrum's, so a random on/off stream, whose power
    crowds into the low frequencies, is no more a period than white noise is. Fewer than
    MIN_LEVEL_BINS ordinates to measure the level (a capture of a few iterations) is p = 1.
    """
    x = series - series.mean()
    n = len(x)
    spectrum = np.abs(np.fft.rfft(x)[1:]) ** 2 / n  # ordinates k = 1 .. n // 2
    freq = bin_ms / period_ms  # cycles per bin
    k0 = freq * n
    power = float(abs(np.dot(x, np.exp(-2j * np.pi * freq * np.arange(n)))) ** 2 / n)
    ks = np.arange(1, len(spectrum) + 1)
    off_harmonic = np.abs(ks - np.maximum(1, np.round(ks / k0)) * k0) > 2
    reach = max(8.0, k0 / 2)
    while True:
        near = off_harmonic & (np.abs(ks - k0) <= reach)
        if near.sum() >= MIN_LEVEL_BINS or reach >= len(ks):
            break
        reach *= 2
    if near.sum() < MIN_LEVEL_BINS:
        return 1.0, 0.0
    level = float(np.median(spectrum[near])) / math.log(2)
    if level <= 0:
        return (0.0, math.inf) if power > 0 else (1.0, 0.0)
    ratio = power / level
    lo, hi = _lag_range(n, bin_ms, min_ms, max_ms)
    trials = max(1.0, n / lo - n / max(hi, lo))
    return min(1.0, trials * math.exp(-min(ratio, 700.0))), ratio


def check_period(series: FloatArray, bin_ms: float, period_ms: float, source: str,
                 min_ms: float | None = None, max_ms: float | None = None) -> None:
    """Refuse a capture whose period is not significant at SIGNIFICANCE (a steady, Poisson or
    random on/off stream): a job made of it would be fiction."""
    p_value, ratio = significance(series, bin_ms, period_ms, min_ms, max_ms)
    if p_value > SIGNIFICANCE:
        raise InputError(f"no clear iteration time: the best period, {period_ms:.4g} ms, is not "
                         f"significant (power {ratio:.3g} x the spectrum's level around it, "
                         f"p = {p_value:.2g} > {SIGNIFICANCE:g}); a steady or random stream, "
                         "or too few iterations? (--host keeps one host's packets)",
                         source=source)


def profile_capture(path: str | Path, *, bin_ms: float = 1.0, host: str | None = None,
                    min_period_ms: float | None = None,
                    max_period_ms: float | None = None, force: bool = False) -> CaptureProfile:
    bins, packets, total, span = bin_capture(path, bin_ms, host)
    check_search(len(bins), bin_ms, min_period_ms, max_period_ms, force=force)
    if len(bins) > 1 and np.all(bins == bins[0]):
        raise InputError("no clear iteration time: the demand is the same in every bin (a "
                         "steady stream has no period)", source=str(path))
    gbps = bins * 8 / (bin_ms * 1e-3) / 1e9
    period, confidence = find_period(gbps, bin_ms, min_period_ms, max_period_ms)
    check_period(gbps, bin_ms, period, str(path), min_period_ms, max_period_ms)
    folded, whole = fold(gbps, bin_ms, period)
    return CaptureProfile(str(path), packets, total, span, bin_ms, period, whole,
                          confidence, tuple(float(v) for v in folded))
