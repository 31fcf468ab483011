"""How much memory a new allocation can get here, how to print an amount of it, and how a
long-lived process hands back what it freed.

Below both `innet.errors` (which refuses to read a file whose parse would not fit) and
`innet.limits` (which refuses work that would not fit), so that neither imports the other.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable

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


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc; musl and others have none
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Give the kernel back the pages of the C heap that hold nothing (glibc's malloc_trim);
    False where the C library has no such call.

    A process up for hours that builds and drops many small objects (a `net up` admitting,
    monitoring and releasing jobs) keeps the freed pages of its heap: scattered live objects
    pin them, so its resident memory grows with the jobs it has seen while its live objects
    do not (the soak measured the first; a census of objects, the second). Trimming after
    each job costs a few milliseconds and makes the resident size follow what is live."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
