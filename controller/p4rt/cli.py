"""`innet deploy` and `innet status`: plans onto P4Runtime switches, and what they hold."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from controller.aggpacket import AGG_UDP_PORT
from controller.argtypes import SEED, K, int_in
from controller.errors import InputError
from controller.jsonout import print_json
from controller.p4rt.client import switch_addresses
from controller.p4rt.deploy import DeployResult, SwitchStatus, deploy, status
from controller.p4rt.intent import (
    DEFAULT_ECN_THRESHOLD,
    NetworkIntent,
    describe,
    load_workload,
    network_intent,
    plan_job,
)
from controller.p4rt.schema import Pipeline, load_pipeline
from controller.p4rt.thrift import QueueSetting, set_queues
from controller.soar.baselines import STRATEGIES
from controller.soar.model import natural_key, phi
from controller.table import format_table
from controller.topology import Topology, load_topology

AGG_EVENT_NAMES = ("held", "emitted", "duplicate", "busy", "foreign")


_threshold = int_in(0, 2**19 - 1)  # the program compares it with enq_qdepth, a bit<19>
_queue_rate = int_in(1, 10**9)  # packets/s; 0 would stop the port, not mean "default"
_queue_depth = int_in(1, 2**19 - 1)


def _program_args(p: Any) -> None:
    p.add_argument("--p4info",
                   help="P4Info text file (default: the committed p4src/innet.p4info.txtpb)")
    p.add_argument("--bmv2-json", help="BMv2 JSON (default: the committed p4src/innet.json)")


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
            f"contributor bitmap of UDP port {AGG_UDP_PORT} packets."),
    )
    dep.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    dep.add_argument("--workload", required=True, action="append", metavar="FILE",
                     help="a job's workers and destination; repeat for several jobs")
    dep.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                     help="which switches aggregate (default soar: optimal for k)")
    dep.add_argument("-k", type=K, default=None,
                     help="at most this many aggregating switches per job "
                          "(default: no limit)")
    dep.add_argument("--seed", type=SEED, default=0, help="seed of the random strategy")
    ecn = dep.add_mutually_exclusive_group()
    ecn.add_argument("--ecn-threshold", type=_threshold, default=DEFAULT_ECN_THRESHOLD,
                     metavar="PKTS", help="mark ECT packets CE from this egress queue depth "
                                          f"(default {DEFAULT_ECN_THRESHOLD})")
    ecn.add_argument("--no-ecn", action="store_true", help="never mark")
    dep.add_argument("--queue-rate", type=_queue_rate, metavar="PPS",
                     help="BMv2 egress queue rate of every port (thrift), packets/s "
                          "(default: leave as is)")
    dep.add_argument("--queue-depth", type=_queue_depth, metavar="PKTS",
                     help="BMv2 egress queue depth of every port (thrift), packets "
                          "(default: leave as is)")
    dep.add_argument("--dry-run", action="store_true",
                     help="read the switches and print the difference; write nothing")
    dep.add_argument("--from-empty", action="store_true",
                     help="with --dry-run: contact no switch, show what empty switches "
                          "would get")
    _program_args(dep)
    dep.add_argument("--json", action="store_true",
                     help='print {"jobs": [{"job", "strategy", "k", "blue", "cost", '
                          '"all_red_cost", "ratio"}], "switches": {name: {"address", '
                          '"load_program", "insert", "modify", "delete"}}, "program_loads", '
                          '"writes", "seconds", "dry_run", "queues"}')
    dep.set_defaults(func=cmd_deploy)

    st = sub.add_parser(
        "status",
        help="what each switch holds and counts",
        description="Read every switch's routes, aggregation entries, ECN setting and "
                    "counters (per-port packets/bytes in and out, CE marks, aggregation "
                    "events). Addresses as for `innet deploy`.",
    )
    st.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    st.add_argument("--switch", action="append", metavar="NAME",
                    help="only this switch (repeatable; default: every switch)")
    _program_args(st)
    st.add_argument("--json", action="store_true",
                    help='print {"switches": [{"switch", "address", "error", "runs_ours", '
                         '"entries", "ports": [{"port", "in_pkts", "in_bytes", "out_pkts", '
                         '"out_bytes", "ce_marked"}], "aggregation_packets"}]}')
    st.set_defaults(func=cmd_status)


def _pipeline(args: argparse.Namespace) -> Pipeline:
    return load_pipeline(args.p4info, args.bmv2_json)


def build_intent(args: argparse.Namespace, topo: Topology) -> NetworkIntent:
    workloads = [load_workload(p, topo) for p in args.workload]
    jobs = [plan_job(topo, w, args.strategy, args.k, seed=args.seed) for w in workloads]
    threshold = None if args.no_ecn else args.ecn_threshold
    return network_intent(topo, jobs, threshold)


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.from_empty and not args.dry_run:
        raise InputError("--from-empty only goes with --dry-run")
    topo = load_topology(args.topology)
    intent = build_intent(args, topo)
    pipeline = _pipeline(args)
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
        from controller.p4rt.deploy import SwitchDeploy, diff
        from controller.p4rt.encode import normalise

        t = {s: SwitchDeploy(s, addresses[s].grpc, True,
                             diff([], [normalise(pipeline.schema, e) for e in es]), 0.0)
             for s, es in entries.items()}
        result = DeployResult(t, 0.0, True)
    else:
        result = deploy(addresses, entries, pipeline, dry_run=args.dry_run)
    if not args.json:
        print_deploy(result)
    queues: list[str] = []
    if not args.dry_run and (args.queue_rate is not None or args.queue_depth is not None):
        setting = QueueSetting(args.queue_rate, args.queue_depth)
        for name in entries:
            set_queues(addresses[name], [setting])
        queues = setting.commands()
        if not args.json:
            print(f"queues: {' and '.join(queues)} on {len(entries)} switches")
    if args.json:
        print_json({"jobs": jobs, "switches": {
            name: {"address": sd.address, "load_program": sd.pipeline,
                   "insert": [describe(e) for e in sd.diff.insert],
                   "modify": [[None if old is None else describe(old), describe(new)]
                              for old, new in sd.diff.modify],
                   "delete": [describe(e) for e in sd.diff.delete]}
            for name, sd in result.switches.items()},
            "program_loads": result.pipelines, "writes": result.writes,
            "seconds": result.seconds, "dry_run": result.dry_run, "queues": queues})
    return 0


def print_deploy(result: DeployResult) -> None:
    for name, sd in result.switches.items():
        d = sd.diff
        head = f"{name} ({sd.address})"
        if not sd.changed:
            print(f"{head}: unchanged")
            continue
        parts = ["load program"] if sd.pipeline else []
        parts.append(f"+{len(d.insert)} ~{len(d.modify)} -{len(d.delete)}")
        print(f"{head}: {'; '.join(parts)}")
        for e in d.delete:
            print(f"  - {describe(e)}")
        for old, new in d.modify:
            was = "(the program's default)" if old is None else describe(old)
            print(f"  ~ {was}  =>  {describe(new)}")
        for e in d.insert:
            print(f"  + {describe(e)}")
    verb = "would write" if result.dry_run else "wrote"
    print(f"{len(result.switches)} switches, {result.pipelines} program loads, {verb} "
          f"{result.writes} entries in {result.seconds:.2f} s"
          + (" (dry run)" if result.dry_run else ""))


def cmd_status(args: argparse.Namespace) -> int:
    topo = load_topology(args.topology)
    addresses = switch_addresses(topo)
    if args.switch:
        unknown = [s for s in args.switch if s not in addresses]
        if unknown:
            raise InputError(f"--switch: no switch {unknown[0]!r} in the topology",
                             source=args.topology)
        addresses = {s: addresses[s] for s in args.switch}
    result = status(addresses, _pipeline(args))
    if args.json:
        print_json({"switches": [status_dict(result[name])
                                 for name in sorted(result, key=natural_key)]})
    else:
        for name in sorted(result, key=natural_key):
            print_status(result[name])
    failed = [s for s in result.values() if s.error]
    if failed:
        print(f"innet: {len(failed)} of {len(result)} switches could not be read",
              file=sys.stderr)
    return 1 if failed else 0


def print_status(st: SwitchStatus) -> None:
    if st.error:
        print(f"{st.switch} ({st.address}): cannot read: {st.error}")
        print()
        return
    if not st.runs_ours:
        print(f"{st.switch} ({st.address}): does not run the innet program")
        print()
        return
    print(f"{st.switch} ({st.address}): {len(st.entries)} entries")
    for e in st.entries:
        print(f"  {describe(e)}")
    rows = port_rows(st.counters)
    if rows:
        print(format_table(["port", "in pkts", "in bytes", "out pkts", "out bytes", "CE marked"],
                           rows))
    events = st.counters.get("agg_events", {})
    counts = [f"{n} {events.get(i, (0, 0))[0]}" for i, n in enumerate(AGG_EVENT_NAMES)]
    print("  aggregation packets: " + ", ".join(counts))
    print()


def status_dict(st: SwitchStatus) -> dict[str, Any]:
    """What `print_status` shows, as JSON: the same names as its columns."""
    events = st.counters.get("agg_events", {})
    return {"switch": st.switch, "address": st.address, "error": st.error,
            "runs_ours": st.runs_ours, "entries": [describe(e) for e in st.entries],
            "ports": [dict(zip(("port", "in_pkts", "in_bytes", "out_pkts", "out_bytes",
                                "ce_marked"), row, strict=True))
                      for row in port_rows(st.counters)],
            "aggregation_packets": {n: events.get(i, (0, 0))[0]
                                    for i, n in enumerate(AGG_EVENT_NAMES)}}


def port_rows(counters: dict[str, dict[int, tuple[int, int]]]) -> list[Sequence[Any]]:
    """One row per port that counted anything."""
    pin, pout, ce = (counters.get(n, {}) for n in ("port_in", "port_out", "ecn_marked"))
    ports = sorted(p for p in set(pin) | set(pout) | set(ce)
                   if pin.get(p, (0, 0))[0] or pout.get(p, (0, 0))[0] or ce.get(p, (0, 0))[0])
    return [[p, pin.get(p, (0, 0))[0], pin.get(p, (0, 0))[1], pout.get(p, (0, 0))[0],
             pout.get(p, (0, 0))[1], ce.get(p, (0, 0))[0]] for p in ports]
