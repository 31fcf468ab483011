"""Each baseline does what its definition says; the online setting respects capacity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from innet.cli import main
from innet.soar.baselines import STRATEGIES, level, max_load, random_choice, run_strategy, top
from innet.soar.generate import binary_tree, draw_loads
from innet.soar.model import Tree, phi
from innet.soar.online import run_online


def hand_tree() -> Tree:
    # depth 1: s1; depth 2: s2 (load 3), s3 (load 2); depth 3: s4 (below s3, load 1)
    return Tree.build(["d", "s1", "s2", "s3", "s4"], [-1, 0, 1, 1, 3],
                      [1, 2, 1, 1, 0.5], [0, 0, 3, 2, 1])


def test_top_takes_the_switches_closest_to_d() -> None:
    tree = hand_tree()
    assert top(tree, 1).blue == ("s1",)
    assert top(tree, 2).blue == ("s1", "s2")  # tie at depth 2 broken by name
    assert top(tree, 9).blue == ("s1", "s2", "s3", "s4")


def test_max_takes_the_busiest_uplinks() -> None:
    tree = hand_tree()  # all-red uplink messages: s1 6, s2 3, s3 3, s4 1
    assert max_load(tree, 1).blue == ("s1",)
    assert max_load(tree, 2).blue == ("s1", "s2")
    assert max_load(tree, 3).blue == ("s1", "s2", "s3")


def test_max_breaks_ties_toward_the_leaves() -> None:
    # a chain: every uplink carries the same 4 messages; the leaf end wins
    tree = Tree.build(["d", "a", "b", "c"], [-1, 0, 1, 2], [1, 1, 1, 1], [0, 0, 0, 4])
    assert max_load(tree, 1).blue == ("c",)


def test_level_fills_the_deepest_level_that_fits() -> None:
    tree = hand_tree()
    assert level(tree, 1).blue == ("s4",)
    assert level(tree, 2).blue == ("s2", "s4")  # rest of the budget to depth 2, by max
    assert level(tree, 3).blue == ("s2", "s3", "s4")
    assert level(tree, 0).blue == ()


def test_level_on_a_binary_tree_blues_a_whole_level() -> None:
    tree = binary_tree(15)  # depths 1..4 hold 1, 2, 4, 8 switches
    plan = level(tree, 5)
    depths = sorted(int(tree.depth[tree.index[b]]) for b in plan.blue)
    assert depths == [2, 3, 3, 3, 3]


def test_random_is_seeded_and_bounded() -> None:
    tree = binary_tree(63)
    a, b = random_choice(tree, 5, seed=3), random_choice(tree, 5, seed=3)
    assert a == b and len(a.blue) == 5
    assert random_choice(tree, 5, seed=4).blue != a.blue
    assert len(random_choice(tree, 1000).blue) == 63


def test_strategies_respect_k_and_availability() -> None:
    tree = binary_tree(31, loads="power-law", seed=2).with_available(
        [f"s{i}" for i in range(1, 32, 2)])
    for name in STRATEGIES:
        plan = run_strategy(tree, name, 4)
        assert set(plan.blue) <= set(tree.available_ids())
        if name != "all-blue":
            assert len(plan.blue) <= 4
    assert run_strategy(tree, "all-blue", 4).blue == tuple(
        sorted(tree.available_ids(), key=lambda s: int(s[1:])))


def test_soar_beats_every_baseline_and_all_blue_beats_soar() -> None:
    for rates in ("constant", "linear", "exponential"):
        tree = binary_tree(127, rates=rates, loads="power-law", seed=11)
        for k in (1, 4, 16):
            soar = run_strategy(tree, "soar", k).cost
            for name in ("top", "max", "level", "random", "all-red"):
                assert soar <= run_strategy(tree, name, k).cost + 1e-9
            assert run_strategy(tree, "all-blue", k).cost <= soar + 1e-9


def test_load_distributions() -> None:
    rng = np.random.default_rng(0)
    uni = draw_loads(10_000, "uniform", rng)
    assert uni.min() == 1 and uni.max() == 10
    pareto = draw_loads(10_000, "power-law", rng)
    assert pareto.min() >= 1 and pareto.max() > 50  # heavy tail
    assert np.median(pareto) == 2


def test_online_consumes_capacity_and_ends_all_red() -> None:
    tree = binary_tree(15, seed=1)
    rng = np.random.default_rng(0)
    loads = [tree.load * int(rng.integers(1, 4)) for _ in range(12)]
    result = run_online(tree, loads, k=4, capacity=2)
    used: dict[str, int] = {}
    for step in result.steps:
        for b in step.plan.blue:
            used[b] = used.get(b, 0) + 1
    assert max(used.values()) <= 2
    assert sum(used.values()) <= 15 * 2
    # capacity runs out, so late workloads cannot aggregate and pay the all-red cost
    last = result.steps[-1]
    assert last.plan.cost == last.all_red_cost
    ratios = result.running_ratio()
    assert ratios[-1] > ratios[0]


def test_online_with_ample_capacity_is_optimal_every_time() -> None:
    tree = binary_tree(31, seed=4)
    loads = [tree.load, tree.load[::-1].copy()]
    loads[1][0] = 0
    result = run_online(tree, loads, k=3, capacity=100)
    for step, load in zip(result.steps, loads, strict=True):
        assert step.plan.cost == pytest.approx(run_strategy(tree.with_loads(load), "soar", 3).cost)


def test_cli_solve_json_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bt.json"
    assert main(["soar", "gen", "-n", "31", "--loads", "power-law", "--rates", "linear",
                 "--seed", "2", "-o", str(path)]) == 0
    capsys.readouterr()
    assert main(["soar", "solve", str(path), "-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"instance", "switches", "height", "messages", "strategy", "k", "cost",
                        "all_red_cost", "ratio", "blue"}
    assert out["strategy"] == "soar" and out["k"] == 3 and len(out["blue"]) <= 3
    tree = binary_tree(31, rates="linear", loads="power-law", seed=2)
    assert out["cost"] == pytest.approx(phi(tree, out["blue"]))
    assert out["all_red_cost"] == pytest.approx(phi(tree, []))
    assert main(["soar", "compare", str(path), "-k", "3"]) == 0
    text = capsys.readouterr().out
    for name in STRATEGIES:
        assert name in text
    assert main(["soar", "compare", str(path), "-k", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # one document, not one line per strategy
    assert [r["strategy"] for r in doc["strategies"]] == list(STRATEGIES)
    assert doc["switches"] == 31 and doc["k"] == 3


def test_cli_unknown_strategy_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["soar", "solve", "x.json", "-k", "1", "--strategy", "best"])
    assert exc.value.code == 2
    assert "invalid choice: 'best'" in capsys.readouterr().err
