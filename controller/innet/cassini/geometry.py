"""Geometry on one link: jobs' demand rolled around a circle, rotated to interleave.

Each job's demand repeats every iteration, so it lives on a circle whose perimeter is its
iteration time T. Jobs with different T share a unified circle of perimeter P = LCM(T_j), on
which job j repeats P / T_j times. Demand is sampled on a grid of step delta = (precision /
360) x min T (bin averages, so volumes are kept), and a shift of m steps is `np.roll(curve, m)`.
The compatibility score of shifts s_j on a link of capacity C is

    score = 1 - mean over the circle of max(0, sum_j d_j(t - s_j) - C) / C

(1: demand never exceeds capacity; below 0: the jobs are badly incompatible).
`best_shifts` fixes the first job at 0 and searches the others: exhaustively while the grid
is small, otherwise by coordinate descent from a greedy start and seeded random restarts.
Among equally good shifts it takes the one deepest inside its plateau, furthest from a worse
shift, so a drifting job keeps its score longest.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from innet.cassini.profiles import JobProfile
from innet.errors import InputError

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DEFAULT_PRECISION_DEG = 5.0
DEFAULT_RESOLUTION_MS = 1.0
DEFAULT_CAP_FACTOR = 100.0
MAX_SAMPLES = 1 << 20
EXHAUSTIVE_CELLS = 16_000_000
_CHUNK_CELLS = 1 << 21
_NOISE = 1e-12  # bin averages add up with rounding: float noise above capacity is no excess


@dataclass(frozen=True)
class Circle:
    """The unified circle of a set of jobs: perimeter, grid step and each job's rounded T."""

    period_ms: float
    step_ms: float
    samples: int
    periods_ms: tuple[float, ...]
    exact: bool = True
    warning: str | None = None

    def shift_steps(self, period_ms: float) -> int:
        """How many grid shifts cover [0, period): the search range of one job."""
        return max(1, min(self.samples, math.ceil(period_ms / self.step_ms - 1e-9)))


def check_precision(precision_deg: float) -> float:
    if not (isinstance(precision_deg, int | float) and 0 < precision_deg <= 360):
        raise InputError(f"--precision-deg must be in (0, 360] degrees, got {precision_deg!r}")
    return float(precision_deg)


def check_capacity(capacity_gbps: float, where: str = "--capacity") -> float:
    if not (isinstance(capacity_gbps, int | float) and math.isfinite(capacity_gbps)
            and capacity_gbps > 0):
        raise InputError(f"{where} must be a number of Gbps > 0, got {capacity_gbps!r}")
    return float(capacity_gbps)


def unified_circle(iterations_ms: Sequence[float], *,
                   precision_deg: float = DEFAULT_PRECISION_DEG,
                   resolution_ms: float = DEFAULT_RESOLUTION_MS,
                   cap_factor: float = DEFAULT_CAP_FACTOR,
                   max_samples: int = MAX_SAMPLES) -> Circle:
    """P = LCM of the iteration times rounded to `resolution_ms`, capped at cap_factor x max T.

    Past the cap the largest T becomes the circle and `warning` says so: the other jobs then
    do not close up on the circle and their scores are approximate.
    """
    if not iterations_ms:
        raise InputError("no jobs on the link")
    precision = check_precision(precision_deg)
    if not resolution_ms > 0:
        raise InputError(f"resolution must be > 0 ms, got {resolution_ms!r}")
    if not cap_factor >= 1:
        raise InputError(f"the circle cap must be >= 1 x the largest T, got {cap_factor!r}")
    units = [max(1, round(t / resolution_ms)) for t in iterations_ms]
    lcm = math.lcm(*units)
    top = max(units)
    warning = None
    exact = True
    if lcm > cap_factor * top:
        shown = ", ".join(f"{u * resolution_ms:g}" for u in units)
        warning = (f"the unified circle of iteration times {shown} ms (LCM "
                   f"{lcm * resolution_ms:g} ms) is longer than {cap_factor:g} x the largest; "
                   f"using the largest ({top * resolution_ms:g} ms) as the circle, so scores "
                   "are approximate")
        lcm, exact = top, False
    period = lcm * resolution_ms
    per_min = max(1, round(360.0 / precision))
    samples = max(1, round(period / (min(units) * resolution_ms / per_min)))
    if samples > max_samples:
        note = (f"the circle ({period:g} ms) would need {samples} samples at "
                f"{precision:g} degrees; coarsened to {max_samples}")
        warning = f"{warning}; {note}" if warning else note
        samples = max_samples
    return Circle(period, period / samples, samples,
                  tuple(u * resolution_ms for u in units), exact, warning)


def demand_curve(job: JobProfile, circle: Circle, period_ms: float,
                 weight: float = 1.0) -> FloatArray:
    """Average Gbps of an unshifted job in each grid bin of the circle.

    The job is modelled with its rounded period: phases are scaled by period / T so the
    shape is kept. Bin averages come from the cumulative volume, so a phase that covers part
    of a bin contributes exactly its share.
    """
    scale = period_ms / job.iteration_ms
    starts = np.array([p.start_ms * scale for p in job.phases])
    durations = np.array([p.duration_ms * scale for p in job.phases])
    rates = np.array([p.gbps for p in job.phases])
    per_period = float((rates * durations).sum())
    edges = np.arange(circle.samples + 1, dtype=np.float64) * circle.step_ms
    whole = np.floor(edges / period_ms)
    within = edges - whole * period_ms
    partial = (np.clip(within[:, None] - starts[None, :], 0.0, durations[None, :])
               * rates[None, :]).sum(axis=1)
    cumulative = whole * per_period + partial
    curve: FloatArray = np.diff(cumulative) / circle.step_ms * weight
    return curve


def _line_excess(base: FloatArray, curve: FloatArray, count: int,
                 capacity: float) -> FloatArray:
    """Mean excess of base + curve shifted by 0..count-1 steps, in row chunks that fit memory.

    The shifted copies are rows of a sliding window over the curve laid twice end to end
    (a view: row n - s is the curve rolled by s), so no index array is built.
    """
    n = base.shape[0]
    windows = np.lib.stride_tricks.sliding_window_view(np.concatenate([curve, curve]), n)
    offset = base - capacity * (1.0 + _NOISE)
    out = np.empty(count, dtype=np.float64)
    rows = max(1, _CHUNK_CELLS // n)
    for lo in range(0, count, rows):
        hi = min(count, lo + rows)
        total = windows[n - hi + 1: n - lo + 1][::-1] + offset[None, :]
        np.maximum(total, 0.0, out=total)
        out[lo:hi] = total.mean(axis=1)
    return out


def _excess(total: FloatArray, capacity: float) -> float:
    return float(np.maximum(total - capacity * (1.0 + _NOISE), 0.0).mean())


def _most_robust(mask: BoolArray) -> tuple[int, ...]:
    """The grid point furthest (in steps, along every axis, cyclically) from a point outside
    the mask: erode the mask until one more erosion would empty it."""
    if mask.all():
        return (0,) * mask.ndim
    current = mask
    while True:
        nxt = current.copy()
        for axis in range(mask.ndim):
            if mask.shape[axis] > 1:
                nxt &= np.roll(current, 1, axis) & np.roll(current, -1, axis)
        if not nxt.any() or nxt.sum() == current.sum():
            break
        current = nxt
    return tuple(int(i) for i in np.argwhere(current)[0])


@dataclass(frozen=True)
class LinkSolution:
    """Best shifts for the jobs of one link: t_j^l in ms (the first job at 0) and the score."""

    jobs: tuple[str, ...]
    capacity_gbps: float
    circle: Circle
    score: float
    score_unshifted: float
    shifts_ms: tuple[float, ...]
    method: str  # "single", "trivial" (never above capacity), "exhaustive", "descent"

    def shift_map(self) -> dict[str, float]:
        return dict(zip(self.jobs, self.shifts_ms, strict=True))


class _Link:
    """The sampled curves of one link's jobs, prepared once for many score evaluations."""

    def __init__(self, jobs: Sequence[JobProfile], capacity: float,
                 weights: Sequence[float] | None, precision_deg: float, resolution_ms: float,
                 cap_factor: float) -> None:
        self.capacity = check_capacity(capacity)
        self.circle = unified_circle([j.iteration_ms for j in jobs], precision_deg=precision_deg,
                                     resolution_ms=resolution_ms, cap_factor=cap_factor)
        w = list(weights) if weights is not None else [1.0] * len(jobs)
        self.curves = [demand_curve(job, self.circle, period, wt) for job, period, wt
                       in zip(jobs, self.circle.periods_ms, w, strict=True)]
        self.counts = [self.circle.shift_steps(p) for p in self.circle.periods_ms]

    def total(self, shifts: Sequence[int]) -> FloatArray:
        """Demand of the first len(shifts) jobs, shifted."""
        out = np.zeros(self.circle.samples)
        for curve, m in zip(self.curves, shifts, strict=False):
            out += np.roll(curve, m)
        return out

    def score(self, shifts: Sequence[int]) -> float:
        return 1.0 - _excess(self.total(shifts), self.capacity) / self.capacity

    def exhaustive(self) -> tuple[int, ...]:
        free = self.counts[1:]
        table = np.empty(free, dtype=np.float64)
        for head in itertools.product(*(range(m) for m in free[:-1])):
            base = self.total([0, *head])
            table[head] = _line_excess(base, self.curves[-1], free[-1], self.capacity)
        best = float(table.min())
        pick = _most_robust(table <= best + 1e-9 * self.capacity)
        return (0, *pick)

    def descent(self, restarts: int, seed: int) -> tuple[int, ...]:
        starts = [self._greedy(), [0] * len(self.curves)]
        rng = np.random.default_rng(seed)
        for _ in range(restarts):
            starts.append([0] + [int(rng.integers(m)) for m in self.counts[1:]])
        best: tuple[float, list[int]] | None = None
        for start in starts:
            shifts = self._descend(list(start))
            excess = _excess(self.total(shifts), self.capacity)
            if best is None or excess < best[0] - 1e-12 * self.capacity:
                best = (excess, shifts)
        assert best is not None
        return tuple(self._polish(best[1]))

    def _greedy(self) -> list[int]:
        shifts = [0]
        base = self.curves[0].copy()
        for curve, m in zip(self.curves[1:], self.counts[1:], strict=True):
            line = _line_excess(base, curve, m, self.capacity)
            s = int(np.argmin(line))
            shifts.append(s)
            base += np.roll(curve, s)
        return shifts

    def _descend(self, shifts: list[int], max_rounds: int = 50) -> list[int]:
        total = self.total(shifts)
        for _ in range(max_rounds):
            improved = False
            for j in range(1, len(self.curves)):
                rest = total - np.roll(self.curves[j], shifts[j])
                line = _line_excess(rest, self.curves[j], self.counts[j], self.capacity)
                s = int(np.argmin(line))
                if line[s] < line[shifts[j]] - 1e-12 * self.capacity:
                    shifts[j] = s
                    improved = True
                total = rest + np.roll(self.curves[j], shifts[j])
            if not improved:
                break
        return shifts

    def _polish(self, shifts: list[int]) -> list[int]:
        """Move each job to the middle of its plateau of equally good shifts."""
        total = self.total(shifts)
        for j in range(1, len(self.curves)):
            rest = total - np.roll(self.curves[j], shifts[j])
            line = _line_excess(rest, self.curves[j], self.counts[j], self.capacity)
            if line.min() < line[shifts[j]] - 1e-9 * self.capacity:
                continue
            shifts[j] = _most_robust(line <= line[shifts[j]] + 1e-9 * self.capacity)[0]
            total = rest + np.roll(self.curves[j], shifts[j])
        return shifts


def best_shifts(jobs: Sequence[JobProfile], capacity_gbps: float, *,
                weights: Sequence[float] | None = None,
                precision_deg: float = DEFAULT_PRECISION_DEG,
                resolution_ms: float = DEFAULT_RESOLUTION_MS,
                cap_factor: float = DEFAULT_CAP_FACTOR,
                exhaustive_cells: int = EXHAUSTIVE_CELLS,
                restarts: int = 4, seed: int = 0) -> LinkSolution:
    """The shifts that best interleave `jobs` on one link of `capacity_gbps`.

    `weights` multiply a job's demand (a job whose ring crosses the link twice weighs 2).
    Exhaustive when (grid points x circle samples) <= exhaustive_cells, else coordinate
    descent with `restarts` seeded random starts.
    """
    if not jobs:
        raise InputError("no jobs on the link")
    link = _Link(jobs, capacity_gbps, weights, precision_deg, resolution_ms, cap_factor)
    zero = [0] * len(jobs)
    unshifted = link.score(zero)
    peak_sum = sum(float(c.max()) for c in link.curves)
    if len(jobs) == 1 or peak_sum <= link.capacity * (1 + 1e-12):
        shifts: tuple[int, ...] = tuple(zero)
        method = "single" if len(jobs) == 1 else "trivial"
    elif math.prod(link.counts[1:]) * link.circle.samples <= exhaustive_cells:
        shifts, method = link.exhaustive(), "exhaustive"
    else:
        shifts, method = link.descent(restarts, seed), "descent"
    step = link.circle.step_ms
    return LinkSolution(tuple(j.name for j in jobs), link.capacity, link.circle,
                        link.score(shifts), unshifted, tuple(s * step for s in shifts), method)


def score_at(jobs: Sequence[JobProfile], shifts_ms: Mapping[str, float] | Sequence[float],
             capacity_gbps: float, *, weights: Sequence[float] | None = None,
             precision_deg: float = DEFAULT_PRECISION_DEG,
             resolution_ms: float = DEFAULT_RESOLUTION_MS,
             cap_factor: float = DEFAULT_CAP_FACTOR) -> float:
    """The score of given shifts (ms, rounded to the grid): to check a plan after the fact."""
    link = _Link(jobs, capacity_gbps, weights, precision_deg, resolution_ms, cap_factor)
    values = ([shifts_ms.get(j.name, 0.0) for j in jobs] if isinstance(shifts_ms, Mapping)
              else list(shifts_ms))
    return link.score([round(v / link.circle.step_ms) % link.circle.samples for v in values])


def shifted_curves(jobs: Sequence[JobProfile], shifts_ms: Mapping[str, float],
                   circle: Circle, weights: Sequence[float] | None = None) -> FloatArray:
    """(jobs x samples) demand on the circle after the shifts: what the polar plot draws."""
    w = list(weights) if weights is not None else [1.0] * len(jobs)
    rows = [np.roll(demand_curve(job, circle, period, wt),
                    round(shifts_ms.get(job.name, 0.0) / circle.step_ms))
            for job, period, wt in zip(jobs, circle.periods_ms, w, strict=True)]
    return np.vstack(rows)
