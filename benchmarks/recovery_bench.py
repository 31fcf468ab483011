"""How long the long-running controller takes to restore a switch that restarted blank.

    sudo flock /tmp/innet-heavy.lock .venv/bin/python benchmarks/recovery_bench.py \
        [--topology topologies/bt15.json] [--switch s4] [--repeat 5] [--down 0.5] [--plot FILE]

Starts one simple_switch_grpc per switch of the topology (no program, no interfaces: the
control plane is what is measured) on free loopback ports, runs `innet controller run` on them
as a subprocess (the SOAR plan of every host but the destination, k = 4, default interval), and
waits until every switch holds its intent. Then, --repeat times: `kill -9` the chosen switch,
--down seconds later start it again blank on the same ports, and poll it (every 20 ms,
read-only session) until it runs our program and holds exactly its entries. Prints per
trial and as a median:
  - restart to restored: from starting the new process to the switch holding its intent;
  - of which the switch's own start (until its gRPC port accepts), and the controller's share
    (port open to restored: noticing the stream ended, reconnecting, program, entries).
--plot draws both parts per trial. Every process is stopped at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from innet.p4rt import entities as en
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.encode import normalise
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, missing_tools, start_switch
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent

PIPE = load_pipeline()


def holds(address: SwitchAddress, want: set[en.Entry]) -> bool:
    try:
        with SwitchClient(address, PIPE.schema, writer=False) as c:
            return (c.pipeline_cookie() == PIPE.cookie
                    and set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES)) == want)
    except SwitchError:
        return False


def wait_until(cond: object, timeout: float, step: float = 0.02) -> float | None:
    """Seconds until cond() held (polled every `step`), None when it never did."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():  # type: ignore[operator]
            return time.monotonic()
        time.sleep(step)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topology", default=str(ROOT / "topologies" / "bt15.json"))
    parser.add_argument("--switch", default="s4", help="the switch to restart (default s4)")
    parser.add_argument("--repeat", type=int, default=5, help="restarts (default 5)")
    parser.add_argument("-k", type=int, default=4, help="SOAR budget (default 4)")
    parser.add_argument("--down", type=float, default=0.5,
                        help="seconds the switch stays dead before it starts again (default "
                             "0.5); longer outages meet the reconnect backoff at its 1 s cap")
    parser.add_argument("--plot", type=Path, help="write a PNG of the trials here")
    args = parser.parse_args()
    missing = missing_tools("simple_switch_grpc")
    if missing:
        print(f"recovery_bench: {', '.join(missing)} not on PATH (BMv2); nothing measured")
        return 1
    topo = load_topology(args.topology)
    if args.switch not in topo.switches:
        print(f"recovery_bench: no switch {args.switch!r} in {args.topology}")
        return 2
    workers = [h for h in topo.hosts if h != topo.destination]
    workload = {"job": 1, "workers": workers}
    intent = it.derive(topo, [it.workload_from_dict(workload, topo)], "soar", args.k)
    want = {n: {normalise(PIPE.schema, e) for e in es} for n, es in intent.entries().items()}
    print(f"{topo.name}: {len(topo.switches)} switches, restarting {args.switch} "
          f"({len(want[args.switch])} entries) {args.repeat} times, {args.down:g} s down")
    switches: dict[str, BMv2Switch] = {}
    ctl: subprocess.Popen[bytes] | None = None
    trials: list[tuple[float, float]] = []  # (switch start, controller share)
    with tempfile.TemporaryDirectory(prefix="innet-recovery-") as tmp:
        run = Path(tmp)
        try:
            for name in topo.switches:
                switches[name] = start_switch(name, run)
            data = topo.to_dict()
            for name, sw in switches.items():
                data["switches"][name] = {"grpc": sw.address.grpc,
                                          "thrift_port": sw.address.thrift_port}
            (run / "topo.json").write_text(json.dumps(data))
            (run / "workload.json").write_text(json.dumps(workload))
            log = (run / "controller.log").open("wb")
            ctl = subprocess.Popen(
                [sys.executable, "-m", "innet.cli", "controller", "run", "--topology",
                 str(run / "topo.json"), "--workload", str(run / "workload.json"), "-k",
                 str(args.k)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            if wait_until(lambda: all(holds(switches[n].address, want[n]) for n in switches),
                          60, 0.2) is None:
                print("recovery_bench: the controller never reached the intent; its log:\n"
                      + (run / "controller.log").read_text()[-2000:])
                return 1
            for trial in range(args.repeat):
                old = switches[args.switch]
                old.proc.send_signal(signal.SIGKILL)
                old.proc.wait(5)
                time.sleep(args.down)  # the controller sees the stream end and retries
                port = int(old.address.grpc.rsplit(":", 1)[1])
                t_spawn = time.monotonic()
                switches[args.switch] = start_switch(args.switch, run, grpc_port=port,
                                                     thrift_port=old.address.thrift_port)
                t_port = time.monotonic()
                addr = switches[args.switch].address
                t_done = wait_until(lambda a=addr: holds(a, want[args.switch]), 30)
                if t_done is None:
                    print(f"trial {trial + 1}: NOT restored within 30 s")
                    return 1
                trials.append((t_port - t_spawn, t_done - t_port))
                total = t_done - t_spawn
                print(f"trial {trial + 1}: restart to restored {total:.2f} s (switch start "
                      f"{t_port - t_spawn:.2f} s, controller {t_done - t_port:.2f} s)")
                time.sleep(1.0)
        finally:
            if ctl is not None and ctl.poll() is None:
                ctl.send_signal(signal.SIGTERM)
                try:
                    ctl.wait(20)
                except subprocess.TimeoutExpired:
                    ctl.kill()
            for sw in switches.values():
                sw.stop()
    totals = [a + b for a, b in trials]
    print(f"median restart to restored: {statistics.median(totals):.2f} s over {len(totals)} "
          f"restarts (min {min(totals):.2f}, max {max(totals):.2f}); controller's share "
          f"median {statistics.median(b for _, b in trials):.2f} s")
    if args.plot is not None:
        plot(trials, args.plot, topo.name, args.switch)
        print(f"plot: {args.plot}")
    return 0


def plot(trials: list[tuple[float, float]], path: Path, topo: str, switch: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [str(i + 1) for i in range(len(trials))]
    start = [a for a, _ in trials]
    share = [b for _, b in trials]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.bar(x, start, color="tab:gray", label="switch starts (until its gRPC port accepts)")
    ax.bar(x, share, bottom=start, color="tab:blue",
           label="controller: reconnect, program, entries")
    ax.axhline(5.0, color="tab:red", linestyle="--", linewidth=1, label="target 5 s")
    ax.set_xlabel("restart (kill -9, started again blank)")
    ax.set_ylabel("seconds to restored")
    ax.set_title(f"{topo}: {switch} restored by `innet controller run`", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
