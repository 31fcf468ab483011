"""`innet topo ...`: generate and check topology files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from innet.cli.argtypes import float_in, int_in
from innet.cli.oldflags import renamed
from innet.cli.options import add_json
from innet.cli.outpaths import output_file
from innet.errors import InputError
from innet.jsonout import print_json
from innet.table import format_table
from innet.topogen import (
    binary_tree_topology,
    dumps_topology,
    fat_tree_topology,
    leaf_spine_topology,
)
from innet.topology import load_topology, topology_from_dict


def register(sub: Any) -> None:
    topo = sub.add_parser("topo", help="generate and check topology files",
                          description="Topologies are JSON files: hosts (ip, mac), switches, "
                                      "links [a, b, delay, Mbps] with switch ports 's1-p2'. "
                                      "See controller/innet/topology.py for every field.")
    tsub = topo.add_subparsers(dest="topo_command", metavar="SUBCOMMAND", required=True)
    gen = tsub.add_parser(
        "gen", help="write a binary tree, fat-tree or leaf-spine topology",
        description="Write a topology file. Sizes are bounded by what the address plan "
                    "(10.0.x.y, one MAC per host) and BMv2's ports (1..509) can number.")
    gen.add_argument("shape", choices=["bt", "fattree", "leafspine"], help="the shape")
    gen.add_argument("--depth", type=int_in(1, 10), default=None,
                     help="bt: levels of switches (2^depth - 1 switches; default 4)")
    gen.add_argument("--hosts-per-leaf", type=int_in(1, 64), default=None,
                     help="bt: workers per leaf (default 2); leafspine: servers (default 4)")
    gen.add_argument("--ports", type=_fat_tree_k, default=None, metavar="K",
                     help="fattree: K, the ports of every switch of the K-ary fat-tree, even, "
                          "2..18 (K^2 * 5/4 switches, K^3/4 hosts; default 4)")
    renamed(gen, "-k", "--ports", "topo gen fattree",
            "-k is the aggregation budget in the soar, deploy and run commands")
    gen.add_argument("--mbps", type=float_in(0, 1e7, low_open=True), default=None,
                     help="fattree: every link's rate in Mbps (default: none; CASSINI's "
                          "planning and its ns-3 engine need one, e.g. 50000)")
    gen.add_argument("--leaves", type=int_in(1, 500), default=None,
                     help="leafspine: leaves (default 6)")
    gen.add_argument("--spines", type=int_in(1, 64), default=None,
                     help="leafspine: spines (default 2)")
    gen.add_argument("-o", "--output", type=output_file(), metavar="FILE",
                     help="file to write (default: standard output)")
    add_json(gen, 'with -o, print {"wrote", "hosts", "switches", "links"}; without '
                          "-o the topology printed is JSON already")
    gen.set_defaults(func=cmd_gen)
    check = tsub.add_parser("check", help="load a topology and summarise it, or say what is "
                                          "wrong",
                            description="Load a topology file, check every element and "
                                        "summarise it; a bad element is named in one line. "
                                        "The p4lang tutorials' topology.json loads as it is: "
                                        "each switch's runtime_json is shown (and must "
                                        "exist), and one line says what innet reads but does "
                                        "not act on (link delays, host commands, cli_input).")
    check.add_argument("file", help="the topology file")
    add_json(check, 'print {"name", "hosts", "switches", "remote", "links", '
                            '"destination", "ports": {switch: {port: neighbour}}, '
                            '"runtime_json": {switch: path}, "ignored" (a line or null)}')
    check.set_defaults(func=cmd_check)


_even = int_in(2, 18)


def _fat_tree_k(text: str) -> int:
    """Even, and at most 18: switch names a<pod><j> stay unique while j has one digit."""
    import argparse

    k = _even(text)
    if k % 2:
        raise argparse.ArgumentTypeError(f"expected an even integer in 2..18, got {k}")
    return k


# which sizing options each shape takes: one given to another shape is refused, not ignored
_SHAPE_OPTIONS = {"bt": ("depth", "hosts_per_leaf"), "fattree": ("ports", "mbps"),
                  "leafspine": ("leaves", "spines", "hosts_per_leaf")}
_FLAGS = {"depth": "--depth", "hosts_per_leaf": "--hosts-per-leaf", "ports": "--ports",
          "mbps": "--mbps",
          "leaves": "--leaves", "spines": "--spines"}


def cmd_gen(args: argparse.Namespace) -> int:
    # every sizing option defaults to None: the shape's own default, and a way to tell
    # an option given to a shape that has no use for it (0 is refused where it is read)
    ignored = [_FLAGS[o] for o in _FLAGS
               if getattr(args, o) is not None and o not in _SHAPE_OPTIONS[args.shape]]
    if ignored:
        takes = ", ".join(_FLAGS[o] for o in _SHAPE_OPTIONS[args.shape])
        raise InputError(f"topo gen {args.shape}: {' and '.join(ignored)} "
                         f"{'does' if len(ignored) == 1 else 'do'} not apply to this shape "
                         f"(it takes {takes})")

    def given(option: str, default: int) -> int:
        value = getattr(args, option)
        return default if value is None else int(value)

    if args.shape == "bt":
        data = binary_tree_topology(given("depth", 4), given("hosts_per_leaf", 2))
    elif args.shape == "fattree":
        try:
            data = fat_tree_topology(given("ports", 4), args.mbps)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    else:
        data = leaf_spine_topology(given("leaves", 6), given("hosts_per_leaf", 4),
                                   given("spines", 2))
    topo = topology_from_dict(data)  # what we write must load
    text = dumps_topology(data)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", source=str(args.output)) from None
        if args.json:
            print_json({"wrote": str(args.output), "hosts": len(topo.hosts),
                        "switches": len(topo.switches), "links": len(topo.links)})
        else:
            print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    topo = load_topology(args.file)
    remote = [s.name for s in topo.switches.values() if s.remote]
    runtime = topo.runtime_files()
    for switch, path in runtime.items():
        if not path.is_file():
            raise InputError(f"switch {switch!r}: runtime_json {topo.switches[switch].runtime_json}"
                             f" is not a file (looked beside the topology and in its parent "
                             f"folder: {path})", source=args.file)
    if args.json:
        port_map = {s: {str(link.end(s).port): far.node for link, far in topo.neighbours(s)}
                 for s in topo.switches}
        print_json({"name": topo.name, "hosts": len(topo.hosts),
                    "switches": len(topo.switches), "remote": remote,
                    "links": len(topo.links), "destination": topo.destination,
                    "ports": port_map,
                    "runtime_json": {s: str(p) for s, p in runtime.items()},
                    "ignored": topo.ignored()})
        return 0
    print(f"{topo.name}: {len(topo.hosts)} hosts, {len(topo.switches)} switches "
          f"({len(remote)} remote), {len(topo.links)} links")
    if topo.destination:
        print(f"aggregation destination: {topo.destination}")
    rows = []
    for s in topo.switches:
        ports = sorted((e.port, far.node) for link, far in topo.neighbours(s)
                       for e in [link.end(s)])
        rows.append([s, "remote " + str(topo.switches[s].grpc) if topo.switches[s].remote
                     else "local BMv2", " ".join(f"p{p}:{n}" for p, n in ports)]
                    + ([str(runtime.get(s, "-"))] if runtime else []))
    print(format_table(["switch", "runs", "ports"] + (["runtime_json"] if runtime else []),
                       rows))
    note = topo.ignored()
    if note:
        print(note)
    return 0
