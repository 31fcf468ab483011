"""Topology files: hosts, switches and links, readable by people, checked on load.

The layout follows the p4lang tutorials' topology.json (hosts with ip/mac, switches, links as
``[a, b, delay, Mbps]`` with switch ports written ``s1-p2``) and adds our own fields:

```json
{"name": "bt15",
 "hosts": {"h1": {"ip": "10.0.1.1", "mac": "08:00:00:00:01:01"}},
 "switches": {"s1": {}, "s9": {"grpc": "192.0.2.9:9559", "device_id": 0}},
 "links": [["h1", "s1-p1"], ["s1-p2", "s2-p1", "0ms", 100],
           {"a": "s2-p2", "b": "s3-p1", "delay": "1ms", "mbps": 100, "rate": 2}],
 "aggregation": {"destination": "h1"}}
```

The tutorials' own fields load too: a host's ``"ip": "10.0.1.1/24"`` and ``commands``, a
switch's ``runtime_json`` (what `innet deploy --program` installs on it), ``cli_input`` and
``program``, delays written "0". What innet reads but does not act on (delays, host commands,
cli_input, per-switch programs) `Topology.ignored` says in one line, and `innet topo check`
prints it.

A switch with a ``grpc`` address is remote: the controller drives it, Mininet does not start
it. ``rate`` is the link's rate in SOAR's cost (default 1: costs count messages). Hosts sit in
one IPv4 network (``prefix``, default 10.0.0.0/8), so every route is a host /32 route.
This module is a description only; `innet.emulation.net` turns it into a running network.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.errors import InputError, finite_number, quote, read_json

# Every pattern is matched whole (fullmatch: `$` would let a trailing newline through) and in
# ASCII (`\d` and `\w` would take other scripts' digits and letters, and '²').
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NAME_RULE = "names are an ASCII letter then ASCII letters, digits or _"
_PORT = re.compile(r"(?P<node>[A-Za-z][A-Za-z0-9_.]*)-p(?P<port>[0-9]+)")
_MAC = re.compile(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}")
_DELAY = re.compile(r"(?P<value>[0-9]+(\.[0-9]+)?)(?P<unit>us|ms|s)?")  # no unit: ms (tutorials)
_IPV4 = re.compile(r"[0-9.]+(/[0-9.]+)?")  # the characters of 10.0.0.2 or 10.0.1.1/24
_GRPC = re.compile(r"[^\x00-\x20\x7f/]+:(?P<port>[0-9]{1,5})")  # HOST:PORT, no blanks

# BMv2's v1model ports are 9 bits (p4src/headers.p4 port_t): 511 is its drop port and 510 the
# CPU port by convention, so links may use 1..509 only.
MAX_PORT = 509
MAX_GPUS = 1024  # per host: far beyond any server, small enough that plans stay cheap
MAX_DELAY_MS = 10_000.0  # Mininet's tc netem takes it; anything longer is a typo
MAX_MBPS = 1e7  # 10 Tbps
MIN_RATE, MAX_RATE = 1e-9, 1e15  # as SOAR's instance rates (controller/innet/soar/model.py)


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str
    gpus: int = 1
    prefix_len: int | None = None  # the tutorials' "10.0.1.1/24": kept, written back
    commands: tuple[str, ...] = ()  # the tutorials' shell commands for the host: not run


@dataclass(frozen=True)
class Switch:
    name: str
    grpc: str | None = None  # remote switch: its P4Runtime address
    device_id: int = 0
    thrift_port: int | None = None  # remote switch's BMv2 thrift port, if any
    # the p4lang tutorials' fields, relative to the topology's folder or its parent (the
    # tutorials' exercise folder): the switch's runtime file (`innet deploy --program`
    # installs it), and two that innet does not use (a thrift CLI script, a per-switch program)
    runtime_json: str | None = None
    cli_input: str | None = None
    program: str | None = None

    @property
    def remote(self) -> bool:
        return self.grpc is not None


@dataclass(frozen=True)
class Endpoint:
    node: str
    port: int | None  # None for a host (its only interface)


@dataclass(frozen=True)
class Link:
    a: Endpoint
    b: Endpoint
    delay_ms: float = 0.0
    mbps: float | None = None
    rate: float = 1.0

    def other(self, node: str) -> Endpoint:
        return self.b if self.a.node == node else self.a

    def end(self, node: str) -> Endpoint:
        return self.a if self.a.node == node else self.b


@dataclass(frozen=True)
class Topology:
    name: str
    hosts: dict[str, Host]
    switches: dict[str, Switch]
    links: tuple[Link, ...]
    destination: str | None = None
    prefix: str = "10.0.0.0/8"
    source: str | None = field(default=None, compare=False)

    @functools.cached_property
    def _adjacency(self) -> dict[str, list[tuple[Link, Endpoint]]]:
        """Built once, so that asking every host for its switch is linear, not quadratic."""
        adj: dict[str, list[tuple[Link, Endpoint]]] = {}
        for link in self.links:
            adj.setdefault(link.a.node, []).append((link, link.b))
            adj.setdefault(link.b.node, []).append((link, link.a))
        return adj

    def neighbours(self, node: str) -> Iterator[tuple[Link, Endpoint]]:
        """(link, far end) for every link of `node`, in file order."""
        yield from self._adjacency.get(node, ())

    def host_switch(self, host: str) -> tuple[str, int]:
        """The switch and port a host is attached to."""
        for _, far in self.neighbours(host):
            if far.node in self.switches and far.port is not None:
                return far.node, far.port
        raise InputError(f"host {quote(host)} is not linked to any switch", source=self.source)

    def counting_ports(self) -> dict[tuple[str, str], tuple[str, int]]:
        """(node, neighbour) -> (switch, port) whose counter sees the packets from node to
        neighbour: a switch's egress port, or for a host (which counts nothing) its switch's
        ingress port. The one rule by which link loads are read off port counters."""
        out: dict[tuple[str, str], tuple[str, int]] = {}
        for link in self.links:
            for near, far in ((link.a, link.b), (link.b, link.a)):
                if near.node in self.switches and near.port is not None:
                    out[(near.node, far.node)] = (near.node, near.port)
                elif far.node in self.switches and far.port is not None:
                    out[(near.node, far.node)] = (far.node, far.port)
        return out

    def graph(self) -> Any:
        """An undirected networkx graph of hosts and switches; edges carry their Link."""
        import networkx as nx

        g = nx.Graph()
        for h in self.hosts:
            g.add_node(h, kind="host")
        for s in self.switches:
            g.add_node(s, kind="switch")
        for link in self.links:
            g.add_edge(link.a.node, link.b.node, link=link)
        return g

    def to_dict(self) -> dict[str, Any]:
        def end(e: Endpoint) -> str:
            return e.node if e.port is None else f"{e.node}-p{e.port}"

        links: list[Any] = []
        for link in self.links:
            if link.rate == 1.0:
                row: list[Any] = [end(link.a), end(link.b), _delay_text(link.delay_ms)]
                if link.mbps is not None:
                    row.append(link.mbps)
                links.append(row)
            else:
                obj: dict[str, Any] = {"a": end(link.a), "b": end(link.b),
                                       "delay": _delay_text(link.delay_ms), "rate": link.rate}
                if link.mbps is not None:
                    obj["mbps"] = link.mbps
                links.append(obj)
        out: dict[str, Any] = {
            "name": self.name,
            "hosts": {h.name: _host_dict(h) for h in self.hosts.values()},
            "switches": {s.name: _switch_dict(s) for s in self.switches.values()},
            "links": links,
        }
        if self.destination:
            out["aggregation"] = {"destination": self.destination}
        if self.prefix != "10.0.0.0/8":
            out["prefix"] = self.prefix
        return out

    def file_path(self, name: str) -> Path:
        """A file the topology names (runtime_json): as given when absolute, else beside the
        topology file, else in its parent folder (the tutorials' files name
        "pod-topo/s1-runtime.json" from their exercise folder); when none exists, the first
        place, for the error to name."""
        p = Path(name)
        if p.is_absolute() or self.source is None:
            return p
        here = Path(self.source).parent
        for candidate in (here / p, here.parent / p):
            if candidate.is_file():
                return candidate
        return here / p

    def runtime_files(self) -> dict[str, Path]:
        """Every switch's runtime_json, resolved (`file_path`)."""
        return {s.name: self.file_path(s.runtime_json) for s in self.switches.values()
                if s.runtime_json}

    def ignored(self) -> str | None:
        """One line naming what of the file innet reads but does not act on, and why; None
        when it acts on everything."""
        parts = []
        delayed = sum(link.delay_ms > 0 for link in self.links)
        if delayed:
            parts.append(f"link delays ({delayed} of {len(self.links)} links): this kernel has "
                         "no netem, so they cannot be emulated")
        commands = [h for h in self.hosts.values() if h.commands]
        if commands:
            parts.append(f"host commands ({', '.join(h.name for h in commands)}): not run; "
                         "innet gives hosts their address, routes and ARP entries itself")
        cli = [s.name for s in self.switches.values() if s.cli_input]
        if cli:
            parts.append(f"cli_input ({', '.join(cli)}): not sent; table entries come from "
                         "runtime_json over P4Runtime")
        prog = [s.name for s in self.switches.values() if s.program]
        if prog:
            parts.append(f"per-switch program ({', '.join(prog)}): every switch runs the one "
                         "--program")
        return "ignored: " + "; ".join(parts) if parts else None


def _host_dict(h: Host) -> dict[str, Any]:
    out: dict[str, Any] = {"ip": h.ip if h.prefix_len is None else f"{h.ip}/{h.prefix_len}",
                           "mac": h.mac}
    if h.gpus != 1:
        out["gpus"] = h.gpus
    if h.commands:
        out["commands"] = list(h.commands)
    return out


def _switch_dict(s: Switch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if s.grpc:
        out["grpc"] = s.grpc
        out["device_id"] = s.device_id
        if s.thrift_port is not None:
            out["thrift_port"] = s.thrift_port
    for key in ("runtime_json", "cli_input", "program"):
        if getattr(s, key) is not None:
            out[key] = getattr(s, key)
    return out


def _delay_text(ms: float) -> str:
    return f"{ms:g}ms"


def _parse_delay(value: Any, where: str, source: str | None) -> float:
    ms: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        ms = float(value)
    elif isinstance(value, str):
        m = _DELAY.fullmatch(value.strip())
        if m:
            # no unit ("0", as the tutorials write it): milliseconds, as a JSON number is
            scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, None: 1.0}[m["unit"]]
            ms = float(m["value"]) * scale
    if ms is None or not 0 <= ms <= MAX_DELAY_MS:  # NaN fails the comparison too
        raise InputError(f"{where}: delay must look like '2ms', '500us', '0.1s' or '0' (at most "
                         f"{MAX_DELAY_MS / 1e3:g} s), got {quote(value)}", source=source)
    return ms


def _bounded(value: Any, low: float, high: float) -> bool:
    """A finite JSON number in [low, high] (booleans are not numbers here)."""
    return finite_number(value) and low <= value <= high


def topology_from_dict(data: Any, *, source: str | None = None) -> Topology:
    """Check every element and name the bad one: hosts, switches, links, destination."""
    if not isinstance(data, dict):
        raise InputError("a topology is a JSON object with hosts, switches and links",
                         source=source)
    unknown = set(data) - {"name", "description", "hosts", "switches", "links", "aggregation",
                           "prefix", "comment"}
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(sorted(unknown))}", source=source)
    for key in ("hosts", "switches", "links"):
        if key not in data:
            raise InputError(f"missing field {key!r}", source=source)
    for key in ("name", "description", "comment"):
        if key in data and not isinstance(data[key], str):
            raise InputError(f"{key} must be a string, got {quote(data[key])}", source=source)
    prefix = data.get("prefix", "10.0.0.0/8")
    try:
        if not isinstance(prefix, str) or not _IPV4.fullmatch(prefix):
            raise ValueError(prefix)
        network = ipaddress.IPv4Network(prefix)
    except ValueError:
        raise InputError(f"prefix: not an IPv4 network like 10.0.0.0/8: {quote(prefix)}",
                         source=source) from None
    hosts = _parse_hosts(data["hosts"], network, source)
    switches = _parse_switches(data["switches"], source)
    clash = set(hosts) & set(switches)
    if clash:
        raise InputError(f"{quote(sorted(clash)[0])} is both a host and a switch", source=source)
    links = _parse_links(data["links"], hosts, switches, source)
    destination = None
    agg = data.get("aggregation")
    if agg is not None:
        if not isinstance(agg, dict) or set(agg) - {"destination"}:
            raise InputError("aggregation: expected {\"destination\": HOST}", source=source)
        destination = check_host(agg.get("destination"), hosts, "aggregation.destination",
                                 source)
    topo = Topology(str(data.get("name", _default_name(source))), hosts,
                    switches, tuple(links), destination, str(network), source)
    for h in hosts:
        topo.host_switch(h)
    return topo


def _default_name(source: str | None) -> str:
    """The file's stem; for the tutorials' "pod-topo/topology.json", its folder's name."""
    if source is None:
        return "topology"
    p = Path(source)
    return p.parent.name if p.stem == "topology" and p.parent.name else p.stem


def check_host(name: Any, hosts: dict[str, Host], where: str, source: str | None) -> str:
    """`name` if it is one of `hosts`: a string first (a list or an object is not a name and
    cannot even be looked up), then a known host."""
    if not isinstance(name, str):
        raise InputError(f"{where}: expected a host name (a string), got {quote(name)}",
                         source=source)
    if name not in hosts:
        raise InputError(f"{where}: unknown host {quote(name)}", source=source)
    return name


def _parse_ip(value: Any, where: str, network: ipaddress.IPv4Network,
              source: str | None) -> ipaddress.IPv4Address:
    """An IPv4 address, alone or as the tutorials write it with its prefix (10.0.1.1/24)."""
    try:
        if not isinstance(value, str) or not _IPV4.fullmatch(value):
            raise ValueError(value)
        ip = ipaddress.IPv4Interface(value).ip
    except ValueError:
        raise InputError(f"{where}: ip must be an IPv4 address like 10.0.1.1 (or 10.0.1.1/24), "
                         f"got {quote(value)}", source=source) from None
    if ip not in network:
        raise InputError(f"{where}: ip {ip} is outside the prefix {network}", source=source)
    return ip


def _parse_hosts(raw: Any, network: ipaddress.IPv4Network,
                 source: str | None) -> dict[str, Host]:
    if not isinstance(raw, dict):
        raise InputError("hosts must be an object {name: {ip, mac}}", source=source)
    hosts: dict[str, Host] = {}
    seen_ip: dict[str, str] = {}
    seen_mac: dict[str, str] = {}
    for name, spec in raw.items():
        where = f"host {quote(name)}"
        if not NAME.fullmatch(name):
            raise InputError(f"{where}: {_NAME_RULE}", source=source)
        if not isinstance(spec, dict):
            raise InputError(f"{where}: expected {{\"ip\": ..., \"mac\": ...}}", source=source)
        extra = set(spec) - {"ip", "mac", "gpus", "commands"}
        if extra:
            raise InputError(f"{where}: unknown field(s) {', '.join(sorted(extra))}",
                             source=source)
        ip = _parse_ip(spec.get("ip"), where, network, source)
        prefix_len = None
        ip_text = str(spec.get("ip"))
        if "/" in ip_text:
            plen_text = ip_text.partition("/")[2]
            if not re.fullmatch(r"[0-9]{1,2}", plen_text) or not 0 < int(plen_text) <= 32:
                raise InputError(f"{where}: ip's prefix length must be 1..32, got "
                                 f"{quote(spec.get('ip'))}", source=source)
            prefix_len = int(plen_text)
        mac = spec.get("mac")
        if not isinstance(mac, str) or not _MAC.fullmatch(mac):
            raise InputError(f"{where}: mac must look like 08:00:00:00:01:01, got {quote(mac)}",
                             source=source)
        commands = spec.get("commands", [])
        if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
            raise InputError(f"{where}: commands must be a list of strings, got "
                             f"{quote(commands)}", source=source)
        gpus = spec.get("gpus", 1)
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= MAX_GPUS:
            raise InputError(f"{where}: gpus must be an integer in 0..{MAX_GPUS}, got "
                             f"{quote(gpus)}", source=source)
        if str(ip) in seen_ip:
            raise InputError(f"{where}: ip {ip} is also host {quote(seen_ip[str(ip)])}'s",
                             source=source)
        if mac.lower() in seen_mac:
            raise InputError(f"{where}: mac {mac} is also host "
                             f"{quote(seen_mac[mac.lower()])}'s", source=source)
        seen_ip[str(ip)] = name
        seen_mac[mac.lower()] = name
        hosts[name] = Host(name, str(ip), mac.lower(), gpus, prefix_len, tuple(commands))
    return hosts


def _parse_switches(raw: Any, source: str | None) -> dict[str, Switch]:
    if not isinstance(raw, dict):
        raise InputError("switches must be an object {name: {...}}", source=source)
    switches: dict[str, Switch] = {}
    for name, spec in raw.items():
        where = f"switch {quote(name)}"
        if not NAME.fullmatch(name):
            raise InputError(f"{where}: {_NAME_RULE}", source=source)
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise InputError(f"{where}: expected an object", source=source)
        extra = set(spec) - {"grpc", "device_id", "thrift_port", "runtime_json", "cli_input",
                             "program"}
        if extra:
            raise InputError(f"{where}: unknown field(s) {', '.join(sorted(extra))}",
                             source=source)
        grpc = spec.get("grpc")
        m = _GRPC.fullmatch(grpc) if isinstance(grpc, str) else None
        if grpc is not None and (m is None or not 1 <= int(m["port"]) <= 65535):
            raise InputError(f"{where}: grpc must be HOST:PORT with a port in 1..65535, got "
                             f"{quote(grpc)}", source=source)
        device_id = spec.get("device_id", 0)
        if (isinstance(device_id, bool) or not isinstance(device_id, int)
                or not 0 <= device_id < 2**64):
            raise InputError(f"{where}: device_id must be an integer in 0..2^64-1 (P4Runtime's "
                             f"uint64), got {quote(device_id)}", source=source)
        thrift = spec.get("thrift_port")
        if thrift is not None and (isinstance(thrift, bool) or not isinstance(thrift, int)
                                   or not 1 <= thrift <= 65535):
            raise InputError(f"{where}: thrift_port must be an integer in 1..65535, got "
                             f"{quote(thrift)}", source=source)
        files = {}
        for key in ("runtime_json", "cli_input", "program"):
            value = spec.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise InputError(f"{where}: {key} must be a file name, got {quote(value)}",
                                 source=source)
            files[key] = value
        switches[name] = Switch(name, grpc, device_id, thrift, **files)
    if not switches:
        raise InputError("switches: at least one switch is needed", source=source)
    return switches


def _endpoint(text: Any, where: str, hosts: dict[str, Host], switches: dict[str, Switch],
              source: str | None) -> Endpoint:
    if not isinstance(text, str):
        raise InputError(f"{where}: an end must be 'h1' or 's1-p2', got {quote(text)}",
                         source=source)
    if text in hosts:
        return Endpoint(text, None)
    m = _PORT.fullmatch(text)
    if m:
        # a port of more digits than any allowed one is out of range (and would trip Python's
        # limit on int() of long digit strings)
        node, port = m["node"], int(m["port"]) if len(m["port"]) <= 6 else MAX_PORT + 1
        if node in switches:
            if not 1 <= port <= MAX_PORT:
                raise InputError(f"{where}: switch ports are 1..{MAX_PORT} (BMv2 reserves 510 "
                                 f"for the CPU and 511 for dropping), got {quote(text)}",
                                 source=source)
            return Endpoint(node, port)
        if node in hosts:
            return Endpoint(node, None)
    if text in switches:
        raise InputError(f"{where}: a switch end needs its port, like {quote(text + '-p1')}",
                         source=source)
    raise InputError(f"{where}: unknown node {quote(text)}", source=source)


def _parse_links(raw: Any, hosts: dict[str, Host], switches: dict[str, Switch],
                 source: str | None) -> list[Link]:
    if not isinstance(raw, list):
        raise InputError("links must be a list", source=source)
    links: list[Link] = []
    used: dict[tuple[str, int], int] = {}
    host_linked: set[str] = set()
    for i, item in enumerate(raw):
        where = f"links[{i}]"
        if isinstance(item, list):
            if not 2 <= len(item) <= 4:
                raise InputError(f"{where}: expected [a, b, delay, Mbps]", source=source)
            a_text, b_text = item[0], item[1]
            delay = item[2] if len(item) > 2 else 0
            mbps = item[3] if len(item) > 3 else None
            rate: Any = 1.0
        elif isinstance(item, dict):
            extra = set(item) - {"a", "b", "delay", "mbps", "rate"}
            if extra or "a" not in item or "b" not in item:
                raise InputError(f"{where}: expected {{a, b, delay, mbps, rate}}", source=source)
            a_text, b_text = item["a"], item["b"]
            delay, mbps, rate = item.get("delay", 0), item.get("mbps"), item.get("rate", 1.0)
        else:
            raise InputError(f"{where}: expected a list or an object", source=source)
        a = _endpoint(a_text, where, hosts, switches, source)
        b = _endpoint(b_text, where, hosts, switches, source)
        if a.node == b.node:
            raise InputError(f"{where}: links {quote(a.node)} to itself", source=source)
        if a.port is None and b.port is None:
            raise InputError(f"{where}: two hosts linked directly; hosts attach to switches",
                             source=source)
        for e in (a, b):
            if e.port is not None:
                key = (e.node, e.port)
                if key in used:
                    raise InputError(f"{where}: port {e.node}-p{e.port} is already used by "
                                     f"links[{used[key]}]", source=source)
                used[key] = i
            else:
                if e.node in host_linked:
                    raise InputError(f"{where}: host {quote(e.node)} has a second link; hosts have "
                                     "one interface", source=source)
                host_linked.add(e.node)
        delay_ms = _parse_delay(delay, where, source)
        if mbps is not None and not (_bounded(mbps, 0, MAX_MBPS) and mbps > 0):
            raise InputError(f"{where}: Mbps must be a number in (0, {MAX_MBPS:g}], got "
                             f"{quote(mbps)}", source=source)
        if not _bounded(rate, MIN_RATE, MAX_RATE):
            raise InputError(f"{where}: rate must be a number in [{MIN_RATE:g}, {MAX_RATE:g}], "
                             f"got {quote(rate)}", source=source)
        links.append(Link(a, b, delay_ms, None if mbps is None else float(mbps), float(rate)))
    return links


def load_topology(path: str | Path) -> Topology:
    return topology_from_dict(read_json(path), source=str(path))
