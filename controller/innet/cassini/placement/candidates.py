"""The Themis-like base: candidate placements of equal finish-time fairness.

Jobs furthest behind their fair share (highest finish-time fairness
rho = (waited + work) / work) get GPUs first; each job goes to the tightest rack that holds
it whole, else across the racks with most free GPUs. Jobs with equal rho can be served in
any order and a job fits equally well in any rack that holds it, so those choices give
several placements of equal fairness: the candidates. Candidate 0 is the base's own pick.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.cluster import Cluster
from innet.errors import InputError


@dataclass(frozen=True)
class Placement:
    """job -> one host per GPU, in ring order (rack by rack)."""

    hosts: Mapping[str, tuple[str, ...]]

    def key(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple(sorted(self.hosts.items()))


@dataclass(frozen=True)
class Proposal:
    """What a base scheduler hands CASSINI: candidates of equal fairness, and who waits."""

    candidates: tuple[Placement, ...]
    waiting: tuple[str, ...]


class BaseScheduler(Protocol):
    def __call__(self, cluster: Cluster, jobs: Sequence[JobProfile], count: int,
                 seed: int) -> Proposal: ...


def finish_time_fairness(job: JobProfile) -> float:
    """Themis's rho for a job not yet served: time to finish (waited + work) over the time it
    would take alone (work). The larger, the further behind its fair share."""
    return (job.waited_ms + job.work_ms) / job.work_ms


def _pinned_free(cluster: Cluster, jobs: Sequence[JobProfile]) -> dict[str, list[str]]:
    free = {rack: list(slots) for rack, slots in cluster.racks}
    where = {h: rack for rack, slots in cluster.racks for h in slots}
    for job in jobs:
        if job.hosts is None:
            continue
        for h in job.hosts:
            if h not in cluster.topology.hosts:
                raise InputError(f"job {job.name!r}: hosts: unknown host {h!r}")
            rack = where.get(h)
            if rack is None or h not in free[rack]:
                raise InputError(f"job {job.name!r}: hosts: host {h!r} has no free GPU left "
                                 f"({cluster.topology.hosts[h].gpus} GPU(s) in all)")
            free[rack].remove(h)
    return free


def _pack(order: Sequence[JobProfile], free: Mapping[str, list[str]],
          rng: np.random.Generator | None) -> dict[str, tuple[str, ...]]:
    free = {rack: list(slots) for rack, slots in free.items()}
    out: dict[str, tuple[str, ...]] = {}
    for job in order:
        g = job.gpus
        racks = list(free)
        fits = [r for r in racks if len(free[r]) >= g]
        taken: list[str] = []
        if fits:
            if rng is None:
                rack = min(fits, key=lambda r: len(free[r]))  # best fit, first on ties
            else:
                rack = fits[int(rng.integers(len(fits)))]
            taken, free[rack] = free[rack][:g], free[rack][g:]
        else:
            ties = (rng.permutation(len(racks)) if rng is not None else np.arange(len(racks)))
            order_r = sorted(range(len(racks)), key=lambda i: (-len(free[racks[i]]), ties[i]))
            for i in order_r:
                rack = racks[i]
                n = min(g - len(taken), len(free[rack]))
                taken += free[rack][:n]
                free[rack] = free[rack][n:]
                if len(taken) == g:
                    break
        out[job.name] = tuple(taken)
    return out


def themis_candidates(cluster: Cluster, jobs: Sequence[JobProfile], count: int = 20,
                      seed: int = 0) -> Proposal:
    """Up to `count` distinct placements of equal finish-time fairness; candidate 0 is the
    deterministic best-fit in fairness order (what the base alone would run).

    The others alternate between kinds, so that none crowds the others out: best-fit
    with two jobs of the same size trading their GPUs (`_swaps`: the same racks filled the
    same way, only which job crosses which link changes, which is what CASSINI's ranking is
    about), and packings in a random order within each fairness group with random ties
    (other fragments, other racks spanned). When the jobs leave GPUs free, every third is a
    random packing into the fewest racks that hold them (`_fewest_racks`, random slots
    within them, so that rings take other spines), from a stream of its own so that the
    other kinds stay what they were: the GPUs left over are whole racks with quiet uplinks,
    where a job arriving later shares no link with the running ones."""
    _check_sizes(cluster, jobs)
    free = _pinned_free(cluster, jobs)
    pinned = {j.name: j.hosts for j in jobs if j.hosts is not None}
    rho = {j.name: finish_time_fairness(j) for j in jobs}
    admitted, waiting = _admit(jobs, free, rho)

    def build(hosts: Mapping[str, tuple[str, ...]]) -> Placement:
        merged = {**{k: v for k, v in pinned.items() if v is not None}, **hosts}
        return Placement({j.name: merged[j.name] for j in jobs if j.name in merged})

    candidates = [build(_pack(admitted, free, None))]
    seen = {candidates[0].key()}
    rng = np.random.default_rng(seed)
    groups = _fairness_groups(admitted, rho)
    swaps = _swaps(cluster, admitted, candidates[0].hosts, rng)
    compact_rng = np.random.default_rng([seed, 1])
    compact = _fewest_racks(free, sum(j.gpus for j in admitted), compact_rng)
    tries = 0
    while len(candidates) < count and tries < count * 20:
        tries += 1
        placement = None
        if compact is not None and tries % 3 == 0:
            order = [g[i] for g in groups for i in compact_rng.permutation(len(g))]
            slots = {r: [h[i] for i in compact_rng.permutation(len(h))]
                     for r, h in compact.items()}
            placement = _pack(order, slots, compact_rng)
        elif tries % 2 == 1:
            placement = next(swaps, None)
        if placement is None:
            order = [g[i] for g in groups for i in rng.permutation(len(g))]
            placement = _pack(order, free, rng)
        built = build(placement)
        if built.key() not in seen:
            seen.add(built.key())
            candidates.append(built)
    return Proposal(tuple(candidates), tuple(waiting))


def _check_sizes(cluster: Cluster, jobs: Sequence[JobProfile]) -> None:
    """A job larger than the whole cluster is an input error, not a wait."""
    total = cluster.gpus
    for job in jobs:
        if job.gpus > total:
            raise InputError(f"job {job.name!r}: gpus {job.gpus} is more than the cluster's "
                             f"{total} GPUs")


def _admit(jobs: Sequence[JobProfile], free: Mapping[str, list[str]],
           rho: Mapping[str, float]) -> tuple[list[JobProfile], list[str]]:
    """The jobs to place now, furthest behind first, while GPUs are left; the others wait
    (by name)."""
    movable = sorted((j for j in jobs if j.hosts is None), key=lambda j: -rho[j.name])
    left = sum(len(s) for s in free.values())
    admitted: list[JobProfile] = []
    waiting: list[str] = []
    for job in movable:
        if job.gpus <= left:
            admitted.append(job)
            left -= job.gpus
        else:
            waiting.append(job.name)
    return admitted, waiting


def _fairness_groups(admitted: Sequence[JobProfile],
                     rho: Mapping[str, float]) -> list[list[JobProfile]]:
    """Runs of admitted jobs of equal rho: any order within one is equally fair."""
    groups: list[list[JobProfile]] = []
    for job in admitted:
        if groups and math.isclose(rho[groups[-1][0].name], rho[job.name], rel_tol=1e-9):
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups


def _fewest_racks(free: Mapping[str, list[str]], need: int,
                  rng: np.random.Generator) -> dict[str, list[str]] | None:
    """The free GPUs of the fewest racks that hold `need` (the racks with most free first,
    random ties), or None when those are every rack with a free GPU (nothing left whole).

    Packing into these leaves the other racks' GPUs free and their uplinks quiet: a job
    arriving later can take them without sharing a link with a running one. A scheduler
    that knows nothing of the arrivals still knows that fragments next to busy uplinks are
    where arrivals collide."""
    racks = [r for r in free if free[r]]
    ties = rng.permutation(len(racks))
    order = sorted(range(len(racks)), key=lambda i: (-len(free[racks[i]]), ties[i]))
    out: dict[str, list[str]] = {}
    got = 0
    for i in order:
        if got >= need:
            break
        out[racks[i]] = free[racks[i]]
        got += len(free[racks[i]])
    return out if len(out) < len(racks) else None


def _swaps(cluster: Cluster, admitted: Sequence[JobProfile],
           first: Mapping[str, tuple[str, ...]],
           rng: np.random.Generator) -> Iterator[dict[str, tuple[str, ...]]]:
    """`first` with two admitted jobs of the same size trading hosts, in a random order of
    the pairs; only pairs where one of the two spans racks (two jobs inside racks trade
    nothing a link sees)."""
    spans = {j.name: len({cluster.rack_of(h) for h in first[j.name]}) > 1 for j in admitted}
    pairs = [(a.name, b.name) for i, a in enumerate(admitted) for b in admitted[i + 1:]
             if a.gpus == b.gpus and (spans[a.name] or spans[b.name])]
    for k in rng.permutation(len(pairs)):
        a, b = pairs[int(k)]
        yield {**first, a: first[b], b: first[a]}
