"""A running Mininet network built from a topology file, torn down whatever happens.

`running_network` is the only way in: a context manager that starts hosts and switches
(BMv2 `simple_switch_grpc` processes, or Linux bridges for tests that need no P4), prepares
the hosts the way measurements need (checksum and segmentation offloads off, IPv6 off, static
ARP for every other host, since our switches route on IPv4 and answer no ARP), and on the way
out, after success, an exception, Ctrl-C or SIGTERM, stops everything it made and checks that
no switch process, veth or bridge of its own is left. The description of the network stays in
`innet.topology`; this module is the running side.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from innet.bmv2 import launcher
from innet.bmv2.launcher import BMv2Options, ServerTls
from innet.bmv2.local import (  # the convention lives with the BMv2 layer
    SwitchPorts,
    local_switch_ports,
    log_tail,
    port_holders,
    reserve_ports,
    wait_for_port,
)
from innet.errors import InputError
from innet.topology import Topology

log = logging.getLogger("innet.emulation")


class EmulationError(RuntimeError):
    """The emulated network could not be brought up (the message says which part and why)."""


@dataclass
class RunningNetwork:
    """What a caller gets inside `running_network`: the Mininet object and its switches."""

    topology: Topology
    net: Any
    run_dir: Path
    ports: dict[str, SwitchPorts] = field(default_factory=dict)

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def switch(self, name: str) -> Any:
        return self.net.get(name)


def require_mininet() -> str | None:
    """Why Mininet cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "Mininet needs root"
    for tool in ("mnexec", "ip", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (./setup.sh installs Debian's mininet, iproute2, " \
                   "ethtool)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return ("the mininet Python package is missing (pip install -e '.[emulation]', or "
                "./setup.sh)")
    return mnexec_namespace_problem()


def mnexec_namespace_problem() -> str | None:
    """Why `mnexec -n` cannot make a network namespace here, or None when it can.

    Mininet starts every host shell with `mnexec -cdn`; when that fails (in a chroot whose /
    is not a mount point, say: "remount: Invalid argument") the shell dies and Mininet waits
    for its prompt forever. Asking first turns that hang into one line."""
    try:
        proc = subprocess.run(["mnexec", "-n", "true"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mnexec -n could not run: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
        return f"mnexec cannot make a network namespace here ({why})"
    return None


def require_bmv2() -> str | None:
    """Why BMv2 switches cannot run here, or None when they can."""
    missing = [b for b in ("simple_switch_grpc", "simple_switch_CLI") if shutil.which(b) is None]
    if missing:
        return (f"{', '.join(missing)} not on PATH: install the P4 toolchain with "
                "./setup.sh as root, which finds the bundle beside the clone or takes "
                "INNET_P4_BUNDLE=PATH (./setup.sh --help, docs/guide.md 'The P4 toolchain'); "
                "innet doctor lists what else is missing")
    return None


def _bmv2_switch_class() -> type:
    from mininet.node import Switch

    class BMv2Switch(Switch):  # type: ignore[misc]
        """simple_switch_grpc as a Mininet switch: its own ports, logs and optional pcaps."""

        def __init__(self, name: str, *, json_path: str, ports: SwitchPorts, log_dir: str,
                     pcap_dir: str | None = None, log_level: str = "off",
                     tls: ServerTls | None = None, **kwargs: Any) -> None:
            Switch.__init__(self, name, **kwargs)
            self.json_path = json_path
            self.addresses = ports
            self.log_dir = Path(log_dir)
            self.pcap_dir = pcap_dir
            self.log_level = log_level
            self.tls = tls
            self.proc: subprocess.Popen[bytes] | None = None

        def start(self, _controllers: Any) -> None:
            options = BMv2Options(
                self.addresses.device_id, self.addresses.thrift_port,
                self.addresses.grpc_address, self.log_dir / f"{self.name}", self.log_level,
                tuple((port, intf.name) for port, intf in self.intfs.items()
                      if intf.name != "lo"),
                self.pcap_dir, self.json_path, self.tls)
            log.info("[%s] %s", self.name, " ".join(options.command_line()))
            self.proc = launcher.launch(options, self.log_dir / f"{self.name}.out")
            if not wait_for_port(self.addresses.grpc_port, 15.0, self.proc):
                tail = log_tail(self.log_dir / f"{self.name}.out")
                held = port_holders(self.addresses.grpc_port)
                where = ("; the port is held by: " + "; ".join(held)) if held else ""
                raise EmulationError(f"switch {self.name!r} did not open gRPC on "
                                     f"{self.addresses.grpc_address}{where}; its log "
                                     f"ends:\n{tail}")

        def stop(self, deleteIntfs: bool = True) -> None:  # Mininet's signature
            launcher.stop(self.proc)
            Switch.stop(self, deleteIntfs)

    return BMv2Switch


def _build(topology: Topology, switch_kind: str, run_dir: Path, json_path: str | None,
           pcap: bool, ports: dict[str, SwitchPorts], log_level: str,
           tls: Mapping[str, ServerTls]) -> Any:
    from mininet.net import Mininet
    from mininet.topo import Topo

    class FileTopo(Topo):  # type: ignore[misc]
        def build(self) -> None:
            for h in topology.hosts.values():
                self.addHost(h.name, ip=f"{h.ip}/{topology.prefix.split('/')[1]}", mac=h.mac)
            for name, sw in topology.switches.items():
                if sw.remote:
                    continue
                if switch_kind == "bmv2":
                    self.addSwitch(name, json_path=json_path or "", ports=ports[name],
                                   log_dir=str(run_dir / "logs"),
                                   pcap_dir=str(run_dir / "pcap") if pcap else None,
                                   log_level=log_level, tls=tls.get(name))
                else:
                    self.addSwitch(name)
            for link in topology.links:
                a, b = link.a, link.b
                if any(topology.switches.get(e.node) and topology.switches[e.node].remote
                       for e in (a, b)):
                    continue  # the far end is not ours to emulate
                opts: dict[str, Any] = {}
                if a.port is not None:
                    opts["port1"] = a.port
                if b.port is not None:
                    opts["port2"] = b.port
                self.addLink(a.node, b.node, **opts)

    if switch_kind == "bmv2":
        switch_cls = _bmv2_switch_class()
    elif switch_kind == "bridge":
        from mininet.nodelib import LinuxBridge

        switch_cls = LinuxBridge
    else:
        raise InputError(f"unknown switch kind {switch_kind!r}: use bmv2 or bridge")
    return Mininet(topo=FileTopo(), switch=switch_cls, controller=None, autoSetMacs=False,
                   autoStaticArp=False, build=False, waitConnected=False)


def _prepare_hosts(topology: Topology, net: Any) -> None:
    """Offloads and IPv6 off, static ARP for every other host."""
    for h in topology.hosts.values():
        node = net.get(h.name)
        intf = node.defaultIntf()
        node.cmd(f"ethtool -K {intf} rx off tx off sg off tso off gso off gro off "
                 "> /dev/null 2>&1")
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                 "net.ipv6.conf.default.disable_ipv6=1")
        static_arp(topology, net, h.name)


def static_arp(topology: Topology, net: Any, host: str) -> None:
    """Host `host` knows every other host's MAC for good (our switches answer no ARP). An
    interface taken down loses its neighbours, these too: a link brought back up needs them
    again (innet.emulation.control's `link` request)."""
    node = net.get(host)
    intf = node.defaultIntf()
    for other in topology.hosts.values():
        if other.name != host:
            node.cmd(f"ip neigh replace {other.ip} lladdr {other.mac} dev {intf} "
                     "nud permanent")


def _wait_for_carrier(net: Any, seconds: float = 10.0) -> None:
    """Until every switch port is up (and, on a bridge, forwarding). The kernel reports a
    veth's carrier asynchronously, up to a second after both ends are set up, and a packet sent
    before that is lost: a network handed over earlier fails its first pings or costs its first
    aggregation packets a retransmission."""
    ports = [intf.name for sw in net.switches for intf in sw.intfList() if intf.name != "lo"]

    def not_ready() -> list[str]:
        # `ip`, not /sys/class/net: sysfs shows the namespace it was mounted in, which need
        # not be this process's
        out = subprocess.run(["ip", "-j", "-d", "link", "show"], capture_output=True,
                             text=True).stdout
        ready = set()
        for link in json.loads(out or "[]"):
            port = link.get("linkinfo", {}).get("info_slave_data", {})
            if link.get("operstate") == "UP" and port.get("state", "forwarding") == "forwarding":
                ready.add(link.get("ifname"))
        return [name for name in ports if name not in ready]

    deadline = time.monotonic() + seconds
    waiting = not_ready()
    while waiting and time.monotonic() < deadline:
        time.sleep(0.02)
        waiting = not_ready()
    if waiting:
        raise EmulationError(f"switch ports without a carrier {seconds:.0f} s after the start: "
                             f"{', '.join(waiting[:8])}")


def own_leftovers(topology: Topology) -> list[str]:
    """Interfaces named after our nodes (Mininet's 'node-ethN' veths, bridges) still present."""
    names = set(topology.switches) | set(topology.hosts)
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 2:
            continue
        ifname = parts[1].strip().split("@")[0]
        base = ifname.split("-eth")[0]
        if base in names and (ifname == base or "-eth" in ifname):
            found.append(ifname)
    return found


def _stop_within(net: Any, seconds: float) -> bool:
    """Mininet's own stop, given a deadline: it reads from node shells, and a shell that died
    under it would keep it waiting for ever. True when it finished."""
    def stop() -> None:
        try:
            net.stop()
        except Exception as exc:  # keep going: the fallback removes the rest
            log.warning("mininet stop failed: %s", exc)

    worker = threading.Thread(target=stop, name="mininet-stop", daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while a teardown runs (main thread only: signals reach
    no other): a second Ctrl-C or SIGTERM raised half-way is what leaves veths, switch
    processes and jobs' agents behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _left_in_hosts(net: Any) -> set[int]:
    """Every process in the hosts' network namespaces but their Mininet shells: what was
    started there (`popen`, `h1 cmd &` at the prompt) and not stopped. Mininet's stop ends
    the shells only, and a process started beside a shell lives on in a namespace whose
    interfaces are gone."""
    own = _netns_of(os.getpid())
    shells: set[int] = {h.shell.pid for h in net.hosts if getattr(h, "shell", None)}
    namespaces = {_netns_of(pid) for pid in shells} - {None, own}
    return {pid for pid in _pids() if pid not in shells and _netns_of(pid) in namespaces}


def _cleanup(topology: Topology, net: Any | None, *, ignore_sigint: bool = True) -> list[str]:
    """Stop the network; then remove whatever it left. Returns what had to be removed.

    A second Ctrl-C or SIGTERM while this runs is ignored (`innet net down` sent while a
    failed start is being cleaned up, say): stopping half-way is what leaves veths and switch
    processes behind.
    """
    removed: list[str] = []
    with signals_ignored() if ignore_sigint else contextlib.nullcontext():
        if net is not None:
            left = _left_in_hosts(net)
            if left:
                _kill_all(left)
                removed.append(f"{len(left)} processes left running in the hosts")
            if not _stop_within(net, 20.0):
                removed.append("mininet stop (timed out after 20 s)")
            for sw in net.switches:
                proc = getattr(sw, "proc", None)
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(5)
                    removed.append(f"process of {sw.name}")
            for node in (*net.hosts, *net.switches):
                shell = getattr(node, "shell", None)
                if shell is not None and shell.poll() is None:
                    with contextlib.suppress(OSError):
                        os.killpg(shell.pid, signal.SIGKILL)
                    removed.append(f"shell of {node.name}")
        for ifname in own_leftovers(topology):
            subprocess.run(["ip", "link", "del", ifname], capture_output=True)
            removed.append(ifname)
    return removed


@contextlib.contextmanager
def running_network(
    topology: Topology,
    run_dir: Path,
    *,
    switch_kind: str = "bmv2",
    json_path: str | None = None,
    pcap: bool = False,
    log_level: str = "off",
    grpc_base: int = 50051,
    thrift_base: int = 9090,
    tls: Mapping[str, ServerTls] | None = None,
) -> Iterator[RunningNetwork]:
    """Start the topology's network; always stop it, even on error, Ctrl-C or SIGTERM.
    `tls`: per switch, its TLS P4Runtime server's files (switches not in it: plain)."""
    why = require_mininet()
    if why:
        raise EmulationError(f"cannot start Mininet: {why}")
    if switch_kind == "bmv2":
        why = require_bmv2()
        if why:
            raise EmulationError(f"cannot start BMv2 switches: {why}")
    leftovers = own_leftovers(topology)
    if leftovers:
        raise EmulationError(
            f"interfaces of an earlier run are still there ({', '.join(leftovers[:5])}); "
            "remove them with `ip link del NAME` (or `mn -c`, which cleans every Mininet "
            "on the machine)")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    if pcap:
        (run_dir / "pcap").mkdir(parents=True, exist_ok=True)
    ports = local_switch_ports(topology, grpc_base, thrift_base)
    reserve_ports(p.grpc_port for p in ports.values())  # before anything connects anywhere
    from mininet.log import setLogLevel

    setLogLevel("warning")

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGTERM and SIGINT both unwind through the cleanup below, whatever handler a library
    # (Mininet, gRPC) may have installed for SIGINT
    main = threading.current_thread() is threading.main_thread()  # signals: main thread only
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    previous_int = signal.signal(signal.SIGINT, on_term) if main else None
    net = None
    try:
        net = _build(topology, switch_kind, run_dir, json_path, pcap, ports, log_level, tls or {})
        net.build()
        net.start()
        _prepare_hosts(topology, net)
        _wait_for_carrier(net)
        yield RunningNetwork(topology, net, run_dir, ports if switch_kind == "bmv2" else {})
    finally:
        if main:
            signal.signal(signal.SIGINT, previous_int)
        removed = _cleanup(topology, net, ignore_sigint=main)
        if main:
            signal.signal(signal.SIGTERM, previous)
        if removed:
            log.warning("removed what the network left behind: %s", ", ".join(removed))


# ------------------------------------------------------------- what a dead `net up` left


@dataclass(frozen=True)
class Footprint:
    """What a running network is made of outside this process, by the names and ids another
    process can find them by: the switch processes, every node's Mininet shell (a host's shell
    holds the host's network namespace, `namespaces` says which: "net:[inode]"), and the
    interfaces in the root namespace."""

    switch_pids: tuple[int, ...] = ()
    shells: tuple[tuple[str, int], ...] = ()  # (node name, shell pid)
    namespaces: tuple[tuple[str, str], ...] = ()  # (host name, its netns link)
    interfaces: tuple[str, ...] = ()


def footprint(network: RunningNetwork) -> Footprint:
    """The footprint of a network that is up (read once it is)."""
    net = network.net
    switch_pids = tuple(sw.proc.pid for sw in net.switches
                        if getattr(sw, "proc", None) is not None)
    shells = tuple((node.name, int(node.pid)) for node in (*net.hosts, *net.switches)
                   if getattr(node, "pid", None))
    hosts = {h.name for h in net.hosts}
    namespaces = tuple((name, ns) for name, pid in shells if name in hosts
                       for ns in [_netns_of(pid)] if ns is not None)
    interfaces = tuple(intf.name for sw in net.switches for intf in sw.intfList()
                       if intf.name != "lo")
    return Footprint(switch_pids, shells, namespaces, interfaces)


@dataclass(frozen=True)
class Removed:
    """What `remove_orphans` found and removed."""

    switches: int = 0
    namespaces: int = 0
    interfaces: int = 0
    processes: int = 0  # other processes: shells, and commands left in the hosts' namespaces

    def __bool__(self) -> bool:
        return bool(self.switches or self.namespaces or self.interfaces or self.processes)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _netns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdecimal()]


def is_switch_of(cmdline: list[str], run_dir: str) -> bool:
    """Whether a command line is a simple_switch_grpc that logs into `run_dir` (the launcher
    gives every switch of a network `--log-file RUN/logs/NAME`): a recorded pid that was
    reused by another process, or another network's switch, is never taken for ours."""
    return (bool(cmdline) and Path(cmdline[0]).name == "simple_switch_grpc"
            and any(a.startswith(f"{run_dir.rstrip('/')}/logs/") for a in cmdline))


def is_shell_of(cmdline: list[str], node: str) -> bool:
    """Whether a command line is Mininet's shell of `node` (`bash ... -is mininet:NODE`)."""
    return bool(cmdline) and cmdline[-1] == f"mininet:{node}"


def _netns_holds(pid: int, host: str) -> bool:
    """Whether the network namespace of `pid` has an interface of `host` (h1-eth0): a
    namespace whose inode number was freed and given to another is never taken for ours."""
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "ip", "-o", "link", "show"],
                         capture_output=True, text=True).stdout
    return any(line.split(":", 2)[1].strip().split("@")[0].startswith(f"{host}-eth")
               for line in out.splitlines() if line.count(":") >= 2)


def _kill_all(pids: set[int], seconds: float = 5.0) -> None:
    """SIGKILL each, then wait until each is gone (they are not our children: init reaps)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + seconds
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1]
    except OSError:
        return False
    return not state.startswith("Z")


def _orphan_namespaces(namespaces: tuple[tuple[str, str], ...]) -> tuple[int, set[int]]:
    """The hosts' namespaces still alive (checked to be ours) and every process in them."""
    own = _netns_of(os.getpid())
    wanted = {ns: host for host, ns in namespaces if ns != own}
    members: dict[str, set[int]] = {}
    for pid in _pids():
        ns = _netns_of(pid)
        if ns in wanted:
            members.setdefault(ns, set()).add(pid)
    found = {ns: pids for ns, pids in members.items()
             if _netns_holds(min(pids), wanted[ns])}
    return len(found), set().union(*found.values()) if found else set()


def remove_orphans(run_dir: str, fp: Footprint, topology: Topology | None = None) -> Removed:
    """Remove what a network whose process died left: its switch processes (recorded, or
    found by their log folder in `run_dir`), the processes in its hosts' namespaces (which
    ends the namespaces), its nodes' shells and its interfaces (recorded, and those named
    after `topology`'s nodes). Only what is checked to be this network's is touched."""
    switches = {p for p in _pids() if is_switch_of(_cmdline(p), run_dir)}
    switches |= {p for p in fp.switch_pids if is_switch_of(_cmdline(p), run_dir)}
    namespaces, in_namespaces = _orphan_namespaces(fp.namespaces)
    shells = {pid for name, pid in fp.shells if is_shell_of(_cmdline(pid), name)}
    others = (in_namespaces | shells) - switches
    # the interfaces are counted before the kill: ending a host's namespace takes its veth's
    # root side with it, at a moment of the kernel's choosing (its netns cleanup work), and
    # counted after, the same network would be reported with a varying number removed
    present = set(_root_interfaces())
    names = [n for n in dict.fromkeys(fp.interfaces) if n in present]
    if topology is not None:
        names += [n for n in own_leftovers(topology) if n not in names]
    _kill_all(switches | others)
    for name in names:  # a veth's peer goes with it: the second `del` of a pair just fails
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    gone = set(names) - set(_root_interfaces())
    return Removed(len(switches), namespaces, len(gone), len(others))


def _root_interfaces() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines()
            if line.count(":") >= 2]
