"""Where local BMv2 switches listen, every switch's address, and waiting for one to come up.

The BMv2 layer owns this convention (the i-th local switch of a topology, in file order,
serves gRPC on 127.0.0.1:50051+i and thrift on 9090+i) so that `deploy`, `status`, the
long-running controller (all handed the addresses by `switch_addresses`) and whatever starts
the switches (the Mininet harness, the BMv2 test helpers) agree on it; the P4Runtime layer
below only gets addresses and knows no convention.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from innet.p4rt.client import ClientTls, SwitchAddress
from innet.topology import Topology

GRPC_BASE = 50051
THRIFT_BASE = 9090
# Linux's ip_local_reserved_ports: ports the kernel never picks as the source port of an
# outgoing connection (it still binds them when asked to)
RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
# free_port() picks here, below Linux's ephemeral range (32768-60999 by default)
FREE_PORTS = range(20000, 30000)

log = logging.getLogger(__name__)
_handed_out: set[int] = set()


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
    """Poll a local TCP port until it accepts, the process dies, or the time is up.

    A probe whose kernel-picked source port is the port itself connects to itself (TCP's
    simultaneous open) while nothing listens yet, and then holds the port the switch is about
    to bind: such a probe does not count, and the ports switches listen on are reserved
    (`reserve_ports`) so that the kernel never picks them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname()[1] != port:
                return True
        time.sleep(0.05)
    return False


def _port_set(text: str) -> set[int]:
    """The ports of a reserved-ports list such as "9090,50051-50066"."""
    out: set[int] = set()
    for part in text.replace("\n", "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdecimal():
            out.update(range(int(lo), int(hi if hi.isdecimal() else lo) + 1))
    return out


def reserve_ports(ports: Iterable[int], path: Path = RESERVED_PORTS) -> bool:
    """Keep the kernel from handing `ports` to outgoing connections as their source port.

    Switches listen on fixed ports (50051 + i) inside Linux's ephemeral range: a controller's
    or a probe's connection that happens to get one as its source port makes the switch's
    bind fail ("Address already in use"), by chance, more often on a busy machine where
    switches take longer to start. Needs root (as the networks do); True when the ports are
    reserved, False (with a warning) when the list could not be written."""
    want = set(ports)
    try:
        have = _port_set(path.read_text())
        if want <= have:
            return True
        merged = sorted(have | want)
        path.write_text(",".join(map(str, merged)) + "\n")
        return True
    except OSError as exc:
        log.warning("could not reserve ports %s in %s (%s): a connection may take one "
                    "before its switch binds it", sorted(want)[:3], path, exc)
        return False


def free_port() -> int:
    """A TCP port nothing listens on right now, below the ephemeral range (so that no
    outgoing connection takes it meanwhile) and not handed out before by this process."""
    rng = random.Random()
    for _ in range(200):
        port = rng.choice(FREE_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free TCP port in {FREE_PORTS.start}..{FREE_PORTS.stop - 1}")


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def port_holders(port: int, proc: Path = Path("/proc")) -> list[str]:
    """Every TCP socket of this network namespace whose local port is `port`: its state, its
    peer's port and the process that owns it (or none: a socket the kernel keeps after its
    process closed it). What a switch's "Address already in use" needs to be traced to."""
    sockets: dict[str, str] = {}
    for table in ("net/tcp", "net/tcp6"):
        try:
            rows = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and int(f[1].rsplit(":", 1)[1], 16) == port:
                peer = int(f[2].rsplit(":", 1)[1], 16)
                sockets[f[9]] = f"{TCP_STATES.get(f[3], f[3])} (peer port {peer})"
    owners: dict[str, str] = {}
    wanted = {f"socket:[{inode}]": inode for inode in sockets if inode != "0"}
    for pid in (p for p in os.listdir(proc) if p.isdecimal()) if wanted else ():
        try:
            for fd in os.listdir(proc / pid / "fd"):
                inode = wanted.get(os.readlink(proc / pid / "fd" / fd))
                if inode is not None:
                    comm = (proc / pid / "comm").read_text().strip()
                    owners[inode] = f"pid {pid} ({comm})"
        except OSError:  # gone, or not ours to read
            continue
    return [f"{what}, {owners.get(inode, 'no process')}" for inode, what in sockets.items()]


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a switch's log, for an error message about it."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


# ---------------------------------------------------------------------------------------------
# Where switches listen


def switch_addresses(topology: Topology, tls: ClientTls | None = None
                     ) -> dict[str, SwitchAddress]:
    """Every switch's address, in the topology's order. Remote switches: their grpc,
    device_id and thrift_port fields. Local (BMv2 on this machine): the convention of
    this module, the i-th local switch in file order on 127.0.0.1:50051+i with
    thrift port 9090+i, which the Mininet harness follows too; with `tls` (the certificates
    of the network that started them) reached over TLS."""
    local = local_switch_ports(topology)
    out: dict[str, SwitchAddress] = {}
    for name, sw in topology.switches.items():
        if sw.grpc is not None:
            host = sw.grpc.rsplit(":", 1)[0]
            out[name] = SwitchAddress(name, sw.grpc, sw.device_id, sw.thrift_port, host)
        else:
            p = local[name]
            out[name] = SwitchAddress(name, p.grpc_address, p.device_id, p.thrift_port,
                                      tls=tls)
    return out
