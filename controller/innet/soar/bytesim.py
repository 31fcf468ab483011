"""Byte complexity: what a plan costs when merged messages grow (Fig. 8 of the paper).

phi counts messages; real payloads grow when merged. Word count (WC) merges word-count maps
by key union; a parameter server (PS) merges sparse gradients by coordinate union. Each
message is a set (a boolean row over the vocabulary or the gradient's dimension); a red
switch forwards its messages unchanged, a blue one sends their union. Byte complexity = sum
over uplinks of the bytes of every message on it, divided by the rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from innet.soar.model import Tree

UseCase = Literal["wc", "ps"]
USE_CASES: tuple[UseCase, ...] = ("wc", "ps")


@dataclass(frozen=True)
class ByteModel:
    """How workers' messages look. Sizes are entries x bytes per entry plus a header."""

    use_case: UseCase
    universe: int  # vocabulary size (WC) or gradient dimension D (PS)
    words_per_worker: int = 200  # WC: words each worker counted
    zipf_exponent: float = 1.2  # WC: word frequencies ~ rank^-s
    dropout: float = 0.5  # PS: each coordinate is zero with this probability
    entry_bytes: int = 8  # key + count, or index + value
    header_bytes: int = 0

    def draw(self, count: int, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
        """Key sets of `count` workers' messages, one boolean row each."""
        if self.use_case == "ps":
            return rng.random((count, self.universe)) >= self.dropout
        ranks = np.arange(1, self.universe + 1, dtype=np.float64)
        p = ranks ** -self.zipf_exponent
        p /= p.sum()
        words = rng.choice(self.universe, size=(count, self.words_per_worker), p=p)
        rows = np.zeros((count, self.universe), dtype=bool)
        rows[np.repeat(np.arange(count), self.words_per_worker), words.ravel()] = True
        return rows

    def size(self, entries: npt.NDArray[np.int64] | int) -> npt.NDArray[np.int64] | int:
        return entries * self.entry_bytes + self.header_bytes


def worker_messages(tree: Tree, model: ByteModel, seed: int) -> list[npt.NDArray[np.bool_]]:
    """Each node's workers' messages (L(v) rows), drawn once so every plan sees the same data."""
    rng = np.random.default_rng(seed)
    return [model.draw(int(tree.load[v]), rng) for v in range(tree.n)]


def byte_complexity(
    tree: Tree,
    blue: npt.NDArray[np.bool_],
    messages: list[npt.NDArray[np.bool_]],
    model: ByteModel,
) -> float:
    """Sum over uplinks of bytes carried / rate, for the given blue mask."""
    w = tree.weight
    pending: list[list[npt.NDArray[np.bool_]]] = [[m] if len(m) else [] for m in messages]
    total = 0.0
    for v in range(tree.n - 1, 0, -1):
        parts = pending[v]
        pending[v] = []
        if not parts:
            continue
        stack = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if blue[v]:
            stack = np.any(stack, axis=0, keepdims=True)
        total += float(np.sum(model.size(stack.sum(axis=1)))) * w[v]
        pending[tree.parent[v]].append(stack)
    return total
