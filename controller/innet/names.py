"""How names of switches, hosts and jobs sort: s2 before s10 (natural order).

Every tie broken by name (routes, trees, listings, racks) uses `natural_key`, so the same
inputs give the same choices everywhere.

Runs of ASCII digits compare as numbers without being converted: a run is compared by its
length once leading zeros are stripped, then as text, which is the numeric order for any
length (int() refuses more than 4,300 digits and is quadratic below that). Other characters,
including the digits of other scripts and superscripts such as '²', compare as text: they are
not numbers innet reads. The key of a name costs time and memory linear in its length.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"([0-9]+)")

# (length without leading zeros, those digits) for a run of digits, (-1, text) for text:
# positions alternate text, digits, text, ... so every position holds one kind, and the
# tuples compare like the numbers they stand for
Part = tuple[int, str]


def natural_key(name: str) -> tuple[tuple[Part, ...], str]:
    """Sort key that puts s2 before s10, for readable tie-breaking by name.

    Names equal as numbers (s01 and s1) are ordered by the name itself after that, so the
    key is a total order: a sort by it never depends on the order of its input.
    """
    parts = _DIGITS.split(name)
    key: list[Part] = []
    for i, part in enumerate(parts):
        if i % 2:  # a run of digits
            digits = part.lstrip("0")
            key.append((len(digits), digits))
        else:
            key.append((-1, part))
    return tuple(key), name
