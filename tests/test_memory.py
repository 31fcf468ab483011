"""A long-lived process gives back what it freed (`release_freed_memory`), measured on a
fresh interpreter whose heap the test fragments on purpose."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from innet.memory import release_freed_memory

ROOT = Path(__file__).resolve().parents[1]

# 200,000 blocks of 1 kB from the C heap (above pymalloc's 512-byte limit), one in a hundred
# kept: the freed pages lie between live blocks, so free() alone cannot give them back
SCRIPT = textwrap.dedent("""
    import json, sys
    from innet.memory import release_freed_memory

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    start = rss_mb()
    blocks = [bytes(1000) for _ in range(200_000)]
    kept = blocks[::100]
    del blocks
    freed = rss_mb()
    trimmed = release_freed_memory()
    print(json.dumps({"start": start, "freed": freed, "after": rss_mb(),
                      "trimmed": trimmed, "kept": len(kept)}))
""")


@pytest.mark.skipif(not release_freed_memory(), reason="this C library has no malloc_trim")
def test_freed_pages_pinned_by_live_blocks_go_back_to_the_kernel() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    got = json.loads(done.stdout)
    assert got["trimmed"] and got["kept"] == 2000
    assert got["freed"] - got["start"] > 150, got  # free() kept the ~200 MB resident
    # the trim gave it back: the 2,000 live blocks pin at most 2,000 pages (8 MB)
    assert got["after"] - got["start"] < 20, got
