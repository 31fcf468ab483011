"""`innet deploy` and `innet status`: plans onto P4Runtime switches, and what they hold."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from innet.aggpacket import AGG_UDP_PORT, EVENT_NAMES, SLOTS
from innet.bmv2.local import switch_addresses
from innet.bmv2.own_program import OwnProgram, load_own_program
from innet.bmv2.thrift import QueueSetting, queue_commands, run_cli
from innet.cli.argtypes import SEED, K, float_in, int_in
from innet.emulation import live
from innet.errors import InputError, NetworkError
from innet.jsonout import print_json
from innet.names import natural_key
from innet.p4rt.client import (
    SwitchAddress,
    SwitchClient,
    SwitchError,
    election_int,
)
from innet.p4rt.deploy import (
    DeployResult,
    Replication,
    SwitchStatus,
    deploy,
    diff,
    diff_replication,
    from_empty,
    status,
)
from innet.p4rt.encode import normalise
from innet.p4rt.entities import Describe, Entry, MulticastGroup
from innet.p4rt.schema import Pipeline
from innet.plan.intent import (
    DEFAULT_ECN_THRESHOLD,
    Held,
    NetworkIntent,
    held_slots,
    load_workload,
    network_intent,
    plan_job,
)
from innet.plan.pipeline import load_pipeline
from innet.plan.program import (
    C_AGG_EVENTS,
    C_AGG_FIRST,
    C_AGG_REPEAT,
    C_ECN_MARKED,
    C_PORT_IN,
    C_PORT_OUT,
    DEFAULT_TABLES,
    MANAGED_TABLES,
    describe,
)
from innet.soar.baselines import STRATEGIES
from innet.soar.model import phi
from innet.table import format_table
from innet.topology import Topology, load_topology

AGG_EVENT_NAMES = EVENT_NAMES


_threshold = int_in(0, 2**19 - 1)  # the program compares it with enq_qdepth, a bit<19>
_queue_rate = int_in(1, 10**9)  # packets/s; 0 would stop the port, not mean "default"
_queue_depth = int_in(1, 2**19 - 1)


def _program_args(p: Any) -> None:
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


def _intent_args(p: Any, *, workload_required: bool) -> None:
    """The options that make an intent, shared by deploy, controller run and status."""
    p.add_argument("--workload", action="append", metavar="FILE",
                   help="a job's workers and destination; repeat for several jobs"
                        + (" (required unless --program; no default)" if workload_required
                           else " (default: none, routes only)"))
    p.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                   help="which switches aggregate (default soar: optimal for k)")
    p.add_argument("-k", type=K, default=None,
                   help="at most this many aggregating switches per job (default: no limit)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the random strategy")
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


def register(sub: Any) -> None:
    dep = sub.add_parser(
        "deploy",
        help="install a plan on P4Runtime switches (only the difference)",
        description=(
            "Plan each workload (SOAR or a baseline, on the routing tree toward its "
            "destination), derive every switch's entries (host routes, aggregation entries, "
            "ECN threshold), read what each switch holds and write only the difference. The "
            "program is loaded on switches that do not run it. Prints per switch what is "
            "added (+), changed (~) and removed (-). Switches without a grpc address in the "
            "topology are local BMv2 switches: the i-th in name order (s1, s2, ..., s10) "
            "listens on 127.0.0.1:50051+i, thrift port 9090+i, device id 0. A workload file "
            'is {"job": 1, "workers": ["h1", "h2"], "destination": "h0"} (destination '
            "defaults to the topology's aggregation.destination); worker i sets bit i of the "
            f"contributor bitmap of UDP port {AGG_UDP_PORT} packets. With --program, your own "
            "P4 program and each switch's tutorials-style runtime file instead "
            "(docs/own-program.md)."),
    )
    dep.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    _intent_args(dep, workload_required=True)
    dep.add_argument("--dry-run", action="store_true",
                     help="read the switches and print the difference; write nothing")
    dep.add_argument("--from-empty", action="store_true",
                     help="with --dry-run: contact no switch, show what empty switches "
                          "would get")
    _program_args(dep)
    dep.add_argument("--json", action="store_true",
                     help='print {"jobs": [{"job", "strategy", "k", "blue", "cost", '
                          '"all_red_cost", "ratio"}], "switches": {name: {"address", '
                          '"load_program", "insert", "modify", "delete"}}, "failed": {name: '
                          'reason}, "program_loads", "writes", "seconds", "dry_run", "queues"}')
    dep.set_defaults(func=cmd_deploy)

    st = sub.add_parser(
        "status",
        help="what each switch holds and counts",
        description="Read every switch's routes, aggregation entries, ECN setting and "
                    "counters (per-port packets/bytes in and out, CE marks, aggregation "
                    "events). Addresses as for `innet deploy`. With --program: the tables "
                    "your program's runtime files name, its groups, sessions and counters, "
                    "and how far each switch is from its file.",
    )
    st.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    st.add_argument("--switch", action="append", metavar="NAME",
                    help="only this switch (repeatable; default: every switch)")
    st.add_argument("--json", action="store_true",
                    help='one JSON object {"switches": {NAME: {"reachable", "pipeline" (cookie '
                         'or null), "entries" (table entries held), "primary_election_id" (or '
                         'null)}}}; with --workload also each switch\'s "difference" from that '
                         "intent")
    _intent_args(st, workload_required=False)
    _program_args(st)
    st.set_defaults(func=cmd_status)

    ctl = sub.add_parser(
        "controller", help="the long-running controller: keep every switch in its intended "
                           "state",
        description="A controller that stays: it keeps every switch of the topology equal to "
                    "the intent through restarts, drift and changes of mastership.")
    csub = ctl.add_subparsers(dest="controller_command", metavar="ACTION", required=True)
    run = csub.add_parser(
        "run",
        help="connect to every switch, become primary, reconcile until SIGTERM or Ctrl-C",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Connect to every switch of --topology (local BMv2 by the port convention of\n"
            "`innet deploy`, remote ones by their grpc address), become primary and keep each\n"
            "switch equal to the intent (the same options as `innet deploy`): the program (by\n"
            "its cookie), table entries, default actions (ECN threshold) and BMv2 queue\n"
            "settings. One thread per switch: a switch that is down never holds up the others.\n"
            "A switch whose stream breaks (it died, restarted) is reconnected with backoff and,\n"
            "when it comes back blank, gets everything again; every --interval seconds each\n"
            "switch is read and any drift repaired. A controller with a higher election id\n"
            "takes a switch over: this one stops writing there and says so, and resumes when\n"
            "that controller leaves. --backup starts as such a standby everywhere.\n"
            "With --program, it keeps your own program and each switch's runtime file\n"
            "(entries, defaults, multicast groups, clone sessions) the same way.\n\n"
            "Logs one line per event on stderr, tagged with the switch name. SIGTERM or Ctrl-C\n"
            "closes every session and exits with status 0. Design: docs/controller.md."),
    )
    run.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    _intent_args(run, workload_required=False)
    run.add_argument("--interval", type=float_in(0.05, 86400), default=2.0, metavar="SECONDS",
                     help="reconcile every switch this often (default 2)")
    role = run.add_mutually_exclusive_group()
    role.add_argument("--backup", action="store_true",
                      help="stand by (election id 0:2^40, below every writer) and take over a "
                           "switch when its primary's stream ends")
    role.add_argument("--election-id", type=_election_id, metavar="HIGH[:LOW]",
                      help="this controller's election id (default 1:0); the highest among "
                           "connected controllers is primary")
    _program_args(run)
    run.set_defaults(func=cmd_controller_run)


def _election_id(text: str) -> tuple[int, int]:
    high, _, low = text.partition(":")
    try:
        eid = (int(high), int(low or 0))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HIGH[:LOW] integers, got {text!r}") from None
    if not all(0 <= x < 1 << 64 for x in eid) or eid == (0, 0):
        raise argparse.ArgumentTypeError(f"each word in 0..2^64-1 and not 0:0, got {text!r}")
    return eid


def _pipeline(args: argparse.Namespace) -> Pipeline:
    return load_pipeline(args.p4info, args.bmv2_json)


def _own(args: argparse.Namespace, topo: Topology) -> OwnProgram:
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


def _no_runtime_without_program(args: argparse.Namespace) -> None:
    if args.runtime and not args.program:
        raise InputError("--runtime goes with --program (runtime files are for your own "
                         "program; innet's entries come from the plan)")


def build_intent(args: argparse.Namespace, topo: Topology, held: Held | None = None
                 ) -> NetworkIntent:
    """`held`: the slot ranges the switches' aggregation entries hold now; jobs that stay
    keep theirs (their cells may hold live sums)."""
    workloads = [load_workload(p, topo) for p in args.workload or ()]
    jobs = [plan_job(topo, w, args.strategy, args.k, seed=args.seed) for w in workloads]
    threshold = None if args.no_ecn else args.ecn_threshold
    return network_intent(topo, jobs, threshold, held=held)


INTENT_FIELDS = ("workload", "strategy", "k", "seed", "ecn_threshold", "no_ecn", "queue_rate",
                 "queue_depth")


def forward_to_running_network(args: argparse.Namespace) -> dict[str, Any] | None:
    """When `innet net up` holds this topology, its own controller must move to the new
    intent (a second writer with the same election id would fight it): the answer of the
    network that is up, or None when none is."""
    record = live.running()
    if record is None or Path(args.topology).resolve() != Path(record.topology):
        return None
    fields = {k: getattr(args, k) for k in INTENT_FIELDS}
    if fields.get("workload"):
        fields["workload"] = [str(Path(w).resolve()) for w in fields["workload"]]
    answer = live.ask(record, {"op": "deploy", "fields": fields})
    if "error" in answer:
        err = InputError if answer.get("exit") == 2 else NetworkError
        raise err(f"the network that is up refused the deploy: {answer['error']}")
    return answer


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.from_empty and not args.dry_run:
        raise InputError("--from-empty only goes with --dry-run")
    _no_runtime_without_program(args)
    record = live.running()
    if (args.program and not args.dry_run and record is not None
            and Path(args.topology).resolve() == Path(record.topology)):
        raise InputError(f"a network is up on this topology ({record.describe()}) and its "
                         "controller holds the switches: bring it up with --program, or stop "
                         "it first (innet net down)")
    if not args.dry_run and not args.program:
        forwarded = forward_to_running_network(args)
        if forwarded is not None:
            if args.json:
                print_json({"through_running_network": True, **forwarded})
            else:
                print(forwarded["plan"])
                changed = "; ".join(f"{n} {d}" for n, d in forwarded["switches"].items())
                print(f"through the network that is up: {forwarded['writes']} writes"
                      + (f" ({changed})" if changed else ""))
            return 0
    topo = load_topology(args.topology)
    if args.program:
        return deploy_own(args, topo, _own(args, topo))
    if not args.workload:
        raise InputError("--workload is required (the job to plan), unless --program runs "
                         "your own program")
    pipeline = _pipeline(args)
    held = None
    if not args.from_empty:
        now = status(switch_addresses(topo), pipeline)
        held = held_slots({s: st.entries for s, st in now.items() if st.runs_ours})
    intent = build_intent(args, topo, held)
    jobs: list[dict[str, Any]] = []
    for jp in intent.jobs:
        red = phi(jp.tree, [])
        ratio = jp.plan.cost / red if red > 0 else 1.0
        jobs.append({"job": jp.workload.job, "strategy": jp.plan.strategy, "k": jp.plan.k,
                     "blue": list(jp.blue), "cost": jp.plan.cost, "all_red_cost": red,
                     "ratio": ratio})
        if args.json:
            continue
        blue = ", ".join(jp.blue) or "(none)"
        print(f"job {jp.workload.job}: {jp.plan.strategy}, k = {jp.plan.k}: blue {blue}; "
              f"cost {jp.plan.cost:.4g} (all-red {red:.4g}, ratio {ratio:.3f})")
    entries = intent.entries()
    addresses = switch_addresses(topo)
    if args.from_empty:
        result = from_empty(addresses, entries, pipeline, intent.replication())
    else:
        result = deploy(addresses, entries, pipeline, dry_run=args.dry_run,
                        replication=intent.replication(),
                        setup=queue_commands(queue_settings(args)), sideband=run_cli)
    queues = queue_settings(args)
    if args.json:
        print_json({"jobs": jobs, "switches": {
            name: {"address": sd.address, "load_program": sd.pipeline,
                   "insert": [describe(e) for e in sd.diff.insert],
                   "modify": [[None if old is None else describe(old), describe(new)]
                              for old, new in sd.diff.modify],
                   "delete": [describe(e) for e in sd.diff.delete]}
            for name, sd in result.switches.items()},
            "failed": dict(result.failed),
            "program_loads": result.pipelines, "writes": result.writes,
            "seconds": result.seconds, "dry_run": result.dry_run,
            "queues": queues[0].commands() if queues and not args.dry_run else []})
    else:
        print_deploy(result, list(entries))
        if queues and not args.dry_run and result.switches:
            print(f"queues: {' and '.join(queues[0].commands())} on "
                  f"{len(result.switches)} switches")
    if result.failed:
        print(f"innet: {len(result.failed)} of {len(entries)} switches failed: "
              f"{', '.join(result.failed)}", file=sys.stderr)
        return 1
    return 0


def deploy_own(args: argparse.Namespace, topo: Topology, own: OwnProgram) -> int:
    """`deploy --program`: the runtime files' entries, groups and sessions, diffed and
    written like innet's intent."""
    pipeline = own.pipeline
    addresses = switch_addresses(topo)
    entries = own.entries()
    queues = queue_settings(args)
    if args.from_empty:
        result = from_empty(addresses, entries, pipeline, replication=own.replication())
    else:
        result = deploy(addresses, entries, pipeline, dry_run=args.dry_run,
                        replication=own.replication(),
                        setup=queue_commands(queues), sideband=run_cli)
    describe_own = pipeline.schema.describe
    if args.json:
        print_json({"program": {"p4info": pipeline.p4info_path,
                                "bmv2_json": pipeline.device_config_path,
                                "compiled": own.compiled is not None and not own.compiled.cached,
                                "tables": list(pipeline.managed.tables),
                                "replication": pipeline.managed.replication},
                    "runtime": {s: r.source for s, r in own.runtimes.items()},
                    "switches": {
            name: {"address": sd.address, "load_program": sd.pipeline,
                   "insert": [describe_own(e) for e in sd.diff.insert],
                   "modify": [[None if old is None else describe_own(old), describe_own(new)]
                              for old, new in sd.diff.modify],
                   "delete": [describe_own(e) for e in sd.diff.delete],
                   "replication": {"insert": [describe_replication(r)
                                              for r in sd.replication.insert],
                                   "modify": [describe_replication(r)
                                              for r in sd.replication.modify],
                                   "delete": [describe_replication(r)
                                              for r in sd.replication.delete]}}
            for name, sd in result.switches.items()},
            "failed": dict(result.failed), "program_loads": result.pipelines,
            "writes": result.writes, "seconds": result.seconds, "dry_run": result.dry_run})
    else:
        if own.compiled is not None:
            how = "from the cache" if own.compiled.cached else "compiled now"
            print(f"program: {args.program} ({how}: {own.compiled.bmv2_json.parent})")
        owned = ", ".join(pipeline.managed.tables) or "no table"
        print(f"the controller owns: {owned}"
              + (" and the replication engine" if pipeline.managed.replication else ""))
        print_deploy(result, list(entries), describe_own)
    if result.failed:
        print(f"innet: {len(result.failed)} of {len(entries)} switches failed: "
              f"{', '.join(result.failed)}", file=sys.stderr)
        return 1
    return 0


def describe_replication(r: Replication) -> str:
    """`multicast group 1 -> port 1 (instance 1), port 2 (instance 1)`, or a clone session."""
    reps = ", ".join(f"port {x.port} (instance {x.instance})" for x in r.replicas) or "nowhere"
    if isinstance(r, MulticastGroup):
        return f"multicast group {r.group_id} -> {reps}"
    extra = "".join([f", class of service {r.class_of_service}" if r.class_of_service else "",
                     f", cut to {r.packet_length_bytes} bytes" if r.packet_length_bytes
                     else ""])
    return f"clone session {r.session_id} -> {reps}{extra}"


def queue_settings(args: argparse.Namespace) -> tuple[QueueSetting, ...]:
    if args.queue_rate is None and args.queue_depth is None:
        return ()
    setting = QueueSetting(args.queue_rate or None, args.queue_depth or None)
    setting.commands()  # a bad value is an input error now, not on every switch later
    return (setting,)


def print_deploy(result: DeployResult, order: Sequence[str] | None = None,
                 describe: Describe = describe) -> None:
    for name in order or [*result.switches, *result.failed]:
        if name in result.failed:
            print(f"{name}: failed: {result.failed[name]}")
            continue
        sd = result.switches[name]
        d = sd.diff
        head = f"{name} ({sd.address})"
        if not sd.changed:
            print(f"{head}: unchanged")
            continue
        parts = ["load program"] if sd.pipeline else []
        parts.append(f"+{len(d.insert)} ~{len(d.modify)} -{len(d.delete)}")
        pre = sd.replication
        if pre.writes:
            parts.append(f"multicast groups +{len(pre.insert)} ~{len(pre.modify)} "
                         f"-{len(pre.delete)}")
        print(f"{head}: {'; '.join(parts)}")
        for e in d.delete:
            print(f"  - {describe(e)}")
        for old, new in d.modify:
            was = "(the program's default)" if old is None else describe(old)
            print(f"  ~ {was}  =>  {describe(new)}")
        for e in d.insert:
            print(f"  + {describe(e)}")
        pre = sd.replication
        for sign, items in (("-", pre.delete), ("~", pre.modify), ("+", pre.insert)):
            for r in items:
                print(f"  {sign} {describe_replication(r)}")
        if sd.cleaned_slots:
            print(f"  registers: slots {', '.join(map(str, sd.cleaned_slots))} back to zero")
        if sd.note:
            print(f"  note: {sd.note}")
    verb = "would write" if result.dry_run else "wrote"
    changed = sum(s.changed for s in result.switches.values())
    print(f"{len(result.switches) + len(result.failed)} switches ({changed} changed, "
          f"{len(result.switches) - changed} unchanged, {len(result.failed)} failed), "
          f"{result.pipelines} program loads, {verb} {result.writes} entries in "
          f"{result.seconds:.2f} s" + (" (dry run)" if result.dry_run else ""))


def cmd_status(args: argparse.Namespace) -> int:
    _no_runtime_without_program(args)
    topo = load_topology(args.topology)
    addresses = switch_addresses(topo)
    if args.switch:
        unknown = [s for s in args.switch if s not in addresses]
        if unknown:
            raise InputError(f"--switch: no switch {unknown[0]!r} in the topology",
                             source=args.topology)
        addresses = {s: addresses[s] for s in args.switch}
    if args.program:
        return status_own(args, addresses, _own(args, topo))
    pipeline = _pipeline(args)
    # every input given is read, and refused, before any switch is contacted, in both modes
    want = _status_intent(args, topo, pipeline)
    if args.json:
        return status_json(addresses, pipeline, want)
    result = status(addresses, pipeline)
    for name in sorted(result, key=natural_key):
        print_status(result[name], None if want is None else want.get(name, []))
    return _status_exit([name for name, st in result.items() if st.error], len(result))


def status_own(args: argparse.Namespace, addresses: dict[str, SwitchAddress],
               own: OwnProgram) -> int:
    """`status --program`: what each switch holds in the tables the runtime files name, its
    groups and sessions, its counters' non-zero cells, and how far that is from its file."""
    pipeline = own.pipeline
    describe_own = pipeline.schema.describe
    result = status(addresses, pipeline)
    want = own.entries()
    want_pre = own.replication()
    out: dict[str, Any] = {}
    for name in sorted(result, key=natural_key):
        st = result[name]
        rec: dict[str, Any] = {"address": st.address, "reachable": st.error is None,
                               "runs_program": st.runs_ours}
        if st.error:
            rec["error"] = st.error
        if st.runs_ours:
            d = diff(st.entries, want.get(name, ()))
            pre = diff_replication(st.replication, want_pre.get(name, ()))
            rec |= {"entries": [describe_own(e) for e in st.entries],
                    "replication": [describe_replication(r) for r in st.replication],
                    "counters": {c: {str(i): list(v) for i, v in cells.items() if any(v)}
                                 for c, cells in st.counters.items()},
                    "in_runtime_file": d.writes == 0 and pre.writes == 0,
                    "missing": [describe_own(e) for e in d.insert],
                    "wrong": [describe_own(n) for _, n in d.modify],
                    "extra": [describe_own(e) for e in d.delete]}
        out[name] = rec
    if args.json:
        print_json({"switches": out}, indent=1)
        return 0
    for name, rec in out.items():
        head = f"{name} ({rec['address']})"
        if not rec["reachable"]:
            print(f"{head}: cannot read: {rec['error']}\n")
            continue
        if not rec["runs_program"]:
            print(f"{head}: does not run {args.program}\n")
            continue
        state = "as its runtime file says" if rec["in_runtime_file"] else (
            f"differs from its runtime file: {len(rec['missing'])} missing, "
            f"{len(rec['wrong'])} wrong, {len(rec['extra'])} extra")
        print(f"{head}: {len(rec['entries'])} entries, {state}")
        for line in rec["entries"] + rec["replication"]:
            print(f"  {line}")
        for counter, cells in rec["counters"].items():
            if cells:
                print(f"  counter {counter}: " + ", ".join(
                    f"[{i}] {p} pkts {b} bytes" for i, (p, b) in cells.items()))
        print()
    return _status_exit([n for n, rec in out.items() if not rec["reachable"]], len(out))


def _status_intent(args: argparse.Namespace, topo: Topology,
                   pipeline: Pipeline) -> dict[str, list[Entry]] | None:
    """Per switch, the entries the --workload intent wants (normalised as read back), or None
    without --workload."""
    if not args.workload:
        return None
    entries = build_intent(args, topo).entries()
    return {s: [normalise(pipeline.schema, e) for e in es] for s, es in entries.items()}


def _status_exit(unread: Sequence[str], total: int) -> int:
    """One rule with and without --json: 1 when a switch could not be read (the output says
    which), 0 when every one was."""
    if unread:
        hint = ("; no switch answers: is the network up? `sudo innet net up --topology FILE` "
                "starts one and stays up" if len(unread) == total else "")
        print(f"innet: {len(unread)} of {total} switches could not be read: "
              f"{', '.join(sorted(unread, key=natural_key)[:8])}"
              + (", ..." if len(unread) > 8 else "") + hint, file=sys.stderr)
        return 1
    return 0


def print_status(st: SwitchStatus, want: list[Entry] | None = None) -> None:
    """A switch's entries and counters; with `want` (the --workload intent), also how far it
    is from it."""
    if st.error:
        print(f"{st.switch} ({st.address}): cannot read: {st.error}")
        print()
        return
    if not st.runs_ours:
        print(f"{st.switch} ({st.address}): does not run the innet program")
        if want is not None:
            print("  intent: a deploy would load the program and write "
                  f"{len(want)} entries")
        print()
        return
    print(f"{st.switch} ({st.address}): {len(st.entries)} entries")
    for e in st.entries:
        print(f"  {describe(e)}")
    pool = held_slots({st.switch: st.entries}).get(st.switch, {})
    used = sum(n for _, n in pool.values())
    print(f"  slot pool: {used} of {SLOTS} cells used by {len(pool)} job(s)"
          + "".join(f"; job {j}: {b}..{b + n - 1}" for j, (b, n) in sorted(pool.items())))
    rows = port_rows(st.counters)
    if rows:
        print(format_table(["port", "in pkts", "in bytes", "out pkts", "out bytes", "CE marked",
                            "agg first", "agg again"], rows))
    events = st.counters.get(C_AGG_EVENTS, {})
    counts = [f"{n} {events.get(i, (0, 0))[0]}" for i, n in enumerate(AGG_EVENT_NAMES)]
    print("  aggregation packets: " + ", ".join(counts))
    if want is not None:
        d = diff(list(st.entries), want)
        print("  intent: in place" if d.writes == 0 else
              f"  intent: {len(d.insert)} missing, {len(d.modify)} wrong, {len(d.delete)} "
              "extra (innet deploy writes the difference)")
    print()


def port_rows(counters: dict[str, dict[int, tuple[int, int]]]) -> list[Sequence[Any]]:
    """One row per port that counted anything: packets and bytes in and out, CE marks, and the
    aggregation packets sent out as a chunk's first transmission or again."""
    names = (C_PORT_IN, C_PORT_OUT, C_ECN_MARKED, C_AGG_FIRST, C_AGG_REPEAT)
    pin, pout, ce, first, repeat = (counters.get(n, {}) for n in names)
    ports = sorted(p for p in set().union(pin, pout, ce, first, repeat)
                   if any(c.get(p, (0, 0))[0] for c in (pin, pout, ce, first, repeat)))
    return [[p, pin.get(p, (0, 0))[0], pin.get(p, (0, 0))[1], pout.get(p, (0, 0))[0],
             pout.get(p, (0, 0))[1], ce.get(p, (0, 0))[0], first.get(p, (0, 0))[0],
             repeat.get(p, (0, 0))[0]] for p in ports]


def status_json(addresses: dict[str, SwitchAddress], pipeline: Pipeline,
                want: dict[str, list[Entry]] | None) -> int:
    """`status --json`: one document, unreachable switches in it too; the exit status follows
    the rule of the text output (`_status_exit`)."""
    out = probe(addresses, pipeline, want)
    print_json({"switches": {n: out[n] for n in addresses}}, indent=1)
    return _status_exit([n for n in addresses if not out[n]["reachable"]], len(addresses))


def probe(addresses: dict[str, SwitchAddress], pipeline: Pipeline,
          want: dict[str, list[Entry]] | None) -> dict[str, dict[str, Any]]:
    """Per switch: reachable, pipeline cookie, entry count, primary's election id, and (with
    `want`) what differs from it. Read-only: a reader's election id never takes over."""
    def one(name: str) -> dict[str, Any]:
        rec: dict[str, Any] = {"reachable": False, "pipeline": None, "entries": 0,
                               "primary_election_id": None}
        try:
            with SwitchClient(addresses[name], pipeline.schema, writer=False) as c:
                rec["reachable"] = True
                arb = c.arbitration
                # our reader primary means no controller is connected: report none
                if arb is not None and not arb.primary and arb.primary_election_id is not None:
                    rec["primary_election_id"] = election_int(arb.primary_election_id)
                rec["pipeline"] = c.pipeline_cookie()
                rec["entries"] = c.count_entries()
                if want is not None and name in want:
                    rec["difference"] = difference(c, pipeline, want[name])
        except SwitchError as exc:
            rec["error"] = str(exc)
        return rec

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(addresses)))) as pool:
        futures = {n: pool.submit(one, n) for n in addresses}
    return {n: f.result() for n, f in futures.items()}


def difference(client: SwitchClient, pipeline: Pipeline, want: list[Entry]) -> dict[str, Any]:
    """What a deploy would do to this switch, as lists of readable entries."""
    ours = client.pipeline_cookie() == pipeline.cookie
    have = client.read_entries(MANAGED_TABLES, DEFAULT_TABLES) if ours else []
    d = diff(have, want)
    return {"load_program": not ours,
            "missing": [describe(e) for e in d.insert],
            "wrong": [describe(new) for _, new in d.modify],
            "extra": [describe(e) for e in d.delete],
            "in_intent": ours and d.writes == 0}


def cmd_controller_run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from innet.p4rt.controller import Controller, SwitchTarget, event

    _no_runtime_without_program(args)
    topo = load_topology(args.topology)
    queues = queue_settings(args)
    addresses = switch_addresses(topo)
    if args.program:
        own = _own(args, topo)
        pipeline = own.pipeline
        targets = own.targets(queue_commands(queues))
        what = (f"program {args.program}, {sum(len(t.entries) for t in targets.values())} "
                "entries from runtime files")
    else:
        intent = build_intent(args, topo)
        pipeline = _pipeline(args)
        groups = intent.replication()
        targets = {s: SwitchTarget(es, queue_commands(queues), groups[s])
                   for s, es in intent.entries().items()}
        for es in intent.entries().values():  # an intent the program cannot hold: exit 2 now
            for e in es:
                normalise(pipeline.schema, e)
        what = f"{len(intent.jobs)} jobs"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("innet.controller")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # p4runtime-shell's root-logger calls may configure the root
    stop = threading.Event()
    why: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        why.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    ctl = Controller(addresses, pipeline, targets, interval=args.interval,
                     election_id=args.election_id, backup=args.backup, sideband=run_cli)
    role = "standby" if args.backup else "primary"
    event("controller", f"{len(targets)} switches, {what}, interval "
                        f"{args.interval:g} s, starting as {role}")
    try:
        ctl.start()
        while not stop.wait(0.5):
            pass
    finally:
        ctl.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
        logger.removeHandler(handler)
    print(f"{time.strftime('%H:%M:%S')} controller: stopped on {why[0] if why else 'exit'}; "
          "every session closed", file=sys.stderr)
    return 0
