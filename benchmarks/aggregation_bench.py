"""Goodput of reliable in-network aggregation on bt15: SOAR k=4 against all-red, with loss.

    sudo .venv/bin/python benchmarks/aggregation_bench.py [--values 1048576] [--loss 0 0.01 0.05]

For each loss (the share of aggregation packets every switch drops, in the P4 program), runs
`innet run aggregation` on topologies/bt15.json with strategies soar (k=4) and all-red (the
destination sums everything itself) and prints, per strategy: values per worker, chunks,
retransmissions, the time to aggregate, goodput (values per second) and whether every sum
was exact. Then measures BMv2's plain forwarding rate on this machine for scale: one
simple_switch_grpc between two namespaces, UDP packets of the aggregation packet's size
offered at increasing rates, the highest rate delivered with under 1% lost. Needs root,
Mininet and BMv2; hold the machine's lock (flock /tmp/innet-heavy.lock ...).
"""

from __future__ import annotations

import argparse
import select
import sys
import tempfile
import time
from pathlib import Path

from innet import aggpacket as ap
from innet.bmv2.thrift import run_cli
from innet.emulation.aggregation import run_aggregation
from innet.p4rt.deploy import deploy
from innet.plan import intent as it
from innet.plan.pipeline import load_pipeline
from innet.table import format_table
from innet.testing.bmv2 import host_namespaces, in_netns, missing_tools, start_switch
from innet.topology import topology_from_dict

ROOT = Path(__file__).resolve().parent.parent

PORT = 40000


def forwarding_rate(rates: list[int], seconds: float = 2.0) -> list[tuple[int, int, float]]:
    """(offered pps, delivered pps, lost share) through one red BMv2 switch."""
    hosts = {"h0": ("10.0.0.2", "08:00:00:00:00:01"), "h1": ("10.0.0.3", "08:00:00:00:00:02")}
    topo = topology_from_dict({"name": "fwd", "hosts": {h: {"ip": ip, "mac": mac} for h, (ip, mac)
                                                        in hosts.items()},
                               "switches": {"s1": {}},
                               "links": [["h0", "s1-p1"], ["h1", "s1-p2"]]})
    out = []
    payload = b"x" * ap.PAYLOAD_BYTES
    with tempfile.TemporaryDirectory(prefix="innet-fwd-") as tmp, \
            host_namespaces(hosts, "fb") as ns:
        sw = start_switch("s1", Path(tmp), interfaces={1: ns["h0"].switch_intf,
                                                       2: ns["h1"].switch_intf})
        try:
            entries = it.network_intent(topo, []).entries()
            deploy({"s1": sw.address}, entries, load_pipeline(), sideband=run_cli)
            with in_netns(ns["h0"].netns):
                rx = ap.receiver_socket("0.0.0.0", PORT)
            with in_netns(ns["h1"].netns):
                tx = ap.sender_socket()
            with rx, tx:
                for rate in rates:
                    sent = 0
                    start = time.monotonic()
                    while (now := time.monotonic() - start) < seconds:
                        while sent < now * rate:
                            tx.sendto(payload, (hosts["h0"][0], PORT))
                            sent += 1
                        time.sleep(0.0005)
                    got = 0
                    while select.select([rx], [], [], 0.5)[0]:
                        rx.recv(2048)
                        got += 1
                    out.append((rate, int(got / seconds), 1 - got / sent if sent else 0.0))
        finally:
            sw.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=1 << 20,
                        help="values each worker streams (default 2^20)")
    parser.add_argument("--loss", type=float, nargs="+", default=[0.0, 0.01, 0.05])
    parser.add_argument("--out", type=Path, default=Path("runs") / "aggregation-bench")
    args = parser.parse_args()
    missing = missing_tools("simple_switch_grpc", "simple_switch_CLI", "mnexec")
    if missing:
        print(f"aggregation_bench: {', '.join(missing)} not on PATH; nothing measured")
        return 1
    rows = []
    for loss in args.loss:
        results = run_aggregation(str(ROOT / "topologies" / "bt15.json"),
                                  args.out / f"loss-{loss}", strategies=("soar", "all-red"),
                                  k=4, values=args.values, loss=loss)
        for r in results:
            rows.append([f"{loss:.0%}", r.strategy, r.values, r.chunks, r.window,
                         r.retransmissions, r.duration_s, r.goodput_values_per_s,
                         "yes" if r.sums_exact else "NO"])
        print(format_table(["loss", "strategy", "values", "chunks", "window", "retransmissions",
                            "duration s", "values/s", "exact"], rows, digits=1), flush=True)
    print("\nBMv2 plain forwarding, one switch, 172-byte UDP payloads:")
    fwd = forwarding_rate([2000, 5000, 10000, 20000])
    print(format_table(["offered pps", "delivered pps", "lost"],
                       [[o, d, f"{lost:.1%}"] for o, d, lost in fwd]))
    ok = [o for o, _, lost in fwd if lost < 0.01]
    print(f"highest offered rate delivered with < 1% loss: {max(ok) if ok else 'none'} pps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
