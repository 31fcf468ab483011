"""Plain-text tables for the terminal: aligned columns, numbers right-aligned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cell(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3) -> str:
    """Render rows under headers; numeric columns are right-aligned, text left-aligned."""
    cells = [[_cell(v, digits) for v in row] for row in rows]
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w)
                 for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)
