"""SOAR's evaluation (Figs. 6-9 of the paper) as commands that write CSV, plots and a summary.

Every point is a pure function of its parameters and seed, computed in worker processes;
results are gathered in task order, so the numbers are the same whatever the parallelism.
Only fig9 (run times) runs on one core: timing two solves at once would measure contention.
"""

from __future__ import annotations

import csv
import multiprocessing
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from innet.errors import InputError
from innet.soar.baselines import run_strategy
from innet.soar.bytesim import USE_CASES, ByteModel, byte_complexity, worker_messages
from innet.soar.generate import (
    LOAD_DISTRIBUTIONS,
    RATE_REGIMES,
    binary_tree,
    workload,
)
from innet.soar.model import Tree, phi, resolve_blue
from innet.soar.online import run_online

STRATEGIES = ("soar", "top", "max", "level", "random")
Row = dict[str, Any]


@dataclass(frozen=True)
class Settings:
    """One experiment's knobs; `quick` shrinks them so a run takes seconds."""

    n: int
    seeds: int
    ks: tuple[int, ...]
    workloads: int = 32
    capacity: int = 4
    capacities: tuple[int, ...] = (1, 2, 4, 8, 16)
    online_k: int = 16
    sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    repeat: int = 3


FULL = {
    "fig6": Settings(n=256, seeds=10, ks=(1, 2, 4, 8, 16, 32)),
    "fig7": Settings(n=256, seeds=10, ks=()),
    "fig8": Settings(n=256, seeds=10, ks=(1, 2, 4, 8, 16, 32)),
    "fig9": Settings(n=0, seeds=1, ks=(4, 8, 16, 32, 64, 128)),
}
QUICK = {
    "fig6": Settings(n=64, seeds=2, ks=(1, 2, 4, 8, 16, 32)),
    "fig7": Settings(n=32, seeds=2, ks=(), workloads=16, capacity=1, capacities=(1, 2, 4),
                     online_k=8),
    "fig8": Settings(n=32, seeds=2, ks=(1, 2, 4, 8, 16)),
    "fig9": Settings(n=0, seeds=1, ks=(4, 8, 16), sizes=(256, 512), repeat=1),
}


def parallel_map(fn: Callable[[Any], list[Row]], tasks: Sequence[Any], jobs: int,
                 label: str) -> list[Row]:
    """Run tasks on `jobs` processes with a progress bar; rows come back in task order."""
    from innet.progress import bar as progress_bar

    rows: list[Row] = []
    bar = progress_bar(total=len(tasks), desc=label, unit="task", leave=False)
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            rows.extend(fn(task))
            bar.update()
    else:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(jobs) as pool:
            for part in pool.imap(fn, tasks):
                rows.extend(part)
                bar.update()
    bar.close()
    return rows


def aggregate(rows: Iterable[Row], keys: Sequence[str], values: Sequence[str]) -> list[Row]:
    """Mean and (population) standard deviation of `values` over the seeds, per `keys`."""
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    out = []
    for key, members in groups.items():
        agg: Row = dict(zip(keys, key, strict=True))
        for v in values:
            arr = np.array([m[v] for m in members], dtype=np.float64)
            agg[f"{v}_mean"] = float(arr.mean())
            agg[f"{v}_std"] = float(arr.std())
        agg["seeds"] = len(members)
        out.append(agg)
    return out


# ---------------------------------------------------------------------------------------------
# Fig. 6: utilisation against k


def fig6_task(task: tuple[str, str, int, tuple[int, ...], int]) -> list[Row]:
    rates, dist, seed, ks, n = task
    tree = binary_tree(n, rates=rates, loads=dist, seed=seed)  # type: ignore[arg-type]
    red = phi(tree, [])
    rows = []
    floor = run_strategy(tree, "all-blue", 0).cost / red
    for k in ks:
        for name in STRATEGIES:
            plan = run_strategy(tree, name, k, seed=seed * 1000 + k)
            rows.append({"rates": rates, "distribution": dist, "seed": seed, "k": k,
                         "strategy": name, "ratio": plan.cost / red})
        rows.append({"rates": rates, "distribution": dist, "seed": seed, "k": k,
                     "strategy": "all-blue", "ratio": floor})
    return rows


def run_fig6(s: Settings, jobs: int) -> tuple[list[Row], list[Row]]:
    tasks = [(r, d, seed, s.ks, s.n) for r in RATE_REGIMES for d in LOAD_DISTRIBUTIONS
             for seed in range(s.seeds)]
    raw = parallel_map(fig6_task, tasks, jobs, "fig6")
    return raw, aggregate(raw, ["rates", "distribution", "k", "strategy"], ["ratio"])


# ---------------------------------------------------------------------------------------------
# Fig. 7: the online setting


def fig7_task(task: tuple[str, int, int, int, int, int]) -> list[Row]:
    rates, seed, capacity, workloads, k, n = task
    tree = binary_tree(n, rates=rates, loads="uniform", seed=seed)  # type: ignore[arg-type]
    rng = np.random.default_rng(10_000 + seed)
    loads = [workload(tree, "uniform" if rng.random() < 0.5 else "power-law", rng)
             for _ in range(workloads)]
    rows = []
    for name in STRATEGIES:
        result = run_online(tree, loads, k, capacity, name, seed)
        for t, ratio in enumerate(result.running_ratio(), start=1):
            rows.append({"rates": rates, "capacity": capacity, "seed": seed, "strategy": name,
                         "workloads": t, "ratio": ratio})
    return rows


def run_fig7(s: Settings, jobs: int) -> tuple[list[Row], list[Row]]:
    capacities = sorted(set(s.capacities) | {s.capacity})
    tasks = [(r, seed, cap, s.workloads, s.online_k, s.n) for r in RATE_REGIMES
             for cap in capacities for seed in range(s.seeds)]
    raw = parallel_map(fig7_task, tasks, jobs, "fig7")
    return raw, aggregate(raw, ["rates", "capacity", "workloads", "strategy"], ["ratio"])


# ---------------------------------------------------------------------------------------------
# Fig. 8: byte complexity


def fig8_task(task: tuple[str, str, int, tuple[int, ...], int]) -> list[Row]:
    use_case, dist, seed, ks, n = task
    tree = binary_tree(n, rates="constant", loads=dist, seed=seed)  # type: ignore[arg-type]
    model = ByteModel(use_case, universe=2000 if use_case == "wc" else 1000)  # type: ignore[arg-type]
    msgs = worker_messages(tree, model, seed)
    red_util = phi(tree, [])
    red_mask = np.zeros(tree.n, dtype=bool)
    red_bytes = byte_complexity(tree, red_mask, msgs, model)
    blue_plan = run_strategy(tree, "all-blue", 0)
    blue_bytes = byte_complexity(tree, resolve_blue(tree, blue_plan.blue), msgs, model)
    rows = []
    for k in ks:
        for name in (*STRATEGIES, "all-blue"):
            plan = blue_plan if name == "all-blue" else run_strategy(tree, name, k,
                                                                     seed=seed * 1000 + k)
            b = blue_bytes if name == "all-blue" else byte_complexity(
                tree, resolve_blue(tree, plan.blue), msgs, model)
            rows.append({"use_case": use_case, "distribution": dist, "seed": seed, "k": k,
                         "strategy": name, "blue": len(plan.blue), "util": plan.cost / red_util,
                         "bytes": b / red_bytes, "all_blue_bytes": blue_bytes / red_bytes})
    return rows


def run_fig8(s: Settings, jobs: int) -> tuple[list[Row], list[Row]]:
    tasks = [(u, d, seed, s.ks, s.n) for u in USE_CASES for d in LOAD_DISTRIBUTIONS
             for seed in range(s.seeds)]
    raw = parallel_map(fig8_task, tasks, jobs, "fig8")
    return raw, aggregate(raw, ["use_case", "distribution", "k", "strategy"],
                          ["util", "bytes", "all_blue_bytes", "blue"])


# ---------------------------------------------------------------------------------------------
# Fig. 9: run time


def run_fig9(s: Settings, jobs: int) -> tuple[list[Row], list[Row]]:
    """Best-of-R wall time of SOAR (Gather + Color) and of the reference DP, on one core."""
    from innet.progress import bar
    from innet.soar.reference import reference_optimum
    from innet.soar.solver import solve

    rows: list[Row] = []
    points = [(n, k) for n in s.sizes for k in s.ks]
    for n, k in bar(points, desc="fig9", unit="point", leave=False):
        tree = binary_tree(n, rates="linear", loads="power-law", seed=0)
        methods: tuple[tuple[str, Callable[[Tree, int], object]], ...] = (
            ("soar", solve), ("reference", reference_optimum))
        for method, fn in methods:
            fn(tree, k)
            best = float("inf")
            for _ in range(s.repeat):
                t0 = time.perf_counter()
                fn(tree, k)
                best = min(best, time.perf_counter() - t0)
            rows.append({"n": n, "k": k, "method": method, "seconds": best})
    return rows, rows


# ---------------------------------------------------------------------------------------------
# The command


RUNNERS: dict[str, Callable[[Settings, int], tuple[list[Row], list[Row]]]] = {
    "fig6": run_fig6, "fig7": run_fig7, "fig8": run_fig8, "fig9": run_fig9,
}


def write_csv(path: Path, rows: Sequence[Row]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})


def run_experiment(name: str, out: Path, *, seeds: int | None = None, quick: bool = False,
                   jobs: int | None = None) -> dict[str, Any]:
    """Run one figure, write its CSVs, PNGs and summary.md into `out`; returns what it wrote."""
    from innet.soar import figures

    if name not in RUNNERS:
        raise InputError(f"unknown experiment {name!r}; choose from {', '.join(RUNNERS)}")
    settings = (QUICK if quick else FULL)[name]
    if seeds is not None:
        if seeds < 1:
            raise InputError(f"--seeds must be >= 1, got {seeds}")
        settings = Settings(**{**settings.__dict__, "seeds": seeds})
    if jobs is None:
        jobs = os.cpu_count() or 1
    if jobs < 1:
        raise InputError(f"--processes must be >= 1, got {jobs}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output folder: {exc.strerror}",
                         source=str(out)) from None
    t0 = time.perf_counter()
    raw, points = RUNNERS[name](settings, jobs)
    elapsed = time.perf_counter() - t0
    write_csv(out / f"{name}.csv", points)
    if raw is not points:
        write_csv(out / f"{name}-raw.csv", raw)
    pngs = figures.PLOTTERS[name](points, out)
    summary = figures.SUMMARIES[name](points, settings, quick)
    (out / "summary.md").write_text(summary + f"\n\nComputed in {elapsed:.1f} s on {jobs} "
                                    f"process(es){' (--quick)' if quick else ''}.\n")
    return {"points": points, "raw": raw, "pngs": pngs, "seconds": elapsed,
            "settings": settings}
