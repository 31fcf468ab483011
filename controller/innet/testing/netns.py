"""A network namespace of the test run's own, so that no other network on the machine touches it.

Mininet names its interfaces after the nodes (`s1-eth2`), and BMv2 listens on fixed gRPC ports,
so two runs on one kernel collide: a run killed half-way (SIGKILL, a machine's job limit) leaves
veths that the next run rightly refuses to start over, and a second run at the same time takes
the first one's ports. A test run that moves itself into a fresh network namespace first sees
none of that, and leaves none of it: when its last process ends, the kernel frees every veth,
bridge and socket it made, however it ended.

Only the calling thread moves (namespaces belong to threads), so `isolate` is called before the
run starts any thread; everything started after it, threads and processes, inherits the new
namespace. `outside_network` gives back the machine's own namespace to the few commands that
need the real network (pip fetching a build backend).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)  # unshare and setns, for this module and bmv2


@dataclass(frozen=True)
class Isolation:
    """Where the run went: the file descriptor of the namespace it left, kept open."""

    outside_fd: int


_current: Isolation | None = None


def isolation_problem() -> str | None:
    """Why this process cannot have a namespace of its own, or None when it can."""
    if os.geteuid() != 0:
        return "a network namespace of one's own needs root"
    if shutil.which("ip") is None:
        return "ip (iproute2) is not installed"
    return None


def isolate() -> Isolation:
    """Move the calling thread into a new network namespace with its loopback up.

    Raises OSError when the kernel refuses. Calling it again keeps the first isolation."""
    global _current
    if _current is not None:
        return _current
    outside = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if libc.unshare(CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        os.close(outside)
        raise OSError(errno, f"unshare(CLONE_NEWNET): {os.strerror(errno)}")
    proc = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise OSError(f"ip link set lo up in the new namespace: {proc.stderr.strip()}")
    _current = Isolation(outside)
    return _current


def isolated() -> bool:
    """Whether this run has moved into a namespace of its own."""
    return _current is not None


def outside_network(argv: Sequence[str]) -> list[str]:
    """`argv` run in the machine's own network namespace when this run is isolated (through
    nsenter, which util-linux ships everywhere), else `argv` unchanged."""
    if _current is None:
        return list(argv)
    return ["nsenter", f"--net=/proc/{os.getpid()}/fd/{_current.outside_fd}", *argv]
