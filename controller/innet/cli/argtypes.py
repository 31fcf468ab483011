"""argparse value types shared by the subcommands: bounds checked where the flag is read.

A bad value is then an argparse error naming the flag, the value and what is allowed, in one
line with exit status 2 (`innet.cli.Parser.error`), like every other bad flag. Every
number has an upper bound too: a size or count beyond what the machine can do in reasonable
time is refused here, not discovered as an exhausted memory an hour later. Zero is never
taken to mean "the default": a flag left out gets the default, a flag given 0 gets 0 or an
error.

Reuse these for new flags (`int_in(1, 10_000)`, `float_in(0, 100, low_open=True)`, `SEED`,
`K`) rather than checking in the command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_DIGITS = 40  # no count or size of innet needs more digits; int() of 5,000 digits is slow


def _int(text: str) -> int:
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS:
        raise argparse.ArgumentTypeError(f"expected an integer, got {stripped[:20]}... "
                                         f"({len(stripped)} characters)")
    try:
        return int(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def int_in(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer flag in [minimum, maximum] (no upper bound when maximum is None)."""
    allowed = f"an integer >= {minimum}" if maximum is None else \
        f"an integer in {minimum}..{maximum}"

    def parse(text: str) -> int:
        value = _int(text)
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {value}")
        return value

    parse.__name__ = allowed  # argparse names the type in its messages
    return parse


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer flag that must be >= minimum (and <= maximum when given)."""
    return int_in(minimum, maximum)


def float_in(low: float, high: float, *, low_open: bool = False,
             high_open: bool = False) -> Callable[[str], float]:
    """A finite number flag in the interval low..high; each end may be open (excluded)."""
    allowed = (f"a number in {'(' if low_open else '['}{low:g}, {high:g}"
               f"{')' if high_open else ']'}")

    def parse(text: str) -> float:
        value = _float(text)
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (above and below):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
        return value

    parse.__name__ = allowed
    return parse


def positive_float(text: str) -> float:
    """A positive number flag of a sane magnitude, 1e-9 to 1e12: no quantity of innet is
    outside that range, and dividing by a smaller one could overflow to infinity."""
    return _POSITIVE(text)


_POSITIVE = float_in(1e-9, 1e12)

# Flags many commands share, with one meaning and one set of bounds everywhere.
SEED = int_in(0, 2**63 - 1)  # NumPy's generators refuse negative seeds
K = int_in(0, 2**31 - 1)  # a budget beyond the switches is allowed: it means "no limit"
PROCESSES = int_in(1, 256)  # worker processes: more than this only thrashes a machine


def nonempty_text(text: str) -> str:
    """A name-like flag that must not be empty or blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a non-empty value")
    return text


def probability(text: str) -> float:
    """A share in [0, 1): 1 would drop everything, which no experiment means."""
    return _PROBABILITY(text)


_PROBABILITY = float_in(0.0, 1.0, high_open=True)


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:8080`); port 0 takes a free one."""
    host, sep, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    number = int_in(0, 65535)(port)
    return host, number
