"""BMv2 switches and host namespaces without Mininet: for the BMv2 tests and the benchmarks.

`bmv2_switch` starts one `simple_switch_grpc` through the launcher (innet.bmv2.launcher; log
level off unless asked: logging halves its packet rate) on free or given ports and always
stops it; `host_namespace` makes a network
namespace with one veth to a switch port, IPv6 off (no stray router solicitations in the
counters), a static ARP entry per peer (our switches answer no ARP), and always deletes it.
`netns_socket` opens a plain socket inside a namespace from this process, so tests send and
receive with the same code a host would run, without a subprocess per packet.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from innet.bmv2 import launcher
from innet.bmv2.launcher import BMv2Options
from innet.bmv2.local import free_port, log_tail, wait_for_port
from innet.p4rt.client import SwitchAddress
from innet.testing.netns import CLONE_NEWNET, libc


def missing_tools(*tools: str) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def _run(*args: str) -> None:
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


@dataclass
class BMv2Switch:
    name: str
    address: SwitchAddress
    proc: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        launcher.stop(self.proc)


def start_switch(name: str, run_dir: Path, *, interfaces: Mapping[int, str] | None = None,
                 grpc_port: int | None = None, thrift_port: int | None = None,
                 device_id: int = 0, json_path: str | None = None, log_level: str = "off",
                 pcap_dir: Path | None = None, timeout: float = 20.0) -> BMv2Switch:
    """Start simple_switch_grpc (without a program unless json_path) and wait for its gRPC
    port; when it does not come, stop it and raise with the tail of its log."""
    grpc_port = grpc_port or free_port()
    thrift_port = thrift_port or free_port()
    run_dir.mkdir(parents=True, exist_ok=True)
    options = BMv2Options(device_id, thrift_port, f"127.0.0.1:{grpc_port}", run_dir / name,
                          log_level, tuple((interfaces or {}).items()),
                          str(pcap_dir) if pcap_dir is not None else None, json_path)
    out_path = run_dir / f"{name}.out"
    proc = launcher.launch(options, out_path)
    sw = BMv2Switch(name, SwitchAddress(name, f"127.0.0.1:{grpc_port}", device_id, thrift_port),
                    proc, out_path)
    if not wait_for_port(grpc_port, timeout, proc):
        sw.stop()
        raise RuntimeError(f"switch {name}: simple_switch_grpc did not open gRPC on port "
                           f"{grpc_port}; its output ends:\n{log_tail(out_path)}")
    return sw


@contextlib.contextmanager
def bmv2_switch(name: str, run_dir: Path, **kwargs: object) -> Iterator[BMv2Switch]:
    sw = start_switch(name, run_dir, **kwargs)  # type: ignore[arg-type]
    try:
        yield sw
    finally:
        sw.stop()


@dataclass(frozen=True)
class HostNs:
    """A host in its own namespace, linked by a veth to `switch_intf` in the root namespace."""

    name: str
    netns: str
    ip: str
    mac: str
    switch_intf: str


def _no_ipv6(netns: str | None, intf: str) -> None:
    cmd = ["sysctl", "-q", "-w", f"net.ipv6.conf.{intf}.disable_ipv6=1"]
    _run(*(["ip", "netns", "exec", netns, *cmd] if netns else cmd))


@contextlib.contextmanager
def host_namespaces(hosts: Mapping[str, tuple[str, str]], tag: str, prefix_len: int = 8,
                    ) -> Iterator[dict[str, HostNs]]:
    """Namespaces `innet-<tag>-<host>` for hosts {name: (ip, mac)}, each with eth0 to a veth
    `i<tag>-<k>` in the root namespace (k = position), static ARP to every other host.
    Everything made here is deleted on the way out, whatever happened."""
    made_ns: list[str] = []
    made_links: list[str] = []
    out: dict[str, HostNs] = {}
    try:
        for k, (name, (ip, mac)) in enumerate(hosts.items()):
            ns = f"innet-{tag}-{name}"
            sw_if, tmp_if = f"i{tag}-{k}", f"j{tag}-{k}"
            if len(sw_if) > 15 or len(tmp_if) > 15:
                raise ValueError(f"tag {tag!r} makes interface names too long")
            _run("ip", "netns", "add", ns)
            made_ns.append(ns)
            _run("ip", "link", "add", sw_if, "type", "veth", "peer", "name", tmp_if)
            made_links.append(sw_if)
            _run("ip", "link", "set", tmp_if, "netns", ns)
            _run("ip", "-n", ns, "link", "set", tmp_if, "name", "eth0")
            _no_ipv6(ns, "all")
            _no_ipv6(ns, "default")
            _no_ipv6(None, sw_if)
            _run("ip", "-n", ns, "link", "set", "eth0", "address", mac)
            _run("ip", "-n", ns, "addr", "add", f"{ip}/{prefix_len}", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "link", "set", sw_if, "up")
            out[name] = HostNs(name, ns, ip, mac, sw_if)
        for h in out.values():
            for peer in out.values():
                if peer.name != h.name:
                    _run("ip", "-n", h.netns, "neigh", "replace", peer.ip, "lladdr", peer.mac,
                         "dev", "eth0", "nud", "permanent")
        yield out
    finally:
        for ns in made_ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in made_links:  # gone with its namespace peer, unless that failed
            subprocess.run(["ip", "link", "del", link], capture_output=True)


@contextlib.contextmanager
def veth_links(count: int, tag: str) -> Iterator[list[tuple[str, str]]]:
    """`count` veth pairs in the root namespace for switch-to-switch links, IPv6 off, up;
    deleted on the way out."""
    made: list[str] = []
    try:
        pairs = []
        for k in range(count):
            a, b = f"l{tag}-{k}a", f"l{tag}-{k}b"
            if len(a) > 15:
                raise ValueError(f"tag {tag!r} makes interface names too long")
            _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            made.append(a)
            for end in (a, b):
                _no_ipv6(None, end)
                _run("ip", "link", "set", end, "up")
            pairs.append((a, b))
        yield pairs
    finally:
        for a in made:
            subprocess.run(["ip", "link", "del", a], capture_output=True)


@contextlib.contextmanager
def in_netns(netns: str) -> Iterator[None]:
    """Run the body with this thread in namespace `netns` (sockets made there stay there)."""
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            yield
        finally:
            if libc.setns(back, CLONE_NEWNET) != 0:  # pragma: no cover - cannot happen
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(target)
        os.close(back)


def netns_socket(netns: str, kind: int = socket.SOCK_DGRAM) -> socket.socket:
    """An IPv4 socket living in `netns`."""
    with in_netns(netns):
        return socket.socket(socket.AF_INET, kind)
