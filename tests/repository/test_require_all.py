"""With INNET_REQUIRE_P4=1 (CI), a test that would skip fails instead, naming the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SKIPPING = '''
import pytest

def test_needs_bmv2():
    pytest.skip("simple_switch_grpc not on PATH")

@pytest.mark.skipif(True, reason="p4c-bm2-ss missing")
def test_needs_p4c():
    pass

def test_plain():
    assert True
'''


def _run(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(SKIPPING)
    env = {k: v for k, v in os.environ.items() if k != "INNET_REQUIRE_P4"}
    if require is not None:
        env["INNET_REQUIRE_P4"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rA", str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


def test_skips_fail_when_required(tmp_path: Path) -> None:
    proc = _run(tmp_path, "1")
    assert proc.returncode == 1, proc.stdout
    summary = proc.stdout.strip().splitlines()[-1]
    # a skip in the call phase becomes a failure, a skipif (setup phase) an error: both fail
    assert "1 failed, 1 passed, 1 error" in summary, summary
    assert "skipped" not in summary
    assert "simple_switch_grpc not on PATH" in proc.stdout
    assert "p4c-bm2-ss missing" in proc.stdout


def test_skips_stay_skips_on_a_users_machine(tmp_path: Path) -> None:
    for require in (None, "0"):
        proc = _run(tmp_path, require)
        assert proc.returncode == 0, proc.stdout
        assert "1 passed, 2 skipped" in proc.stdout
