"""Instance generators for the evaluation: BT(n) and random trees, seeded loads and rates.

Everything is a pure function of its arguments and a seed, so a figure can be regenerated
bit for bit. Rates are set by level (leaves' uplinks are level 0), loads on leaves only, as in
the SOAR paper's evaluation setup.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from innet.errors import InputError
from innet.soar.model import MAX_RATE, IntArray, Tree

LoadDistribution = Literal["uniform", "power-law"]
RateRegime = Literal["constant", "linear", "exponential"]
LOAD_DISTRIBUTIONS: tuple[LoadDistribution, ...] = ("uniform", "power-law")
RATE_REGIMES: tuple[RateRegime, ...] = ("constant", "linear", "exponential")


def binary_tree_parents(n: int) -> list[int]:
    """Parents of BT(n) in the node order d, s1..sn: heap layout, d above the top switch."""
    if n < 1:
        raise InputError(f"a binary tree needs at least one switch, got n={n}")
    # switch i (1-based) has parent i // 2; the top switch s1 hangs below d (index 0)
    return [-1] + [i // 2 for i in range(1, n + 1)]


def random_tree_parents(n: int, seed: int, max_children: int = 4) -> list[int]:
    """A random rooted tree of n switches below d: each new switch picks a random parent.

    Parents are drawn among nodes that still have room for a child (at most `max_children`),
    which gives shapes from path-like to bushy; d has exactly one child, like BT(n).
    """
    if n < 1:
        raise InputError(f"a tree needs at least one switch, got n={n}")
    if max_children < 1:
        raise InputError(f"max_children must be >= 1, got {max_children}")
    rng = np.random.default_rng(seed)
    parents = [-1, 0]
    room = [0, max_children]
    open_nodes = [1]
    for v in range(2, n + 1):
        pick = int(rng.integers(len(open_nodes)))
        p = open_nodes[pick]
        parents.append(p)
        room[p] -= 1
        if room[p] == 0:
            open_nodes[pick] = open_nodes[-1]
            open_nodes.pop()
        room.append(max_children)
        open_nodes.append(v)
    return parents


def draw_loads(
    leaves: int, distribution: LoadDistribution, rng: np.random.Generator
) -> IntArray:
    """Uniform integers in [1, 10], or Pareto (shape 1.5, scale 1) rounded up (at least 1)."""
    if distribution == "uniform":
        return rng.integers(1, 11, size=leaves).astype(np.int64)
    if distribution == "power-law":
        return np.maximum(1, np.ceil(rng.pareto(1.5, size=leaves) + 1.0)).astype(np.int64)
    raise InputError(f"unknown load distribution {distribution!r}; use uniform or power-law")


def rates_by_level(level: IntArray, regime: RateRegime) -> np.ndarray:
    """constant: 1; linear: 1 + level; exponential: 2^level (faster toward the root), all
    capped at the model's largest rate (MAX_RATE, 1e15 ~ 2^49.8): on a deep tree 2^level
    would overflow to infinity and write a rate no loader accepts."""
    if regime == "constant":
        return np.ones(len(level))
    if regime == "linear":
        return np.minimum(1.0 + level.astype(np.float64), MAX_RATE)
    if regime == "exponential":
        return np.minimum(np.power(2.0, np.minimum(level, 64).astype(np.float64)), MAX_RATE)
    raise InputError(f"unknown rate regime {regime!r}; use constant, linear or exponential")


def tree_from_parents(
    parents: list[int],
    *,
    rates: RateRegime = "constant",
    loads: LoadDistribution = "uniform",
    seed: int = 0,
) -> Tree:
    """Name switches s1..sn below d, set rates by level and draw loads on the leaves."""
    n = len(parents)
    ids = ["d"] + [f"s{i}" for i in range(1, n)]
    skeleton = Tree.build(ids, parents, [1.0] * n, [0] * n)
    level = skeleton.levels()
    rate = rates_by_level(level, rates)
    rate[0] = 1.0
    leaf_mask = np.array([v > 0 and not skeleton.children[v] for v in range(n)])
    load = np.zeros(n, dtype=np.int64)
    load[leaf_mask] = draw_loads(int(leaf_mask.sum()), loads, np.random.default_rng(seed))
    return Tree(skeleton.ids, skeleton.parent, rate, load, skeleton.available,
                skeleton.children, skeleton.depth, skeleton.index)


def binary_tree(
    n: int, *, rates: RateRegime = "constant", loads: LoadDistribution = "uniform", seed: int = 0
) -> Tree:
    """BT(n): the complete binary tree of n switches, d above the top one, loads on leaves."""
    return tree_from_parents(binary_tree_parents(n), rates=rates, loads=loads, seed=seed)


def random_tree(
    n: int,
    *,
    rates: RateRegime = "constant",
    loads: LoadDistribution = "uniform",
    seed: int = 0,
    max_children: int = 4,
) -> Tree:
    """A random tree of n switches (see `random_tree_parents`), loads on leaves."""
    return tree_from_parents(
        random_tree_parents(n, seed, max_children), rates=rates, loads=loads, seed=seed + 1
    )


def workload(tree: Tree, distribution: LoadDistribution, rng: np.random.Generator) -> IntArray:
    """A fresh load vector on the tree's leaves (for the online setting)."""
    leaf_mask = np.array([v > 0 and not tree.children[v] for v in range(tree.n)])
    load = np.zeros(tree.n, dtype=np.int64)
    load[leaf_mask] = draw_loads(int(leaf_mask.sum()), distribution, rng)
    return load
