"""`--json` output: one JSON document per command, never NaN or Infinity.

Python's json module writes float('inf') as `Infinity`, which no strict JSON parser reads.
Results that can be unbounded (a ratio whose denominator is 0) are written as null instead,
and each command documents what null means in its help.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, indent: int | None = None) -> str:
    """Strict JSON text of `value` (non-finite floats become null)."""
    return json.dumps(finite(value), indent=indent, allow_nan=False)


def print_json(value: Any, indent: int | None = None) -> None:
    """Print one JSON document on standard output."""
    print(dumps(value, indent), flush=True)
