"""Geometry on one link: jobs' demand rolled around a circle, rotated to interleave.

Each job's demand repeats every iteration, so it lives on a circle whose perimeter is its
iteration time T. Jobs with different T share a unified circle of perimeter P = LCM(T_j), on
which job j repeats P / T_j times. Demand is sampled on a grid of step delta = (precision /
360) x min T (bin averages, so volumes are kept), and a shift of m steps is `np.roll(curve, m)`.
The compatibility score of shifts s_j on a link of capacity C is

    score = 1 - mean over the circle of max(0, sum_j d_j(t - s_j) - C) / C

(1: demand never exceeds capacity; below 0: the jobs are badly incompatible).
`best_shifts` fixes the job of the longest iteration at 0 (only relative shifts matter, and
this leaves the fewest shifts to search whatever the order of the file) and searches the
others: exhaustively while the grid is small, otherwise by coordinate descent from a greedy
start and seeded random restarts; the shifts are then given with the file's first job at 0.
Among equally good shifts it takes the one deepest inside its plateau, furthest from a worse
shift, so a drifting job keeps its score longest.

The search is bounded before it starts (`search_cost`): every evaluation of one job's shifts
costs (its shift steps x the circle's samples) cells, so the cost is known from the circle
alone. Descent rounds share a budget (`ROUNDS_PER_START` per start, unless forced), which
makes that estimate an upper bound; a search past `SEARCH_LIMIT_S` or the memory available is
refused with its estimate, and `force` runs it anyway.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from innet.cassini.model.profiles import JobProfile
from innet.errors import InputError
from innet.limits import check_memory, check_time

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DEFAULT_PRECISION_DEG = 5.0
DEFAULT_RESOLUTION_MS = 1.0
DEFAULT_CAP_FACTOR = 100.0
MAX_SAMPLES = 1 << 20
EXHAUSTIVE_CELLS = 16_000_000
_CHUNK_CELLS = 1 << 21
_NOISE = 1e-12  # bin averages add up with rounding: float noise above capacity is no excess
SEARCH_LIMIT_S = 20.0  # a shift search longer than this is refused unless forced
NS_PER_CELL = 4.0  # _line_excess, measured here: 3.4 ns per cell at 2^20 samples, 1.8 at 4320
ROUNDS_PER_START = 6  # descent rounds per start, shared by all starts (seen: 1 or 2 each)
MAX_ROUNDS = 50  # rounds of one start when forced


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
    volumes = rates * durations
    per_period = float(volumes.sum())
    # The volume sent since the period began is piecewise linear: flat in the gaps, rising
    # at each phase's rate. The phases are sorted and do not overlap (profiles.py), so it is
    # np.interp over their ends: time and memory linear in samples + phases (a matrix of
    # samples x phases took gigabytes for a demand curve of many steps).
    before = np.concatenate([[0.0], np.cumsum(volumes)[:-1]])
    xs = np.maximum.accumulate(np.column_stack([starts, starts + durations]).ravel())
    ys = np.column_stack([before, before + volumes]).ravel()
    edges = np.arange(circle.samples + 1, dtype=np.float64) * circle.step_ms
    whole = np.floor(edges / period_ms)
    within = edges - whole * period_ms
    cumulative = whole * per_period + np.interp(within, xs, ys)
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


@dataclass(frozen=True)
class SearchCost:
    """What `best_shifts` will do on one link, known before any curve is built."""

    samples: int
    steps: tuple[int, ...]  # shift steps searched per job (the reference job's is 1)
    method: str  # "single", "trivial", "exhaustive", "descent"
    cells: float  # additions of the search, an upper bound
    nbytes: float  # peak memory, about

    @property
    def seconds(self) -> float:
        return self.cells * NS_PER_CELL * 1e-9

    def describe(self) -> str:
        searched = [s for s in self.steps if s > 1]
        return (f"a circle of {self.samples} samples x {sum(searched)} shift steps "
                f"({self.method})")


def search_cost(jobs: Sequence[JobProfile], capacity_gbps: float, *,
                weights: Sequence[float] | None = None,
                precision_deg: float = DEFAULT_PRECISION_DEG,
                resolution_ms: float = DEFAULT_RESOLUTION_MS,
                cap_factor: float = DEFAULT_CAP_FACTOR,
                exhaustive_cells: int = EXHAUSTIVE_CELLS, restarts: int = 4,
                force: bool = False) -> SearchCost:
    """Upper bounds of the cells (float additions) and memory of `best_shifts` on these jobs,
    from the circle's samples and each job's shift steps; the same for any order of `jobs`."""
    circle = unified_circle([j.iteration_ms for j in jobs], precision_deg=precision_deg,
                            resolution_ms=resolution_ms, cap_factor=cap_factor)
    n = circle.samples
    counts = sorted((circle.shift_steps(p) for p in circle.periods_ms), reverse=True)
    free = counts[1:]  # the reference job (the longest iteration) is not searched
    w = list(weights) if weights is not None else [1.0] * len(jobs)
    build = float(n) * 12 * len(jobs) + sum(len(j.phases) for j in jobs) * 4.0
    peak = sum(max(p.gbps for p in j.phases) * wt for j, wt in zip(jobs, w, strict=True))
    line = float(sum(free)) * n  # every job's shifts evaluated once against the rest
    if len(jobs) == 1 or peak <= capacity_gbps * (1 + 1e-12):
        method, cells = ("single" if len(jobs) == 1 else "trivial"), 0.0
    elif math.prod(free) * n <= exhaustive_cells:
        heads = math.prod(free[:-1])
        method, cells = "exhaustive", float(math.prod(free)) * n + heads * len(jobs) * n
    else:
        starts = 2 + restarts
        rounds = starts * (MAX_ROUNDS if force else ROUNDS_PER_START)
        method, cells = "descent", (2 + rounds) * line + rounds * len(jobs) * n
    nbytes = 8.0 * n * (len(jobs) + 12) + 16.0 * _CHUNK_CELLS
    if method == "exhaustive":
        nbytes += 8.0 * math.prod(free) * 3  # the table and two erosion copies
    return SearchCost(n, (1, *free), method, build + cells, nbytes)


def check_search(cost: SearchCost, what: str, *, force: bool = False,
                 flag: str = "--force", limit_s: float = SEARCH_LIMIT_S) -> None:
    """Refuse a search whose estimate is past `limit_s` or the memory available here."""
    hint = f"a coarser --precision-deg, or {flag}," if flag else "a coarser --precision-deg"
    check_time(f"the shift search of {what} on {cost.describe()}", cost.seconds, limit_s,
               force=force, flag=hint)
    check_memory(f"the shift search of {what} on {cost.describe()}", cost.nbytes,
                 force=force, flag=flag or None)


class _Link:
    """The sampled curves of one link's jobs, prepared once for many score evaluations."""

    rounds_left: int = ROUNDS_PER_START

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

    def descent(self, restarts: int, seed: int, *, force: bool = False) -> tuple[int, ...]:
        starts = [self._greedy(), [0] * len(self.curves)]
        rng = np.random.default_rng(seed)
        for _ in range(restarts):
            starts.append([0] + [int(rng.integers(m)) for m in self.counts[1:]])
        best: tuple[float, list[int]] | None = None
        # the rounds of all starts share one budget, so `search_cost` is an upper bound
        self.rounds_left = len(starts) * (MAX_ROUNDS if force else ROUNDS_PER_START)
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

    def _descend(self, shifts: list[int], max_rounds: int = MAX_ROUNDS) -> list[int]:
        total = self.total(shifts)
        for _ in range(max_rounds):
            if self.rounds_left <= 0:
                break
            self.rounds_left -= 1
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
                restarts: int = 4, seed: int = 0, force: bool = False,
                flag: str = "--force") -> LinkSolution:
    """The shifts that best interleave `jobs` on one link of `capacity_gbps`.

    `weights` multiply a job's demand (a job whose ring crosses the link twice weighs 2).
    Exhaustive when (grid points x circle samples) <= exhaustive_cells, else coordinate
    descent with `restarts` seeded random starts. Refused up front (InputError with the
    estimate) when the search would take more than SEARCH_LIMIT_S or the memory available,
    unless `force` (`flag` is the option that sets it, "" when the command has none).
    """
    if not jobs:
        raise InputError("no jobs on the link")
    check_capacity(capacity_gbps)
    cost = search_cost(jobs, capacity_gbps, weights=weights, precision_deg=precision_deg,
                       resolution_ms=resolution_ms, cap_factor=cap_factor,
                       exhaustive_cells=exhaustive_cells, restarts=restarts, force=force)
    names = [j.name for j in jobs]
    what = (f"jobs {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3
                                               else ""))
    check_search(cost, what, force=force, flag=flag)
    # search with the longest iteration (the most shift steps) fixed at 0: the fewest shifts
    # to try, whatever the order of the file; then report them with the first job at 0
    w = list(weights) if weights is not None else [1.0] * len(jobs)
    ref = max(range(len(jobs)), key=lambda i: (jobs[i].iteration_ms, -i))
    order = [ref, *(i for i in range(len(jobs)) if i != ref)]
    shifts, unshifted, method = _search([jobs[i] for i in order], capacity_gbps,
                                           [w[i] for i in order], precision_deg,
                                           resolution_ms, cap_factor, exhaustive_cells,
                                           restarts, seed, force)
    steps = [0] * len(jobs)
    for k, i in enumerate(order):
        steps[i] = shifts[k]
    final = _Link(jobs, capacity_gbps, weights, precision_deg, resolution_ms, cap_factor)
    n = final.circle.samples
    steps = [(s - steps[0]) % n for s in steps]
    for i, period in enumerate(final.circle.periods_ms):
        reps = max(1, round(final.circle.period_ms / period))
        if n % reps == 0:  # the job's curve repeats every n / reps steps exactly
            steps[i] %= n // reps
    step = final.circle.step_ms
    return LinkSolution(tuple(names), final.capacity, final.circle, final.score(steps),
                        unshifted, tuple(s * step for s in steps), method)


def _search(jobs: Sequence[JobProfile], capacity_gbps: float, weights: Sequence[float],
            precision_deg: float, resolution_ms: float, cap_factor: float,
            exhaustive_cells: int, restarts: int, seed: int,
            force: bool) -> tuple[tuple[int, ...], float, str]:
    """The search itself, the first job fixed at 0: (shifts, score unshifted, method)."""
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
        shifts, method = link.descent(restarts, seed, force=force), "descent"
    return shifts, unshifted, method


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
