"""The one BMv2 launcher: its command line, and stop on a process that is there or gone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from innet.bmv2 import launcher
from innet.bmv2.launcher import BMv2Options


def test_command_line_without_a_program() -> None:
    opts = BMv2Options(3, 9093, "127.0.0.1:50054", Path("/run/logs/s3"),
                       interfaces=((2, "s3-eth2"), (1, "s3-eth1")))
    assert opts.command_line() == [
        "simple_switch_grpc", "--device-id", "3", "--thrift-port", "9093", "-L", "off",
        "--log-file", "/run/logs/s3", "-i", "1@s3-eth1", "-i", "2@s3-eth2", "--no-p4", "--",
        "--grpc-server-addr", "127.0.0.1:50054"]


def test_command_line_with_a_program_and_pcaps() -> None:
    opts = BMv2Options(0, 9090, "127.0.0.1:50051", Path("s1"), "info", (), "/run/pcap",
                       "p4src/innet.json")
    args = opts.command_line()
    assert args[args.index("-L") + 1] == "info"
    assert args[args.index("--pcap") + 1] == "/run/pcap"
    assert "--no-p4" not in args
    assert args[-4:] == ["p4src/innet.json", "--", "--grpc-server-addr", "127.0.0.1:50051"]


def test_stop_ends_a_running_process_and_ignores_a_gone_one() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    launcher.stop(proc)
    assert proc.returncode is not None
    launcher.stop(proc)  # already gone: nothing to do
    launcher.stop(None)
