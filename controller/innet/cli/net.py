"""`innet net up|exec|down`: an emulated network that stays up, to look at and change live.

`net up` starts the topology's BMv2 switches in Mininet with the reconciling controller
holding the plan, prints how to reach every switch with the usual tools, and opens Mininet's
CLI with innet's commands added (plan, table, counters, registers, deploy, status); with
`--no-cli` it stays up until Ctrl-C or SIGTERM. While it is up, `innet deploy` against the same
topology goes through the network's own controller, `innet status` reads the switches as
always, and `innet net exec HOST CMD...` runs a command on a host. Everything goes on any exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innet.bmv2.own_program import OwnProgram
from innet.bmv2.thrift import queue_commands, run_cli
from innet.cli.deploy import (
    INTENT_FIELDS,
    _intent_args,
    _no_runtime_without_program,
    _own,
    _program_args,
    build_intent,
    queue_settings,
)
from innet.cli.outpaths import output_dir
from innet.cli.run import _check_environment, default_out
from innet.emulation import live
from innet.emulation.experiment import ControlledNetwork, controlled_network
from innet.emulation.net import EmulationError
from innet.errors import InputError, NetworkError
from innet.jsonout import print_json
from innet.p4rt.deploy import SwitchDeploy
from innet.plan.intent import NetworkIntent, held_slots
from innet.soar.model import phi
from innet.table import format_table
from innet.topology import Topology, load_topology

READY = "innet net: ready"  # the line scripts wait for


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
                    "From another shell while it is up: `innet deploy --topology T ...` "
                    "(through this\nnetwork's controller), `innet status --topology T`, "
                    "`innet net exec h1 ping -c1 10.0.0.2`,\n`innet net down`.")
    up.add_argument("--topology", required=True, metavar="FILE", help="the topology file")
    _intent_args(up, workload_required=False)
    _program_args(up)
    up.add_argument("--no-cli", action="store_true",
                    help="no prompt: stay up until Ctrl-C or SIGTERM (scripts, notebooks)")
    up.add_argument("--out", type=output_dir, default=None,
                    help="run folder: logs, control socket (default runs/net-DATE)")
    up.add_argument("--pcap", action="store_true", help="capture every switch port")
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
                                       "until it has cleaned up.")
    down.add_argument("--timeout", type=float, default=60.0,
                      help="seconds to wait (default 60)")
    down.set_defaults(func=cmd_down)

    info = nsub.add_parser("info", help="which network is up (pid, run folder, topology)",
                           description="The record of the network that is up on this machine "
                                       "(or that none is).")
    info.add_argument("--json", action="store_true", help="print the record as JSON")
    info.set_defaults(func=cmd_info)


# --------------------------------------------------------------------------- the live side


@dataclass
class Live:
    """The network that is up and what it holds now; requests and the CLI change it."""

    topo: Topology
    cn: ControlledNetwork
    intent: NetworkIntent
    args: argparse.Namespace  # the intent's options as last deployed
    own: OwnProgram | None = None  # --program: a user's program and its runtime files

    def plan_text(self) -> str:
        if self.own is not None:
            n = sum(len(es) for es in self.own.entries().values())
            return (f"your program {self.args.program}: {n} entries from the runtime files of "
                    f"{', '.join(self.own.runtimes) or 'no switch'}")
        if not self.intent.jobs:
            return "no job: routes only (deploy --workload FILE to plan one)"
        lines = []
        for jp in self.intent.jobs:
            red = phi(jp.tree, [])
            lines.append(f"job {jp.workload.job} -> {jp.workload.destination}: "
                         f"{jp.plan.strategy}, k = {jp.plan.k}, blue "
                         f"{', '.join(jp.blue) or '(none)'}; cost {jp.plan.cost:.4g} "
                         f"(all-red {red:.4g})")
            t = jp.tree
            lines.append("  tree: " + ", ".join(
                f"{t.ids[v]}->{t.ids[int(t.parent[v])]}" for v in range(1, t.n)))
        return "\n".join(lines)

    def deploy(self, fields: dict[str, Any]) -> dict[str, Any]:
        if self.own is not None:
            raise InputError(f"the network that is up runs your program {self.args.program}: "
                             "its entries come from its runtime files, not from a plan")
        args = argparse.Namespace(**{**vars(self.args), **fields})
        held = held_slots(self.intent.entries())
        intent = build_intent(args, self.topo, held)
        applied = self.cn.set_intent(intent.entries(), intent.replication())
        self.intent, self.args = intent, args
        return {"plan": self.plan_text(), "writes": sum(d.writes for d in applied.values()),
                "switches": {n: _summary(d) for n, d in applied.items() if d.writes}}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "deploy":
            fields = request.get("fields")
            if not isinstance(fields, dict) or set(fields) - set(INTENT_FIELDS):
                raise InputError(f"deploy takes the fields {', '.join(INTENT_FIELDS)}")
            return self.deploy(fields)
        if op == "plan":
            return {"plan": self.plan_text()}
        if op == "exec":
            host, argv = request.get("host"), request.get("argv")
            if host not in self.topo.hosts:
                raise InputError(f"no host {host!r} in {self.topo.name}")
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str)
                                                                 for a in argv):
                raise InputError("exec takes a command: a list of strings")
            proc = self.cn.host(str(host)).popen(argv, stdin=None)
            try:
                out, err = proc.communicate(timeout=float(request.get("timeout", 60)))
            except Exception:
                proc.kill()
                proc.wait()
                raise InputError(f"{argv[0]} on {host} did not end in time") from None
            return {"stdout": out.decode(errors="replace"),
                    "stderr": err.decode(errors="replace"), "returncode": proc.returncode}
        raise InputError(f"unknown request {op!r} (deploy, plan, exec)")


def _summary(d: SwitchDeploy) -> str:
    diff = d.diff
    return f"+{len(diff.insert)} ~{len(diff.modify)} -{len(diff.delete)}"


def _address_table(cn: ControlledNetwork) -> str:
    rows = []
    for name, a in cn.addresses.items():
        rows.append([name, a.grpc, a.device_id, a.thrift_port,
                     f"simple_switch_CLI --thrift-port {a.thrift_port}",
                     f"p4runtime-sh --grpc-addr {a.grpc} --device-id {a.device_id} "
                     "--election-id 0,1"])
    return format_table(["switch", "P4Runtime", "device", "thrift", "BMv2 CLI",
                         "P4Runtime shell (reads; the controller holds 1,0)"], rows)


def cmd_up(args: argparse.Namespace) -> int:
    _check_environment()
    _no_runtime_without_program(args)
    topo = load_topology(args.topology)
    own = _own(args, topo) if args.program else None
    intent = build_intent(argparse.Namespace(**{**vars(args), "workload": None}) if own
                          else args, topo)
    out: Path = args.out or default_out("net")
    record = live.NetworkRecord(os.getpid(), str(out.resolve()),
                                str(Path(args.topology).resolve()),
                                str((out / "control.sock").resolve()), time.time())
    setup = queue_commands(queue_settings(args))
    try:
        entries, groups = ((own.entries(), own.replication()) if own
                           else (intent.entries(), intent.replication()))
        with live.claimed(record), _made(out), controlled_network(
                topo, out, entries, replication=groups, setup=setup, pcap=args.pcap,
                pipeline=own.pipeline if own else None) as cn:
            state = Live(topo, cn, intent, args, own)
            server = live.ControlServer(Path(record.control), state.handle)
            try:
                print(f"network {topo.name} is up: {len(topo.switches)} switches, "
                      f"{len(topo.hosts)} hosts; run folder {out} (controller log: "
                      f"{out}/logs/controller.log)")
                print(_address_table(cn))
                print(state.plan_text())
                print(READY, flush=True)
                if args.no_cli:
                    _wait_for_signal()
                else:
                    _cli(state)
            finally:
                server.close()
    except EmulationError as exc:
        raise InputError(str(exc)) from None
    print("innet net: stopped; everything it started is gone", file=sys.stderr)
    return 0


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


def _cli(state: Live) -> None:
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    setLogLevel("output")  # what Mininet's own commands (pingall, nodes, ...) print

    class InnetCLI(CLI):  # type: ignore[misc]  # Mininet is untyped
        """Mininet's CLI with innet's commands; `help innet` lists them."""

        prompt = "innet> "

        def __init__(self, state: Live) -> None:
            self.live = state
            super().__init__(state.cn.network.net)

        def _switch(self, line: str) -> tuple[str, list[str]]:
            words = shlex.split(line)
            if not words or words[0] not in self.live.cn.addresses:
                raise InputError(f"name a switch: {', '.join(self.live.cn.addresses)}")
            return words[0], words[1:]

        def onecmd(self, line: str) -> bool:
            try:
                return bool(super().onecmd(line))
            except (InputError, NetworkError) as exc:
                print(f"innet: {exc}")
                return False

        def help_innet(self) -> None:
            print(__doc__)
            print("plan | table SWITCH | counters SWITCH [NAME] | registers SWITCH NAME [I] | "
                  "deploy [-k N] [--strategy S] [--workload FILE] | status")

        def do_plan(self, _line: str) -> None:
            """plan: the jobs, their blue switches, trees and costs."""
            print(self.live.plan_text())

        def do_table(self, line: str) -> None:
            """table SWITCH: every entry the controller manages on SWITCH."""
            sw, _ = self._switch(line)
            pipeline = self.live.cn.controller.pipeline
            session = self.live.cn.controller.session(sw)
            for e in session.read_entries(pipeline.managed.tables,
                                          pipeline.managed.default_tables):
                print(pipeline.schema.describe(e))
            for r in session.read_replication() if pipeline.managed.replication else ():
                print(r)

        def do_counters(self, line: str) -> None:
            """counters SWITCH [NAME]: packets and bytes of each cell (every counter)."""
            sw, rest = self._switch(line)
            session = self.live.cn.controller.session(sw)
            for name in rest or self.live.cn.controller.pipeline.managed.counters:
                cells = session.read_counters(name)
                shown = ", ".join(f"[{i}] {p} pkts/{b} B" for i, (p, b) in sorted(cells.items())
                                  if p or b)
                print(f"{name}: {shown or 'all zero'}")

        def do_registers(self, line: str) -> None:
            """registers SWITCH NAME [INDEX...]: cells of a register, through thrift."""
            sw, rest = self._switch(line)
            if not rest:
                raise InputError("registers SWITCH NAME [INDEX...]")
            name, indices = rest[0], rest[1:] or ["0"]
            text = run_cli(self.live.cn.addresses[sw],
                           [f"register_read {name} {i}" for i in indices])
            print("\n".join(x for x in text.splitlines() if "=" in x or "[" in x))

        def do_deploy(self, line: str) -> None:
            """deploy [-k N] [--strategy S] [--workload FILE ...]: move to that plan live."""
            answer = self.live.deploy(_deploy_fields(shlex.split(line)))
            print(answer["plan"])
            print(f"{answer['writes']} writes: " + ("; ".join(
                f"{n} {s}" for n, s in answer["switches"].items()) or "nothing changed"))

        def do_status(self, _line: str) -> None:
            """status: each switch as the controller sees it."""
            rows = [[n, v.state, v.synced, v.restores, v.error or ""]
                    for n, v in self.live.cn.controller.views().items()]
            print(format_table(["switch", "state", "generation", "restores", "error"], rows))

    previous = signal.getsignal(signal.SIGTERM)

    def on_term(_signum: int, _frame: Any) -> None:
        raise SystemExit(143)  # through the CLI (which swallows KeyboardInterrupt) to cleanup

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    try:
        InnetCLI(state)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


class _PromptParser(argparse.ArgumentParser):
    """At the prompt a bad option is a message, not an exit."""

    def error(self, message: str) -> Any:
        raise InputError(f"deploy: {message} (see `help deploy`)")


def _deploy_fields(argv: Sequence[str]) -> dict[str, Any]:
    """The intent options of `deploy` typed at the prompt, as request fields."""
    p = _PromptParser(prog="deploy", add_help=False)
    _intent_args(p, workload_required=False)
    ns, extra = p.parse_known_args(list(argv))
    if extra:
        raise InputError(f"deploy does not take {' '.join(extra)}")
    given = {k: v for k, v in vars(ns).items() if k in INTENT_FIELDS}
    if given.get("workload"):
        given["workload"] = [str(Path(w).resolve()) for w in given["workload"]]
    else:
        given.pop("workload", None)  # keep the jobs running now
    return given


# ------------------------------------------------------------------- from another shell


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
        print_json(None if record is None else record.__dict__)
        return 0
    print(record.describe() if record else "no network is up")
    return 0
