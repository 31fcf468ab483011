"""Per-host traffic agent for the CASSINI experiment: paced on/off UDP, ECN counted at the end.

Run inside an emulated host (`python -m innet.cli.agent send|receive ...`).

A sender is one job's worker: iteration i is planned to start at epoch + shift + i * T. In each
Up phase it sends paced UDP (ECT(0) in the TOS byte: a socket and a timer, no scapy) at the
phase's rate, and reacts to congestion as the transports of training jobs do: the receiver
echoes the CE marks it sees every few packets and the sender cuts its rate DCTCP-style
(`RateControl`), so a shared link's queue is held near the marking threshold instead of
overflowing, and a congested phase lasts longer. After the last phase it asks the receiver
for an acknowledgement, so a congested link delays the end of the communication and with
it the iteration, as in a training job whose compute waits for its gradients. A late
iteration re-aligns to the grid of its interleaving (CASSINI's agents; the grid and the
budget as in `innet.cassini.sim.fluid`). The receiver counts packets and CE marks per job
and iteration and answers the acknowledgements.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innet.aggpacket import ECT0

DATA_PORT = 50001
MAGIC = 0x1CA5
KIND_DATA, KIND_END, KIND_ACK, KIND_ECHO = 0, 1, 2, 3
HEADER = struct.Struct("!HBBHIII")  # magic, kind, tos seen, job, iteration, seq, sent packets
ARRIVED = struct.Struct("!d")  # after an ACK's header: when the first END arrived (UNIX s)
# Linux's SO_TIMESTAMPNS (the socket module does not name it): the kernel's receive time of
# each datagram, as a struct timespec in the ancillary data
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
PAYLOAD_BYTES = 1000
DRIFT_TOLERANCE = 0.05
ECHO_EVERY = 4  # the receiver echoes CE counts every this many data packets of a flow
WINDOW_S = 0.010  # the sender's congestion window: one rate decision per 10 ms (default)
GAIN = 1.0 / 16  # DCTCP's g: weight of the newest window in alpha
MIN_RATE = 1.0 / 16  # never below this share of the phase's rate
INCREASE = 0.05  # additive increase per window without marks, share of the phase's rate


@dataclass(frozen=True)
class Phase:
    start_ms: float
    duration_ms: float
    pps: float


class RateControl:
    """DCTCP's reaction, on a paced sender: the receiver echoes how many of the packets it
    got were CE-marked; once per window the sender folds the marked fraction F into
    alpha = (1 - g) alpha + g F and, if anything was marked, cuts its rate by alpha / 2
    (as DCTCP cuts its window), else raises it additively back toward the phase's rate.
    alpha starts at 1, as Linux's DCTCP does, so the first marked window halves the rate."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.rate = 1.0  # share of the phase's pps
        self.alpha = 1.0
        self.acked = 0
        self.marked = 0
        self.window_end = 0.0
        self.cuts = 0
        self.lowest = 1.0

    def echo(self, packets: int, marked: int) -> None:
        self.acked += packets
        self.marked += marked

    def tick(self, now: float) -> None:
        if now < self.window_end:
            return
        self.window_end = now + self.window_s
        if self.acked == 0:
            return
        fraction = self.marked / self.acked
        self.alpha = (1 - GAIN) * self.alpha + GAIN * fraction
        if self.marked:
            self.rate = max(MIN_RATE, self.rate * (1 - self.alpha / 2))
            self.cuts += 1
            self.lowest = min(self.lowest, self.rate)
        else:
            self.rate = min(1.0, self.rate + INCREASE)
        self.acked = self.marked = 0


def _sleep_until(t: float) -> None:
    while True:
        left = t - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.002) if left < 0.01 else left - 0.005)


def _drain(sock: socket.socket, job: int, control: RateControl | None,
           want_ack: int | None = None) -> float | None:
    """Read what has arrived without waiting: echoes feed the rate control. When the
    acknowledgement of iteration `want_ack` is among them: the time the receiver's kernel
    took in the iteration's END (math.nan from a receiver that does not say)."""
    acked: float | None = None
    while True:
        try:
            data = sock.recv(64, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError, TimeoutError):
            return acked
        if len(data) < HEADER.size:
            continue
        magic, kind, _, ajob, ait, packets, marked = HEADER.unpack_from(data)
        if magic != MAGIC or ajob != job:
            continue
        if kind == KIND_ECHO and control is not None:
            control.echo(packets, marked)
        elif kind == KIND_ACK and ait == want_ack:
            acked = (ARRIVED.unpack_from(data, HEADER.size)[0]
                     if len(data) >= HEADER.size + ARRIVED.size else math.nan)


@dataclass(frozen=True)
class SenderSettings:
    """One worker's traffic, as its command line gives it (innet.cli.agent builds it once).

    Iteration i is planned at `epoch` + `shift_ms` + i x `iteration_ms`; `phases` are its Up
    phases. `react`: DCTCP-like rate control on echoed CE marks (else the phase's full rate
    whatever the queues), one decision per `window_s`. `realign`: a late iteration waits for
    the next point of epoch + shift + m x `grid_ms` (None: the iteration time) when it is
    more than 5% of T off it and the wait is at most `budget_pct`% of T."""

    dest: str
    job: int
    iteration_ms: float
    phases: tuple[Phase, ...]
    shift_ms: float
    epoch: float
    iterations: int
    tos: int = ECT0
    port: int = DATA_PORT
    react: bool = True
    realign: bool = True
    grid_ms: float | None = None
    budget_pct: float = 100.0
    window_s: float = WINDOW_S

    @property
    def period(self) -> float:
        """The iteration time T, in seconds."""
        return self.iteration_ms / 1000

    @property
    def grid(self) -> float:
        """The re-alignment grid, in seconds."""
        return (self.grid_ms or self.iteration_ms) / 1000

    @property
    def comm_end(self) -> float:
        """Seconds from an iteration's start to the planned end of its last phase."""
        return max((p.start_ms + p.duration_ms for p in self.phases), default=0.0) / 1000


def send(settings: SenderSettings, out: Path) -> dict[str, Any]:
    """One worker's traffic (see `SenderSettings`); what each iteration did goes to `out`."""
    s = settings
    sender = _Sender(s)
    records = []
    origin = s.epoch + s.shift_ms / 1000
    start = origin
    realigned = 0
    try:
        for i in range(s.iterations):
            _sleep_until(start)
            cuts_before = sender.cuts
            sent, lowest = sender.send_phases(i, start)
            delivered, acked = sender.end_of_communication(i, sent)
            finished = delivered - start + (s.period - s.comm_end)
            records.append({"iteration": i, "start": start, "sent": sent,
                            "iteration_ms": 1000 * max(finished, 0.0), "acked": acked,
                            "rate_cuts": sender.cuts - cuts_before, "lowest_rate": lowest})
            start, moved = next_start(s.period, s.grid, origin, start, finished, s.realign,
                                      s.budget_pct)
            realigned += moved
    finally:
        sender.sock.close()
    result = {"job": s.job, "iterations": records, "realigned": realigned}
    out.write_text(json.dumps(result))
    return result


class _Sender:
    """A sender's socket and what it carries from one iteration to the next: the sequence
    number, the rate control and the least round trip seen."""

    def __init__(self, settings: SenderSettings) -> None:
        self.settings = settings
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, settings.tos)
        self.sock.setblocking(False)  # echoes and acks are read between packets, never waited
        self.control = RateControl(settings.window_s) if settings.react else None
        self.seq = 0
        self.min_rtt = math.inf
        self.pad = b"\0" * (PAYLOAD_BYTES - HEADER.size)

    @property
    def cuts(self) -> int:
        return self.control.cuts if self.control is not None else 0

    @property
    def rate(self) -> float:
        return self.control.rate if self.control is not None else 1.0

    def send_phases(self, iteration: int, start: float) -> tuple[int, float]:
        """Iteration `iteration`'s Up phases: packets sent, and the lowest share of the
        phases' rates the rate control went down to.

        Pacing follows the clock, not the last send: packet n of a phase is due one interval
        (at the current rate) after packet n - 1 was due, so a sender the machine kept from
        running for a while catches up, at no more than twice the rate (no burst), instead
        of stretching its phase by the time it lost."""
        s = self.settings
        sent, lowest = 0, 1.0
        for ph in s.phases:
            count = round(ph.pps * ph.duration_ms / 1000)
            if ph.pps <= 0 or count == 0:
                continue
            # a phase starts when its offset comes, or when the previous one is done
            due = max(start + ph.start_ms / 1000, time.time())
            last = -math.inf
            for _ in range(count):
                gap = 1.0 / (ph.pps * self.rate)
                _sleep_until(max(due, last + gap / 2))  # behind the clock: twice the rate
                if self.control is not None:
                    _drain(self.sock, s.job, self.control)
                    self.control.tick(time.time())
                self.sock.sendto(HEADER.pack(MAGIC, KIND_DATA, 0, s.job, iteration, self.seq, 0)
                                 + self.pad, (s.dest, s.port))
                last = time.time()
                self.seq += 1
                sent += 1
                lowest = min(lowest, self.rate)
                due += 1.0 / (ph.pps * self.rate)
        return sent, lowest

    def end_of_communication(self, iteration: int, sent: int) -> tuple[float, bool]:
        """Ask the receiver to acknowledge the iteration (its END resent every 50 ms, for at
        most max(1 s, 2 T)): when its data was delivered, and whether the ack came.

        The communication is over when the data has arrived: when the END behind it reached
        the receiver's kernel (one clock: the hosts are namespaces of one machine), so
        neither the receiver's scheduling nor the acknowledgement's way back makes an
        iteration late, while queueing in the switches does; from an older receiver, the
        acknowledgement less the least round trip seen."""
        s = self.settings
        ack_time = None
        arrived: float | None = None
        asked = time.time()
        deadline = asked + max(1.0, 2 * s.period)
        while ack_time is None and time.time() < deadline:
            self.sock.sendto(HEADER.pack(MAGIC, KIND_END, 0, s.job, iteration, self.seq, sent),
                             (s.dest, s.port))
            wait_until = time.time() + 0.05
            while ack_time is None and time.time() < wait_until:
                arrived = _drain(self.sock, s.job, self.control, want_ack=iteration)
                if arrived is not None:
                    ack_time = time.time()
                else:
                    time.sleep(0.001)
        if ack_time is not None and arrived is not None and math.isfinite(arrived):
            return arrived, True
        if ack_time is not None:
            self.min_rtt = min(self.min_rtt, ack_time - asked)
            return ack_time - self.min_rtt, True
        return time.time(), False


def next_start(period: float, grid: float, origin: float, start: float, finished: float,
               realign: bool = True, budget_pct: float = 100.0) -> tuple[float, bool]:
    """When the next iteration starts after one that began at `start` and took `finished`
    seconds, and whether it waits to be back on the grid of its interleaving (points
    origin + m x `grid`): a late iteration more than 5% of the `period` off the grid waits
    for its next point if that wait is at most `budget_pct`% of the period."""
    following = start + period
    end = start + finished
    if end <= following:
        return following, False
    late = (end - origin) % grid
    if grid - late < 1e-6:
        late = 0.0
    if (realign and late > DRIFT_TOLERANCE * period
            and grid - late <= budget_pct / 100 * period + 1e-9):
        return end + (grid - late), True
    return end, False


def receive(duration_s: float, out: Path, port: int = DATA_PORT,
            idle_s: float | None = None) -> dict[str, Any]:
    """Count packets and CE marks per job and iteration, echo the marks to each sender every
    ECHO_EVERY packets, and acknowledge the end of each iteration. Stops after `duration_s`,
    or once nothing has arrived for `idle_s` after the first packet (the senders are done:
    a slowed run is not cut short by a duration guessed in advance)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    counts = _Counts()
    ancillary = socket.CMSG_SPACE(4) + socket.CMSG_SPACE(_TIMESPEC.size)
    deadline = time.time() + duration_s
    last: float | None = None
    while time.time() < deadline:
        if idle_s is not None and last is not None and time.time() - last > idle_s:
            break
        try:
            data, anc, _, addr = sock.recvmsg(2048, ancillary)
        except TimeoutError:
            continue
        last = time.time()
        if reply := counts.take(data, anc, addr, last):
            sock.sendto(reply, addr)
    sock.close()
    result = counts.result()
    out.write_text(json.dumps(result))
    return result


class _Counts:
    """What a receiver has seen: packets and CE marks per job and per iteration, the marks
    not yet echoed to each sender, and when each iteration's first END arrived."""

    def __init__(self) -> None:
        self.packets: dict[int, int] = defaultdict(int)
        self.ce: dict[int, int] = defaultdict(int)
        self.per_iter: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        self.unechoed: dict[tuple[Any, int], list[int]] = defaultdict(lambda: [0, 0])
        self.ended: dict[tuple[Any, int, int], float] = {}  # (sender, job, iteration) -> END

    def take(self, data: bytes, anc: list[tuple[int, int, bytes]], addr: Any, now: float
             ) -> bytes | None:
        """Count one datagram; the answer it calls for (an ACK, an echo), if any."""
        if len(data) < HEADER.size:
            return None
        magic, kind, _, job, it, _, _sent = HEADER.unpack_from(data)
        if magic != MAGIC:
            return None
        if kind == KIND_END:
            at = self.ended.setdefault((addr, job, it), _kernel_time(anc) or now)
            return HEADER.pack(MAGIC, KIND_ACK, 0, job, it, 0, 0) + ARRIVED.pack(at)
        tos = 0
        for level, ctype, cdata in anc:
            if level == socket.IPPROTO_IP and ctype == socket.IP_TOS and cdata:
                tos = cdata[0]
        self.packets[job] += 1
        self.per_iter[(job, it)][0] += 1
        marked = tos & 0x03 == 0x03
        if marked:
            self.ce[job] += 1
            self.per_iter[(job, it)][1] += 1
        echo = self.unechoed[(addr, job)]
        echo[0] += 1
        echo[1] += marked
        if echo[0] < ECHO_EVERY:
            return None
        # tell the sender what the queues did to its packets
        reply = HEADER.pack(MAGIC, KIND_ECHO, 0, job, it, echo[0], echo[1])
        echo[0] = echo[1] = 0
        return reply

    def result(self) -> dict[str, Any]:
        return {
            "packets": {str(j): n for j, n in self.packets.items()},
            "ce": {str(j): self.ce.get(j, 0) for j in self.packets},
            "per_iteration": [{"job": j, "iteration": i, "packets": v[0], "ce": v[1]}
                              for (j, i), v in sorted(self.per_iter.items())],
        }


def _kernel_time(anc: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's receive time of a datagram (SO_TIMESTAMPNS), None when absent."""
    for level, ctype, cdata in anc:
        if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPNS and len(cdata) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(cdata)
            return float(sec + nsec * 1e-9)
    return None
