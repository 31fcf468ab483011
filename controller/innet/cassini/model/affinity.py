"""The Affinity graph: one time shift per job that honours every shared link at once.

Each shared link l asks for relative shifts t_j^l between its jobs (from
`geometry.best_shifts`). A job on several links must get one shift. The graph is bipartite,
jobs on one side and links on the other; a breadth-first traversal from a root job (shift 0)
gives each job it reaches, through link l from job j, t_k = (t_j - t_j^l + t_k^l) mod T_k.
Every component gets its own root.

On a tree this honours every link exactly. A loop can make the links contradict each other,
so every link's constraint is checked after the traversal: jobs j and k on link l agree when
(s_k - s_j) - (t_k^l - t_j^l) is 0 modulo gcd(T_j, T_k) (shifting a job by its own period
changes nothing, and both by the same amount changes nothing), within one time step of that
link's grid. By the Chinese remainder theorem, pairwise agreement is what a link with three
or more jobs needs. Links carrying exactly the same jobs (an uplink and its downlink) are
merged first: they are one constraint, not a loop. A loop that agrees is kept; one that does
not is a conflict, and the scheduler discards the placement.

One refinement over the plain rule: a link only fixes t_k modulo the common period g of the
two jobs, so when k's period differs from its parent's there are T_k / g equally right
values; where a loop closes, the traversal takes the one that agrees best with the jobs
already assigned (with equal periods there is one value, the rule's).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from innet.errors import InputError

_US = 1000  # gcd of periods is taken on whole microseconds


@dataclass(frozen=True)
class LinkShifts:
    """What one link asks for: relative shifts of its jobs (ms), and its grid step."""

    link: str
    shifts_ms: Mapping[str, float]
    step_ms: float = 0.0

    @property
    def jobs(self) -> frozenset[str]:
        return frozenset(self.shifts_ms)


@dataclass(frozen=True)
class Conflict:
    """Jobs j and k cannot both have link `link`'s relative shift: off by `error_ms`."""

    link: str
    jobs: tuple[str, str]
    error_ms: float
    modulus_ms: float

    def describe(self) -> str:
        a, b = self.jobs
        return (f"link {self.link}: jobs {a!r} and {b!r} are {self.error_ms:.3g} ms off the "
                f"link's relative shift (mod {self.modulus_ms:g} ms)")


@dataclass(frozen=True)
class Assignment:
    """Per-job shifts after the traversal, and what the loops did."""

    shifts_ms: Mapping[str, float]
    roots: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]  # merged links: each group carries one job set
    loops: int  # independent cycles of the merged graph
    conflicts: tuple[Conflict, ...]

    @property
    def ok(self) -> bool:
        return not self.conflicts


def merge_links(links: Sequence[LinkShifts]) -> list[list[LinkShifts]]:
    """Group links that carry the same job set, first-seen order kept."""
    groups: dict[frozenset[str], list[LinkShifts]] = {}
    for link in links:
        groups.setdefault(link.jobs, []).append(link)
    return list(groups.values())


def _gcd_ms(a: float, b: float) -> float:
    return math.gcd(round(a * _US), round(b * _US)) / _US


def _offset(value: float, modulus: float) -> float:
    """Distance from value to the nearest multiple of modulus."""
    if modulus <= 0:
        return abs(value)
    r = value % modulus
    return min(r, modulus - r)


def _representative(k: str, value: float, parent_period: float, periods: Mapping[str, float],
                    links: Sequence[LinkShifts], shifts: Mapping[str, float]) -> float:
    """t_k for job k reached from a job of period `parent_period`.

    The link only fixes t_k modulo g = gcd(parent's T, T_k), so value + n g (mod T_k) are
    all equally right for it; with equal periods there is one choice, the spec's
    (value mod T_k). When k also shares links with jobs already assigned (a loop closes
    here), take the choice that agrees with them best, so a loop that can be satisfied is.
    """
    period = periods[k]
    g = _gcd_ms(parent_period, period)
    options = round(period / g) if g > 0 else 1
    if options <= 1 or options > 1000:
        return value % period
    best, best_error = value % period, math.inf
    for n in range(options):
        t = (value + n * g) % period
        error = 0.0
        for link in links:
            for m, t_m in link.shifts_ms.items():
                if m != k and m in shifts:
                    error += _offset((t - shifts[m]) - (link.shifts_ms[k] - t_m),
                                     _gcd_ms(period, periods[m]))
        if error < best_error - 1e-9:
            best, best_error = t, error
    return best


def assign_shifts(periods_ms: Mapping[str, float], links: Sequence[LinkShifts]) -> Assignment:
    """Breadth-first shifts, one root per component.

    Links are expanded in the order given, so a caller that puts its most valuable links
    first has them honoured by the tree edges when a loop forces a compromise; each
    component's root is the first job (in `periods_ms` order) of its first link. The result
    is deterministic.
    """
    for link in links:
        unknown = set(link.shifts_ms) - set(periods_ms)
        if unknown:
            raise InputError(f"link {link.link}: unknown job(s) {', '.join(sorted(unknown))}")
    merged = merge_links([link for link in links if len(link.shifts_ms) >= 2])
    heads = [group[0] for group in merged]
    on_job: dict[str, list[LinkShifts]] = {j: [] for j in periods_ms}
    for link in heads:
        for j in periods_ms:
            if j in link.shifts_ms:
                on_job[j].append(link)
    first_link = {j: i for i, link in reversed(list(enumerate(heads)))
                  for j in link.shifts_ms}
    rank = {j: i for i, j in enumerate(periods_ms)}
    root_order = sorted(periods_ms, key=lambda j: (first_link.get(j, len(heads)), rank[j]))

    shifts: dict[str, float] = {}
    roots: list[str] = []
    components = 0
    for root in root_order:
        if root in shifts:
            continue
        components += 1
        roots.append(root)
        shifts[root] = 0.0
        queue = deque([root])
        while queue:
            j = queue.popleft()
            for link in on_job[j]:
                for k in periods_ms:
                    if k in link.shifts_ms and k not in shifts:
                        value = shifts[j] - link.shifts_ms[j] + link.shifts_ms[k]
                        shifts[k] = _representative(k, value, periods_ms[j], periods_ms,
                                                    on_job[k], shifts)
                        queue.append(k)

    edges = sum(len(link.shifts_ms) for link in heads)
    loops = edges - (len(periods_ms) + len(heads)) + components

    ordered = {j: shifts[j] for j in periods_ms}
    return Assignment(ordered, tuple(roots), tuple(tuple(x.link for x in g) for g in merged),
                      loops, tuple(_conflicts(merged, periods_ms, shifts)))


def _conflicts(merged: Sequence[Sequence[LinkShifts]], periods_ms: Mapping[str, float],
               shifts: Mapping[str, float]) -> list[Conflict]:
    """Every pair of jobs on a link whose assigned shifts miss the link's own by more than
    its search step (modulo what their periods leave free): what a loop cost."""
    conflicts: list[Conflict] = []
    for group in merged:
        for link in group:
            names = [j for j in periods_ms if j in link.shifts_ms]
            for x, a in enumerate(names):
                for b in names[x + 1:]:
                    modulus = _gcd_ms(periods_ms[a], periods_ms[b])
                    want = link.shifts_ms[b] - link.shifts_ms[a]
                    error = _offset((shifts[b] - shifts[a]) - want, modulus)
                    if error > link.step_ms + 1e-6:
                        conflicts.append(Conflict(link.link, (a, b), error, modulus))
    return conflicts
