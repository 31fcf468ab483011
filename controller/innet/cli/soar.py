"""`innet soar ...`: solve, compare, generate and run the online setting from the shell."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from innet.cli.argtypes import PROCESSES, K, int_in
from innet.cli.oldflags import renamed
from innet.cli.options import add_force, add_json, add_seed
from innet.cli.outpaths import output_dir, output_file
from innet.cli.parsing import say
from innet.errors import InputError
from innet.jsonout import dumps, print_json
from innet.limits import check_memory, check_time, duration
from innet.progress import bar
from innet.soar.baselines import STRATEGIES, compare_text, run_strategy
from innet.soar.generate import (
    LOAD_DISTRIBUTIONS,
    RATE_REGIMES,
    binary_tree,
    random_tree,
    workload,
)
from innet.soar.model import Tree, check_k, load_tree, phi, tree_to_dict
from innet.soar.online import run_online
from innet.soar.solver import estimate_bytes, estimate_seconds, solve
from innet.table import format_table

DEFAULT_INSTANCE = "BT(256), uniform loads on the leaves, linear rates, seed 0"


def _default_tree() -> Tree:
    return binary_tree(256, rates="linear", loads="uniform", seed=0)


def _tree_arg(path: str | None) -> tuple[Tree, str]:
    if path is None:
        return _default_tree(), DEFAULT_INSTANCE
    return load_tree(path), path


MAX_GEN_SWITCHES = 50_000_000  # 1.5 KB each while generating: 75 GB, beyond any machine here
MAX_WORKLOADS = 10_000
MAX_SEEDS = 100  # per point of an experiment: 10x the paper's, hours on two cores
TIME_LIMIT_S = 600.0  # beyond 10 minutes, ask for --force: likely a mistake in the sizes
FORCE_HELP = ("run even when the estimate of memory or time exceeds what this machine has "
              "(more memory than available, more than 10 minutes)")


LONG_S = 10.0  # an estimate past this is said before the work starts


def _check_fits(tree: Tree, k: int, what: str, force: bool, repeat: int = 1) -> float:
    """Refuse a solve whose tables would not fit in memory (deep trees need depth^2 cells)
    or that would run for more than TIME_LIMIT_S, before starting it; say the estimate when
    it is long (LONG_S). Returns the estimated seconds."""
    where = f"{what} (n = {tree.n - 1} switches, height {tree.height}, k = {k})"
    check_memory(where, estimate_bytes(tree, k), force=force)
    if repeat > 1:
        where += f", {repeat} workloads"
    # every plan of the online setting also rebuilds the tree: ~10 us per node, 6 strategies
    per_plan = estimate_seconds(tree, k) + (6 * 10e-6 * tree.n if repeat > 1 else 0.0)
    seconds = repeat * per_plan
    check_time(where, seconds, TIME_LIMIT_S, force=force)
    if seconds > LONG_S:
        say(f"{where}: about {duration(seconds)} (estimated)")
    return seconds


def _k_option(p: argparse.ArgumentParser, **kwargs: Any) -> None:
    p.add_argument("-k", type=K, metavar="K", **kwargs)


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
    _register_solve(ssub)
    _register_compare(ssub)
    _register_gen(ssub)
    _register_online(ssub)
    _register_exp(ssub)


def _register_solve(ssub: Any) -> None:
    solve = ssub.add_parser(
        "solve",
        help="plan one instance with one strategy",
        description="Plan one instance. The cost is phi = sum over uplinks of messages / rate.",
    )
    solve.add_argument("instance", metavar="INSTANCE.json", help="the instance file")
    _k_option(solve, required=True,
              help="at most this many blue switches (an integer >= 0; required)")
    solve.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                       help="soar is optimal; the others are the paper's baselines")
    add_seed(solve, "the random strategy")
    add_json(solve, 'print {"instance", "switches", "height", "messages", "strategy", '
                            '"k", "cost", "all_red_cost", "ratio", "blue"}')
    add_force(solve, FORCE_HELP)
    solve.set_defaults(func=cmd_solve)


def _register_compare(ssub: Any) -> None:
    compare = ssub.add_parser(
        "compare",
        help="every strategy side by side on one instance",
        description=f"Every strategy on one instance, cost and ratio to all-red. Without "
                    f"INSTANCE.json: {DEFAULT_INSTANCE}.",
    )
    compare.add_argument("instance", metavar="INSTANCE.json", nargs="?",
                         help=f"the instance file (default: {DEFAULT_INSTANCE})")
    _k_option(compare, default=16, help="at most this many blue (aggregating) switches")
    add_seed(compare, "the random strategy")
    add_json(compare, 'print {"instance", "switches", "height", "messages", "k", '
                              '"strategies": [{"strategy", "k", "cost", "all_red_cost", '
                              '"ratio", "blue"}, ...]}')
    add_force(compare, FORCE_HELP)
    compare.set_defaults(func=cmd_compare)


def _register_gen(ssub: Any) -> None:
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
                     help="bt: complete binary tree BT(n); random: random tree")
    gen.add_argument("-n", type=int_in(1, MAX_GEN_SWITCHES), default=256,
                     help="number of switches")
    gen.add_argument("--loads", choices=LOAD_DISTRIBUTIONS, default="uniform",
                     help="uniform in [1, 10] or power-law (Pareto 1.5)")
    gen.add_argument("--rates", choices=RATE_REGIMES, default="constant",
                     help="constant 1, linear 1+level, exponential 2^level (capped at 1e15)")
    add_seed(gen, "the loads (and the shape)")
    gen.add_argument("--max-children", type=int_in(1, 1_000_000), default=4,
                     help="children per switch at most (random trees only)")
    gen.add_argument("-o", "--output", type=output_file(), metavar="FILE",
                     help="file to write (default: standard output)")
    add_json(gen, 'with -o, print {"wrote", "switches", "messages"}; without -o the '
                          "instance printed is JSON already")
    add_force(gen, "generate even when the memory estimate exceeds what is available")
    gen.set_defaults(func=cmd_gen)


def _register_online(ssub: Any) -> None:
    online = ssub.add_parser(
        "online",
        help="plan a sequence of workloads with bounded switch capacity",
        description="Draw W workloads on the instance's tree (uniform or power-law, 1/2 each), "
                    "plan them one after the other; each switch may aggregate for at most "
                    "CAPACITY workloads. Prints the running ratio to all-red per strategy.",
    )
    online.add_argument("instance", metavar="INSTANCE.json", nargs="?",
                        help=f"the instance file (default: {DEFAULT_INSTANCE})")
    _k_option(online, default=16,
              help="at most this many blue (aggregating) switches per workload")
    online.add_argument("--workloads", type=int_in(1, MAX_WORKLOADS), default=32,
                        help="workloads planned one after the other")
    online.add_argument("--capacity", type=int_in(0, 2**31 - 1), default=4,
                        help="workloads each switch may aggregate for, a(s)")
    add_seed(online, "the workloads and of the random strategy")
    add_json(online, 'print {"instance", "workloads", "k", "capacity", "strategies": '
                             '[{"strategy", "running_ratio": [after 1, 2, ...]}, ...]}')
    add_force(online, FORCE_HELP)
    online.set_defaults(func=cmd_online)


def _register_exp(ssub: Any) -> None:
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
            "Runs on every core (--processes); the numbers are the same whatever the parallelism.\n"
            "fig9 times on one core. --quick: a reduced run of a few seconds."
        ),
    )
    exp.add_argument("name", choices=["fig6", "fig7", "fig8", "fig9"], help="the figure")
    exp.add_argument("--out", type=output_dir, required=True, metavar="DIR",
                     help="output folder (created if missing; required)")
    exp.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=None,
                     help="seeds per point (default: 10, or the quick run's)")
    exp.add_argument("--quick", action="store_true", help="reduced sizes, a few seconds")
    exp.add_argument("--processes", type=PROCESSES, default=None,
                     help="worker processes (default: all cores)")
    renamed(exp, "--jobs", "--processes", "soar experiment",
            "--jobs names a jobs file in the cassini and run commands")
    add_json(exp, 'print {"experiment", "points", "seconds", "files"}')
    exp.set_defaults(func=cmd_experiment)


def _header(tree: Tree, label: str) -> dict[str, Any]:
    return {"instance": label, "switches": tree.n - 1, "height": tree.height,
            "messages": int(tree.load.sum())}


def cmd_solve(args: argparse.Namespace) -> int:
    tree, label = _tree_arg(args.instance)
    k = check_k(args.k)
    if args.strategy == "soar":
        _check_fits(tree, k, f"solving {label}", args.force)
        with bar(total=tree.n, desc="solve", unit="node", leave=False) as progress:
            plan = solve(tree, k, done=progress.update)
    else:
        plan = run_strategy(tree, args.strategy, k, args.seed)
    red = phi(tree, [])
    ratio = plan.cost / red if red > 0 else 1.0
    if args.json:
        print_json({**_header(tree, label), "strategy": plan.strategy, "k": k,
                    "cost": plan.cost, "all_red_cost": red, "ratio": ratio,
                    "blue": list(plan.blue)})
        return 0
    print(f"instance: {label} ({tree.n - 1} switches, height {tree.height}, "
          f"{int(tree.load.sum())} messages)")
    print(f"strategy: {plan.strategy}, k = {k}")
    print(f"cost (phi): {plan.cost:.6g}   all-red: {red:.6g}   ratio: {ratio:.4f}")
    shown = ", ".join(plan.blue) if plan.blue else "(none)"
    print(f"blue ({len(plan.blue)}): {shown}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    tree, label = _tree_arg(args.instance)
    k = check_k(args.k)
    _check_fits(tree, k, f"solving {label}", args.force)
    rows, table = compare_text(tree, k, args.seed)
    if args.json:
        print_json({**_header(tree, label), "k": k, "strategies": rows})
        return 0
    print(f"instance: {label}")
    print(f"{tree.n - 1} switches, height {tree.height}, {int(tree.load.sum())} messages, k = {k}")
    print()
    print(table)
    print()
    print("all-blue ignores k: it is the floor no plan can beat. soar is optimal for k.")
    return 0


def cmd_gen(args: argparse.Namespace) -> int:
    # measured: about 1.5 KB per switch at the peak (ids, arrays, the JSON text), 70 MB base
    check_memory(f"generating {args.n} switches", 70e6 + 1600 * args.n, force=args.force)
    if args.shape == "bt":
        tree = binary_tree(args.n, rates=args.rates, loads=args.loads, seed=args.seed)
    else:
        tree = random_tree(args.n, rates=args.rates, loads=args.loads, seed=args.seed,
                           max_children=args.max_children)
    text = dumps(tree_to_dict(tree), indent=1)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", source=str(args.output)) from None
        summary = {"wrote": str(args.output), "switches": tree.n - 1,
                   "messages": int(tree.load.sum())}
        if args.json:
            print_json(summary)
        else:
            print(f"wrote {args.output}: {tree.n - 1} switches, {int(tree.load.sum())} messages",
                  file=sys.stderr)
    else:
        print(text)
    return 0


def _counted(items: list[Any], tick: Any) -> Iterator[Any]:
    """`items`, calling tick(1) after each is used."""
    for item in items:
        yield item
        tick(1)


def cmd_online(args: argparse.Namespace) -> int:
    tree, label = _tree_arg(args.instance)
    k = check_k(args.k)
    _check_fits(tree, k, f"solving {label}", args.force, repeat=args.workloads)
    rng = np.random.default_rng(args.seed)
    loads = [workload(tree, "uniform" if rng.random() < 0.5 else "power-law", rng)
             for _ in range(args.workloads)]
    ratios: dict[str, list[float]] = {}
    names = [name for name in STRATEGIES if name != "all-blue"]
    # one bar over every strategy's workloads, so it says how long the whole command has left
    with bar(total=len(names) * len(loads), unit="workload", leave=False) as progress:
        for name in names:
            progress.set_description(name)
            steps = _counted(loads, progress.update)
            ratios[name] = run_online(tree, steps, k, args.capacity, name,
                                      args.seed).running_ratio()
    if args.json:
        print_json({"instance": label, "workloads": args.workloads, "k": k,
                    "capacity": args.capacity,
                    "strategies": [{"strategy": name, "running_ratio": r}
                                   for name, r in ratios.items()]})
        return 0
    print(f"instance: {label}; {args.workloads} workloads, k = {k}, capacity {args.capacity}")
    rows = [[name, r[0], r[len(r) // 2], r[-1]] for name, r in ratios.items()]
    half = args.workloads // 2 + 1
    print(format_table(["strategy", "after 1", f"after {half}", f"after {args.workloads}"],
                       rows, digits=4))
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from innet.soar.experiments import run_experiment

    result = run_experiment(args.name, Path(args.out), seeds=args.seeds, quick=args.quick,
                            jobs=args.processes)
    out = Path(args.out)
    files = [str(out / f"{args.name}.csv"), *(str(out / p) for p in result["pngs"]),
             str(out / "summary.md")]
    if args.json:
        print_json({"experiment": args.name, "points": len(result["points"]),
                    "seconds": result["seconds"], "files": files})
        return 0
    print(f"{args.name}: {len(result['points'])} points in {result['seconds']:.1f} s")
    print(f"wrote {out / (args.name + '.csv')}, {len(result['pngs'])} plots "
          f"({', '.join(result['pngs'][:3])}{', ...' if len(result['pngs']) > 3 else ''}), "
          f"{out / 'summary.md'}")
    return 0
