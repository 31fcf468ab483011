"""A user's file is read under a bound that is a share of the machine's memory; reading it
must cost what the file holds, not what the bound allows."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from innet import errors
from innet.errors import InputError, read_at_most, read_bytes


def test_a_bounded_read_asks_for_no_more_than_the_file_holds(tmp_path: Path) -> None:
    """Under an address-space limit 512 MB above what the interpreter holds, a 1 kB file
    read with an 8 GiB bound comes back whole (a reader that allocates its bound first
    fails with MemoryError)."""
    small = tmp_path / "small.json"
    small.write_bytes(b"{}" * 512)
    script = textwrap.dedent(f"""
        import resource
        from innet.errors import read_bytes
        with open("/proc/self/status") as f:
            vm = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), vm + (512 << 20)))
        print(len(read_bytes({str(small)!r}, 8 << 30)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1024"


@pytest.mark.parametrize("size", [0, 1, 4, 5, 9, 10, 11])
def test_a_stream_is_read_whole_up_to_the_bound_and_one_byte_past_it(
        size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "READ_CHUNK", 3)  # several chunks, a boundary inside each
    data = bytes(range(size))
    got = read_at_most(io.BytesIO(data), 9)
    assert got == data[:10]  # all of it, or the bound and one more: enough to refuse


def test_a_file_past_the_bound_is_refused_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 100)
    with pytest.raises(InputError, match=r"big\.json"):
        read_bytes(big, 50)
