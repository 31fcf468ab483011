"""The `innet>` prompt of `innet net up`: Mininet's CLI with innet's commands added.

Its own module because it subclasses Mininet's CLI at import time, and Mininet is loaded
only when a prompt is opened. Every command reads or changes the network through
`LiveNetwork` (innet.emulation.control), as the control socket does.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mininet.cli import CLI
from mininet.log import setLogLevel

from innet.cli.job import add_submit_options, job_line, jobs_table, submit_request
from innet.cli.net import __doc__ as NET_DOC
from innet.cli.options import add_intent_options, intent_options
from innet.emulation.control import LiveNetwork
from innet.errors import InputError, NetworkError
from innet.plan.intent import IntentOptions
from innet.table import format_table


class InnetCLI(CLI):  # type: ignore[misc]  # Mininet is untyped
    """Mininet's CLI with innet's commands; `help innet` lists them."""

    prompt = "innet> "

    def __init__(self, state: LiveNetwork) -> None:
        self.live = state
        super().__init__(state.cn.network.net)

    def _switch(self, line: str) -> tuple[str, list[str]]:
        words = shlex.split(line)
        if not words:
            raise InputError(f"name a switch: {', '.join(self.live.cn.addresses)}")
        return self.live.check_switch(words[0]), words[1:]

    def onecmd(self, line: str) -> bool:
        try:
            with self.live.lock:  # the job monitor moves the same controller
                return bool(super().onecmd(line))
        except (InputError, NetworkError) as exc:
            print(f"innet: {exc}")
            return False

    def help_innet(self) -> None:
        print(NET_DOC)
        print("plan | table SWITCH | counters SWITCH [NAME] | registers SWITCH NAME [I] | "
              "deploy [-k N] [--strategy S] [--workload FILE] | status | "
              "job submit --model M --workers W --iterations N [...] | job cancel NAME | jobs | "
              "restart SWITCH")

    def do_plan(self, _line: str) -> None:
        """plan: the jobs, their blue switches, trees and costs."""
        print(self.live.plan_text())

    def do_table(self, line: str) -> None:
        """table SWITCH: every entry the controller manages on SWITCH."""
        sw, _ = self._switch(line)
        for text in self.live.table_lines(sw):
            print(text)

    def do_counters(self, line: str) -> None:
        """counters SWITCH [NAME]: packets and bytes of each cell (every counter)."""
        sw, rest = self._switch(line)
        for text in self.live.counter_lines(sw, rest):
            print(text)

    def do_registers(self, line: str) -> None:
        """registers SWITCH NAME [INDEX...]: cells of a register, through thrift."""
        sw, rest = self._switch(line)
        if not rest:
            raise InputError("registers SWITCH NAME [INDEX...]")
        print("\n".join(self.live.register_lines(sw, rest[0], rest[1:])))

    def do_deploy(self, line: str) -> None:
        """deploy [-k N] [--strategy S] [--workload FILE ...]: move to that plan live."""
        answer = self.live.deploy(prompt_options(shlex.split(line), self.live.options))
        print(answer["plan"])
        print(f"{answer['writes']} writes: " + ("; ".join(
            f"{n} {s}" for n, s in answer["switches"].items()) or "nothing changed"))

    def do_job(self, line: str) -> None:
        """job submit --model M --workers W --iterations N [--policy P] [-k K] [--name N] |
        job list | job cancel NAME: jobs on this network (each runs once installed)."""
        words = shlex.split(line)
        if words[:1] == ["submit"]:
            answer = self.live.handle(prompt_submit(words[1:]))
            for row in answer.get("jobs", [answer]):
                print(job_line(row))
        elif words[:1] == ["list"] and len(words) == 1:
            self.do_jobs("")
        elif words[:1] == ["cancel"] and len(words) == 2:
            answer = self.live.handle({"op": "job_cancel", "name": words[1]})
            print(f"job {words[1]} cancelled; released with "
                  f"{answer['cancelled']['release_writes']} writes")
            for name in answer["admitted"]:
                print(f"job {name} admitted from the queue")
        else:
            raise InputError("job submit --model M --workers W --iterations N [...] | "
                             "job list | job cancel NAME")

    def do_jobs(self, _line: str) -> None:
        """jobs: every job, its state, hosts, blue switches, shift and writes."""
        print(jobs_table(self.live.handle({"op": "job_list"})["jobs"]))

    def do_restart(self, line: str) -> None:
        """restart SWITCH: kill it (SIGKILL, a crash) and start it blank; the controller
        loads it again, the jobs crossing it recover."""
        sw, _ = self._switch(line)
        self.live.restart_switch(sw)
        print(f"{sw} restarted blank; `status` shows the controller restoring it")

    def do_status(self, _line: str) -> None:
        """status: each switch as the controller sees it."""
        print(format_table(["switch", "state", "generation", "restores", "error"],
                           self.live.switch_rows()))


class _PromptParser(argparse.ArgumentParser):
    """At the prompt a bad option is a message, not an exit."""

    def error(self, message: str) -> Any:
        raise InputError(f"{self.prog}: {message} (see `help {self.prog.split()[0]}`)")


def prompt_submit(argv: Sequence[str]) -> dict[str, Any]:
    """The `job_submit` request of `job submit ...` typed at the prompt."""
    p = _PromptParser(prog="job submit", add_help=False)
    add_submit_options(p)
    ns, extra = p.parse_known_args(list(argv))
    if extra:
        raise InputError(f"job submit does not take {' '.join(extra)}")
    return submit_request(ns)


def prompt_options(argv: Sequence[str], current: IntentOptions) -> IntentOptions:
    """The intent options of `deploy` typed at the prompt; without --workload the jobs
    running now stay."""
    p = _PromptParser(prog="deploy", add_help=False)
    add_intent_options(p, workload_required=False)
    ns, extra = p.parse_known_args(list(argv))
    if extra:
        raise InputError(f"deploy does not take {' '.join(extra)}")
    options = intent_options(ns)
    workloads = (tuple(str(Path(w).resolve()) for w in options.workloads)
                 if options.workloads else current.workloads)
    return replace(options, workloads=workloads)


def run_prompt(state: LiveNetwork) -> None:
    """The prompt until `exit`, Ctrl-D or SIGTERM (which leaves through the cleanup)."""
    setLogLevel("output")  # what Mininet's own commands (pingall, nodes, ...) print
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(_signum: int, _frame: Any) -> None:
        raise SystemExit(143)  # through the CLI (which swallows KeyboardInterrupt) to cleanup

    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        signal.signal(signal.SIGTERM, on_term)
    try:
        InnetCLI(state)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
