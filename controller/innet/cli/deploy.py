"""`innet deploy` and `innet status`: plans onto P4Runtime switches, and what they hold."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from innet.aggpacket import AGG_UDP_PORT, EVENT_NAMES, SLOTS
from innet.bmv2.local import switch_addresses
from innet.bmv2.own_program import OwnProgram
from innet.bmv2.thrift import queue_commands, queue_settings, run_cli
from innet.cli.argtypes import float_in
from innet.cli.options import (
    add_intent_options,
    add_json,
    add_program_options,
    add_tls,
    add_topology,
    check_runtime_needs_program,
    client_tls,
    intent_options,
    own_program,
)
from innet.emulation import live
from innet.errors import InputError, NetworkError
from innet.jsonout import print_json
from innet.names import natural_key
from innet.p4rt.client import SwitchAddress
from innet.p4rt.deploy import (
    DeployResult,
    SwitchStatus,
    deploy,
    diff,
    diff_replication,
    from_empty,
    status,
)
from innet.p4rt.encode import normalise
from innet.p4rt.entities import Describe, Entry, describe_replication
from innet.p4rt.probe import probe
from innet.p4rt.schema import Pipeline
from innet.plan.intent import JobPlan, build_intent, held_slots
from innet.plan.pipeline import load_pipeline
from innet.plan.program import (
    C_AGG_EVENTS,
    C_AGG_FIRST,
    C_AGG_REPEAT,
    C_ECN_MARKED,
    C_PORT_IN,
    C_PORT_OUT,
    describe,
)
from innet.soar.model import phi
from innet.table import format_table
from innet.topology import Topology, load_topology

AGG_EVENT_NAMES = EVENT_NAMES


def register(sub: Any) -> None:
    _register_deploy(sub)
    _register_status(sub)
    _register_controller(sub)


def _register_deploy(sub: Any) -> None:
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
    add_topology(dep)
    add_intent_options(dep, workload_required=True)
    dep.add_argument("--dry-run", action="store_true",
                     help="read the switches and print the difference; write nothing")
    dep.add_argument("--from-empty", action="store_true",
                     help="with --dry-run: contact no switch, show what empty switches "
                          "would get")
    add_program_options(dep)
    add_tls(dep, starts=False)
    add_json(dep, 'print {"jobs": [{"job", "strategy", "k", "blue", "cost", '
                          '"all_red_cost", "ratio"}], "switches": {name: {"address", '
                          '"load_program", "insert", "modify", "delete"}}, "failed": {name: '
                          'reason}, "program_loads", "writes", "seconds", "dry_run", "queues"}')
    dep.set_defaults(func=cmd_deploy)


def _register_status(sub: Any) -> None:
    st = sub.add_parser(
        "status",
        help="what each switch holds and counts",
        description="Read every switch's routes, aggregation entries, ECN setting and "
                    "counters (per-port packets/bytes in and out, CE marks, aggregation "
                    "events). Addresses as for `innet deploy`. With --program: the tables "
                    "your program's runtime files name, its groups, sessions and counters, "
                    "and how far each switch is from its file.",
    )
    add_topology(st)
    st.add_argument("--switch", action="append", metavar="NAME",
                    help="only this switch (repeatable; default: every switch)")
    add_json(st, 'one JSON object {"switches": {NAME: {"reachable", "pipeline" (cookie '
                         'or null), "entries" (table entries held), "primary_election_id" (or '
                         'null)}}}; with --workload also each switch\'s "difference" from that '
                         "intent")
    add_intent_options(st, workload_required=False)
    add_program_options(st)
    add_tls(st, starts=False)
    st.set_defaults(func=cmd_status)


def _register_controller(sub: Any) -> None:
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
    add_topology(run)
    add_intent_options(run, workload_required=False)
    run.add_argument("--interval", type=float_in(0.05, 86400), default=2.0, metavar="SECONDS",
                     help="reconcile every switch this often (default 2)")
    role = run.add_mutually_exclusive_group()
    role.add_argument("--backup", action="store_true",
                      help="stand by (election id 0:2^40, below every writer) and take over a "
                           "switch when its primary's stream ends")
    role.add_argument("--election-id", type=_election_id, metavar="HIGH[:LOW]",
                      help="this controller's election id (default 1:0); the highest among "
                           "connected controllers is primary")
    add_program_options(run)
    add_tls(run, starts=False)
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


def forward_to_running_network(args: argparse.Namespace) -> dict[str, Any] | None:
    """When `innet net up` holds this topology, its own controller must move to the new
    intent (a second writer with the same election id would fight it): the answer of the
    network that is up, or None when none is. The request carries the intent options' JSON,
    workload paths made absolute (the network's process has its own working directory)."""
    record = live.running()
    if record is None or Path(args.topology).resolve() != Path(record.topology):
        return None
    options = intent_options(args)
    options = replace(options, workloads=tuple(str(Path(w).resolve())
                                               for w in options.workloads))
    answer = live.ask(record, {"op": "deploy", "options": options.to_json()})
    if "error" in answer:
        err = InputError if answer.get("exit") == 2 else NetworkError
        raise err(f"the network that is up refused the deploy: {answer['error']}")
    return answer


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.from_empty and not args.dry_run:
        raise InputError("--from-empty only goes with --dry-run")
    check_runtime_needs_program(args)
    record = live.running()
    if (args.program and not args.dry_run and record is not None
            and Path(args.topology).resolve() == Path(record.topology)):
        raise InputError(f"a network is up on this topology ({record.describe()}) and its "
                         "controller holds the switches: bring it up with --program, or stop "
                         "it first (innet net down)")
    if not args.dry_run and not args.program:
        forwarded = forward_to_running_network(args)
        if forwarded is not None:
            _print_forwarded(forwarded, args.json)
            return 0
    topo = load_topology(args.topology)
    if args.program:
        return deploy_own(args, topo, own_program(args, topo))
    if not args.workload:
        raise InputError("--workload is required (the job to plan), unless --program runs "
                         "your own program")
    return _deploy_intent(args, topo)


def _print_forwarded(answer: dict[str, Any], as_json: bool) -> None:
    """What the network that is up did with the deploy it was handed."""
    if as_json:
        print_json({"through_running_network": True, **answer})
        return
    print(answer["plan"])
    changed = "; ".join(f"{n} {d}" for n, d in answer["switches"].items())
    print(f"through the network that is up: {answer['writes']} writes"
          + (f" ({changed})" if changed else ""))


def _job_summary(jp: JobPlan) -> dict[str, Any]:
    red = phi(jp.tree, [])
    return {"job": jp.workload.job, "strategy": jp.plan.strategy, "k": jp.plan.k,
            "blue": list(jp.blue), "cost": jp.plan.cost, "all_red_cost": red,
            "ratio": jp.plan.cost / red if red > 0 else 1.0}


def _deploy_intent(args: argparse.Namespace, topo: Topology) -> int:
    """innet's program: plan the workloads, then write each switch's difference."""
    pipeline = load_pipeline(args.p4info, args.bmv2_json)
    held = None
    if not args.from_empty:
        now = status(switch_addresses(topo, client_tls(args)), pipeline)
        held = held_slots({s: st.entries for s, st in now.items() if st.runs_ours})
    intent = build_intent(intent_options(args), topo, held)
    jobs = [_job_summary(jp) for jp in intent.jobs]
    if not args.json:
        for j in jobs:
            print(f"job {j['job']}: {j['strategy']}, k = {j['k']}: blue "
                  f"{', '.join(j['blue']) or '(none)'}; cost {j['cost']:.4g} (all-red "
                  f"{j['all_red_cost']:.4g}, ratio {j['ratio']:.3f})")
    entries = intent.entries()
    addresses = switch_addresses(topo, client_tls(args))
    queues = queue_settings(args.queue_rate, args.queue_depth)
    if args.from_empty:
        result = from_empty(addresses, entries, pipeline, intent.replication())
    else:
        result = deploy(addresses, entries, pipeline, dry_run=args.dry_run,
                        replication=intent.replication(), setup=queue_commands(queues),
                        sideband=run_cli)
    queue_lines = queues[0].commands() if queues and not args.dry_run else []
    if args.json:
        print_json({"jobs": jobs, "switches": _switches_json(result, describe),
                    "failed": dict(result.failed), "program_loads": result.pipelines,
                    "writes": result.writes, "seconds": result.seconds,
                    "dry_run": result.dry_run, "queues": queue_lines})
    else:
        print_deploy(result, list(entries))
        if queue_lines and result.switches:
            print(f"queues: {' and '.join(queue_lines)} on {len(result.switches)} switches")
    return _deploy_exit(result, len(entries))


def _switches_json(result: DeployResult, describe: Describe, replication: bool = False
                   ) -> dict[str, Any]:
    """Per switch: its address, whether the program is loaded, and the entries inserted,
    modified and deleted (with `replication`, its multicast groups' and sessions' too)."""
    out: dict[str, Any] = {}
    for name, sd in result.switches.items():
        rec: dict[str, Any] = {
            "address": sd.address, "load_program": sd.pipeline,
            "insert": [describe(e) for e in sd.diff.insert],
            "modify": [[None if old is None else describe(old), describe(new)]
                       for old, new in sd.diff.modify],
            "delete": [describe(e) for e in sd.diff.delete]}
        if replication:
            rec["replication"] = {
                key: [describe_replication(r) for r in getattr(sd.replication, key)]
                for key in ("insert", "modify", "delete")}
        out[name] = rec
    return out


def _deploy_exit(result: DeployResult, switches: int) -> int:
    if result.failed:
        print(f"innet: {len(result.failed)} of {switches} switches failed: "
              f"{', '.join(result.failed)}", file=sys.stderr)
        return 1
    return 0


def deploy_own(args: argparse.Namespace, topo: Topology, own: OwnProgram) -> int:
    """`deploy --program`: the runtime files' entries, groups and sessions, diffed and
    written like innet's intent."""
    pipeline = own.pipeline
    addresses = switch_addresses(topo, client_tls(args))
    entries = own.entries()
    queues = queue_settings(args.queue_rate, args.queue_depth)
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
                    "switches": _switches_json(result, describe_own, replication=True),
                    "failed": dict(result.failed), "program_loads": result.pipelines,
                    "writes": result.writes, "seconds": result.seconds,
                    "dry_run": result.dry_run})
    else:
        if own.compiled is not None:
            how = "from the cache" if own.compiled.cached else "compiled now"
            print(f"program: {args.program} ({how}: {own.compiled.bmv2_json.parent})")
        owned = ", ".join(pipeline.managed.tables) or "no table"
        print(f"the controller owns: {owned}"
              + (" and the replication engine" if pipeline.managed.replication else ""))
        print_deploy(result, list(entries), describe_own)
    return _deploy_exit(result, len(entries))


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
    check_runtime_needs_program(args)
    topo = load_topology(args.topology)
    addresses = switch_addresses(topo, client_tls(args))
    if args.switch:
        unknown = [s for s in args.switch if s not in addresses]
        if unknown:
            raise InputError(f"--switch: no switch {unknown[0]!r} in the topology",
                             source=args.topology)
        addresses = {s: addresses[s] for s in args.switch}
    if args.program:
        return status_own(args, addresses, own_program(args, topo))
    pipeline = load_pipeline(args.p4info, args.bmv2_json)
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
    entries = build_intent(intent_options(args), topo).entries()
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


def cmd_controller_run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from innet.p4rt.controller import Controller, SwitchTarget, event

    check_runtime_needs_program(args)
    topo = load_topology(args.topology)
    queues = queue_settings(args.queue_rate, args.queue_depth)
    addresses = switch_addresses(topo, client_tls(args))
    if args.program:
        own = own_program(args, topo)
        pipeline = own.pipeline
        targets = own.targets(queue_commands(queues))
        what = (f"program {args.program}, {sum(len(t.entries) for t in targets.values())} "
                "entries from runtime files")
    else:
        intent = build_intent(intent_options(args), topo)
        pipeline = load_pipeline(args.p4info, args.bmv2_json)
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
