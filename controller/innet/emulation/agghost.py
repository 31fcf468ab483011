"""The aggregation protocol on real hosts (command line: `python -m innet.cli.agghost worker|dest`).

Sockets and clocks around the pure state machines of controller/innet/aggproto.py. A worker streams
its tensor (floats made from a seed, converted to fixed point with a scale that keeps the sum
of all workers inside 32 bits), a destination sums and answers. Each writes one JSON file
when it ends: counts, times, and a SHA-256 digest of the sums it holds, so the experiment can
check every worker's result against the host-side fixed-point sum without moving tensors
around. The destination serves several jobs at once (one socket: the aggregation port) and
runs until SIGTERM, answering late retransmissions after it has every sum. With
`--multicast-from` it sends each completed chunk's RESULT once to the job's group address
(the switches copy it to every worker, who joined the group with `--local-ip`).
"""

from __future__ import annotations

import errno
import hashlib
import select
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from innet import aggpacket as ap
from innet.aggproto import Destination, Worker

# send errors that mean "lost before it left": the host's link is down or its queue is full
LOCAL_DROPS = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.ENOBUFS}
MAX_ABS = 1.0  # the tensors' values lie in [-1, 1]: the bound the scale is chosen for


def worker_tensor(seed: int, job: int, worker: int, values: int, workers: int,
                  iteration: int | None = None) -> npt.NDArray[np.int64]:
    """Worker `worker`'s tensor in fixed point: uniform floats in [-1, 1] times the scale
    (`iteration`: a job's gradient of that iteration, each one new)."""
    key = [seed, job, worker] + ([] if iteration is None else [iteration])
    rng = np.random.default_rng(key)
    floats = rng.uniform(-MAX_ABS, MAX_ABS, values)
    scale = ap.fixed_point_scale(MAX_ABS, workers)
    return np.rint(floats * scale).astype(np.int64)


def chunks_of(tensor: npt.NDArray[np.int64]) -> list[tuple[int, ...]]:
    return ap.chunked([int(v) for v in tensor])


def digest(sums: Iterable[Sequence[int]]) -> str:
    """SHA-256 of the sums, chunk after chunk, as 32-bit two's complement big-endian."""
    h = hashlib.sha256()
    for vec in sums:
        h.update(np.asarray(vec, dtype=np.int64).astype(">i4").tobytes())
    return h.hexdigest()


def expected_digest(seed: int, job: int, workers: int, values: int,
                    iteration: int | None = None) -> str:
    """What every worker and the destination must end with: the host-side fixed-point sum."""
    total = sum(worker_tensor(seed, job, i, values, workers, iteration)
                for i in range(workers))
    assert isinstance(total, np.ndarray)
    assert int(np.abs(total).max(initial=0)) <= ap.INT32_MAX  # the scale's promise
    return digest(chunks_of(total))


class Pacer:
    """Sends through `sock` at most `burst` packets back to back, then pauses `gap` seconds:
    BMv2 reads its ports through packet captures that drop a burst of a few dozen packets
    before the switch ever sees them (measured: the destination's 16 results of a chunk, sent
    in one loop, lost some), and a drop there would be taken for the fault injection."""

    def __init__(self, sock: Any, burst: int = 4, gap: float = 0.0005) -> None:
        self.sock, self.burst, self.gap = sock, burst, gap
        self._n = 0
        self.dropped = 0  # packets the host could not send (its link down)

    def send(self, ip: str, pkt: ap.AggPacket) -> None:
        try:
            ap.send_packet(self.sock, ip, pkt)
        except OSError as exc:
            # the host's own link is down (or its queue full): the packet is lost here as it
            # could be on any link, and the protocol's timers send it again
            if exc.errno not in LOCAL_DROPS:
                raise
            self.dropped += 1
        self._n += 1
        if self._n % self.burst == 0:
            time.sleep(self.gap)


@dataclass(frozen=True)
class WorkerSettings:
    """One worker of one job, as its command line gives it: which tensor it streams, to
    whom, and the window and timers of docs/aggregation-protocol.md. Built once by the
    front end (innet.cli.agghost), so the loop below reads a value, never a flag name."""

    dest: str  # the destination's IPv4 address
    job: int
    worker: int  # index in the job's workers
    workers: int  # workers in the job
    values: int
    window: int  # how far ahead of its oldest unanswered chunk the worker may go
    slots: int
    seed: int = 0
    inflight: int | None = None  # chunks kept unanswered at most (None: the window)
    first_chunk: int = 0
    start_at: float = 0.0  # wall-clock time to start
    rto: float = 0.5  # initial timeout (s)
    min_rto: float = 0.2
    max_rto: float = 0.5
    backoff: float = 1.5
    stall_timeout: float = 120.0  # give up when no RESULT came for this long (s)
    local_ip: str | None = None  # join the job's result group on it (None: results unicast)


@dataclass(frozen=True)
class DestinationJob:
    """One job the destination serves: worker i at `ips[i]`, `slots` cells per switch."""

    job: int
    ips: tuple[str, ...]
    chunks: int
    slots: int

    @staticmethod
    def parse(spec: str) -> DestinationJob:
        """JOB:IP,IP,...:CHUNKS:SLOTS, the form the destination's command line takes."""
        job_s, ips_s, chunks_s, slots_s = spec.split(":")
        return DestinationJob(int(job_s), tuple(ips_s.split(",")), int(chunks_s), int(slots_s))

    def spec(self) -> str:
        """The inverse of `parse`: what the experiment puts on the command line."""
        return f"{self.job}:{','.join(self.ips)}:{self.chunks}:{self.slots}"


@dataclass(frozen=True)
class DestinationSettings:
    """The destination of every job: `ready` is touched once the socket is bound (the
    experiment starts the workers only then); with `multicast_from` each completed chunk's
    RESULT goes once to the job's group address, from that address."""

    jobs: tuple[DestinationJob, ...]
    ready: Path
    first_chunk: int = 0
    multicast_from: str | None = None


def run_worker(settings: WorkerSettings) -> dict[str, Any]:
    s = settings
    tensor = worker_tensor(s.seed, s.job, s.worker, s.values, s.workers)
    w = Worker(s.job, s.worker, chunks_of(tensor), s.window, s.slots, s.first_chunk,
               rto=s.rto, min_rto=s.min_rto, max_rto=s.max_rto, backoff=s.backoff,
               inflight=s.inflight, grouped=bool(s.local_ip))
    sock = ap.receiver_socket()
    if s.local_ip:  # the switches copy the job's RESULTs to its group address
        ap.join_result_group(sock, s.job, s.local_ip)
    # every worker starts at the same moment: a chunk completes only when all have sent it,
    # and processes that start one after the other would time out waiting for the last one
    time.sleep(max(0.0, s.start_at - time.time()))
    start = time.time()
    try:
        stream(w, sock, s.dest, s.stall_timeout)
    finally:
        sock.close()
    end = time.time()
    sums = [w.results[i].values if i in w.results else ap.ZERO_VECTOR
            for i in range(len(w.chunks))]
    return {"job": s.job, "worker": s.worker, "done": w.done, "start": start,
            "end": end, "chunks": len(w.chunks), "sent": w.sent,
            "retransmissions": w.retransmissions, "nacked": w.nacked,
            "lost_results": w.lost_results, "result_requests": w.result_requests,
            "timeouts": w.timeouts,
            "latency_ms": _percentiles(w.latency.values()), "srtt": w.srtt, "max_rtt": w.max_rtt,
            "rto": w.rto, "retransmitted_chunks": w.retransmitted_chunks()[:100],
            "overflow": any(r.overflow for r in w.results.values()),
            "digest": digest(sums)}


def stream(w: Worker, sock: Any, dest: str, stall_timeout: float) -> None:
    """Send what the worker's window allows and take in RESULTs until every chunk has its
    sum, or until no RESULT came for `stall_timeout` seconds (a network that stopped): not
    after a fixed time, since a long stream at heavy loss takes as long as it takes."""
    pacer = Pacer(sock)
    progress, answered = time.monotonic(), 0
    while not w.done and time.monotonic() - progress < stall_timeout:
        now = time.monotonic()
        if len(w.results) != answered:
            progress, answered = now, len(w.results)
        for pkt in w.poll(now):
            pacer.send(dest, pkt)
        nxt = w.next_deadline()
        wait = 0.05 if nxt is None else max(0.0, min(0.05, nxt - time.monotonic()))
        if select.select([sock], [], [], wait)[0]:
            while select.select([sock], [], [], 0)[0]:
                try:
                    w.receive(ap.decode(sock.recv(65535)), time.monotonic())
                except ValueError:
                    continue


def _percentiles(seconds: Iterable[float]) -> dict[str, float]:
    """p50, p90, p99 and max of chunk latencies, in ms (what a stall looks like)."""
    ms = np.asarray(list(seconds), dtype=float) * 1e3
    if not ms.size:
        return {}
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(ms.max())}


_Jobs = dict[int, tuple[Destination, tuple[str, ...]]]


def run_destination(settings: DestinationSettings) -> dict[str, Any]:
    # with results multicast the switches hold the job's group: a blue switch can copy a
    # request to the workers below it, so one request per blue switch will do
    grouped = bool(settings.multicast_from)
    jobs: _Jobs = {j.job: (Destination(j.job, len(j.ips), j.chunks, settings.first_chunk,
                                       j.slots, group_requests=grouped), j.ips)
                   for j in settings.jobs}
    stop = False

    def _stop(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    counts = {"packets": 0, "ce_marked": 0, "multicast_results": 0}
    with ap.receiver_socket(tos=True) as sock:
        if settings.multicast_from:
            ap.multicast_from(sock, settings.multicast_from)
        pacer = Pacer(sock)
        Path(settings.ready).touch()
        while not stop:
            _serve_once(sock, pacer, jobs, bool(settings.multicast_from), counts)
    return {**counts, "jobs": {
        str(j): {"complete": d.complete, "chunks": d.chunks, "duplicates": d.duplicates,
                 "resent": d.resent, "nacks": d.nacks, "nack_rto": d.nack_rto,
                 "requests": d.requests,
                 "counts_ok": all(s.count == d.workers and s.bitmap == d.full
                                  for s in d.state.values()),
                 "overflow": any(s.overflow for s in d.state.values()),
                 "digest": digest(d.sums())}
        for j, (d, _) in jobs.items()}}


def _serve_once(sock: Any, pacer: Pacer, jobs: _Jobs, multicast: bool,
                counts: dict[str, int]) -> None:
    """One turn of the destination's loop: the requests its timers say are due, then at
    most one packet (waiting up to 0.1 s, or the next deadline, for it) and its answers.
    `counts` adds up packets, CE-marked ones and RESULTs sent to a group."""
    now = time.monotonic()
    for dest, ips in jobs.values():  # requests for what later chunks say was lost
        for wi, nack in dest.poll(now):
            pacer.send(ips[wi], nack)
    due = [t for d, _ in jobs.values() if (t := d.next_deadline()) is not None]
    wait = max(0.0, min([0.1, *(t - now for t in due)]))
    if not select.select([sock], [], [], wait)[0]:
        return
    try:
        data, _, tos = ap.recv_with_tos(sock)
        pkt = ap.decode(data)
    except (ValueError, InterruptedError):
        return
    counts["packets"] += 1
    marked = tos >= 0 and tos & 3 == 3
    counts["ce_marked"] += marked
    entry = jobs.get(pkt.job)
    if entry is None:
        return
    dest, ips = entry
    answers = dest.receive(pkt, marked, time.monotonic())
    if multicast and len(answers) == dest.workers:
        # a chunk just completed: one RESULT, the switches copy it to every worker
        pacer.send(ap.result_group_ip(pkt.job), answers[0][1])
        counts["multicast_results"] += 1
        return
    for wi, res in answers:  # a retransmission's answer: to the workers it names
        pacer.send(ips[wi], res)
