"""The simple strategies SOAR is compared with (the SOAR paper's baselines).

Each picks at most k available switches; all-blue ignores k and is the floor. Ties are broken
deterministically (by name in natural order) so that every figure is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from innet.errors import InputError
from innet.names import natural_key
from innet.soar.model import Plan, Tree, check_k, make_plan, phi
from innet.soar.solver import solve
from innet.table import format_table


def all_red(tree: Tree, k: int) -> Plan:
    return make_plan(tree, "all-red", check_k(k), [])


def all_blue(tree: Tree, k: int) -> Plan:
    """Every available switch aggregates, whatever k: the best any plan can do."""
    return make_plan(tree, "all-blue", check_k(k), np.flatnonzero(tree.available).tolist())


def top(tree: Tree, k: int) -> Plan:
    """The k available switches closest to d (fewest hops), ties by name."""
    k = check_k(k)
    cand = sorted(np.flatnonzero(tree.available).tolist(),
                  key=lambda v: (tree.depth[v], natural_key(tree.ids[v])))
    return make_plan(tree, "top", k, cand[:k])


def _by_max(tree: Tree, nodes: list[int]) -> list[int]:
    """Most messages on the uplink under all-red first; ties toward the leaves, then name."""
    sub = tree.subtree_load()
    return sorted(nodes, key=lambda v: (-sub[v], -tree.depth[v], natural_key(tree.ids[v])))


def max_load(tree: Tree, k: int) -> Plan:
    """The k available switches that carry the most messages when everything is red."""
    k = check_k(k)
    return make_plan(tree, "max", k, _by_max(tree, np.flatnonzero(tree.available).tolist())[:k])


def level(tree: Tree, k: int) -> Plan:
    """The deepest level that fits in k is all blue; what is left goes to the level above by max.

    Levels count hops from d. Only levels with at least one available switch are considered.
    """
    k = check_k(k)
    by_depth: dict[int, list[int]] = {}
    for v in np.flatnonzero(tree.available).tolist():
        by_depth.setdefault(int(tree.depth[v]), []).append(v)
    chosen: list[int] = []
    fitting = [d for d, nodes in by_depth.items() if len(nodes) <= k]
    if fitting:
        deepest = max(fitting)
        chosen = list(by_depth[deepest])
        rest = k - len(chosen)
        above = by_depth.get(deepest - 1, [])
        chosen += _by_max(tree, above)[:rest]
    return make_plan(tree, "level", k, chosen)


def random_choice(tree: Tree, k: int, seed: int = 0) -> Plan:
    """k available switches uniformly at random, reproducible for a seed."""
    k = check_k(k)
    cand = sorted(np.flatnonzero(tree.available).tolist(), key=lambda v: natural_key(tree.ids[v]))
    picked = random.Random(seed).sample(cand, min(k, len(cand)))
    return make_plan(tree, "random", k, picked)


def soar(tree: Tree, k: int) -> Plan:
    return solve(tree, k)


Strategy = Callable[[Tree, int], Plan]
STRATEGIES: dict[str, Strategy] = {
    "soar": soar,
    "top": top,
    "max": max_load,
    "level": level,
    "random": random_choice,
    "all-red": all_red,
    "all-blue": all_blue,
}


def run_strategy(tree: Tree, name: str, k: int, seed: int = 0) -> Plan:
    """Dispatch by name, with a clear error for an unknown one."""
    if name == "random":
        return random_choice(tree, k, seed)
    try:
        fn = STRATEGIES[name]
    except KeyError:
        raise InputError(
            f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}"
        ) from None
    return fn(tree, k)


def compare(tree: Tree, k: int, seed: int = 0) -> list[Plan]:
    """Every strategy's plan for `tree` at `k`, in the order of STRATEGIES (SOAR first, the
    all-red reference and the all-blue floor last)."""
    return [run_strategy(tree, name, k, seed) for name in STRATEGIES]


def compare_text(tree: Tree, k: int, seed: int = 0) -> tuple[list[dict[str, Any]], str]:
    """Every strategy at `k`: the JSON rows and the table `soar compare` prints."""
    red = phi(tree, [])
    plans = compare(tree, k, seed)
    rows = [{**p.to_dict(all_red_cost=red), "ratio": p.cost / red if red > 0 else 1.0}
            for p in plans]
    table = [[r["strategy"], r["cost"], r["ratio"], len(r["blue"])] for r in rows]
    return rows, format_table(["strategy", "cost (phi)", "ratio to all-red", "blue"], table,
                              digits=4)
