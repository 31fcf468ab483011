"""`innet net up|exec|down`: an emulated network that stays up, to look at and change live.

`net up` starts the topology's BMv2 switches in Mininet with the reconciling controller
holding the plan, prints how to reach every switch with the usual tools, and opens Mininet's
CLI with innet's commands added (plan, table, counters, registers, deploy, status); with
`--no-cli` it stays up until Ctrl-C or SIGTERM. While it is up, `innet deploy` against the same
topology goes through the network's own controller, `innet status` reads the switches as
always, `innet job submit|list|cancel` admits and releases jobs (innet.cli.job), and
`innet net exec HOST CMD...` runs a command on a host. Everything goes on any exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from innet.bmv2.thrift import queue_commands, queue_settings
from innet.cli.argtypes import host_port
from innet.cli.options import (
    add_intent_options,
    add_json,
    add_program_options,
    add_tls,
    add_topology,
    check_runtime_needs_program,
    intent_options,
    own_program,
)
from innet.cli.outpaths import output_dir
from innet.cli.run import check_environment, default_out
from innet.emulation import live
from innet.emulation.control import LiveNetwork
from innet.emulation.experiment import ControlledNetwork, controlled_network
from innet.emulation.net import EmulationError, footprint, signals_ignored
from innet.errors import InputError, NetworkError
from innet.jsonout import print_json
from innet.plan.intent import IntentOptions, build_intent
from innet.table import format_table
from innet.topology import load_topology

if TYPE_CHECKING:
    from innet.view.server import ViewServer

READY = "innet net: ready"  # the line scripts wait for
WEB_HOST = "127.0.0.1"


def register(sub: Any) -> None:
    net = sub.add_parser(
        "net", help="bring an emulated network up and stay in it (Mininet CLI, live plans)",
        description="An emulated network of BMv2 switches that stays up: look at it, change "
                    "the plan live, run traffic. One network at a time on a machine.")
    nsub = net.add_subparsers(dest="net_command", metavar="SUBCOMMAND", required=True)
    up = nsub.add_parser(
        "up", help="start the network and its controller; open Mininet's CLI",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Start every switch of --topology (BMv2 in Mininet) with the reconciling "
                    "controller holding\nthe plan of --workload (routes only without one), "
                    "print every switch's P4Runtime\naddress and thrift port with the "
                    "commands that reach it, and open Mininet's CLI with\ninnet's commands "
                    "added (`help innet` there):\n"
                    "  plan                      the jobs, their blue switches and trees\n"
                    "  table SWITCH              the entries the switch holds\n"
                    "  counters SWITCH [NAME]    its counters (per port)\n"
                    "  registers SWITCH NAME [I] a register's cells (thrift)\n"
                    "  deploy [-k N] [--strategy S] [--workload W]   move to another plan\n"
                    "  status                    what the controller sees of each switch\n"
                    "  job submit|list|cancel, jobs   jobs admitted and released live\n"
                    "                            (innet job --help; not with --workload)\n"
                    "From another shell while it is up: `innet deploy --topology T ...` "
                    "(through this\nnetwork's controller), `innet status --topology T`, "
                    "`innet net exec h1 ping -c1 10.0.0.2`,\n`innet net down`.")
    add_topology(up)
    add_intent_options(up, workload_required=False)
    add_program_options(up)
    up.add_argument("--no-cli", action="store_true",
                    help="no prompt: stay up until Ctrl-C or SIGTERM (scripts, notebooks)")
    up.add_argument("--out", type=output_dir, default=None,
                    help="run folder: logs, control socket (default runs/net-DATE)")
    up.add_argument("--pcap", action="store_true", help="capture every switch port")
    add_tls(up, starts=True, default=True)
    add_web(up)
    up.set_defaults(func=cmd_up)

    ex = nsub.add_parser("exec", help="run a command on a host of the network that is up",
                         description="Run CMD on HOST (inside its network namespace) and "
                                     "print what it printed; the exit status is CMD's.")
    ex.add_argument("host", metavar="HOST", help="a host of the topology, e.g. h1")
    ex.add_argument("argv", metavar="CMD", nargs=argparse.REMAINDER,
                    help="the command and its arguments (required)")
    ex.set_defaults(func=cmd_exec)

    down = nsub.add_parser("down", help="stop the network that is up",
                           description="SIGTERM to the process that holds the network; wait "
                                       "until it has cleaned up. When that process died "
                                       "without cleaning up (SIGKILL), remove what it left: "
                                       "switch processes, host namespaces, interfaces.")
    down.add_argument("--timeout", type=float, default=60.0,
                      help="seconds to wait (default 60)")
    down.set_defaults(func=cmd_down)

    info = nsub.add_parser("info", help="which network is up (pid, run folder, topology)",
                           description="The record of the network that is up on this machine "
                                       "(or that none is).")
    add_json(info, "print the record as JSON")
    info.set_defaults(func=cmd_info)


def add_web(up: Any) -> None:
    up.add_argument("--web", type=host_port, default=(WEB_HOST, 0), metavar="HOST:PORT",
                    help=f"serve the live view (a read-only page and JSON API, token "
                         f"required) there (default {WEB_HOST}:0, a free port of the "
                         "loopback only)")
    up.add_argument("--no-web", action="store_true",
                    help="do not serve the live view (default: serve it)")


def _address_table(cn: ControlledNetwork) -> str:
    rows = []
    for name, a in cn.addresses.items():
        tls = (f" --ssl --cacert {a.tls.ca} --cert {a.tls.cert} --private-key {a.tls.key}"
               if a.tls else "")
        rows.append([name, a.grpc, a.device_id, a.thrift_port,
                     f"simple_switch_CLI --thrift-port {a.thrift_port}",
                     f"p4runtime-sh --grpc-addr {a.grpc} --device-id {a.device_id} "
                     f"--election-id 0,1{tls}"])
    return format_table(["switch", "P4Runtime", "device", "thrift", "BMv2 CLI",
                         "P4Runtime shell (reads; the controller holds 1,0)"], rows)


def cmd_up(args: argparse.Namespace) -> int:
    check_environment()
    check_runtime_needs_program(args)
    topo = load_topology(args.topology)
    own = own_program(args, topo) if args.program else None
    options = IntentOptions() if own else intent_options(args)
    intent = build_intent(options, topo)
    out: Path = args.out or default_out("net")
    record = live.NetworkRecord(os.getpid(), str(out.resolve()),
                                str(Path(args.topology).resolve()),
                                str((out / "control" / "control.sock").resolve()), time.time(),
                                str((out / "tls").resolve()) if args.tls else None)
    setup = queue_commands(queue_settings(args.queue_rate, args.queue_depth))
    _say_dead(live.clear_dead())
    try:
        entries, groups = ((own.entries(), own.replication()) if own
                           else (intent.entries(), intent.replication()))
        with live.claimed(record, report=_say_dead), _made(out), controlled_network(
                topo, out, entries, replication=groups, setup=setup, pcap=args.pcap,
                pipeline=own.pipeline if own else None, tls=args.tls) as cn:
            live.update(live.with_footprint(record, footprint(cn.network)))
            state = LiveNetwork(topo, cn, intent, options, own, args.program, out)
            server = live.ControlServer(Path(record.control), state.handle)
            state.start_monitor()
            view = None
            try:
                view = None if args.no_web else _view(state, args.web)
                _announce(state, out, view)
                if args.no_cli:
                    _wait_for_signal()
                else:
                    _prompt(state)
            finally:
                with signals_ignored():  # a second Ctrl-C must not strand the jobs' processes
                    if view is not None:
                        view.close()
                    server.close()
                    state.close()
    except EmulationError as exc:
        raise InputError(str(exc)) from None
    print("innet net: stopped; everything it started is gone", file=sys.stderr)
    return 0


def _view(state: LiveNetwork, where: tuple[str, int]) -> ViewServer:
    """The live view's server (innet.view), started beside the control socket; aiohttp
    loaded only here, so the other commands start without it."""
    from innet.view.server import live_view

    try:
        return live_view(state, *where)
    except OSError as exc:
        raise InputError(f"--web {where[0]}:{where[1]}: cannot serve the live view there: "
                         f"{exc.strerror or exc}") from None


def _announce(state: LiveNetwork, out: Path, view: ViewServer | None = None) -> None:
    """The network, how to reach each switch, its plan, and the line scripts wait for."""
    topo = state.topo
    print(f"network {topo.name} is up: {len(topo.switches)} switches, "
          f"{len(topo.hosts)} hosts; run folder {out} (controller log: "
          f"{out}/logs/controller.log)")
    print(_address_table(state.cn))
    if state.cn.tls is None:
        print("the switches are open (no TLS: any local user can take them over P4Runtime)")
    else:
        print(f"P4Runtime over TLS: the switches accept only the controller certificate in "
              f"{state.cn.tls.folder} (root's)")
    print(state.plan_text())
    if view is not None:
        print(f"view: {view.url}")
    print(READY, flush=True)


@contextlib.contextmanager
def _made(out: Path) -> Iterator[None]:
    """The run folder, made once the network is ours to start (a refused `net up` leaves
    nothing behind)."""
    out.mkdir(parents=True, exist_ok=True)
    yield


def _wait_for_signal() -> None:
    """Until SIGTERM or SIGINT (running_network turns both into KeyboardInterrupt)."""
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        return


def _prompt(state: LiveNetwork) -> None:
    """Mininet's CLI with innet's commands, until `exit`, Ctrl-D or SIGTERM."""
    from innet.cli.net_prompt import run_prompt  # Mininet's CLI: loaded only for a prompt

    run_prompt(state)


# ------------------------------------------------------------------- from another shell


def _say_dead(line: str | None) -> None:
    if line:
        print(f"innet net: {line}", file=sys.stderr)


def _record() -> live.NetworkRecord:
    record = live.running()
    if record is None:
        raise InputError("no network is up (start one with `innet net up --topology FILE`)")
    return record


def cmd_exec(args: argparse.Namespace) -> int:
    if not args.argv:
        raise InputError("give the command to run: innet net exec HOST CMD [ARG ...]")
    answer = live.ask(_record(), {"op": "exec", "host": args.host, "argv": args.argv})
    if "error" in answer:
        raise InputError(answer["error"])
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    return int(answer["returncode"])


def cmd_down(args: argparse.Namespace) -> int:
    dead = live.clear_dead()
    if dead is not None:
        print(dead)
        return 0
    record = _record()
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while live.running() is not None:
        if time.monotonic() > deadline:
            raise NetworkError(f"the network ({record.describe()}) is still up after "
                               f"{args.timeout:g} s")
        time.sleep(0.2)
    print(f"stopped the network ({record.describe()})")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    record = live.running()
    if args.json:
        print_json(None if record is None else record.to_json())
        return 0
    if record is None:
        gone = live.dead()
        print("no network is up" + (
            f" (the record of one whose `net up` died is there: {gone.describe()}; "
            "`innet net down` removes what it left)" if gone else ""))
        return 0
    print(record.describe())
    return 0
