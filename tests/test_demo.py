"""`innet demo` runs the model-level parts anywhere and says what it skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.cli import main


def test_demo_without_emulation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--quick", "--skip-emulation", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "soar" in out and "all-red" in out
    assert (tmp_path / "soar-fig6" / "fig6.png").exists()
    assert (tmp_path / "cassini-vgg19-pair").is_dir()
    assert list((tmp_path / "cassini-13-jobs").glob("*.png"))
    assert "skipped: the BMv2 experiments" in out
    assert "Vagrantfile" in out and "innet doctor" in out
