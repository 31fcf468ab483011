"""`innet demo` runs the model-level parts anywhere and says what it skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.cli import main


def test_demo_without_bmv2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A clone without the toolchain: the quick demo exits 0 and says what it skipped, why."""
    import shutil

    which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name.startswith("simple_switch")
                        else which(name, *a, **k))
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("simple_switch_grpc, simple_switch_CLI not on PATH" in out
            or "Mininet needs root" in out), out
    assert "soar" in out and "all-red" in out
    assert (tmp_path / "soar-fig6" / "fig6.png").exists()
    assert (tmp_path / "cassini-vgg19-pair").is_dir()
    assert list((tmp_path / "cassini-13-jobs").glob("*.png"))
    assert "skipped: the BMv2 experiments" in out
    assert "Vagrantfile" in out and "innet doctor" in out
