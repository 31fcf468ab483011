"""How names of switches, hosts and jobs sort: s2 before s10 (natural order).

Every tie broken by name (routes, trees, listings, racks) uses `natural_key`, so the same
inputs give the same choices everywhere.
"""

from __future__ import annotations

import re
from typing import Any

_NATURAL = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that puts s2 before s10, for readable tie-breaking by name."""
    return tuple(int(part) if part.isdigit() else part for part in _NATURAL.split(name))
