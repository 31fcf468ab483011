"""The straightforward SOAR Gather, O(n * h * k^2): the reference the benchmarks time against.

Same recurrence as `innet.soar.solver.gather`, written the way the paper states it:
every table is k + 1 wide whatever the subtree holds, and every child merge tries all k + 1
splits. It is vectorised over the rows (l) and targets like ours, so the gap measured is the
algorithmic one (the budget bound), not Python against NumPy.
"""

from __future__ import annotations

import numpy as np

from innet.soar.model import Tree


def reference_optimum(tree: Tree, k: int) -> float:
    n = tree.n
    w = tree.weight
    dist: list[np.ndarray] = [np.zeros(0)] * n
    for v in range(1, n):
        dist[v] = w[v] + np.concatenate(([0.0], dist[tree.parent[v]]))
    below = tree.subtree_load()
    tables: list[np.ndarray | None] = [None] * n
    for v in range(n - 1, -1, -1):
        rows = int(tree.depth[v]) + 1
        merged = np.zeros((rows, k + 1))
        for c in tree.children[v]:
            child = tables[c]
            assert child is not None
            out = np.full((rows, k + 1), np.inf)
            for x in range(k + 1):
                np.minimum(out[:, x:], merged[:, x:x + 1] + child[:, :k + 1 - x], out=out[:, x:])
            merged = out
            tables[c] = None
        if v == 0:
            tables[0] = merged
            break
        table = merged[1:, :] + (tree.load[v] * dist[v])[:, None]
        if tree.available[v] and k >= 1:
            send = dist[v] if below[v] > 0 else np.zeros(len(dist[v]))
            blue = send[:, None] + merged[0:1, :k]
            np.minimum(table[:, 1:], blue, out=table[:, 1:])
        tables[v] = table
    root = tables[0]
    assert root is not None
    return float(root[0, k]) if n > 1 else 0.0
