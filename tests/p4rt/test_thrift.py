"""Queue settings go to simple_switch_CLI as its commands; its complaints become SwitchErrors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from innet.bmv2.thrift import QueueSetting, run_cli, set_queues
from innet.errors import InputError
from innet.p4rt.client import SwitchAddress, SwitchError

ADDR = SwitchAddress("s3", "127.0.0.1:50053", 0, 9092)


def test_commands() -> None:
    assert QueueSetting(1000, 100, 2).commands() == ["set_queue_rate 1000 2",
                                                     "set_queue_depth 100 2"]
    assert QueueSetting(rate_pps=500).commands() == ["set_queue_rate 500"]
    assert QueueSetting().commands() == []
    with pytest.raises(InputError, match="rate must be > 0"):
        QueueSetting(0).commands()
    with pytest.raises(InputError, match="depth must be > 0"):
        QueueSetting(depth=-1).commands()


@pytest.fixture
def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in simple_switch_CLI that records its arguments and input, and fails on cue."""
    log = tmp_path / "calls"
    script = tmp_path / "simple_switch_CLI"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
cat >> {log}
case "$*" in *9999*) echo "Could not connect to thrift client on port 9999"; exit 1;; esac
grep -q bogus {log} && echo "Invalid queue rate"
exit 0
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return log


def test_settings_reach_the_cli(fake_cli: Path) -> None:
    set_queues(ADDR, [QueueSetting(1000, 100, 1), QueueSetting(rate_pps=20)])
    text = fake_cli.read_text()
    assert "--thrift-ip 127.0.0.1 --thrift-port 9092" in text
    assert "set_queue_rate 1000 1\nset_queue_depth 100 1\nset_queue_rate 20\n" in text
    set_queues(ADDR, [])  # nothing to say: the CLI is not even started
    assert fake_cli.read_text() == text


def test_cli_failures_name_the_switch(fake_cli: Path) -> None:
    with pytest.raises(SwitchError, match=r"switch s3 .*thrift port 9999: Could not connect"):
        run_cli(SwitchAddress("s3", "x:1", 0, 9999), ["set_queue_rate 1"])
    with pytest.raises(SwitchError, match="Invalid queue rate"):
        run_cli(ADDR, ["bogus"])
    with pytest.raises(SwitchError, match="no thrift port known"):
        run_cli(SwitchAddress("s1", "x:1"), ["set_queue_rate 1"])


def test_missing_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SwitchError, match="simple_switch_CLI is not on PATH"):
        run_cli(ADDR, ["set_queue_rate 1"])
