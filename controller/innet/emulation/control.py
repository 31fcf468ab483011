"""The network that `innet net up` holds, and the requests that change or read it.

`LiveNetwork` is what the control socket (innet.emulation.live.ControlServer) and the
`innet>` prompt both drive: its plan as text, a move to other intent options (only the
difference is written, by the network's own controller), a command on a host, and the reads
the prompt shows. Requests are plain JSON: `{"op": "deploy", "options": IntentOptions JSON}`
(fields left out keep the current ones), `{"op": "plan"}`, `{"op": "exec", "host", "argv"}`,
and the jobs' (innet.emulation.jobs): `{"op": "job_submit", "job": {...}, "policy": P}`,
`{"op": "job_list"}`, `{"op": "job_cancel", "name": N}`, `{"op": "readback"}` (every
switch read back against the intent), `{"op": "restart", "switch": S}` (a crash and a
blank start of one switch, the fault the controller restores) and `{"op": "link", "a", "b",
"up": BOOL}` (a link taken down or brought back, as Mininet's `link` command).

A network runs either a `--workload` plan (deploy) or admitted jobs (job submit), never
both: each is refused while the other holds the switches, since both would own job ids and
slot cells.

Jobs end on their own: `start_monitor` runs a thread that, every `MONITOR_S`, lets the job
desk end the jobs whose processes ended and admit the queued ones. Requests and the monitor
take one lock, since both move the same controller.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.bmv2.own_program import OwnProgram
from innet.bmv2.thrift import run_cli
from innet.cassini.experiments.traces import load_trace
from innet.emulation.experiment import ControlledNetwork
from innet.emulation.jobclient import ENDED_KEPT, MAX_DELAY_S
from innet.emulation.jobrun import JobLauncher, RunScale
from innet.emulation.jobs import (
    DEFAULT_POLICY,
    ENDED,
    Installed,
    JobDesk,
    Launch,
    job_request,
)
from innet.emulation.net import static_arp
from innet.errors import InputError
from innet.p4rt.deploy import SwitchDeploy, diff, diff_replication
from innet.plan.cluster import ClusterState, JobRequest
from innet.plan.intent import IntentOptions, NetworkIntent, build_intent, held_slots
from innet.plan.jobintent import cluster_intent
from innet.soar.model import phi
from innet.topology import Topology

MONITOR_S = 0.5
log = logging.getLogger("innet.jobs")


@dataclass
class LiveNetwork:
    """The network that is up and what it holds now; requests and the prompt change it."""

    topo: Topology
    cn: ControlledNetwork
    intent: NetworkIntent
    options: IntentOptions  # as last deployed
    own: OwnProgram | None = None  # --program: a user's program and its runtime files
    program: str | None = None  # that program's file, as the user named it
    folder: Path | None = None  # the run folder: jobs' files go to its jobs/
    scale: RunScale = field(default_factory=RunScale)
    launch: Launch | None = None  # None: the jobs' processes on the network's hosts
    # ended jobs kept in memory (older ones only in their folder's job.json); None: every
    # one, for a run that reads them all at its end
    keep_ended: int | None = ENDED_KEPT
    jobs: JobDesk = field(init=False)
    jobs_folder: Path | None = field(init=False, default=None)  # each job's files, job.json
    lock: threading.RLock = field(init=False, default_factory=threading.RLock)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _monitor: threading.Thread | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        launch = self.launch
        folder = self.folder
        if launch is None:
            folder = folder or Path(tempfile.mkdtemp(prefix="innet-jobs-"))
            launch = JobLauncher(self.cn, self.topo, folder / "jobs", self.scale).start
        self.jobs_folder = None if folder is None else folder / "jobs"
        self.jobs = JobDesk(ClusterState(self.topo), self.install_jobs, launch,
                            archive=None if folder is None else self.archive_job,
                            keep_ended=self.keep_ended)

    def archive_job(self, row: dict[str, Any]) -> bool:
        """An ended job's last `job list` row into its folder (job.json), where it stays
        once the desk lets the job go from memory. A write that fails (a full disk) is
        logged and the job stays in memory: the monitor goes on, nothing is lost."""
        assert self.jobs_folder is not None
        path = self.jobs_folder / row["name"] / "job.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(row, indent=1) + "\n")
            tmp.replace(path)
        except OSError as exc:
            log.warning("job %s: its row stays in memory; writing %s failed: %s",
                        row["name"], path, exc.strerror or exc)
            return False
        return True

    def start_monitor(self) -> None:
        """End finished jobs and admit queued ones every MONITOR_S, until `close`."""
        self._monitor = threading.Thread(target=self._watch, name="innet-jobs", daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        while not self._stop.wait(MONITOR_S):
            with self.lock:
                self.jobs.tick()

    def close(self) -> None:
        """The monitor stopped and every job's processes with it (before the hosts go)."""
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join()
        with self.lock:
            self.jobs.shutdown()

    def plan_text(self) -> str:
        if self.own is not None:
            n = sum(len(es) for es in self.own.entries().values())
            return (f"your program {self.program}: {n} entries from the runtime files of "
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

    def deploy(self, options: IntentOptions) -> dict[str, Any]:
        """Move to `options`' plan; jobs that stay keep their slot cells."""
        if self.own is not None:
            raise InputError(f"the network that is up runs your program {self.program}: "
                             "its entries come from its runtime files, not from a plan")
        if self.jobs.active():
            raise InputError(f"jobs hold the network ({', '.join(self.jobs.active())}): a "
                             "--workload plan would overwrite them; cancel them first "
                             "(innet job cancel NAME)")
        held = held_slots(self.intent.entries())
        intent = build_intent(options, self.topo, held)
        applied = self.cn.set_intent(intent.entries(), intent.replication())
        self.intent, self.options = intent, options
        return {"plan": self.plan_text(), "writes": sum(d.writes for d in applied.values()),
                "switches": {n: change_summary(d) for n, d in applied.items() if d.writes}}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request of the control socket; bad ones raise InputError (exit 2 there). A
        command on a host runs without the lock: it touches no switch, and holding the lock
        for its minute would stall the job monitor, the view and every other request."""
        if request.get("op") == "exec":
            return self.answer(request)
        with self.lock:
            return self.answer(request)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "deploy":
            return self.deploy(IntentOptions.from_json(request.get("options"), self.options,
                                                       source="deploy request"))
        if op == "plan":
            return {"plan": self.plan_text()}
        if op == "exec":
            return self.run_on_host(request.get("host"), request.get("argv"),
                                    float(request.get("timeout", 60)))
        if op in ("job_submit", "trace_submit", "job_list", "job_cancel", "readback"):
            return self.handle_jobs(op, request)
        if op == "restart":
            return self.restart_switch(request.get("switch"))
        if op == "link":
            return self.set_link(request.get("a"), request.get("b"), request.get("up"))
        raise InputError(f"unknown request {op!r} (deploy, plan, exec, job_submit, "
                         "trace_submit, job_list, job_cancel, readback, restart, link)")

    def set_link(self, a: Any, b: Any, up: Any) -> dict[str, Any]:
        """Take the link between nodes `a` and `b` down (both ends) or bring it back up, as
        Mininet's `link a b down|up` does: packets on it are dropped meanwhile, and routes
        do not change (they are the intent's)."""
        ends = {(link.a.node, link.b.node) for link in self.topo.links}
        if (a, b) not in ends and (b, a) not in ends:
            raise InputError(f"no link between {a!r} and {b!r} in {self.topo.name}")
        if not isinstance(up, bool):
            raise InputError('link takes "up": true or false')
        self.cn.network.net.configLinkStatus(a, b, "up" if up else "down")
        if up:  # a host's interface that went down lost its static neighbours
            for end in (a, b):
                if end in self.topo.hosts:
                    static_arp(self.topo, self.cn.network.net, end)
        return {"link": [a, b], "up": up}

    def restart_switch(self, name: Any) -> dict[str, Any]:
        """Kill a switch's process (SIGKILL, as a crash would) and start it again blank, on
        the same interfaces and ports: the controller sees its stream drop and loads the
        program and the intent again; the jobs crossing it recover what it held."""
        if not isinstance(name, str):
            raise InputError("restart takes a switch's name")
        switch = self.cn.network.switch(self.check_switch(name))
        switch.proc.kill()
        switch.proc.wait(5)
        switch.start([])  # simple_switch_grpc --no-p4 again
        return {"restarted": name}

    def handle_jobs(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        if op == "job_list":
            return {**self.jobs.listing(), "archive": str(self.jobs_folder or "")}
        if op == "readback":
            return self.readback()
        if op == "job_cancel":
            name = request.get("name")
            if not isinstance(name, str):
                raise InputError("job_cancel takes the job's name")
            return self.jobs.cancel(name)
        self.check_jobs_allowed()
        policy = str(request.get("policy") or DEFAULT_POLICY)
        delay = request.get("at_s", 0.0)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not (
                0 <= delay <= MAX_DELAY_S):
            raise InputError(f"at_s: seconds from now in 0..{MAX_DELAY_S:g}, got {delay!r}")
        if op == "trace_submit":
            return self.submit_trace(request.get("file"), policy, time.time() + delay)
        job, model = job_request(request.get("job"), self.topo, self.jobs.names(), self.scale)
        return self.jobs.submit(job, policy, model, time.time() + delay if delay else None)

    def submit_trace(self, path: Any, policy: str, epoch: float) -> dict[str, Any]:
        """Every job of a trace file (innet cassini's format), each arriving at `epoch` plus
        its arrival (on the jobs' clock, times the network's slowdown), with its GPUs as
        workers and its gradient at the network's scale."""
        if not isinstance(path, str):
            raise InputError("trace_submit takes the trace file's path")
        trace = load_trace(path)
        taken = [j.name for j in trace.jobs if j.name in self.jobs.records
                 and self.jobs.records[j.name].state not in ENDED]
        if taken:
            raise InputError(f"jobs of {path} already run or wait: {', '.join(taken)}")
        requests = []
        for j in trace.jobs:
            request = JobRequest(j.name, j.profile, j.profile.gpus, j.iterations,
                                 self.scale.values(j.profile, self.topo))
            request.check(self.topo)
            requests.append((request, epoch + j.arrival_ms * self.scale.slowdown / 1000))
        rows = [self.jobs.submit(r, policy, r.profile.model or r.profile.name, at)
                for r, at in sorted(requests, key=lambda ra: ra[1])]
        return {"jobs": rows}

    def check_jobs_allowed(self) -> None:
        """Jobs only where no --workload plan or own program holds the switches."""
        if self.own is not None:
            raise InputError(f"the network that is up runs your program {self.program}: it "
                             "has no aggregation tables to admit jobs into")
        if self.options.workloads:
            raise InputError("the network holds the plan of --workload "
                             f"{', '.join(self.options.workloads)}: jobs are admitted only "
                             "on a network brought up without --workload")

    def install_jobs(self, state: ClusterState) -> Installed:
        """Move the switches to the admitted jobs' intent; only the difference is written."""
        intent = cluster_intent(state, self.options.ecn_threshold)
        applied = self.cn.set_intent(intent.entries(), intent.replication())
        self.intent = intent
        return Installed(sum(d.writes for d in applied.values()),
                         {n: change_summary(d) for n, d in applied.items() if d.writes})

    def readback(self) -> dict[str, Any]:
        """Every switch read through the controller against the intent: what differs."""
        pipeline = self.cn.controller.pipeline
        wanted, groups = self.intent.entries(), self.intent.replication()
        differ: dict[str, str] = {}
        for s in self.cn.addresses:
            session = self.cn.controller.session(s)
            d = diff(session.read_entries(pipeline.managed.tables,
                                          pipeline.managed.default_tables), wanted.get(s, ()))
            r = diff_replication(session.read_replication(), groups.get(s, ()))
            if d.writes or r.writes:
                differ[s] = (f"+{len(d.insert)} ~{len(d.modify)} -{len(d.delete)} entries, "
                             f"{r.writes} group writes to match the intent")
        return {"equal": not differ, "differ": differ,
                "entries": {s: len(wanted.get(s, ())) for s in self.cn.addresses}}

    def run_on_host(self, host: Any, argv: Any, timeout: float) -> dict[str, Any]:
        """`argv` on `host`, inside its namespace: what it printed and its exit status."""
        if host not in self.topo.hosts:
            raise InputError(f"no host {host!r} in {self.topo.name}")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise InputError("exec takes a command: a list of strings")
        proc = self.cn.host(str(host)).popen(argv, stdin=None)
        try:
            out, err = proc.communicate(timeout=timeout)
        except Exception:
            proc.kill()
            proc.wait()
            raise InputError(f"{argv[0]} on {host} did not end in time") from None
        return {"stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace"),
                "returncode": proc.returncode}

    def check_switch(self, name: str) -> str:
        if name not in self.cn.addresses:
            raise InputError(f"name a switch: {', '.join(self.cn.addresses)}")
        return name

    def table_lines(self, switch: str) -> list[str]:
        """Every entry (and multicast group) the controller manages on `switch`, in words."""
        pipeline = self.cn.controller.pipeline
        session = self.cn.controller.session(self.check_switch(switch))
        lines = [pipeline.schema.describe(e) for e in session.read_entries(
            pipeline.managed.tables, pipeline.managed.default_tables)]
        if pipeline.managed.replication:
            lines += [str(r) for r in session.read_replication()]
        return lines

    def counter_lines(self, switch: str, names: list[str]) -> list[str]:
        """Packets and bytes of each non-zero cell of the counters named (default: all)."""
        session = self.cn.controller.session(self.check_switch(switch))
        lines = []
        for name in names or self.cn.controller.pipeline.managed.counters:
            cells = session.read_counters(name)
            shown = ", ".join(f"[{i}] {p} pkts/{b} B" for i, (p, b) in sorted(cells.items())
                              if p or b)
            lines.append(f"{name}: {shown or 'all zero'}")
        return lines

    def register_lines(self, switch: str, name: str, indices: list[str]) -> list[str]:
        """Cells of a register, read through the switch's thrift side channel."""
        text = run_cli(self.cn.addresses[self.check_switch(switch)],
                       [f"register_read {name} {i}" for i in indices or ["0"]])
        return [x for x in text.splitlines() if "=" in x or "[" in x]

    def switch_rows(self) -> list[list[Any]]:
        """Each switch as the controller sees it: state, generation, restores, last error."""
        return [[n, v.state, v.synced, v.restores, v.error or ""]
                for n, v in self.cn.controller.views().items()]


def change_summary(d: SwitchDeploy) -> str:
    """`+2 ~0 -1`: what a deploy inserted, modified and deleted on one switch."""
    diff = d.diff
    return f"+{len(diff.insert)} ~{len(diff.modify)} -{len(diff.delete)}"
