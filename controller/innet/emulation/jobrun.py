"""A job's processes on the hosts of the running network, and what they report.

`JobLauncher.start(admission)` starts, inside the emulated hosts, the job's destination (the
aggregation protocol's, `innet.cli.agghost dest`, serving every chunk of every iteration and
multicasting each RESULT down the job's tree) and one `innet.cli.jobagent` per worker, all on
the job's grid: the network's common epoch plus the job's CASSINI shift plus whole iterations,
the first such point a few seconds from now (processes need that to start). Times are the
emulation's: the profile's iteration and phases `slowdown` times longer, as `innet run
cassini` scales them, so that BMv2 carries a phase's packets in the phase.

`AgentRun` reads the workers' progress lines as they come and says how the job stands:
iterations every worker has finished, their mean duration (on the job's clock: divided back
by the slowdown), ECN echoes and retransmissions, and whether every sum so far equals the
host-side fixed-point sum. It ends `done` when every worker finished with exact sums, and
`failed` (saying which worker and why) when one dies, stalls or receives a wrong sum.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.aggpacket import VECTOR_LEN
from innet.cassini.model.profiles import JobProfile
from innet.emulation.agghost import DestinationJob, expected_digest
from innet.emulation.aggregation import default_inflight
from innet.emulation.jobagent import JobTiming, JobWorkerSettings
from innet.plan.cluster import Admission, link_capacity
from innet.topology import Topology

DEFAULT_SLOWDOWN = 4.0  # as `innet run cassini`: phases long against a busy machine's stalls
DEFAULT_CAPACITY_PPS = 800  # packets/s that stand for the slowest link (run cassini's)
ZOO_LINK_GBPS = 50.0  # the zoo's NIC, when the topology gives no link rates
START_MARGIN_S = 3.0  # processes start in about a second on a busy machine


@dataclass(frozen=True)
class RunScale:
    """How a job's own clock and volume map onto the emulation: `slowdown` times slower,
    `capacity_pps` packets/s standing for the slowest link."""

    slowdown: float = DEFAULT_SLOWDOWN
    capacity_pps: int = DEFAULT_CAPACITY_PPS
    link_pps: float | None = None  # what each egress queue drains (emulation); None: unbound

    def min_rto(self, inflight: int, workers: int) -> float:
        """The workers' timer floor: on bound links, the time one link needs to drain every
        worker's chunks in flight (the all-red worst case), so a queue that holds them is
        never taken for a loss. At 200 packets/s a 5 ms floor let the stream's timer fire
        on its own queueing, every retransmission of a merged chunk came back from the blue
        switch as one more packet on the bottleneck, and iterations stalled for seconds."""
        if self.link_pps is None:
            return 0.005
        return max(0.005, inflight * workers / self.link_pps)

    def values(self, profile: JobProfile, topo: Topology) -> int:
        """Gradient values per iteration: the profile's volume in packets at this scale (one
        chunk of 32 values a packet), so its Up phase carries what it would at line rate."""
        rates = link_capacity(topo).values()
        slowest = min(rates, default=ZOO_LINK_GBPS)
        packets = profile.volume_mbit / 1000 * self.capacity_pps / slowest
        return VECTOR_LEN * max(1, round(packets))

    def timing(self, profile: JobProfile, epoch: float, shift_ms: float, iterations: int,
               now: float, realign: bool = True) -> JobTiming:
        """The job's first grid point at least START_MARGIN_S from `now`, and its phases;
        `realign`: its agents keep to the grid (CASSINI's policies) or not."""
        period = profile.iteration_ms * self.slowdown / 1000
        base = epoch + shift_ms * self.slowdown / 1000
        m = max(0, math.ceil((now + START_MARGIN_S - base) / period))
        starts = [p.start_ms for p in profile.phases] or [0.0]
        ends = [p.start_ms + p.duration_ms for p in profile.phases] or [0.0]
        return JobTiming(origin=base + m * period, period_s=period,
                         comm_start_s=min(starts) * self.slowdown / 1000,
                         comm_end_s=min(max(ends), profile.iteration_ms) * self.slowdown / 1000,
                         iterations=iterations, realign=realign)


@dataclass
class AgentRun:
    """One admitted job's processes and the progress read from them so far."""

    admission: Admission
    folder: Path
    scale: RunScale
    dest: Any  # the destination's process
    workers: dict[str, Any]  # host -> its agent's process
    seed: int = 0
    lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _expected: dict[int, str] = field(default_factory=dict)
    _read_to: dict[str, int] = field(default_factory=dict)  # host -> bytes of its file parsed

    def progress_file(self, host: str) -> Path:
        return self.folder / f"progress-{host}.jsonl"

    def read(self) -> None:
        """The lines each worker added since the last read (whole lines only: one being
        written is taken next time). Read from where the last read stopped, so a job's
        monitor, every half second, parses each line once, not every line again."""
        for h in self.workers:
            try:
                with self.progress_file(h).open("rb") as f:
                    f.seek(self._read_to.get(h, 0))
                    new = f.read()
            except FileNotFoundError:
                continue
            whole = new[:new.rfind(b"\n") + 1]
            self._read_to[h] = self._read_to.get(h, 0) + len(whole)
            self.lines.setdefault(h, []).extend(
                json.loads(x) for x in whole.decode().splitlines() if x.endswith("}"))

    def iterations(self, host: str) -> list[dict[str, Any]]:
        return [x for x in self.lines.get(host, []) if "iteration" in x]

    def expected(self, i: int) -> str:
        """The host-side fixed-point sum of iteration i's gradients, digested."""
        if i not in self._expected:
            r = self.admission.request
            self._expected[i] = expected_digest(self.seed, self.admission.job,
                                                r.workers, r.values, iteration=i)
        return self._expected[i]

    def outcome(self) -> tuple[str, str | None] | None:
        """None while the job runs; ("done", None) or ("failed", why) once it ended.

        The processes are asked before their files are read: an agent writes its last line
        and then exits, so one seen gone has its last line in the file read after; read
        first, an agent ending between the read and the question would look dead without
        its end (a job that failed by chance once the controller was slow)."""
        codes = {h: proc.poll() for h, proc in self.workers.items()}
        self.read()
        for h, code in codes.items():
            wrong = [x["iteration"] for x in self.iterations(h)
                     if x["complete"] and x["digest"] != self.expected(x["iteration"])]
            if wrong:
                return "failed", f"worker {h} received a wrong sum in iteration {wrong[0]}"
            ends = [x for x in self.lines.get(h, []) if x.get("end")]
            if ends and not ends[0]["complete"]:
                return "failed", f"worker {h} stalled: no result came for its stream"
            if code is not None and not ends:
                return "failed", f"worker {h}'s agent died (exit {code}) before the end"
        if self.dest.poll() is not None:
            return "failed", f"the destination {self.admission.destination} died " \
                             f"(exit {self.dest.poll()})"
        if all(code is not None for code in codes.values()):
            return "done", None
        return None

    def stats(self) -> dict[str, Any]:
        """What `job list` shows of the traffic: iterations every worker has finished, their
        mean duration on the job's clock, ECN echoes, retransmissions, exact sums."""
        per = [self.iterations(h) for h in self.workers]
        done = min((len(x) for x in per), default=0)
        durations = [max(p[i]["iteration_ms"] for p in per) for i in range(done)]
        checked = [x["digest"] == self.expected(x["iteration"]) for p in per for x in p
                   if x["complete"]]
        starts = [p[0]["start"] for p in per if p]
        ends = [p[-1]["start"] + p[-1]["iteration_ms"] / 1000 for p in per if p]
        return {"iterations_done": done,
                "started_at": min(starts) if starts else None,
                "ended_at": max(ends) if len(ends) == len(per) and done else None,
                "mean_iteration_ms": (sum(durations) / len(durations) / self.scale.slowdown
                                      if durations else None),
                "iteration_ms": [d / self.scale.slowdown for d in durations],
                "marks": max((sum(x["marks"] for x in p) for p in per), default=0),
                "retransmissions": sum(x["retransmissions"] for p in per for x in p),
                "sums_exact": all(checked) if checked else None}

    def stop(self) -> None:
        """Every process of the job ended (SIGTERM, then SIGKILL); the destination last, so
        it answers the workers' last retransmissions."""
        for proc in [*self.workers.values(), self.dest]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers.values(), self.dest]:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class JobLauncher:
    """Starts admitted jobs' processes on the hosts of `network` (Mininet's, or any object
    whose `host(name).popen(argv, ...)` runs argv inside that host)."""

    network: Any
    topo: Topology
    folder: Path
    scale: RunScale = field(default_factory=RunScale)
    epoch: float = field(default_factory=time.time)

    def start(self, admission: Admission) -> AgentRun:
        folder = self.folder / admission.name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("progress-*.jsonl"):
            old.unlink()
        dest = self.start_destination(admission, folder)
        timing = self.scale.timing(admission.request.profile, self.epoch,
                                   admission.shift_ms, admission.request.iterations,
                                   time.time(), realign="cassini" in admission.policy)
        workers = {h: self.start_worker(admission, i, h, timing, folder)
                   for i, h in enumerate(admission.workers)}
        return AgentRun(admission, folder, self.scale, dest, workers)

    def start_destination(self, a: Admission, folder: Path) -> Any:
        r, hosts = a.request, self.topo.hosts
        chunks = math.ceil(r.values / VECTOR_LEN) * r.iterations
        spec = DestinationJob(a.job, tuple(hosts[h].ip for h in a.workers), chunks, r.slots)
        ready = folder / "dest.ready"
        ready.unlink(missing_ok=True)
        proc = self.network.host(a.destination).popen(
            [sys.executable, "-m", "innet.cli.agghost", "dest", "--job", spec.spec(),
             "--ready", str(ready), "--out", str(folder / "dest.json"),
             "--multicast-from", hosts[a.destination].ip],
            stdout=subprocess.DEVNULL, stderr=(folder / "dest.err").open("w"))
        waited = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > waited:
                raise RuntimeError(f"job {a.name}: the destination did not start; see "
                                   f"{folder}/dest.err")
            time.sleep(0.05)
        return proc

    def start_worker(self, a: Admission, index: int, host: str, timing: JobTiming,
                     folder: Path) -> Any:
        r, hosts = a.request, self.topo.hosts
        window = r.slots // 2
        inflight = default_inflight([a.plan], window)
        floor = self.scale.min_rto(inflight, r.workers)
        settings = JobWorkerSettings(
            dest=hosts[a.destination].ip, job=a.job, worker=index, workers=r.workers,
            values=r.values, slots=r.slots, window=window, inflight=inflight, timing=timing,
            progress=str(folder / f"progress-{host}.jsonl"), local_ip=hosts[host].ip,
            min_rto=floor, rto=max(0.2, floor), max_rto=max(1.0, 2 * floor))
        path = folder / f"worker-{host}.json"
        path.write_text(settings.to_json())
        return self.network.host(host).popen(
            [sys.executable, "-m", "innet.cli.jobagent", str(path)],
            stdout=subprocess.DEVNULL, stderr=(folder / f"worker-{host}.err").open("w"))

