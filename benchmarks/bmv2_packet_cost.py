"""What one packet costs a BMv2 switch here, by what the P4 program does with it.

    sudo .venv/bin/python benchmarks/bmv2_packet_cost.py [--rate 3000] [--seconds 4]

One `simple_switch_grpc` running innet's program between three namespaces (h1 and h2 send,
h0 receives). For each kind of packet a sender offers `--rate` packets per second while a
receiver thread reads them as they arrive; the switch process's CPU time (user + system,
from /proc) over the packets sent is the figure:

- plain: UDP to another port, routes only (what the network blast of
  aggregation_bench.py forwards);
- result: an aggregation packet flagged RESULT, forwarded untouched;
- track: a contribution through a switch that is red for the job (checked, counted);
- blue: contributions of a two-worker job through the switch that aggregates it, two per
  chunk: the first is stored in its cell, the second added and the sum emitted.

It says why the aggregation's switches handle fewer packets per second than the blast:
a blue switch's packet costs more than a plain one, and light queues cost BMv2 a thread
hand-off per packet that a saturating blast shares among many. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregation_bench import Counter

from innet import aggpacket as ap
from innet.bmv2.thrift import run_cli
from innet.p4rt.deploy import deploy
from innet.plan import intent as it
from innet.plan.pipeline import load_pipeline
from innet.table import format_table
from innet.testing.bmv2 import host_namespaces, in_netns, missing_tools, start_switch
from innet.topology import Topology, topology_from_dict

HOSTS = {"h0": ("10.0.0.2", "08:00:00:00:00:01"), "h1": ("10.0.0.3", "08:00:00:00:00:02"),
         "h2": ("10.0.0.4", "08:00:00:00:00:03")}
PLAIN_PORT = 40000
KINDS = ("plain", "result", "track", "blue")
JOB, SLOTS = 1, 16


def _topology() -> Topology:
    return topology_from_dict({
        "name": "cost", "switches": {"s1": {}},
        "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac) in HOSTS.items()},
        "links": [["h0", "s1-p1"], ["h1", "s1-p2"], ["h2", "s1-p3"]]})


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _payload(kind: str, n: int) -> bytes:
    vec = list(range(ap.VECTOR_LEN))
    if kind == "plain":
        return b"x" * ap.PAYLOAD_BYTES
    if kind == "result":
        return ap.encode(ap.result_packet(ap.contribution(JOB, n, 0, vec, SLOTS), 0b11, 2, vec,
                                          False))
    return ap.encode(ap.contribution(JOB, n // 2, n % 2, vec, SLOTS))  # workers 0, 1 per chunk


def measure(rate: int, seconds: float) -> list[list[object]]:
    topo = _topology()
    pipe = load_pipeline()
    workload = it.workload_from_dict({"job": JOB, "workers": ["h1", "h2"], "destination": "h0",
                                      "slots": SLOTS}, topo)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="innet-cost-") as tmp, \
            host_namespaces(HOSTS, "pc") as ns:
        sw = start_switch("s1", Path(tmp), interfaces={1: ns["h0"].switch_intf,
                                                       2: ns["h1"].switch_intf,
                                                       3: ns["h2"].switch_intf})
        try:
            with in_netns(ns["h0"].netns):
                rx_plain = ap.receiver_socket("0.0.0.0", PLAIN_PORT)
                rx_agg = ap.receiver_socket()
            with in_netns(ns["h1"].netns):
                tx = ap.sender_socket()
            with rx_plain, rx_agg, tx:
                for kind in KINDS:
                    blue = [] if kind == "track" else ["s1"]
                    plans = [it.plan_job(topo, workload, blue=blue)]
                    deploy({"s1": sw.address}, it.network_intent(topo, plans).entries(), pipe,
                           sideband=run_cli)
                    rx = rx_plain if kind == "plain" else rx_agg
                    port = PLAIN_PORT if kind == "plain" else ap.AGG_UDP_PORT
                    reader = Counter(rx)
                    reader.start()
                    reader.started.wait()
                    cpu0, sent, start = _cpu_seconds(sw.proc.pid), 0, time.monotonic()
                    while (now := time.monotonic() - start) < seconds:
                        while sent < now * rate:
                            tx.sendto(_payload(kind, sent), (HOSTS["h0"][0], port))
                            sent += 1
                        time.sleep(0.0002)
                    reader.join()
                    cpu = _cpu_seconds(sw.proc.pid) - cpu0
                    rows.append([kind, sent, reader.got, round(cpu, 2), round(cpu / sent * 1e6)])
        finally:
            sw.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--rate", type=int, default=3000, help="packets per second offered")
    parser.add_argument("--seconds", type=float, default=4.0, help="per kind of packet")
    args = parser.parse_args()
    missing = missing_tools("simple_switch_grpc", "ip")
    if os.geteuid() != 0 or missing:
        print("needs root and BMv2 on PATH" + (f" (missing: {', '.join(missing)})"
                                               if missing else ""), file=sys.stderr)
        return 2
    rows = measure(args.rate, args.seconds)
    print(f"one BMv2 switch, {args.rate} packets/s offered for {args.seconds:g} s per kind "
          "(blue: two workers, every other packet completes a chunk)")
    print(format_table(["packet", "sent", "received", "switch CPU s", "us per packet"],
                       rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
