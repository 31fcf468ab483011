"""`innet deploy` and `innet status`: plans onto P4Runtime switches, and what they hold."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from innet.aggpacket import AGG_UDP_PORT, EVENT_NAMES, SLOTS
from innet.argtypes import SEED, K, float_in, int_in
from innet.bmv2.local import switch_addresses
from innet.errors import InputError
from innet.jsonout import print_json
from innet.names import natural_key
from innet.p4rt.client import (
    SwitchAddress,
    SwitchClient,
    SwitchError,
    election_int,
)
from innet.p4rt.deploy import DeployResult, SwitchStatus, deploy, diff, status
from innet.p4rt.encode import normalise
from innet.p4rt.entities import Entry
from innet.p4rt.schema import Pipeline
from innet.p4rt.thrift import QueueSetting
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
    p.add_argument("--p4info",
                   help="P4Info text file (default: the committed p4src/innet.p4info.txtpb)")
    p.add_argument("--bmv2-json", help="BMv2 JSON (default: the committed p4src/innet.json)")


def _intent_args(p: Any, *, workload_required: bool) -> None:
    """The options that make an intent, shared by deploy, controller run and status."""
    p.add_argument("--workload", required=workload_required, action="append", metavar="FILE",
                   help="a job's workers and destination; repeat for several jobs"
                        + ("" if workload_required else " (default: none, routes only)"))
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
            f"contributor bitmap of UDP port {AGG_UDP_PORT} packets."),
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
                    "events). Addresses as for `innet deploy`.",
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
            "that controller leaves. --backup starts as such a standby everywhere.\n\n"
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


def build_intent(args: argparse.Namespace, topo: Topology, held: Held | None = None
                 ) -> NetworkIntent:
    """`held`: the slot ranges the switches' aggregation entries hold now; jobs that stay
    keep theirs (their cells may hold live sums)."""
    workloads = [load_workload(p, topo) for p in args.workload or ()]
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
        from innet.p4rt.deploy import SwitchDeploy

        t = {s: SwitchDeploy(s, addresses[s].grpc, True,
                             diff([], [normalise(pipeline.schema, e) for e in es]), 0.0)
             for s, es in entries.items()}
        result = DeployResult(t, 0.0, True)
    else:
        result = deploy(addresses, entries, pipeline, dry_run=args.dry_run,
                        queues=queue_settings(args))
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


def queue_settings(args: argparse.Namespace) -> tuple[QueueSetting, ...]:
    if args.queue_rate is None and args.queue_depth is None:
        return ()
    setting = QueueSetting(args.queue_rate or None, args.queue_depth or None)
    setting.commands()  # a bad value is an input error now, not on every switch later
    return (setting,)


def print_deploy(result: DeployResult, order: Sequence[str] | None = None) -> None:
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
        print(f"{head}: {'; '.join(parts)}")
        for e in d.delete:
            print(f"  - {describe(e)}")
        for old, new in d.modify:
            was = "(the program's default)" if old is None else describe(old)
            print(f"  ~ {was}  =>  {describe(new)}")
        for e in d.insert:
            print(f"  + {describe(e)}")
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
    topo = load_topology(args.topology)
    addresses = switch_addresses(topo)
    if args.switch:
        unknown = [s for s in args.switch if s not in addresses]
        if unknown:
            raise InputError(f"--switch: no switch {unknown[0]!r} in the topology",
                             source=args.topology)
        addresses = {s: addresses[s] for s in args.switch}
    pipeline = _pipeline(args)
    # every input given is read, and refused, before any switch is contacted, in both modes
    want = _status_intent(args, topo, pipeline)
    if args.json:
        return status_json(addresses, pipeline, want)
    result = status(addresses, pipeline)
    for name in sorted(result, key=natural_key):
        print_status(result[name], None if want is None else want.get(name, []))
    return _status_exit([name for name, st in result.items() if st.error], len(result))


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
        print(f"innet: {len(unread)} of {total} switches could not be read: "
              f"{', '.join(sorted(unread, key=natural_key)[:8])}"
              + (", ..." if len(unread) > 8 else ""), file=sys.stderr)
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

    topo = load_topology(args.topology)
    intent = build_intent(args, topo)
    pipeline = _pipeline(args)
    queues = queue_settings(args)
    addresses = switch_addresses(topo)
    targets = {s: SwitchTarget(es, queues) for s, es in intent.entries().items()}
    for es in intent.entries().values():  # an intent the program cannot hold: exit 2 now
        for e in es:
            normalise(pipeline.schema, e)
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
                     election_id=args.election_id, backup=args.backup)
    role = "standby" if args.backup else "primary"
    event("controller", f"{len(targets)} switches, {len(intent.jobs)} jobs, interval "
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
