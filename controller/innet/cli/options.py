"""The options several commands share, added one way everywhere, and turned into the options
objects of the layers below (`intent_options`): a front end parses its flags once and hands
the layers plain, typed data, never an argparse.Namespace."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from innet.bmv2.own_program import OwnProgram, load_own_program
from innet.bmv2.tls import network_tls
from innet.cli.argtypes import SEED, K, int_in
from innet.cli.outpaths import output_dir
from innet.emulation import live
from innet.errors import InputError
from innet.p4rt.client import ClientTls
from innet.plan.intent import DEFAULT_ECN_THRESHOLD, IntentOptions
from innet.soar.baselines import STRATEGIES
from innet.topology import Topology

_threshold = int_in(0, 2**19 - 1)  # the program compares it with enq_qdepth, a bit<19>
_queue_rate = int_in(1, 10**9)  # packets/s; 0 would stop the port, not mean "default"
_queue_depth = int_in(1, 2**19 - 1)


def add_topology(p: Any, help: str = "the topology file") -> None:
    p.add_argument("--topology", required=True, metavar="FILE", help=help)


def add_json(p: Any, shape: str) -> None:
    """--json, whose help says the shape of the one JSON document printed instead."""
    p.add_argument("--json", action="store_true", help=shape)


def add_seed(p: Any, what: str) -> None:
    p.add_argument("--seed", type=SEED, default=0, help=f"seed of {what}")


def add_intent_options(p: Any, *, workload_required: bool) -> None:
    """The options that make an intent (IntentOptions), shared by deploy, status,
    controller run, net up and the `deploy` typed at the `innet>` prompt."""
    p.add_argument("--workload", action="append", metavar="FILE",
                   help="a job's workers and destination; repeat for several jobs"
                        + (" (required unless --program; no default)" if workload_required
                           else " (default: none, routes only)"))
    p.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                   help="which switches aggregate (default soar: optimal for k)")
    p.add_argument("-k", type=K, default=None,
                   help="at most this many aggregating switches per job (default: no limit)")
    add_seed(p, "the random strategy")
    ecn = p.add_mutually_exclusive_group()
    ecn.add_argument("--ecn-threshold", type=_threshold, default=DEFAULT_ECN_THRESHOLD,
                     metavar="PKTS", help="mark ECT packets CE from this egress queue depth "
                                          f"(default {DEFAULT_ECN_THRESHOLD})")
    ecn.add_argument("--no-ecn", action="store_true", help="never mark")
    p.add_argument("--queue-rate", type=_queue_rate, metavar="PPS",
                   help="BMv2 egress queue rate of every port (thrift), packets/s "
                        "(default: leave as is)")
    p.add_argument("--queue-depth", type=_queue_depth, metavar="PKTS",
                   help="BMv2 egress queue depth of every port (thrift), packets "
                        "(default: leave as is)")


def intent_options(args: argparse.Namespace) -> IntentOptions:
    """The intent options of the flags `add_intent_options` added."""
    return IntentOptions(tuple(args.workload or ()), args.strategy, args.k, args.seed,
                         None if args.no_ecn else args.ecn_threshold, args.queue_rate,
                         args.queue_depth)


def add_program_options(p: Any) -> None:
    p.add_argument("--program", metavar="FILE",
                   help="your own P4 program instead of innet's: a .p4 source (P4_16, v1model; "
                        "compiled with p4c-bm2-ss, cached by content in ~/.cache/innet/p4c or "
                        "$INNET_CACHE_DIR/p4c) or its compiled BMv2 JSON with --p4info. Its "
                        "entries, multicast groups and clone sessions come from runtime files "
                        "in the p4lang tutorials' format (--runtime, or each switch's "
                        "runtime_json in the topology); the controller owns the tables they "
                        "name. The workload, strategy and ECN options are innet's program's "
                        "and do not apply (default: innet's program). Guide: "
                        "docs/own-program.md")
    p.add_argument("--p4info", metavar="FILE",
                   help="P4Info text file: of --program X.json, else of innet's program "
                        "(default: the committed p4src/innet.p4info.txtpb)")
    p.add_argument("--bmv2-json", metavar="FILE",
                   help="BMv2 JSON of innet's program (default: the committed "
                        "p4src/innet.json); for your own, --program")
    p.add_argument("--runtime", action="append", default=[], metavar="SWITCH=FILE",
                   help="with --program: SWITCH's runtime file (tutorials' sX-runtime.json: "
                        "table_entries, multicast_group_entries, clone_session_entries); "
                        "repeatable; overrides the topology's runtime_json for that switch "
                        "(default: the topology's)")


def check_runtime_needs_program(args: argparse.Namespace) -> None:
    if args.runtime and not args.program:
        raise InputError("--runtime goes with --program (runtime files are for your own "
                         "program; innet's entries come from the plan)")


def own_program(args: argparse.Namespace, topo: Topology) -> OwnProgram:
    """--program's pipeline and runtime files; innet's own options refused by name (they
    would be silently meaningless for another program)."""
    given = [flag for flag, on in (
        ("--workload", bool(args.workload)), ("-k", args.k is not None),
        ("--strategy", args.strategy != "soar"), ("--seed", args.seed != 0),
        ("--no-ecn", args.no_ecn), ("--ecn-threshold", args.ecn_threshold !=
                                    DEFAULT_ECN_THRESHOLD),
        ("--bmv2-json", args.bmv2_json is not None)) if on]
    if given:
        raise InputError(f"{given[0]} is an option of innet's own program; with --program the "
                         "switches' entries come from runtime files (--runtime)")
    return load_own_program(topo, args.program, args.p4info, args.runtime)


def add_force(p: Any, help: str) -> None:
    """--force: run although an estimate (memory, time) says the machine is too small."""
    p.add_argument("--force", action="store_true", help=help)


def add_out_dir(p: Any, help: str, *, required: bool = False) -> None:
    """--out: the run folder, checked creatable before any work starts."""
    p.add_argument("--out", type=output_dir, default=None, required=required, metavar="DIR",
                   help=help)


def add_tls(p: Any, *, starts: bool, default: bool = False) -> None:
    """--tls/--no-tls: P4Runtime over TLS. A command that starts the switches (`starts`)
    makes their certificates; one that reaches switches `net up` started uses that
    network's."""
    if starts:
        p.add_argument("--tls", action=argparse.BooleanOptionalAction, default=default,
                       help="P4Runtime over TLS: a CA of this run, a certificate per switch "
                            "and one for the controller (owner-only files in the run "
                            "folder's tls/), every switch requiring the controller's "
                            f"(default {'on' if default else 'off'})")
        return
    p.add_argument("--tls", action=argparse.BooleanOptionalAction, default=None,
                   help="reach the local switches over TLS with the controller certificate "
                        "of the network that is up (`innet net up`; reading it needs root "
                        "or that network's user) (default: when the network that is up on "
                        "this topology uses TLS)")


def client_tls(args: argparse.Namespace) -> ClientTls | None:
    """The TLS files for reaching local switches, as --tls/--no-tls and the network that is
    up say."""
    if args.tls is False:
        return None
    record = live.running()
    if args.tls is None:
        same = record is not None and Path(args.topology).resolve() == Path(record.topology)
        return network_tls(Path(record.tls)).client() if same and record and record.tls \
            else None
    if record is None or record.tls is None:
        raise InputError("--tls: no network that is up uses TLS (its certificates are what "
                         "the switches accept); `innet net up` makes them")
    return network_tls(Path(record.tls)).client()
