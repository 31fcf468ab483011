"""The SOAR model (phi-BIC): a tree rooted at the destination, rates, loads, and the cost phi.

A `Tree` is immutable plain data indexed 0..n-1 in breadth-first order from the root, so
that every parent precedes its children; solvers sweep it backwards for bottom-up passes and
forwards for top-down ones without recursion. Names are kept only at the edges (files, CLI).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from innet.errors import InputError, elide_join, finite_number, quote, read_json
from innet.names import natural_key

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Tree:
    """A rooted tree of switches with uplink rates, loads and the available set.

    Index 0 is the root d (the destination); `parent[0] == -1`. `rate[v]` is the rate of v's
    uplink (unused for the root), `load[v]` the messages born at v, `available[v]` whether v
    may aggregate. Build it with `Tree.build`, which validates and orders the nodes.
    """

    ids: tuple[str, ...]
    parent: IntArray
    rate: FloatArray
    load: IntArray
    available: npt.NDArray[np.bool_]
    children: tuple[tuple[int, ...], ...] = field(repr=False)
    depth: IntArray = field(repr=False)
    index: Mapping[str, int] = field(repr=False)

    @property
    def n(self) -> int:
        """Number of nodes, the root included."""
        return len(self.ids)

    @property
    def root(self) -> str:
        return self.ids[0]

    @property
    def weight(self) -> FloatArray:
        """Cost of one message on each uplink, w(v) = 1 / r(v) (0 for the root)."""
        w = 1.0 / self.rate
        w[0] = 0.0
        return w

    @property
    def height(self) -> int:
        """Hops from the deepest node to the root."""
        return int(self.depth.max()) if self.n else 0

    def available_ids(self) -> list[str]:
        return [self.ids[v] for v in np.flatnonzero(self.available)]

    def subtree_load(self) -> IntArray:
        """Messages born in each node's subtree: what its uplink carries when all are red."""
        total = self.load.copy()
        for v in range(self.n - 1, 0, -1):
            total[self.parent[v]] += total[v]
        return total

    def levels(self) -> IntArray:
        """Height of each node above the leaves below it (leaves are level 0)."""
        level = np.zeros(self.n, dtype=np.int64)
        for v in range(self.n - 1, 0, -1):
            p = self.parent[v]
            level[p] = max(level[p], level[v] + 1)
        return level

    def with_loads(self, load: Sequence[int] | IntArray) -> Tree:
        """The same tree carrying another workload (validated like a file's loads)."""
        arr = np.asarray(load)
        if arr.shape != (self.n,):
            raise InputError(f"load vector has {arr.shape} entries, the tree has {self.n} nodes")
        return Tree.build(
            self.ids, self.parent.tolist(), self.rate.tolist(), arr.tolist(),
            self.available_ids(),
        )

    def with_available(self, available: Iterable[str]) -> Tree:
        return Tree.build(
            self.ids, self.parent.tolist(), self.rate.tolist(), self.load.tolist(), available
        )

    @staticmethod
    def build(
        ids: Sequence[str],
        parent: Sequence[int],
        rate: Sequence[float],
        load: Sequence[Any],
        available: Iterable[str] | None = None,
        *,
        source: str | None = None,
    ) -> Tree:
        """Validate nodes given by index (parent -1 marks the root) and order them by BFS."""
        n = len(ids)
        root = _check_nodes(ids, parent, rate, load, source)
        order, children = _bfs_order(root, parent, ids, source)
        new_of_old = {old: new for new, old in enumerate(order)}
        new_ids = tuple(ids[old] for old in order)
        new_parent = np.array(
            [-1 if parent[old] == -1 else new_of_old[parent[old]] for old in order],
            dtype=np.int64,
        )
        new_rate = np.array([float(rate[old]) for old in order], dtype=np.float64)
        new_load = np.array([int(load[old]) for old in order], dtype=np.int64)
        index = {name: i for i, name in enumerate(new_ids)}
        avail = _available_mask(available, index, n, source)
        new_children = tuple(
            tuple(sorted(new_of_old[c] for c in children[old])) for old in order
        )
        depth = np.zeros(n, dtype=np.int64)
        for v in range(1, n):
            depth[v] = depth[new_parent[v]] + 1
        return Tree(new_ids, new_parent, new_rate, new_load, avail, new_children, depth, index)


def _check_nodes(ids: Sequence[str], parent: Sequence[int], rate: Sequence[float],
                 load: Sequence[Any], source: str | None) -> int:
    """The root's index, once the lists agree, there is one root and every rate and load
    is one the costs can hold exactly (an InputError naming the first that is not)."""
    n = len(ids)
    if not (len(parent) == len(rate) == len(load) == n):
        raise InputError("ids, parent, rate and load must have the same length", source=source)
    roots = [i for i in range(n) if parent[i] == -1]
    if not roots:
        raise InputError("no root: every node has a parent", source=source)
    if len(roots) > 1:
        names = ", ".join(repr(ids[i]) for i in roots)
        raise InputError(f"several roots: {names} have no parent", source=source)
    total = 0
    for i in range(n):
        _check_rate(ids[i], rate[i], source, is_root=parent[i] == -1)
        total += _check_load(ids[i], load[i], source)
    if total > MAX_TOTAL_LOAD:
        raise InputError(f"the loads total {total} messages; at most 2^53 = "
                         f"{MAX_TOTAL_LOAD} can be counted exactly", source=source)
    return roots[0]


def _bfs_order(root: int, parent: Sequence[int], ids: Sequence[str], source: str | None
               ) -> tuple[list[int], list[list[int]]]:
    """The nodes in breadth-first order from the root, and each node's children (by the
    given indices); a node the root does not reach sits on a cycle, named in the error."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(parent):
        if p != -1:
            children[p].append(i)
    order = [root]
    for v in order:
        order.extend(children[v])
    if len(order) < n:
        reached = set(order)
        stuck = next(i for i in range(n) if i not in reached)
        raise InputError(
            f"node {quote(ids[stuck])}: cycle in its parent chain "
            f"({_cycle_text(stuck, parent, ids)})",
            source=source,
        )
    return order, children


def _available_mask(available: Iterable[str] | None, index: Mapping[str, int], n: int,
                    source: str | None) -> npt.NDArray[np.bool_]:
    """Which of the `n` nodes (in BFS order) may aggregate: all but the root when none are
    named."""
    avail = np.zeros(n, dtype=bool)
    if available is None:
        avail[1:] = True
        return avail
    for name in available:
        if not isinstance(name, str) or name not in index:
            raise InputError(f"available: unknown node {quote(name)}", source=source)
        if index[name] == 0:
            raise InputError(
                f"available: {quote(name)} is the root (the destination), which receives "
                "the result and cannot aggregate on its way",
                source=source,
            )
        avail[index[name]] = True
    return avail


# Why these bounds: message counts are int64 and the costs float64. Loads whose total stays
# within 2^53 are exact in both (no wrap-around, no rounding of a count), and rates within
# [1e-9, 1e15] keep every weight 1/rate and every cost finite and normal, so no plan is ever
# chosen by an overflowed, infinite or NaN cost.
MAX_TOTAL_LOAD = 2**53
MIN_RATE = 1e-9
MAX_RATE = 1e15
_LOAD_RULE = f"a non-negative integer (the loads may total at most 2^53 = {MAX_TOTAL_LOAD})"
_RATE_RULE = f"a number in [{MIN_RATE:g}, {MAX_RATE:g}]"


def _check_rate(name: str, rate: Any, source: str | None, *, is_root: bool) -> None:
    ok = (isinstance(rate, int | float | np.floating | np.integer) and not isinstance(rate, bool)
          and finite_number(float(rate) if isinstance(rate, np.floating | np.integer)
                            else rate))
    if ok and not is_root:
        ok = MIN_RATE <= rate <= MAX_RATE
    if not ok:
        rule = "a finite number" if is_root else _RATE_RULE
        raise InputError(f"node {quote(name)}: rate must be {rule}, got {quote(rate)}",
                         source=source)


def _check_load(name: str, load: Any, source: str | None) -> int:
    """The load as a Python int (exact), or an InputError naming the node."""
    ok = isinstance(load, int | float | np.integer) and not isinstance(load, bool)
    if ok and isinstance(load, float):
        ok = math.isfinite(load) and load.is_integer()
    if not ok or not 0 <= load <= MAX_TOTAL_LOAD:
        raise InputError(f"node {quote(name)}: load must be {_LOAD_RULE}, got {quote(load)}",
                         source=source)
    return int(load)


def _cycle_text(start: int, parent: Sequence[int], ids: Sequence[str]) -> str:
    seen: list[int] = []
    seen_set: set[int] = set()
    v = start
    while v != -1 and v not in seen_set:
        seen.append(v)
        seen_set.add(v)
        v = parent[v]
    if v == -1:  # start hangs below a cycle; show the cycle itself
        return elide_join(ids[i] for i in seen)
    loop = [*seen[seen.index(v):], v]
    return elide_join(ids[i] for i in loop)


# ---------------------------------------------------------------------------------------------
# Instance files


def tree_from_dict(data: Any, *, source: str | None = None) -> Tree:
    """Read the instance JSON format of the spec (root, nodes, optional available)."""
    root, nodes = _instance_fields(data, source)
    ids, position, raw_parent, rate, load = _read_nodes(nodes, source)
    if root not in position:
        raise InputError(f"root {quote(root)} is not among the nodes", source=source)
    parent = _parent_indices(root, ids, raw_parent, position, source)
    available = data.get("available")
    if available is not None and not isinstance(available, list):
        raise InputError("available must be a list of node ids", source=source)
    return Tree.build(ids, parent, rate, load, available, source=source)


def _instance_fields(data: Any, source: str | None) -> tuple[str, list[Any]]:
    """The instance's root and nodes, once its fields are the format's."""
    if not isinstance(data, dict):
        raise InputError("an instance must be a JSON object with 'root' and 'nodes'", source=source)
    for key in ("root", "nodes"):
        if key not in data:
            raise InputError(f"missing field {quote(key)}", source=source)
    unknown = set(data) - {"root", "nodes", "available", "comment", "meta"}
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(sorted(unknown))}", source=source)
    root = data["root"]
    nodes = data["nodes"]
    if not isinstance(root, str):
        raise InputError(f"root must be a node id (string), got {quote(root)}", source=source)
    if not isinstance(nodes, list) or not nodes:
        raise InputError("nodes must be a non-empty list", source=source)
    return root, nodes


def _read_nodes(nodes: list[Any], source: str | None
                ) -> tuple[list[str], dict[str, int], list[str | None], list[Any], list[Any]]:
    """Each node's id, position, parent's id, rate and load, in the file's order (rates
    and loads checked later, by `Tree.build`)."""
    ids: list[str] = []
    position: dict[str, int] = {}  # id -> position: the duplicate check must not scan a list
    raw_parent: list[str | None] = []
    rate: list[Any] = []
    load: list[Any] = []
    for pos, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("id"), str):
            raise InputError(f"nodes[{pos}]: needs a string 'id'", source=source)
        name = node["id"]
        extra = set(node) - {"id", "parent", "rate", "load"}
        if extra:
            raise InputError(f"node {quote(name)}: unknown field(s) {', '.join(sorted(extra))}",
                             source=source)
        if name in position:
            raise InputError(f"node {quote(name)}: defined twice (nodes[{position[name]}] and "
                             f"nodes[{pos}])", source=source)
        position[name] = pos
        ids.append(name)
        par = node.get("parent")
        if par is not None and not isinstance(par, str):
            raise InputError(f"node {quote(name)}: parent must be a node id, got {quote(par)}",
                             source=source)
        raw_parent.append(par)
        rate.append(node.get("rate", 1.0))
        load.append(node.get("load", 0))
    return ids, position, raw_parent, rate, load


def _parent_indices(root: str, ids: list[str], raw_parent: list[str | None],
                    position: dict[str, int], source: str | None) -> list[int]:
    """Each node's parent as a position (-1 for the root), the root being the only node
    without one."""
    parent: list[int] = []
    for name, par in zip(ids, raw_parent, strict=True):
        if name == root:
            if par is not None:
                raise InputError(f"root {quote(root)} must not have a parent (got {quote(par)})",
                                 source=source)
            parent.append(-1)
        elif par is None:
            raise InputError(
                f"several roots: node {quote(name)} has no parent but the root is {quote(root)}",
                source=source,
            )
        elif par not in position:
            raise InputError(f"node {quote(name)}: unknown parent {quote(par)}", source=source)
        elif par == name:
            raise InputError(f"node {quote(name)}: cycle in its parent chain "
                             f"({elide_join([name, name])})",
                             source=source)
        else:
            parent.append(position[par])
    return parent


def load_tree(path: str | Path) -> Tree:
    """Read an instance file; every problem is an InputError naming the file."""
    return tree_from_dict(read_json(path), source=str(path))


def tree_to_dict(tree: Tree) -> dict[str, Any]:
    """The instance JSON format; `available` is written only when it is not the default."""
    nodes: list[dict[str, Any]] = [{"id": tree.ids[0]}]
    if tree.load[0]:
        nodes[0]["load"] = int(tree.load[0])
    for v in range(1, tree.n):
        rate = float(tree.rate[v])
        nodes.append({
            "id": tree.ids[v],
            "parent": tree.ids[tree.parent[v]],
            "rate": int(rate) if rate.is_integer() else rate,
            "load": int(tree.load[v]),
        })
    out: dict[str, Any] = {"root": tree.root, "nodes": nodes}
    if not tree.available[1:].all():
        out["available"] = tree.available_ids()
    return out


def tree_from_networkx(
    graph: Any,
    root: Any,
    *,
    rate: str = "rate",
    load: str = "load",
    available: Iterable[Any] | None = None,
) -> Tree:
    """Build a Tree from a networkx tree (Graph or DiGraph, edges in either direction).

    Node attribute `rate` is the rate of the node's uplink (default 1), `load` its messages
    (default 0); an edge attribute `rate` is used when the child node has none.
    """
    import networkx as nx

    if root not in graph:
        raise InputError(f"root {quote(root)} is not a node of the graph")
    und = graph.to_undirected(as_view=True) if graph.is_directed() else graph
    if not nx.is_tree(und):
        raise InputError("the graph is not a tree (it has a cycle or is disconnected)")
    ids: list[str] = [str(root)]
    parent: list[int] = [-1]
    rates: list[Any] = [1.0]
    loads: list[Any] = [graph.nodes[root].get(load, 0)]
    pos: dict[Any, int] = {root: 0}
    for node, par in nx.bfs_predecessors(und, root):
        pos[node] = len(ids)
        ids.append(str(node))
        parent.append(pos[par])
        attrs = graph.nodes[node]
        loads.append(attrs.get(load, 0))
        rates.append(attrs.get(rate, und.edges[par, node].get(rate, 1.0)))
    if len(set(ids)) != len(ids):
        raise InputError("node names collide once turned into strings")
    avail = None if available is None else [str(a) for a in available]
    return Tree.build(ids, parent, rates, loads, avail)


# ---------------------------------------------------------------------------------------------
# The cost


def resolve_blue(tree: Tree, blue: Iterable[str | int]) -> npt.NDArray[np.bool_]:
    """A boolean mask from node names or indices; blue nodes must be available."""
    mask = np.zeros(tree.n, dtype=bool)
    for b in blue:
        v = b if isinstance(b, int | np.integer) else tree.index.get(b, -1)
        if not 0 <= v < tree.n:
            raise InputError(f"blue: unknown node {quote(b)}")
        if not tree.available[v]:
            raise InputError(f"blue: node {quote(tree.ids[v])} is not available for aggregation")
        mask[v] = True
    return mask


def messages(tree: Tree, blue: npt.NDArray[np.bool_]) -> IntArray:
    """msgs(v): messages on each uplink. Red forwards all it gets plus its own; blue sends one."""
    msgs = tree.load.copy()
    for v in range(tree.n - 1, 0, -1):
        if blue[v]:
            msgs[v] = 1 if msgs[v] > 0 else 0
        msgs[tree.parent[v]] += msgs[v]
    msgs[0] = 0
    return msgs


def phi(tree: Tree, blue: Iterable[str | int] | npt.NDArray[np.bool_]) -> float:
    """Utilisation complexity: sum over uplinks of messages times 1/rate."""
    mask = blue if isinstance(blue, np.ndarray) and blue.dtype == bool else resolve_blue(tree, blue)
    return float(np.dot(messages(tree, mask)[1:], tree.weight[1:]))


@dataclass(frozen=True)
class Plan:
    """Which switches aggregate, and what that costs: the output of every strategy."""

    strategy: str
    k: int
    blue: tuple[str, ...]
    cost: float

    def to_dict(self, all_red_cost: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy, "k": self.k, "cost": self.cost, "blue": list(self.blue)
        }
        if all_red_cost is not None:
            out["all_red_cost"] = all_red_cost
        return out


def make_plan(tree: Tree, strategy: str, k: int, blue_idx: Iterable[int]) -> Plan:
    """A Plan from blue node indices, names sorted naturally, cost computed by phi."""
    mask = np.zeros(tree.n, dtype=bool)
    for v in blue_idx:
        mask[v] = True
    names = tuple(sorted((tree.ids[v] for v in np.flatnonzero(mask)), key=natural_key))
    return Plan(strategy, k, names, phi(tree, mask))


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise InputError(f"k must be an integer >= 0, got {quote(k)}")
    return int(k)
