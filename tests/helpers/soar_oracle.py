"""Independent oracles for SOAR: cost by closest-blue-ancestor distances, exhaustive search.

Nothing here uses the solver or `messages()`: phi is recomputed from the equivalent view of
the model (every red node's load and every loaded blue node's one message travel to the
closest blue strict ancestor, or d), from plain parent/rate/load lists.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass


@dataclass
class RawInstance:
    parent: list[int]  # -1 for the root, index 0
    rate: list[float]
    load: list[int]
    available: list[int]


def cost(inst: RawInstance, blue: set[int]) -> float:
    n = len(inst.parent)
    below: list[int] = list(inst.load)  # load in each subtree
    order = sorted(range(1, n), key=lambda v: -_depth(inst, v))
    for v in order:
        below[inst.parent[v]] += below[v]

    def dist_to_blue(v: int) -> float:
        total = 0.0
        u = v
        while u != 0:
            total += 1.0 / inst.rate[u]
            u = inst.parent[u]
            if u in blue:
                break
        return total

    result = 0.0
    for v in range(1, n):
        if v in blue:
            if below[v] > 0:
                result += dist_to_blue(v)
        else:
            result += inst.load[v] * dist_to_blue(v)
    return result


def _depth(inst: RawInstance, v: int) -> int:
    d = 0
    while inst.parent[v] != -1:
        v = inst.parent[v]
        d += 1
    return d


def exhaustive(inst: RawInstance, k: int) -> float:
    best = cost(inst, set())
    for size in range(1, min(k, len(inst.available)) + 1):
        for combo in itertools.combinations(inst.available, size):
            best = min(best, cost(inst, set(combo)))
    return best


def random_instance(rng: random.Random, max_nodes: int = 9) -> RawInstance:
    """Random shape (paths to stars), rates, loads on any node (root too), availability."""
    n = rng.randint(1, max_nodes)
    shape = rng.choice(["any", "path", "star", "binary"])
    parent = [-1]
    for i in range(1, n):
        if shape == "path":
            parent.append(i - 1)
        elif shape == "star":
            parent.append(0 if i == 1 else 1)
        elif shape == "binary":
            parent.append((i - 1) // 2)
        else:
            parent.append(rng.randrange(i))
    rate = [1.0] + [rng.choice([1.0, 2.0, 0.5, 4.0, round(rng.uniform(0.1, 8.0), 3)])
                    for _ in range(n - 1)]
    load = [rng.choice([0, 0, 1, 1, 2, 3, 7, rng.randint(0, 30)]) for _ in range(n)]
    p_avail = rng.choice([1.0, 0.7, 0.4])
    available = [v for v in range(1, n) if rng.random() < p_avail]
    return RawInstance(parent, rate, load, available)
