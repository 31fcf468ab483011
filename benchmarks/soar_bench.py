"""Time SOAR's solve on BT(n) against the straightforward O(n h k^2) reference DP.

    python benchmarks/soar_bench.py            # the grid of issue 2 (a few minutes)
    python benchmarks/soar_bench.py --quick    # a smaller grid

For each (n, k): the best of R runs of `solve` (Gather + Color), the reference's Gather time
(skipped where it would take too long: it is O(n h k^2)), their ratio, whether the two optima
agree, and the peak memory of one solve measured by tracemalloc (NumPy's buffers included).
Run it alone on the machine: the other core's load shows up in the figures.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from innet.soar.generate import binary_tree
from innet.soar.reference import reference_optimum
from innet.soar.solver import solve
from innet.table import format_table

FULL_N = [256, 1024, 2048, 8192, 65536]
FULL_K = [4, 16, 128, 1024]
QUICK_N = [256, 2048]
QUICK_K = [4, 128]
REFERENCE_BUDGET = 2048 * 256  # n * k beyond which the reference is not run


def best_time(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n in {256, 2048}, k in {4, 128}")
    parser.add_argument("--n", type=int, nargs="*", help="override the sizes")
    parser.add_argument("--k", type=int, nargs="*", help="override the budgets")
    parser.add_argument("--rates", default="linear", choices=["constant", "linear", "exponential"])
    parser.add_argument("--loads", default="power-law", choices=["uniform", "power-law"])
    args = parser.parse_args()
    sizes = args.n or (QUICK_N if args.quick else FULL_N)
    budgets = args.k or (QUICK_K if args.quick else FULL_K)
    print(f"BT(n), {args.loads} loads on the leaves, {args.rates} rates, seed 0", flush=True)
    rows = []
    for n in sizes:
        tree = binary_tree(n, rates=args.rates, loads=args.loads, seed=0)
        for k in budgets:
            if k > n:
                continue
            repeat = 5 if n * k <= 2048 * 128 else 1
            solve(tree, k)  # warm-up
            ours = best_time(lambda tree=tree, k=k: solve(tree, k), repeat)
            tracemalloc.start()
            plan = solve(tree, k)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            if n * k <= REFERENCE_BUDGET:
                ref_cost = reference_optimum(tree, k)
                ref = best_time(lambda tree=tree, k=k: reference_optimum(tree, k),
                                max(1, repeat // 2))
                same = "yes" if abs(ref_cost - plan.cost) <= 1e-9 * max(1.0, ref_cost) else "NO"
                row = [n, k, ours, ref, ref / ours, same, peak]
            else:
                row = [n, k, ours, "skipped", "", "", peak]
            rows.append(row)
            print(format_table(["n", "k", "solve s", "reference s", "ratio", "same optimum",
                                "peak MiB"], [row], digits=4).splitlines()[-1], flush=True)
    print()
    print(format_table(["n", "k", "solve s", "reference s", "ratio", "same optimum", "peak MiB"],
                       rows, digits=4))


if __name__ == "__main__":
    main()
