"""SOAR = Gather + Color: the exact phi-BIC solver.

Gather, bottom-up, gives every node v a table X_v[l, i]: the least cost of all messages born
in v's subtree, counted until they reach v's ancestor l hops up (the nearest blue one, or d),
with at most i blue nodes inside the subtree. Color walks back down, reading the decisions
and budget splits Gather stored.

Why it is O(n * h * k) and not the paper's O(n * h * k^2): a subtree with a available switches
can use at most min(k, a) of the budget, so its table is only min(k, a) + 1 wide, and merging
two children of widths p and q costs (min(p, q) + 1) * (p + q + 1) per row. Summed over a tree,
that is the classic tree-knapsack bound O(n * k) merge cells per row, times h rows. Each
merge is vectorised over rows (l) and budgets (i) with NumPy; the Python loop only runs over
the narrower side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from innet.soar.model import FloatArray, Plan, Tree, check_k, make_plan

_SPLIT = np.int32


@dataclass
class _GroupTrace:
    """What Color needs of a batch of same-shaped nodes: colour decisions and budget splits."""

    choose_blue: npt.NDArray[np.bool_] | None  # (batch, depth, width): blue beats red at (l, i)
    merged_width: int  # width of the merged children tables (their budget cap + 1)
    splits: list[npt.NDArray[np.int32]]  # per child after the first: its share at (b, row, t)


@dataclass
class Gathered:
    """The result of Gather: the optimum and the breadcrumbs for Color."""

    optimum: float
    budget: int
    trace_of: list[tuple[_GroupTrace, int]]  # node -> (its batch, its position in the batch)


def min_plus_merge(
    a: FloatArray, b: FloatArray, k: int
) -> tuple[FloatArray, npt.NDArray[np.int32]]:
    """Min-plus convolution of budget tables along the last axis, capped at budget k.

    c[..., t] = min over x + y = t of a[..., x] + b[..., y]; also returns y (b's share) at the
    min. Leading axes (batch, row) are element-wise. Inputs are non-increasing in the budget
    ("at most i"), and so is the result. The loop runs over the narrower table's budgets.
    """
    pa = a.shape[-1]
    pb = b.shape[-1]
    width = min(k + 1, pa + pb - 1)
    out = np.full((*a.shape[:-1], width), np.inf)
    share = np.zeros(out.shape, dtype=_SPLIT)
    if pb <= pa:
        for y in range(min(pb, width)):
            span = min(width - y, pa)
            cand = a[..., :span] + b[..., y:y + 1]
            view = out[..., y:y + span]
            better = cand < view
            np.copyto(view, cand, where=better)
            np.copyto(share[..., y:y + span], _SPLIT(y), where=better)
    else:
        for x in range(min(pa, width)):
            span = min(width - x, pb)
            cand = a[..., x:x + 1] + b[..., :span]
            view = out[..., x:x + span]
            better = cand < view
            np.copyto(view, cand, where=better)
            ys = np.broadcast_to(np.arange(span, dtype=_SPLIT), cand.shape)
            np.copyto(share[..., x:x + span], ys, where=better)
    return out, share


def _levels(tree: Tree) -> list[npt.NDArray[np.int64]]:
    """Nodes by depth. BFS order makes each depth a contiguous range of indices."""
    bounds = np.searchsorted(tree.depth, np.arange(tree.height + 2))
    return [np.arange(bounds[d], bounds[d + 1]) for d in range(tree.height + 1)]


def _distances(tree: Tree, levels: list[npt.NDArray[np.int64]]) -> list[FloatArray]:
    """dist[d][j, l-1]: sum of 1/rate from the j-th node at depth d up l hops, l = 1 .. d."""
    w = tree.weight
    dist: list[FloatArray] = [np.zeros((1, 0))]
    for d in range(1, len(levels)):
        nodes = levels[d]
        above = dist[d - 1][tree.parent[nodes] - levels[d - 1][0]]
        mat = np.empty((len(nodes), d))
        mat[:, 0] = 0.0
        mat[:, 1:] = above
        mat += w[nodes][:, None]
        dist.append(mat)
    return dist


def gather(tree: Tree, k: int, done: Callable[[int], None] | None = None) -> Gathered:
    """Bottom-up tables; returns the optimal cost with at most k blue nodes and the traces.
    `done(m)` is told after each depth how many nodes it finished (a progress bar: a deep
    tree takes minutes).

    Nodes are processed a depth at a time, and nodes of one depth whose children tables have
    the same widths (and the same availability) are stacked and merged as one batch, so the
    Python loop runs per batch, not per node: on regular trees a depth is one or two batches.
    """
    k = check_k(k)
    levels = _levels(tree)
    dist = _distances(tree, levels)
    has_load = tree.subtree_load() > 0
    tables: list[FloatArray | None] = [None] * tree.n
    trace_of: list[tuple[_GroupTrace, int] | None] = [None] * tree.n
    for d in range(len(levels) - 1, -1, -1):
        groups: dict[tuple[object, ...], list[int]] = {}
        for v in levels[d].tolist():
            kids = tree.children[v]
            sig = (bool(tree.available[v]), *(tables[c].shape[-1] for c in kids))  # type: ignore[union-attr]
            groups.setdefault(sig, []).append(v)
        for (available, *_), members in groups.items():
            rows = np.asarray(members) - int(levels[d][0])
            _gather_batch(tree, k, d, members, rows, bool(available), dist[d], has_load, tables,
                          trace_of)
        if d + 1 < len(levels):
            for c in levels[d + 1].tolist():
                tables[c] = None
        if done is not None:
            done(len(levels[d]))
    root = tables[0]
    assert root is not None
    budget = min(k, root.shape[-1] - 1)
    optimum = float(root[0, budget]) if tree.n > 1 else 0.0
    traces = [t for t in trace_of if t is not None]
    assert len(traces) == tree.n
    return Gathered(optimum, budget, traces)


def _gather_batch(
    tree: Tree,
    k: int,
    d: int,
    members: list[int],
    rows: npt.NDArray[np.int64],
    available: bool,
    dist: FloatArray,
    has_load: npt.NDArray[np.bool_],
    tables: list[FloatArray | None],
    trace_of: list[tuple[_GroupTrace, int] | None],
) -> None:
    """Tables of a batch of nodes at depth d whose children tables share their widths."""
    n_kids = len(tree.children[members[0]])
    splits: list[npt.NDArray[np.int32]] = []
    if n_kids == 0:
        merged = np.zeros((len(members), d + 1, 1))
    else:
        merged = np.stack([tables[tree.children[v][0]] for v in members])  # type: ignore[misc]
        for j in range(1, n_kids):
            child = np.stack([tables[tree.children[v][j]] for v in members])  # type: ignore[misc]
            merged, share = min_plus_merge(merged, child, k)
            splits.append(share)
    mw = merged.shape[-1]
    if d == 0:
        trace = _GroupTrace(None, mw, splits)
        tables[0] = merged[0]
        trace_of[0] = (trace, 0)
        return
    width = min(k + 1, mw + int(available))
    dmat = dist[rows]  # (batch, d): distances l = 1 .. d up
    # red: own load pays the distance l up; children's messages stop l + 1 up
    red = np.empty((len(members), d, width))
    red[..., :mw] = merged[:, 1:, :]
    red[..., mw:] = merged[:, 1:, mw - 1:mw]
    red += (tree.load[members][:, None] * dmat)[..., None]
    choose_blue = None
    if available and width > 1:
        # blue: one message (if any load below) pays the distance l up; children stop at v
        send = dmat * has_load[members][:, None]
        below = np.empty((len(members), width - 1))
        below[:, :mw] = merged[:, 0, :width - 1]
        below[:, mw:] = merged[:, 0, mw - 1:mw]
        blue = send[:, :, None] + below[:, None, :]
        choose_blue = np.zeros(red.shape, dtype=bool)
        choose_blue[..., 1:] = blue < red[..., 1:]
        np.minimum(red[..., 1:], blue, out=red[..., 1:])
    trace = _GroupTrace(choose_blue, mw, splits)
    for b, v in enumerate(members):
        tables[v] = red[b]
        trace_of[v] = (trace, b)


def color(tree: Tree, gathered: Gathered) -> list[int]:
    """Top-down: read each node's colour and hand its budget to its children."""
    trace_of = gathered.trace_of
    blue: list[int] = []
    # (node, row in its merged children table, budget for its children)
    stack: list[tuple[int, int, int]] = [(0, 0, gathered.budget)]
    while stack:
        v, row, budget = stack.pop()
        trace, b = trace_of[v]
        kids = tree.children[v]
        t = min(budget, trace.merged_width - 1)
        shares = []
        for j in range(len(kids) - 1, 0, -1):
            share = int(trace.splits[j - 1][b, row, t])
            shares.append((kids[j], share))
            t -= share
        if kids:
            shares.append((kids[0], t))
        for c, i in shares:
            ctrace, cb = trace_of[c]
            decision = ctrace.choose_blue
            if decision is not None and decision[cb, row, i]:
                blue.append(c)
                stack.append((c, 0, i - 1))
            else:
                stack.append((c, row + 1, i))
    return blue


def solve(tree: Tree, k: int, done: Callable[[int], None] | None = None) -> Plan:
    """The optimal plan: at most k available switches minimising phi (`done`: as gather's)."""
    k = check_k(k)
    gathered = gather(tree, k, done)
    return make_plan(tree, "soar", k, color(tree, gathered))


def optimum(tree: Tree, k: int) -> float:
    """The optimal phi alone (Gather without Color)."""
    return gather(tree, k).optimum



def estimate_bytes(tree: Tree, k: int) -> int:
    """Peak memory of `solve(tree, k)`, estimated from the shape alone in O(n).

    What stays allocated until Color: each node's distances up (depth floats), its colour
    decisions (depth x width booleans) and the budget splits of its merges (depth x width
    int32 per child after the first); what lives a level at a time: the float tables of two
    adjacent depths and the temporaries of their merge. Width is min(k, available switches
    in the subtree) + 1. A path of n switches needs n^2 / 2 distances: that is what makes
    deep trees expensive, whatever k.
    """
    k = check_k(k)
    n = tree.n
    avail_below = tree.available.astype(np.int64)
    for v in range(n - 1, 0, -1):
        avail_below[tree.parent[v]] += avail_below[v]
    width = np.minimum(avail_below, k) + 1
    depth = tree.depth.astype(np.float64)
    kids = np.array([len(c) for c in tree.children], dtype=np.float64)
    cells = (depth + 1) * width
    stored = (8 * depth + np.where(tree.available, depth * width, 0)
              + 4 * cells * np.maximum(0, kids - 1))
    per_level = np.bincount(tree.depth, weights=8 * cells)
    pair = per_level[:-1] + per_level[1:] if len(per_level) > 1 else per_level
    live = 3 * float(pair.max())
    return int(stored.sum() + live + 400 * n)


def estimate_seconds(tree: Tree, k: int) -> float:
    """Run time of `solve(tree, k)` on this machine's class of CPU, roughly and from above.

    Measured (CPU time: benchmarks/soar_bench.py, random shapes, benchmarks/soar_paths.py):
    about 30 us per node of Python and NumPy call overhead (batches are small on irregular
    trees), 150 ns per distance up (a node at depth d makes several arrays of d: its
    distances, the red and blue costs' rows) and 8 ns per table cell (depth x width). On deep
    trees the last two dominate: a path of n switches has n^2 / 2 distances whatever k. A
    path of 20,000 switches at k = 16 is estimated at 58 s and measured at 44 to 82 s (the
    cells alone, as this estimate once counted, said 21 s); docs/inputs.md has the figures.
    """
    k = check_k(k)
    avail_below = tree.available.astype(np.int64)
    for v in range(tree.n - 1, 0, -1):
        avail_below[tree.parent[v]] += avail_below[v]
    ups = (tree.depth + 1).astype(np.float64)
    cells = float((ups * (np.minimum(avail_below, k) + 1)).sum())
    return 30e-6 * tree.n + 150e-9 * float(ups.sum()) + 8e-9 * cells
