"""Where local BMv2 switches listen, and waiting for one to come up.

The P4Runtime layer owns this convention (the i-th local switch of a topology, in file order,
serves gRPC on 127.0.0.1:50051+i and thrift on 9090+i) so that `deploy`, `status`, the
long-running controller and whatever starts the switches (the Mininet harness, the BMv2 test
helpers) agree on it without the controller importing the emulator.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from innet.topology import Topology

GRPC_BASE = 50051
THRIFT_BASE = 9090


@dataclass(frozen=True)
class SwitchPorts:
    """Where the controller reaches a local BMv2 switch."""

    grpc_port: int
    thrift_port: int
    device_id: int = 0

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


def local_switch_ports(topology: Topology, grpc_base: int = GRPC_BASE,
                       thrift_base: int = THRIFT_BASE) -> dict[str, SwitchPorts]:
    """The i-th local switch (file order) gets gRPC grpc_base + i and thrift thrift_base + i.
    Remote switches (those with a grpc address) are not counted."""
    out: dict[str, SwitchPorts] = {}
    for i, sw in enumerate(s for s in topology.switches.values() if not s.remote):
        out[sw.name] = SwitchPorts(grpc_base + i, thrift_base + i, sw.device_id)
    return out


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Poll a local TCP port until it accepts, the process dies, or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a switch's log, for an error message about it."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"
