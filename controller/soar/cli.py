"""`innet soar ...`: solve, compare, generate and run the online setting from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from controller.errors import InputError
from controller.soar.baselines import STRATEGIES, run_strategy
from controller.soar.generate import (
    LOAD_DISTRIBUTIONS,
    RATE_REGIMES,
    binary_tree,
    random_tree,
    workload,
)
from controller.soar.model import Tree, check_k, load_tree, phi, tree_to_dict
from controller.soar.online import run_online
from controller.table import format_table

DEFAULT_INSTANCE = "BT(256), uniform loads on the leaves, linear rates, seed 0"


def _default_tree() -> Tree:
    return binary_tree(256, rates="linear", loads="uniform", seed=0)


def _tree_arg(path: str | None) -> tuple[Tree, str]:
    if path is None:
        return _default_tree(), DEFAULT_INSTANCE
    return load_tree(path), path


def _k_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"k must be an integer, got {text!r}") from None
    return value


def register(sub: Any) -> None:
    soar = sub.add_parser(
        "soar",
        help="choose the at most k switches that aggregate (SOAR and baselines)",
        description=(
            "SOAR picks, optimally, the at most k switches that merge the messages flowing to a "
            "destination so that the network carries the least (sum over links of messages / "
            "rate). Instances are JSON trees: see `innet soar gen --help` for the format."
        ),
    )
    ssub = soar.add_subparsers(dest="soar_command", metavar="SUBCOMMAND", required=True)

    solve = ssub.add_parser(
        "solve",
        help="plan one instance with one strategy",
        description="Plan one instance. The cost is phi = sum over uplinks of messages / rate.",
    )
    solve.add_argument("instance", metavar="INSTANCE.json")
    solve.add_argument("-k", type=_k_arg, required=True, help="at most this many blue switches")
    solve.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                       help="soar is optimal; the others are the paper's baselines "
                            "(default: soar)")
    solve.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    solve.add_argument("--json", action="store_true",
                       help='print {"strategy", "k", "cost", "blue", "all_red_cost"}')
    solve.set_defaults(func=cmd_solve)

    compare = ssub.add_parser(
        "compare",
        help="every strategy side by side on one instance",
        description=f"Every strategy on one instance, cost and ratio to all-red. Without "
                    f"INSTANCE.json: {DEFAULT_INSTANCE}.",
    )
    compare.add_argument("instance", metavar="INSTANCE.json", nargs="?")
    compare.add_argument("-k", type=_k_arg, default=16, help="budget (default 16)")
    compare.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    compare.add_argument("--json", action="store_true", help="one JSON object per strategy")
    compare.set_defaults(func=cmd_compare)

    gen = ssub.add_parser(
        "gen",
        help="write a generated instance (binary or random tree)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Write an instance in the JSON format the solver reads:\n\n"
            '  {"root": "d",\n'
            '   "nodes": [{"id": "d"},\n'
            '             {"id": "s1", "parent": "d", "rate": 4.0, "load": 0},\n'
            '             {"id": "s2", "parent": "s1", "rate": 1.0, "load": 3}],\n'
            '   "available": ["s1", "s2"]}\n\n'
            "rate is the uplink's rate (default 1), load the messages born at the node\n"
            "(default 0), available the switches allowed to aggregate (default: all but root).\n"
            "Generated loads sit on the leaves; rates grow by level (leaves are level 0)."
        ),
    )
    gen.add_argument("--shape", choices=["bt", "random"], default="bt",
                     help="bt: complete binary tree BT(n); random: random tree (default bt)")
    gen.add_argument("-n", type=int, default=256, help="number of switches (default 256)")
    gen.add_argument("--loads", choices=LOAD_DISTRIBUTIONS, default="uniform",
                     help="uniform in [1, 10] or power-law (Pareto 1.5) (default uniform)")
    gen.add_argument("--rates", choices=RATE_REGIMES, default="constant",
                     help="constant 1, linear 1+level, exponential 2^level (default constant)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--max-children", type=int, default=4, help="random trees only (default 4)")
    gen.add_argument("-o", "--output", help="file to write (default: standard output)")
    gen.set_defaults(func=cmd_gen)

    online = ssub.add_parser(
        "online",
        help="plan a sequence of workloads with bounded switch capacity",
        description="Draw W workloads on the instance's tree (uniform or power-law, 1/2 each), "
                    "plan them one after the other; each switch may aggregate for at most "
                    "CAPACITY workloads. Prints the running ratio to all-red per strategy.",
    )
    online.add_argument("instance", metavar="INSTANCE.json", nargs="?")
    online.add_argument("-k", type=_k_arg, default=16)
    online.add_argument("--workloads", type=int, default=32)
    online.add_argument("--capacity", type=int, default=4)
    online.add_argument("--seed", type=int, default=0)
    online.set_defaults(func=cmd_online)

    exp = ssub.add_parser(
        "experiment",
        help="reproduce a figure of the SOAR paper: CSV, plots and summary.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Reproduce one of the paper's evaluations; writes NAME.csv (every point: mean and\n"
            "std over seeds), NAME-raw.csv (every seed), one PNG per panel plus an overview\n"
            "NAME.png, and summary.md (what the plots show, in words).\n\n"
            "  fig6  phi / phi(all-red) against k on BT(256): 3 rate regimes x 2 load laws\n"
            "  fig7  online: 32 workloads, capacity a(s) = 4, k = 16; and against a(s)\n"
            "  fig8  byte complexity: word count and parameter server, constant rates\n"
            "  fig9  solver run time against n and k, with the O(n h k^2) reference DP\n\n"
            "Runs on every core (--jobs); the numbers are the same whatever the parallelism.\n"
            "fig9 times on one core. --quick: a reduced run of a few seconds."
        ),
    )
    exp.add_argument("name", choices=["fig6", "fig7", "fig8", "fig9"])
    exp.add_argument("--out", required=True, help="output folder (created if missing)")
    exp.add_argument("--seeds", type=int, default=None, help="seeds per point (default 10)")
    exp.add_argument("--quick", action="store_true", help="reduced sizes, a few seconds")
    exp.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    exp.set_defaults(func=cmd_experiment)


def cmd_solve(args: argparse.Namespace) -> int:
    tree, _ = _tree_arg(args.instance)
    k = check_k(args.k)
    plan = run_strategy(tree, args.strategy, k, args.seed)
    red = phi(tree, [])
    if args.json:
        print(json.dumps(plan.to_dict(all_red_cost=red)))
        return 0
    ratio = plan.cost / red if red > 0 else 1.0
    print(f"instance: {args.instance} ({tree.n - 1} switches, height {tree.height}, "
          f"{int(tree.load.sum())} messages)")
    print(f"strategy: {plan.strategy}, k = {k}")
    print(f"cost (phi): {plan.cost:.6g}   all-red: {red:.6g}   ratio: {ratio:.4f}")
    shown = ", ".join(plan.blue) if plan.blue else "(none)"
    print(f"blue ({len(plan.blue)}): {shown}")
    return 0


def compare_rows(tree: Tree, k: int, seed: int) -> list[dict[str, Any]]:
    red = phi(tree, [])
    rows = []
    for name in STRATEGIES:
        plan = run_strategy(tree, name, k, seed)
        rows.append({**plan.to_dict(all_red_cost=red),
                     "ratio": plan.cost / red if red > 0 else 1.0})
    return rows


def cmd_compare(args: argparse.Namespace) -> int:
    tree, label = _tree_arg(args.instance)
    k = check_k(args.k)
    rows = compare_rows(tree, k, args.seed)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"instance: {label}")
    print(f"{tree.n - 1} switches, height {tree.height}, {int(tree.load.sum())} messages, k = {k}")
    print()
    table = [[r["strategy"], r["cost"], r["ratio"], len(r["blue"])] for r in rows]
    print(format_table(["strategy", "cost (phi)", "ratio to all-red", "blue"], table, digits=4))
    print()
    print("all-blue ignores k: it is the floor no plan can beat. soar is optimal for k.")
    return 0


def cmd_gen(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise InputError(f"-n must be >= 1, got {args.n}")
    if args.shape == "bt":
        tree = binary_tree(args.n, rates=args.rates, loads=args.loads, seed=args.seed)
    else:
        tree = random_tree(args.n, rates=args.rates, loads=args.loads, seed=args.seed,
                           max_children=args.max_children)
    text = json.dumps(tree_to_dict(tree), indent=1)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", source=args.output) from None
        print(f"wrote {args.output}: {tree.n - 1} switches, {int(tree.load.sum())} messages",
              file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_online(args: argparse.Namespace) -> int:
    tree, label = _tree_arg(args.instance)
    k = check_k(args.k)
    if args.workloads < 1:
        raise InputError(f"--workloads must be >= 1, got {args.workloads}")
    rng = np.random.default_rng(args.seed)
    loads = [workload(tree, "uniform" if rng.random() < 0.5 else "power-law", rng)
             for _ in range(args.workloads)]
    print(f"instance: {label}; {args.workloads} workloads, k = {k}, capacity {args.capacity}")
    rows = []
    for name in STRATEGIES:
        if name == "all-blue":
            continue
        result = run_online(tree, loads, k, args.capacity, name, args.seed)
        ratio = result.running_ratio()
        rows.append([name, ratio[0], ratio[len(ratio) // 2], ratio[-1]])
    half = args.workloads // 2 + 1
    print(format_table(["strategy", "after 1", f"after {half}", f"after {args.workloads}"],
                       rows, digits=4))
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from controller.soar.experiments import run_experiment

    result = run_experiment(args.name, Path(args.out), seeds=args.seeds, quick=args.quick,
                            jobs=args.jobs)
    out = Path(args.out)
    print(f"{args.name}: {len(result['points'])} points in {result['seconds']:.1f} s")
    print(f"wrote {out / (args.name + '.csv')}, {len(result['pngs'])} plots "
          f"({', '.join(result['pngs'][:3])}{', ...' if len(result['pngs']) > 3 else ''}), "
          f"{out / 'summary.md'}")
    return 0
