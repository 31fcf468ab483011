"""How long deploying a bt15 SOAR plan to 15 BMv2 switches takes, and a no-change redeploy.

    sudo .venv/bin/python benchmarks/deploy_bench.py [-k 4] [--repeat 3]

Starts 15 simple_switch_grpc processes without a program and without interfaces (deploy
time does not depend on ports), then times, from the caller's side and including the
P4Runtime sessions being opened and closed, as `innet deploy` does:
  1. the first deploy: program (SetForwardingPipelineConfig) plus every entry on every switch;
  2. the same plan again, which must find nothing to write.
Targets (issue 5): at most 3 s and 0.5 s. Every switch process is stopped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from innet.p4rt.client import SwitchClient
from innet.p4rt.deploy import deploy
from innet.plan.intent import derive, workload_from_dict
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, missing_tools, start_switch
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent

TARGET_FIRST, TARGET_AGAIN = 3.0, 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", type=int, default=4, help="SOAR budget (default 4)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each measurement (fresh switches for each first deploy)")
    args = parser.parse_args()
    missing = missing_tools("simple_switch_grpc")
    if missing:
        print(f"deploy_bench: {', '.join(missing)} not on PATH (BMv2); nothing measured")
        return 1
    topo = load_topology(ROOT / "topologies" / "bt15.json")
    workers = [h for h in topo.hosts if h != topo.destination]
    w = workload_from_dict({"job": 1, "workers": workers}, topo)
    intent = derive(topo, [w], "soar", args.k)
    entries = intent.entries()
    pipe = load_pipeline()
    n_entries = sum(len(e) for e in entries.values())
    print(f"bt15, soar k={args.k}: blue {', '.join(intent.jobs[0].blue)}; {len(entries)} "
          f"switches, {n_entries} entries; BMv2 JSON {len(pipe.device_config) // 1024} KiB")
    firsts, agains = [], []
    with tempfile.TemporaryDirectory(prefix="innet-bench-") as tmp:
        for run in range(args.repeat):
            switches: list[BMv2Switch] = []
            try:
                for name in topo.switches:
                    switches.append(start_switch(name, Path(tmp) / f"run{run}"))
                addrs = {sw.name: sw.address for sw in switches}
                t0 = time.perf_counter()
                first = deploy(addrs, entries, pipe)
                firsts.append(time.perf_counter() - t0)
                assert first.pipelines == len(switches) and first.writes > 0
                t0 = time.perf_counter()
                again = deploy(addrs, entries, pipe)
                agains.append(time.perf_counter() - t0)
                assert again.pipelines == 0 and again.writes == 0, "redeploy wrote something"
                with SwitchClient(addrs["s4"], pipe.schema, writer=False) as c:
                    assert len(c.read_entries(("agg_job",))) == (1 if "s4" in
                                                                 intent.jobs[0].blue else 0)
                print(f"run {run + 1}: first deploy {firsts[-1]:.3f} s ({first.writes} writes, "
                      f"{first.pipelines} programs), no-change redeploy {agains[-1]:.3f} s")
            finally:
                for sw in switches:
                    sw.stop()
    f, a = statistics.median(firsts), statistics.median(agains)
    ok = f <= TARGET_FIRST and a <= TARGET_AGAIN
    print(f"median of {args.repeat}: deploy (program + entries, 15 switches) {f:.3f} s "
          f"[target <= {TARGET_FIRST:g} s]; no-change redeploy {a:.3f} s "
          f"[target <= {TARGET_AGAIN:g} s] -> {'OK' if ok else 'TOO SLOW'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
