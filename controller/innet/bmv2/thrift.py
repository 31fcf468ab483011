"""BMv2 queue settings through its runtime CLI (thrift): P4Runtime has no call for them.

Without a queue rate BMv2 drains its egress queues as fast as it can, so enq_qdepth stays near
zero and nothing is ever marked; `set_queue_rate` (packets per second) puts the bottleneck
inside the switch where the P4 program sees it. `set_queue_depth` bounds the queue (packets).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from innet.errors import InputError
from innet.p4rt.client import SwitchAddress, SwitchError

CLI = "simple_switch_CLI"


@dataclass(frozen=True, slots=True)
class QueueSetting:
    """Egress queue of `port` (None: every port) drains `rate_pps` and holds `depth` packets."""

    rate_pps: int | None = None
    depth: int | None = None
    port: int | None = None

    def commands(self) -> list[str]:
        where = "" if self.port is None else f" {self.port}"
        out = []
        if self.rate_pps is not None:
            if self.rate_pps <= 0:
                raise InputError(f"queue rate must be > 0 packets/s, got {self.rate_pps}")
            out.append(f"set_queue_rate {self.rate_pps}{where}")
        if self.depth is not None:
            if self.depth <= 0:
                raise InputError(f"queue depth must be > 0 packets, got {self.depth}")
            out.append(f"set_queue_depth {self.depth}{where}")
        return out



def queue_settings(rate_pps: int | None, depth: int | None) -> tuple[QueueSetting, ...]:
    """Every port's queue set to `rate_pps` and `depth` (None: left as it is), checked now: a
    bad value is an input error before any switch is contacted, not on each of them later."""
    if rate_pps is None and depth is None:
        return ()
    setting = QueueSetting(rate_pps or None, depth or None)
    setting.commands()
    return (setting,)

def run_cli(address: SwitchAddress, commands: Sequence[str], *, timeout: float = 30.0) -> str:
    """Feed commands to simple_switch_CLI; any error it prints becomes a SwitchError."""
    if address.thrift_port is None:
        raise SwitchError(f"{address}: no thrift port known (give thrift_port in the topology)")
    exe = shutil.which(CLI)
    if exe is None:
        raise SwitchError(f"{address}: {CLI} is not on PATH (it comes with BMv2)")
    try:
        proc = subprocess.run(
            [exe, "--thrift-ip", address.thrift_host, "--thrift-port", str(address.thrift_port)],
            input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SwitchError(f"{address}: {CLI} did not answer within {timeout:g} s") from None
    text = proc.stdout + proc.stderr
    bad = [line.strip() for line in text.splitlines()
           if "Error" in line or "Invalid" in line or "Could not connect" in line
           or "Traceback" in line]
    if proc.returncode != 0 or bad:
        tail = text.strip().splitlines()
        detail = bad[0] if bad else (tail[-1] if tail else f"exit status {proc.returncode}")
        raise SwitchError(f"{address}: thrift port {address.thrift_port}: {detail}")
    return text


def queue_commands(settings: Sequence[QueueSetting]) -> tuple[str, ...]:
    """The CLI commands of `settings`, in order: what the controller sends as a switch's set-up
    (innet.p4rt.controller.SwitchTarget.setup)."""
    return tuple(c for s in settings for c in s.commands())


def set_queues(address: SwitchAddress, settings: Sequence[QueueSetting]) -> None:
    cmds = queue_commands(settings)
    if cmds:
        run_cli(address, cmds)
