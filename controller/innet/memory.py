"""How much memory a new allocation can get here, and how to print an amount of it.

Below both `innet.errors` (which refuses to read a file whose parse would not fit) and
`innet.limits` (which refuses work that would not fit), so that neither imports the other.
"""

from __future__ import annotations

import os

GIB = 1 << 30


def available_memory() -> int:
    """Bytes the kernel says a new allocation can get without swapping (MemAvailable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 8 * GIB


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.3g} GiB"
