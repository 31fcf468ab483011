"""SOAR's time estimate against the measured solve on path-shaped trees (the deepest shape).

    python benchmarks/soar_paths.py 16 5000 10000 20000    # k, then the path lengths

A path of n switches has n^2 / 2 distances up and that many cells per unit of table width:
the case where `solver.estimate_seconds` is most likely to be off. Measured in CPU time
(`time.process_time`), so the other processes of a busy machine do not count; wall time is
printed beside it.
"""

from __future__ import annotations

import sys
import time

from innet.soar.model import tree_from_dict
from innet.soar.solver import estimate_seconds, solve


def path_tree(n: int) -> dict[str, object]:
    """A destination and n switches in a line, one message each."""
    nodes: list[dict[str, object]] = [{"id": "d"}]
    nodes += [{"id": f"s{i}", "parent": f"s{i - 1}" if i else "d", "load": 1} for i in range(n)]
    return {"root": "d", "nodes": nodes}


def main(argv: list[str]) -> None:
    k, sizes = int(argv[0]), [int(a) for a in argv[1:]]
    for n in sizes:
        tree = tree_from_dict(path_tree(n))
        estimate = estimate_seconds(tree, k)
        cpu, wall = time.process_time(), time.perf_counter()
        solve(tree, k)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"path n={n} k={k}: estimate {estimate:.2f} s, measured {cpu:.2f} s CPU "
              f"({wall:.2f} s wall), measured / estimate {cpu / estimate:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["16", "2000", "5000", "10000"])
