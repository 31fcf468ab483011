"""`innet topo ...`: generate and check topology files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.errors import InputError
from controller.table import format_table
from controller.topogen import (
    binary_tree_topology,
    dumps_topology,
    fat_tree_topology,
    leaf_spine_topology,
)
from controller.topology import load_topology, topology_from_dict


def register(sub: Any) -> None:
    topo = sub.add_parser("topo", help="generate and check topology files",
                          description="Topologies are JSON files: hosts (ip, mac), switches, "
                                      "links [a, b, delay, Mbps] with switch ports 's1-p2'. "
                                      "See controller/topology.py for every field.")
    tsub = topo.add_subparsers(dest="topo_command", metavar="SUBCOMMAND", required=True)
    gen = tsub.add_parser("gen", help="write a binary tree, fat-tree or leaf-spine topology")
    gen.add_argument("shape", choices=["bt", "fattree", "leafspine"])
    gen.add_argument("--depth", type=int, default=4, help="bt: levels of switches (default 4)")
    gen.add_argument("--hosts-per-leaf", type=int, default=None,
                     help="bt: workers per leaf (default 2); leafspine: servers (default 4)")
    gen.add_argument("-k", type=int, default=4, help="fattree: k (default 4)")
    gen.add_argument("--leaves", type=int, default=6, help="leafspine (default 6)")
    gen.add_argument("--spines", type=int, default=2, help="leafspine (default 2)")
    gen.add_argument("-o", "--output", help="file to write (default: standard output)")
    gen.set_defaults(func=cmd_gen)
    check = tsub.add_parser("check", help="load a topology and summarise it, or say what is "
                                          "wrong")
    check.add_argument("file")
    check.set_defaults(func=cmd_check)


def cmd_gen(args: argparse.Namespace) -> int:
    if args.shape == "bt":
        data = binary_tree_topology(args.depth, args.hosts_per_leaf or 2)
    elif args.shape == "fattree":
        try:
            data = fat_tree_topology(args.k)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    else:
        data = leaf_spine_topology(args.leaves, args.hosts_per_leaf or 4, args.spines)
    topology_from_dict(data)  # what we write must load
    text = dumps_topology(data)
    if args.output:
        Path(args.output).write_text(text + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    topo = load_topology(args.file)
    remote = [s.name for s in topo.switches.values() if s.remote]
    print(f"{topo.name}: {len(topo.hosts)} hosts, {len(topo.switches)} switches "
          f"({len(remote)} remote), {len(topo.links)} links")
    if topo.destination:
        print(f"aggregation destination: {topo.destination}")
    rows = []
    for s in topo.switches:
        ports = sorted((e.port, far.node) for link, far in topo.neighbours(s)
                       for e in [link.end(s)])
        rows.append([s, "remote " + str(topo.switches[s].grpc) if topo.switches[s].remote
                     else "local BMv2", " ".join(f"p{p}:{n}" for p, n in ports)])
    print(format_table(["switch", "runs", "ports"], rows))
    return 0
