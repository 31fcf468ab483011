"""Aggregation at the data plane's speed: what BMv2 carries here, and what the stream uses.

    sudo .venv/bin/python benchmarks/aggregation_bench.py [--values 1048576]
        [--loss 0 0.01 0.02 0.05] [--values-at 0.05=131072] [--link-pps 400]
        [--link-values 131072] [--link-loss 0 0.01]

Measured in one run, both sides of every figure at once:

1. One BMv2 switch's plain forwarding between two namespaces: a sender offers aggregation-
   sized UDP packets at a fixed rate while a receiver thread reads them as they arrive (a
   receiver that read only after the sending would measure its socket buffer, not the
   switch); delivered = what the receiver read, and the switch's own egress counter beside
   it.
2. The same bt15 network the aggregation runs on, routes only, every worker blasting
   aggregation-sized packets at the destination at once: the switches' total packets per
   second (every switch's ingress counters), the network's forwarding capacity on this
   machine.
3. `innet run aggregation` on bt15 for SOAR k=4 and all-red at each --loss: time, goodput
   (values of the sum per second), retransmissions, the switches' total packets per second
   and its share of the blast's, the repairs' packets per lost packet (packets through the
   switches beyond the lossless row's per chunk, per packet the fault injection dropped),
   and whether the first-transmission cost equals phi; then SOAR over all-red and the share
   of its lossless goodput SOAR keeps, per loss. With
   --compare, the same with results sent unicast and the old timers (2-4 s without loss,
   0.2-0.5 s with), as before results were multicast.
4. The link-bound regime (--link-pps), at each --link-loss: every port drains its link's
   rate, so the plan's busiest uplink sets the goodput. Per strategy: goodput, the busiest
   uplink's messages per chunk and use of its rate; then SOAR's goodput over all-red's
   against the ratio of their bottleneck loads computed from the plans.

Needs root, Mininet and BMv2. Run it alone on the machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from innet import aggpacket as ap
from innet.bmv2.thrift import run_cli
from innet.emulation.aggregation import (
    AggregationRunOptions,
    StrategyRun,
    Timers,
    default_workload,
    run_aggregation,
)
from innet.emulation.experiment import controlled_network
from innet.p4rt.client import SwitchClient
from innet.p4rt.deploy import deploy
from innet.plan import intent as it
from innet.plan.pipeline import load_pipeline
from innet.plan.program import C_PORT_IN, C_PORT_OUT
from innet.table import format_table
from innet.testing.bmv2 import host_namespaces, in_netns, missing_tools, start_switch
from innet.topology import load_topology, topology_from_dict

ROOT = Path(__file__).resolve().parent.parent
BT15 = ROOT / "topologies" / "bt15.json"
PORT = 40000  # not the aggregation port: plain forwarding, no aggregation logic


class Counter(threading.Thread):
    """Reads a socket while the sender sends; stops `idle` seconds after the last packet."""

    def __init__(self, sock: socket.socket, idle: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.sock, self.idle, self.got = sock, idle, 0
        self.started = threading.Event()

    def run(self) -> None:
        self.started.set()
        while select.select([self.sock], [], [], self.idle)[0]:
            self.sock.recv(2048)
            self.got += 1


def one_switch(rates: list[int], seconds: float = 3.0) -> list[list[object]]:
    hosts = {"h0": ("10.0.0.2", "08:00:00:00:00:01"), "h1": ("10.0.0.3", "08:00:00:00:00:02")}
    topo = topology_from_dict({"name": "fwd", "hosts": {h: {"ip": ip, "mac": mac}
                                                        for h, (ip, mac) in hosts.items()},
                               "switches": {"s1": {}},
                               "links": [["h0", "s1-p1"], ["h1", "s1-p2"]]})
    rows: list[list[object]] = []
    payload = b"x" * ap.PAYLOAD_BYTES
    pipe = load_pipeline()
    with tempfile.TemporaryDirectory(prefix="innet-fwd-") as tmp, \
            host_namespaces(hosts, "fb") as ns:
        sw = start_switch("s1", Path(tmp), interfaces={1: ns["h0"].switch_intf,
                                                       2: ns["h1"].switch_intf})
        try:
            deploy({"s1": sw.address}, it.network_intent(topo, []).entries(), pipe,
                   sideband=run_cli)
            with in_netns(ns["h0"].netns):
                rx = ap.receiver_socket("0.0.0.0", PORT)
            with in_netns(ns["h1"].netns):
                tx = ap.sender_socket()
            with rx, tx, SwitchClient(sw.address, pipe.schema, writer=False) as c:
                for rate in rates:
                    out0 = c.read_counters(C_PORT_OUT).get(1, (0, 0))[0]
                    reader = Counter(rx)
                    reader.start()
                    reader.started.wait()
                    sent, start = 0, time.monotonic()
                    while (now := time.monotonic() - start) < seconds:
                        while sent < now * rate:
                            tx.sendto(payload, (hosts["h0"][0], PORT))
                            sent += 1
                        time.sleep(0.0002)
                    reader.join()
                    out = c.read_counters(C_PORT_OUT).get(1, (0, 0))[0] - out0
                    rows.append([rate, round(sent / seconds), round(out / seconds),
                                 round(reader.got / seconds), f"{1 - reader.got / sent:.1%}"])
        finally:
            sw.stop()
    return rows


BLASTER = """
import socket, sys, time
dst, rate, seconds, size = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, sent, start = b"x" * size, 0, time.monotonic()
while (now := time.monotonic() - start) < seconds:
    while sent < now * rate:
        s.sendto(payload, (dst, PORT)); sent += 1
    time.sleep(0.0005)
print(sent)
""".replace("PORT", str(PORT))


def network_blast(out: Path, rates: list[int], seconds: float = 5.0) -> list[list[object]]:
    """Every worker of bt15 sends to the destination at `rate` at once; the switches' total
    ingress packets per second while they do."""
    topo = load_topology(BT15)
    work = default_workload(topo)
    rows: list[list[object]] = []
    intent = it.network_intent(topo, [])
    with controlled_network(topo, out, intent.entries()) as cn:
        def ingress() -> int:
            return sum(p for s in cn.addresses
                       for p, _ in cn.controller.session(s).read_counters(C_PORT_IN).values())

        dst = topo.hosts[work.destination].ip
        for rate in rates:
            before = ingress()
            procs = [cn.host(h).popen([sys.executable, "-c", BLASTER, dst, str(rate),
                                       str(seconds), str(ap.PAYLOAD_BYTES)],
                                      stdout=subprocess.PIPE) for h in work.workers]
            sent = sum(int(p.communicate()[0] or 0) for p in procs)
            time.sleep(1.0)  # the queues drain
            got = ingress() - before
            rows.append([rate, len(work.workers), round(sent / seconds), round(got / seconds)])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=1 << 20,
                        help="values each worker streams (default 2^20)")
    parser.add_argument("--loss", type=float, nargs="+", default=[0.0, 0.01, 0.05])
    parser.add_argument("--values-at", nargs="*", default=["0.05=131072"], metavar="LOSS=N",
                        help="a smaller stream at these losses (default 0.05=131072: at 5%% "
                             "loss 2^20 values take about half an hour per strategy here)")
    parser.add_argument("--link-pps", type=int, default=400,
                        help="the link-bound regime's fastest link, packets/s (0: skip it)")
    parser.add_argument("--link-values", type=int, default=1 << 17,
                        help="values per worker in the link-bound regime (default 2^17: "
                             "all-red's 16 messages per chunk at 400 packets/s take 164 s)")
    parser.add_argument("--link-loss", type=float, nargs="*", default=[0.0, 0.01],
                        help="the losses of the link-bound regime (default 0 and 1%%)")
    parser.add_argument("--compare", action="store_true",
                        help="also run with unicast results and the old timers")
    parser.add_argument("--out", type=Path, default=Path("runs") / "aggregation-bench")
    args = parser.parse_args()
    missing = missing_tools("simple_switch_grpc", "simple_switch_CLI", "mnexec")
    if missing:
        print(f"aggregation_bench: {', '.join(missing)} not on PATH; nothing measured")
        return 1
    print("1. one BMv2 switch, plain forwarding of 172-byte UDP payloads (receiver reading "
          "while the sender sends):")
    print(format_table(["offered pps", "sent pps", "switch out pps", "received pps", "lost"],
                       one_switch([2000, 5000, 10000, 20000])), flush=True)
    blast = network_blast(args.out / "blast", [200, 500, 1000, 2000])
    print("\n2. bt15, routes only, every worker blasting the destination at once:")
    print(format_table(["pps per worker", "workers", "offered pps", "switches' ingress pps"],
                       blast), flush=True)
    capacity = max(float(str(r[3])) for r in blast)
    variants = [("multicast results, RTT timers", True, Timers())]
    if args.compare:
        variants.append(("unicast results, old timers", False, Timers(2.0, 4.0, 2.0)))
    sizes = {float(k): int(v) for k, v in (item.split("=") for item in args.values_at)}
    rows = []
    for label, multicast, timers in variants:
        measured: dict[tuple[float, str], StrategyRun] = {}
        for loss in args.loss:
            values = sizes.get(loss, args.values)
            old = not multicast and loss > 0
            options = AggregationRunOptions(
                str(BT15), strategies=("soar", "all-red"), k=4, values=values, loss=loss,
                multicast=multicast, timers=Timers(0.2, 0.5, 0.5) if old else timers,
                progress=False)
            results = run_aggregation(options, args.out / f"{label[:9]}-loss-{loss}")
            for r in results:
                measured[loss, r.strategy] = r
                rows.append([label, f"{loss:.0%}", r.strategy, r.values, r.window, r.inflight,
                             r.retransmissions, r.duration_s, round(r.goodput_values_per_s),
                             round(r.switch_pps), f"{r.switch_pps / capacity:.0%}",
                             repairs_per_loss(r, measured.get((0.0, r.strategy))),
                             "yes" if r.cost_matches else "NO",
                             "yes" if r.sums_exact else "NO"])
            print("\n3. aggregation on bt15 (CPU-bound: no link rates set):")
            print(format_table(["variant", "loss", "strategy", "values", "window", "in flight",
                                "retransmissions", "duration s", "values/s", "switch pps",
                                "of blast", "repairs per loss", "cost == phi", "exact"],
                               rows, digits=1), flush=True)
        print(f"\n   {label}: SOAR against all-red, and against its own lossless goodput:")
        print(format_table(["loss", "SOAR / all-red", "SOAR keeps"],
                           summary(measured, args.loss)), flush=True)
    for loss in args.link_loss if args.link_pps else []:
        link_bound(args.out / f"link-bound-loss-{loss}", args.link_pps, args.link_values, loss)
    return 0


def repairs_per_loss(r: StrategyRun, lossless: StrategyRun | None) -> str:
    """Packets through the switches beyond the lossless stream's per chunk, per packet the
    fault injection dropped: what one loss costs the repairs, all kinds together."""
    drops = r.events.get("fault_drop", 0)
    if lossless is None or not drops:
        return "n/a"
    extra = r.switch_packets - r.chunks * lossless.switch_packets / lossless.chunks
    return f"{extra / drops:.1f}"


def summary(measured: dict[tuple[float, str], StrategyRun], losses: list[float]
            ) -> list[list[object]]:
    base = measured.get((0.0, "soar"))
    out: list[list[object]] = []
    for loss in losses:
        soar, red = measured.get((loss, "soar")), measured.get((loss, "all-red"))
        if soar is None or red is None:
            continue
        kept = (f"{soar.goodput_values_per_s / base.goodput_values_per_s:.0%}"
                if base is not None else "n/a")
        out.append([f"{loss:.0%}", f"{soar.goodput_values_per_s / red.goodput_values_per_s:.2f}x",
                    kept])
    return out


def link_bound(out: Path, link_pps: int, values: int, loss: float) -> None:
    results = run_aggregation(AggregationRunOptions(
        str(BT15), strategies=("soar", "all-red"), k=4, values=values, link_pps=link_pps,
        loss=loss, progress=False), out)
    rows = [[r.strategy, r.values, r.duration_s, round(r.goodput_values_per_s),
             r.retransmissions, r.bottleneck_switch, r.bottleneck_messages, r.bottleneck_pps,
             f"{r.bottleneck_use:.0%}",
             round(r.bottleneck_pps * ap.VECTOR_LEN / r.bottleneck_messages),
             "yes" if r.cost_matches else "NO", "yes" if r.sums_exact else "NO"]
            for r in results]
    print(f"\n4. the link-bound regime on bt15, {loss:.0%} loss: every port drains its link's "
          f"rate, the fastest {link_pps} packets/s:")
    print(format_table(["strategy", "values", "duration s", "values/s", "retransmissions",
                        "busiest uplink", "its messages per chunk", "its pps", "busy",
                        "its pps x 32 / messages", "cost == phi", "exact"], rows, digits=1))
    soar, red = results
    measured = soar.goodput_values_per_s / red.goodput_values_per_s
    predicted = red.bottleneck_load / soar.bottleneck_load
    print(f"SOAR / all-red goodput: {measured:.2f}x; their bottleneck loads (largest messages "
          f"per chunk / rate): {red.bottleneck_load:g} / {soar.bottleneck_load:g} = "
          f"{predicted:.2f}x; measured / predicted = {measured / predicted:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
