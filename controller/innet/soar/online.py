"""The online setting: workloads on one tree, one after the other, with bounded capacity.

Each switch may aggregate for at most a(s) workloads (register space, in practice). Workload t
is planned with Lambda_t = the switches that still have capacity; the switches it turns blue
each lose one unit. Nothing is re-planned: this is what a controller facing arrivals can do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from innet.errors import InputError
from innet.soar.baselines import run_strategy
from innet.soar.model import IntArray, Plan, Tree, phi


@dataclass(frozen=True)
class OnlineStep:
    plan: Plan
    all_red_cost: float
    capacity_left: dict[str, int]


@dataclass(frozen=True)
class OnlineResult:
    steps: tuple[OnlineStep, ...]

    @property
    def costs(self) -> list[float]:
        return [s.plan.cost for s in self.steps]

    @property
    def all_red_costs(self) -> list[float]:
        return [s.all_red_cost for s in self.steps]

    def running_ratio(self) -> list[float]:
        """Total utilisation so far over total all-red utilisation so far, after each workload."""
        cost = np.cumsum(self.costs)
        red = np.cumsum(self.all_red_costs)
        return [float(c / r) if r > 0 else 1.0 for c, r in zip(cost, red, strict=True)]


def run_online(
    tree: Tree,
    workloads: Iterable[Sequence[int] | IntArray],
    k: int,
    capacity: int | Mapping[str, int],
    strategy: str = "soar",
    seed: int = 0,
) -> OnlineResult:
    """Plan each workload in turn; `capacity` is a(s) for every switch, or per switch name."""
    if isinstance(capacity, int):
        if capacity < 0:
            raise InputError(f"capacity must be >= 0, got {capacity}")
        left = {name: capacity for name in tree.available_ids()}
    else:
        for name, cap in capacity.items():
            if name not in tree.index:
                raise InputError(f"capacity: unknown node {name!r}")
            if cap < 0:
                raise InputError(f"capacity of {name!r} must be >= 0, got {cap}")
        left = {name: int(capacity.get(name, 0)) for name in tree.available_ids()}
    steps: list[OnlineStep] = []
    for t, load in enumerate(workloads):
        if len(load) != tree.n:
            raise InputError(f"workload {t}: {len(load)} loads for {tree.n} nodes")
        now = tree.with_loads(load).with_available(n for n, c in left.items() if c > 0)
        plan = run_strategy(now, strategy, k, seed + t)
        for name in plan.blue:
            left[name] -= 1
        steps.append(OnlineStep(plan, phi(now, []), dict(left)))
    return OnlineResult(tuple(steps))
