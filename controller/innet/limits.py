"""What this machine can give a command: refuse work that would not fit, before starting it.

A command whose input would need more memory than the machine has left is refused up front
with its estimate (one line, exit 2), instead of growing until the kernel kills it; where an
estimate may be pessimistic, a flag (`--force`) runs it anyway.
"""

from __future__ import annotations

from innet.errors import InputError
from innet.memory import available_memory, gib


def check_memory(what: str, estimate: float, *, force: bool = False,
                 flag: str | None = "--force") -> None:
    """Refuse `what` when its estimated bytes exceed the available memory (unless forced)."""
    if force:
        return
    avail = available_memory()
    if estimate > avail:
        insist = f"; {flag} runs it anyway" if flag else ""
        raise InputError(f"{what} would need about {gib(estimate)} of memory, more than the "
                         f"{gib(avail)} available here{insist}")


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def check_time(what: str, estimate_s: float, limit_s: float, *, force: bool = False,
               flag: str = "--force") -> None:
    """Refuse `what` when its estimated run time exceeds `limit_s` (unless forced)."""
    if not force and estimate_s > limit_s:
        raise InputError(f"{what} would take about {duration(estimate_s)} (more than "
                         f"{duration(limit_s)}); {flag} runs it anyway")
