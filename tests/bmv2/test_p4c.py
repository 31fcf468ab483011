"""The committed BMv2 JSON and P4Info are what p4c makes of p4src/ today (when p4c is here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
P4C = "p4c-bm2-ss"


def compile_program(out_dir: Path) -> tuple[Path, Path]:
    """The command of p4src/innet.p4's header, run from the repository root (the JSON records
    source paths, so the working directory matters)."""
    json_out, info_out = out_dir / "innet.json", out_dir / "innet.p4info.txtpb"
    proc = subprocess.run([P4C, "--std", "p4-16", "--arch", "v1model", "-o", str(json_out),
                           "--p4runtime-files", str(info_out), "p4src/innet.p4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json_out, info_out


@pytest.mark.dataplane
@pytest.mark.skipif(shutil.which(P4C) is None, reason=f"{P4C} (p4c) is not on PATH")
def test_committed_outputs_are_not_stale(tmp_path: Path) -> None:
    json_out, info_out = compile_program(tmp_path)
    stale = [name for name, fresh in (("innet.json", json_out), ("innet.p4info.txtpb", info_out))
             if (ROOT / "p4src" / name).read_bytes() != fresh.read_bytes()]
    assert not stale, (f"p4src/{' and p4src/'.join(stale)} differ from what {P4C} makes of "
                       "p4src/innet.p4: recompile with the command in its header and commit")
