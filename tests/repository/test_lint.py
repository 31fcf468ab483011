"""ruff, mypy and the import contracts stay clean: run them as part of the suite so CI holds
the line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_import_contracts_hold() -> None:
    """The layers and the forbidden imports of pyproject.toml's [tool.importlinter]."""
    result = subprocess.run([_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_switch_client_does_not_load_the_solver() -> None:
    code = ("import json, sys, innet.p4rt.client; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('innet.'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    loaded = set(json.loads(result.stdout))
    assert "innet.p4rt.client" in loaded
    assert not {m for m in loaded if m.startswith(("innet.soar", "innet.plan",
                                                   "innet.emulation"))}, loaded


def test_importing_the_switch_client_leaves_the_root_logger_alone() -> None:
    """p4runtime-shell's CRITICAL lines are demoted only once a session opens, not on import
    (an importer's own logging stays as it configured it)."""
    code = ("import logging, innet.p4rt.client as c; "
            "print(len(logging.getLogger().filters)); c._demote_library_logs(); "
            "c._demote_library_logs(); print(len(logging.getLogger().filters))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert result.stdout.split() == ["0", "1"]
