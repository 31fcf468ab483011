"""`innet deploy` and `innet status`: plans onto P4Runtime switches, and what they hold."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from controller.aggpacket import AGG_UDP_PORT, EVENT_NAMES, SLOTS
from controller.argtypes import int_at_least
from controller.errors import InputError
from controller.p4rt.client import switch_addresses
from controller.p4rt.deploy import DeployResult, SwitchStatus, deploy, status
from controller.p4rt.intent import (
    DEFAULT_ECN_THRESHOLD,
    Held,
    NetworkIntent,
    describe,
    held_slots,
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

AGG_EVENT_NAMES = EVENT_NAMES


_nonneg = int_at_least(0)


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
    dep.add_argument("--topology", required=True, metavar="FILE")
    dep.add_argument("--workload", required=True, action="append", metavar="FILE",
                     help="a job's workers and destination; repeat for several jobs")
    dep.add_argument("--strategy", default="soar", choices=list(STRATEGIES),
                     help="which switches aggregate (default soar: optimal for k)")
    dep.add_argument("-k", type=_nonneg, default=None,
                     help="at most this many aggregating switches per job "
                          "(default: no limit)")
    dep.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    ecn = dep.add_mutually_exclusive_group()
    ecn.add_argument("--ecn-threshold", type=_nonneg, default=DEFAULT_ECN_THRESHOLD,
                     metavar="PKTS", help="mark ECT packets CE from this egress queue depth "
                                          f"(default {DEFAULT_ECN_THRESHOLD})")
    ecn.add_argument("--no-ecn", action="store_true", help="never mark")
    dep.add_argument("--queue-rate", type=_nonneg, metavar="PPS",
                     help="BMv2 egress queue rate of every port (thrift), packets/s")
    dep.add_argument("--queue-depth", type=_nonneg, metavar="PKTS",
                     help="BMv2 egress queue depth of every port (thrift), packets")
    dep.add_argument("--dry-run", action="store_true",
                     help="read the switches and print the difference; write nothing")
    dep.add_argument("--from-empty", action="store_true",
                     help="with --dry-run: contact no switch, show what empty switches "
                          "would get")
    _program_args(dep)
    dep.set_defaults(func=cmd_deploy)

    st = sub.add_parser(
        "status",
        help="what each switch holds and counts",
        description="Read every switch's routes, aggregation entries, ECN setting and "
                    "counters (per-port packets/bytes in and out, CE marks, aggregation "
                    "events). Addresses as for `innet deploy`.",
    )
    st.add_argument("--topology", required=True, metavar="FILE")
    st.add_argument("--switch", action="append", metavar="NAME",
                    help="only this switch (repeatable)")
    _program_args(st)
    st.set_defaults(func=cmd_status)


def _pipeline(args: argparse.Namespace) -> Pipeline:
    return load_pipeline(args.p4info, args.bmv2_json)


def build_intent(args: argparse.Namespace, topo: Topology, held: Held | None = None
                 ) -> NetworkIntent:
    """`held`: the slot ranges the switches' aggregation entries hold now; jobs that stay
    keep theirs (their cells may hold live sums)."""
    workloads = [load_workload(p, topo) for p in args.workload]
    jobs = [plan_job(topo, w, args.strategy, args.k, seed=args.seed) for w in workloads]
    threshold = None if args.no_ecn else args.ecn_threshold
    return network_intent(topo, jobs, threshold, held=held)


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.from_empty and not args.dry_run:
        raise InputError("--from-empty only goes with --dry-run")
    topo = load_topology(args.topology)
    pipeline = _pipeline(args)
    held = None
    if not args.from_empty:
        now = status(switch_addresses(topo), pipeline)
        held = held_slots({s: st.entries for s, st in now.items() if st.runs_ours})
    intent = build_intent(args, topo, held)
    for jp in intent.jobs:
        red = phi(jp.tree, [])
        ratio = jp.plan.cost / red if red > 0 else 1.0
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
    print_deploy(result)
    if not args.dry_run and (args.queue_rate is not None or args.queue_depth is not None):
        setting = QueueSetting(args.queue_rate or None, args.queue_depth or None)
        for name in entries:
            set_queues(addresses[name], [setting])
        print(f"queues: {' and '.join(setting.commands())} on {len(entries)} switches")
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
    pool = held_slots({st.switch: st.entries}).get(st.switch, {})
    used = sum(n for _, n in pool.values())
    print(f"  slot pool: {used} of {SLOTS} cells used by {len(pool)} job(s)"
          + "".join(f"; job {j}: {b}..{b + n - 1}" for j, (b, n) in sorted(pool.items())))
    rows = port_rows(st.counters)
    if rows:
        print(format_table(["port", "in pkts", "in bytes", "out pkts", "out bytes", "CE marked"],
                           rows))
    events = st.counters.get("agg_events", {})
    counts = [f"{n} {events.get(i, (0, 0))[0]}" for i, n in enumerate(AGG_EVENT_NAMES)]
    print("  aggregation packets: " + ", ".join(counts))
    print()


def port_rows(counters: dict[str, dict[int, tuple[int, int]]]) -> list[Sequence[Any]]:
    """One row per port that counted anything."""
    pin, pout, ce = (counters.get(n, {}) for n in ("port_in", "port_out", "ecn_marked"))
    ports = sorted(p for p in set(pin) | set(pout) | set(ce)
                   if pin.get(p, (0, 0))[0] or pout.get(p, (0, 0))[0] or ce.get(p, (0, 0))[0])
    return [[p, pin.get(p, (0, 0))[0], pin.get(p, (0, 0))[1], pout.get(p, (0, 0))[0],
             pout.get(p, (0, 0))[1], ce.get(p, (0, 0))[0]] for p in ports]
