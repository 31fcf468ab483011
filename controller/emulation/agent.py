"""Per-host traffic agent for the CASSINI experiment: paced on/off UDP, ECN counted at the end.

Run inside an emulated host (`python -m controller.emulation.agent send|receive ...`).

A sender is one job's worker: iteration i is planned to start at epoch + shift + i * T. In each
Up phase it sends paced UDP (ECT(0) in the TOS byte: a socket and a timer, no scapy) at the
phase's rate; after the last phase it asks the receiver for an acknowledgement, so a
congested link (a queue in the switch) delays the end of the communication and with it the
iteration, as in a training job whose compute waits for its gradients. If an iteration ends
more than 5% of T after the next planned start, the agent re-aligns to the next start on the
grid instead of drifting (CASSINI's agents do the same). The receiver counts packets and CE
marks per job and iteration and answers the acknowledgements.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA_PORT = 50001
MAGIC = 0x1CA5
KIND_DATA, KIND_END, KIND_ACK = 0, 1, 2
_HEAD = struct.Struct("!HBBHIII")  # magic, kind, tos seen, job, iteration, seq, sent packets
PAYLOAD_BYTES = 1000
ECT0 = 0x02
DRIFT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Phase:
    start_ms: float
    duration_ms: float
    pps: float


def _sleep_until(t: float) -> None:
    while True:
        left = t - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.002) if left < 0.01 else left - 0.005)


def send(dest: str, job: int, iteration_ms: float, phases: list[Phase], shift_ms: float,
         epoch: float, iterations: int, out: Path, tos: int = ECT0) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    sock.settimeout(0.05)
    period = iteration_ms / 1000
    comm_end = max((p.start_ms + p.duration_ms for p in phases), default=0.0) / 1000
    pad = b"\0" * (PAYLOAD_BYTES - _HEAD.size)
    records = []
    start = epoch + shift_ms / 1000
    realigned = 0
    seq = 0
    for i in range(iterations):
        _sleep_until(start)
        sent = 0
        for ph in phases:
            t0 = start + ph.start_ms / 1000
            count = round(ph.pps * ph.duration_ms / 1000)
            gap = 1.0 / ph.pps if ph.pps > 0 else 0.0
            for j in range(count):
                _sleep_until(t0 + j * gap)
                sock.sendto(_HEAD.pack(MAGIC, KIND_DATA, 0, job, i, seq, 0) + pad,
                            (dest, DATA_PORT))
                seq += 1
                sent += 1
        # the end of communication: wait for the receiver's acknowledgement of this iteration
        ack_time = None
        deadline = time.time() + max(1.0, 2 * period)
        while ack_time is None and time.time() < deadline:
            sock.sendto(_HEAD.pack(MAGIC, KIND_END, 0, job, i, seq, sent), (dest, DATA_PORT))
            try:
                while True:
                    data = sock.recv(64)
                    magic, kind, _, ajob, ait, _, _ = _HEAD.unpack_from(data)
                    if magic == MAGIC and kind == KIND_ACK and ajob == job and ait == i:
                        ack_time = time.time()
                        break
            except TimeoutError:
                continue
        finished = (ack_time or time.time()) - start + (period - comm_end)
        records.append({"iteration": i, "start": start, "sent": sent,
                        "iteration_ms": 1000 * max(finished, 0.0), "acked": ack_time is not None})
        next_start = start + period
        end = start + finished
        if end > next_start + DRIFT_TOLERANCE * period:
            # late: skip to the next planned start after the end instead of drifting
            behind = int((end - next_start) / period) + 1
            next_start += behind * period
            realigned += 1
        elif end > next_start:
            next_start = end
        start = next_start
    sock.close()
    result = {"job": job, "iterations": records, "realigned": realigned}
    out.write_text(json.dumps(result))
    return result


def receive(duration_s: float, out: Path, port: int = DATA_PORT) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    packets: dict[int, int] = defaultdict(int)
    ce: dict[int, int] = defaultdict(int)
    per_iter: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    deadline = time.time() + duration_s
    while time.time() < deadline:
        try:
            data, anc, _, addr = sock.recvmsg(2048, socket.CMSG_SPACE(4))
        except TimeoutError:
            continue
        if len(data) < _HEAD.size:
            continue
        magic, kind, _, job, it, _, _sent = _HEAD.unpack_from(data)
        if magic != MAGIC:
            continue
        if kind == KIND_END:
            sock.sendto(_HEAD.pack(MAGIC, KIND_ACK, 0, job, it, 0, 0), addr)
            continue
        tos = 0
        for level, ctype, cdata in anc:
            if level == socket.IPPROTO_IP and ctype == socket.IP_TOS and cdata:
                tos = cdata[0]
        packets[job] += 1
        per_iter[(job, it)][0] += 1
        if tos & 0x03 == 0x03:
            ce[job] += 1
            per_iter[(job, it)][1] += 1
    sock.close()
    result = {
        "packets": {str(j): n for j, n in packets.items()},
        "ce": {str(j): ce.get(j, 0) for j in packets},
        "per_iteration": [{"job": j, "iteration": i, "packets": v[0], "ce": v[1]}
                          for (j, i), v in sorted(per_iter.items())],
    }
    out.write_text(json.dumps(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.emulation.agent",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send", help="one job's paced on/off traffic")
    s.add_argument("--dest", required=True)
    s.add_argument("--job", type=int, required=True)
    s.add_argument("--iteration-ms", type=float, required=True)
    s.add_argument("--phases", required=True,
                   help='JSON list of {"start_ms", "duration_ms", "pps"}')
    s.add_argument("--shift-ms", type=float, default=0.0)
    s.add_argument("--epoch", type=float, required=True, help="UNIX time of iteration 0")
    s.add_argument("--iterations", type=int, required=True)
    s.add_argument("--tos", type=int, default=ECT0)
    s.add_argument("--out", required=True)
    r = sub.add_parser("receive", help="count packets and CE marks, answer acknowledgements")
    r.add_argument("--duration", type=float, required=True)
    r.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.mode == "send":
        phases = [Phase(float(p["start_ms"]), float(p["duration_ms"]), float(p["pps"]))
                  for p in json.loads(args.phases)]
        send(args.dest, args.job, args.iteration_ms, phases, args.shift_ms, args.epoch,
             args.iterations, Path(args.out), args.tos)
    else:
        receive(args.duration, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
