"""One worker of a job on the running network: its iterations, each a gradient aggregated
through the switches (command line: `python -m innet.cli.jobagent SETTINGS.json`).

Iteration i is planned at `origin + i x period` (origin: the network's epoch plus the job's
CASSINI shift, on the job's grid). It computes until the communication phase starts (a sleep:
the profile's compute before its Up phase), then streams the iteration's gradient with the
reliable protocol (innet.aggproto.Worker, chunks numbered on from the last iteration's so the
switches' cells and the destination's state simply continue), in ECT(0), cutting its window
on the destination's ECN echoes; then the rest of the compute. An iteration whose
communication ran late ends late, and the next one waits to be back on the grid of its
interleaving as CASSINI's agents do (`innet.emulation.agent.next_start`). The congestion
window and the retransmission timer carry over from one iteration to the next, as a
transport's would.

After each iteration one JSON line goes to the progress file (the controller reads it while
the job runs): times, marks echoed, window cuts, retransmissions, and the SHA-256 digest of
the sums received, which the controller compares with the host-side fixed-point sum. A last
line says whether the job's stream ended complete. docs/cluster-planner.md has the state
machine and what each fault does.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from innet import aggpacket as ap
from innet.aggproto import Worker
from innet.emulation.agent import next_start
from innet.emulation.agghost import chunks_of, digest, stream, worker_tensor

REALIGN_BUDGET_PCT = 10.0


@dataclass(frozen=True)
class JobTiming:
    """When a job's iterations run, in wall-clock seconds: iteration i is planned at
    `origin + i x period`; its communication starts `comm_start_s` into it and is planned to
    end by `comm_end_s` (the profile's Up phases, scaled to the emulation's clock)."""

    origin: float
    period_s: float
    comm_start_s: float
    comm_end_s: float
    iterations: int
    realign: bool = True
    # the longest wait a re-alignment may cost, % of the period: `cassini evaluate`'s
    # default; a late iteration that would wait longer goes on off the grid
    budget_pct: float = REALIGN_BUDGET_PCT

    def check(self) -> None:
        if not (self.period_s > 0 and 0 <= self.comm_start_s <= self.comm_end_s
                <= self.period_s and self.iterations >= 1):
            raise ValueError(f"inconsistent job timing {self}")


@dataclass(frozen=True)
class JobWorkerSettings:
    """Everything one worker of one job needs, written by the controller as one JSON file."""

    dest: str  # the destination's IPv4 address
    job: int
    worker: int
    workers: int
    values: int  # gradient values per iteration
    slots: int
    window: int
    inflight: int | None
    timing: JobTiming
    progress: str  # the JSON-lines file this worker appends an iteration to
    local_ip: str  # joins the job's result group on it (the switches multicast RESULTs)
    seed: int = 0
    rto: float = 0.2
    min_rto: float = 0.005
    max_rto: float = 1.0
    stall_timeout: float = 60.0

    @property
    def chunks(self) -> int:
        """Chunks of one iteration's gradient."""
        return len(ap.chunked([0] * self.values))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> JobWorkerSettings:
        data = json.loads(text)
        data["timing"] = JobTiming(**data["timing"])
        return JobWorkerSettings(**data)


def run_job_worker(s: JobWorkerSettings) -> dict[str, Any]:
    """Every iteration of one worker; returns (and writes as the last progress line) how the
    stream ended."""
    s.timing.check()
    progress = Path(s.progress)
    sock = ap.receiver_socket(send_tos=ap.ECT0)
    ap.join_result_group(sock, s.job, s.local_ip)
    carried: Worker | None = None
    t = s.timing
    start, realigned, done = t.origin, 0, True
    try:
        for i in range(t.iterations):
            carried, record = run_iteration(s, i, start, carried, sock)
            record["realigned"] = realigned
            append_line(progress, record)
            if not record["complete"]:
                done = False
                break
            finished = record["iteration_ms"] / 1000
            start, moved = next_start(t.period_s, t.period_s, t.origin, start, finished,
                                      t.realign, t.budget_pct)
            realigned += moved
    finally:
        sock.close()
    end = {"end": True, "complete": done, "worker": s.worker, "realigned": realigned}
    append_line(progress, end)
    return end


def run_iteration(s: JobWorkerSettings, i: int, start: float, carried: Worker | None,
                  sock: Any) -> tuple[Worker, dict[str, Any]]:
    """Iteration `i`, planned at `start`: compute, aggregate, the rest of the compute."""
    t = s.timing
    sleep_until(start + t.comm_start_s)
    tensor = worker_tensor(s.seed, s.job, s.worker, s.values, s.workers, iteration=i)
    w = Worker(s.job, s.worker, chunks_of(tensor), s.window, s.slots,
               first_chunk=i * s.chunks, rto=carried.rto if carried else s.rto,
               min_rto=s.min_rto, max_rto=s.max_rto, backoff=1.5, inflight=s.inflight,
               grouped=True)  # it joined the job's result group
    if carried is not None:  # the transport's state goes on from the last iteration
        w.cwnd, w.alpha = carried.cwnd, carried.alpha
    comm_start = time.time()
    stream(w, sock, s.dest, s.stall_timeout)
    comm_end = time.time()
    # the compute after the Up phase still takes what the profile gives it
    finished = comm_end - start + (t.period_s - t.comm_end_s)
    sums = [w.results[c].values if c in w.results else ap.ZERO_VECTOR
            for c in range(len(w.chunks))]
    record = {"iteration": i, "start": start, "comm_start": comm_start, "comm_end": comm_end,
              "comm_ms": 1000 * (comm_end - comm_start),
              "iteration_ms": 1000 * max(t.period_s, finished), "complete": w.done,
              "marks": w.marks, "cuts": w.cuts, "retransmissions": w.retransmissions,
              "sent": w.sent, "cwnd": w.cwnd, "digest": digest(sums)}
    sleep_until(start + max(t.period_s, finished))
    return w, record


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, flushed: the controller may read the file at any moment."""
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        time.sleep(delay)
