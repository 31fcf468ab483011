"""SOAR against exhaustive search, and the properties a user relies on."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
from soar_oracle import RawInstance, cost, exhaustive, random_instance

from innet.errors import InputError
from innet.soar.generate import binary_tree, random_tree
from innet.soar.model import Tree, phi, tree_from_networkx
from innet.soar.solver import gather, min_plus_merge, solve


def to_tree(inst: RawInstance) -> Tree:
    ids = [f"v{i}" for i in range(len(inst.parent))]
    return Tree.build(ids, inst.parent, inst.rate, inst.load, [ids[v] for v in inst.available])


BATCHES = 25
PER_BATCH = 24  # 600 random instances in all


@pytest.mark.parametrize("batch", range(BATCHES))
def test_optimal_against_exhaustive_search(batch: int) -> None:
    rng = random.Random(1000 + batch)
    for _ in range(PER_BATCH):
        inst = random_instance(rng)
        tree = to_tree(inst)
        n_switches = len(inst.parent) - 1
        k = rng.randint(0, n_switches + 2)  # k = 0 and k beyond the switches included
        best = exhaustive(inst, k)
        plan = solve(tree, k)
        blue = {int(name[1:]) for name in plan.blue}
        assert len(blue) <= k
        assert blue <= set(inst.available)
        assert cost(inst, blue) == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert plan.cost == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert gather(tree, k).optimum == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_every_k_on_one_tree_is_monotone_and_optimal() -> None:
    rng = random.Random(7)
    inst = random_instance(rng, max_nodes=10)
    while len(inst.available) < 5:
        inst = random_instance(rng, max_nodes=10)
    tree = to_tree(inst)
    costs = [solve(tree, k).cost for k in range(len(inst.available) + 2)]
    assert costs == sorted(costs, reverse=True)
    for k, c in enumerate(costs):
        assert c == pytest.approx(exhaustive(inst, k))


def test_hand_worked_tree() -> None:
    # d <- s1 (rate 2) <- {s2 (load 3), s3 (load 2) <- s4 (rate 0.5, load 1)}
    tree = Tree.build(["d", "s1", "s2", "s3", "s4"], [-1, 0, 1, 1, 3],
                      [1, 2, 1, 1, 0.5], [0, 0, 3, 2, 1])
    assert solve(tree, 0).cost == 11.0
    one = solve(tree, 1)  # s2 saves 2 + 1, s3 saves 2 + 1: a tie at 8
    assert one.cost == 8.0 and one.blue in {("s2",), ("s3",)}
    two = solve(tree, 2)
    assert (two.blue, two.cost) == (("s2", "s3"), 5.0)


def test_ties_prefer_fewer_blue_switches() -> None:
    # a chain with all load at the bottom: one blue switch at the leaf is all it takes
    tree = Tree.build(["d", "a", "b", "c"], [-1, 0, 1, 2], [1, 1, 1, 1], [0, 0, 0, 5])
    plan = solve(tree, 3)
    assert plan.blue == ("c",)
    assert plan.cost == 3.0


def test_no_load_means_no_cost_and_no_blue() -> None:
    tree = binary_tree(15).with_loads([0] * 16)
    plan = solve(tree, 4)
    assert plan.cost == 0.0 and plan.blue == ()


def test_root_only_tree() -> None:
    tree = Tree.build(["d"], [-1], [1.0], [4])
    assert solve(tree, 3).cost == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_generated_trees_match_exhaustive_search(seed: int) -> None:
    # small generated trees with power-law loads and exponential rates (the paper's regimes)
    tree = random_tree(9, rates="exponential", loads="power-law", seed=seed, max_children=3)
    inst = RawInstance(tree.parent.tolist(), tree.rate.tolist(), tree.load.tolist(),
                       list(range(1, tree.n)))
    for k in (1, 2, 3):
        assert solve(tree, k).cost == pytest.approx(exhaustive(inst, k))


def test_networkx_tree_input() -> None:
    g = nx.DiGraph()
    g.add_edge("s1", "d", rate=2.0)
    g.add_edge("s2", "s1", rate=1.0)
    g.add_edge("s3", "s1", rate=1.0)
    g.add_edge("s4", "s3", rate=0.5)
    nx.set_node_attributes(g, {"s2": 3, "s3": 2, "s4": 1}, "load")
    tree = tree_from_networkx(g, "d")
    assert phi(tree, []) == 11.0
    assert solve(tree, 2).blue == ("s2", "s3")


def test_networkx_rejects_a_graph_with_a_cycle() -> None:
    with pytest.raises(InputError, match="not a tree"):
        tree_from_networkx(nx.cycle_graph(4), 0)


def test_min_plus_merge_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for pa, pb, k in [(1, 1, 3), (2, 5, 10), (5, 2, 4), (4, 4, 3), (7, 3, 20)]:
        a = np.sort(rng.random((3, pa)), axis=1)[:, ::-1].copy()
        b = np.sort(rng.random((3, pb)), axis=1)[:, ::-1].copy()
        out, share = min_plus_merge(a, b, k)
        assert out.shape == (3, min(k + 1, pa + pb - 1))
        for r in range(3):
            for t in range(out.shape[1]):
                pairs = [(a[r, x] + b[r, t - x], t - x) for x in range(pa) if 0 <= t - x < pb]
                assert out[r, t] == pytest.approx(min(p[0] for p in pairs))
                y = share[r, t]
                assert a[r, t - y] + b[r, y] == pytest.approx(out[r, t])


def test_large_tree_against_reference_dp() -> None:
    from innet.soar.reference import reference_optimum

    for rates in ("constant", "exponential"):
        tree = binary_tree(300, rates=rates, loads="power-law", seed=5)
        for k in (0, 1, 7, 40):
            assert solve(tree, k).cost == pytest.approx(reference_optimum(tree, k), rel=1e-9)
