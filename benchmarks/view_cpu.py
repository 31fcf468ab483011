"""What the live view of `net up` costs: CPU of its server with no page open and with one,
and how much a page open slows the gradient aggregation of a job running on the network.

    sudo .venv/bin/python benchmarks/view_cpu.py [--seconds 30] [--topology topologies/bt15.json]
        [--rounds 4] [--iterations 30] [--skip-cpu]

Starts `innet net up --no-cli` (k = 4 on bt15 by default, its own INNET_STATE_DIR), then for
--seconds each: nobody watching, then one client on /api/events (what an open page does).
Per phase it prints the CPU seconds per second of wall time of the `net up` process (the
view's threads run in it beside the controller's and the job monitor's: the view costs the
difference between the phases) and of the network's simple_switch_grpc processes (the
switches answering the counter reads; the pids its record names), and the events received.

Then, on a second `net up` without a workload (a network runs a --workload plan or
submitted jobs, never both), --rounds times in turn: the same job (VGG19 on 6 workers, SOAR
k = 4 by the network's admission, --iterations iterations of its gradient aggregated through
the switches) with nobody watching and with one page open. Per run it prints the job's mean
aggregation time (each worker's communication phase: its gradient through the switches and
the sums back, from the agents' progress lines), its mean iteration time and its run time
(the iterations follow the job's grid, so these two move only when aggregation overruns its
phase). The slowdown is given twice: the ratio of the medians, and the page's effect in a
least-squares fit with a linear trend over the jobs (the aggregation time drifts up from
job to job on one network); ABBA order (closed, open, open, closed, ...), so such a drift
falls equally on both sides.

Needs root, Mininet and BMv2. Run it alone on the machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from innet.emulation import live

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def cpu(stat: Path) -> float:
    """utime + stime of a /proc stat file, in seconds (0 when it is gone)."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def switches(pids: list[int]) -> float:
    return sum(cpu(Path(f"/proc/{p}/stat")) for p in pids)


def measure(pid: int, pids: list[int], seconds: float) -> tuple[float, float]:
    before = (cpu(Path(f"/proc/{pid}/stat")), switches(pids))
    t0 = time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    after = (cpu(Path(f"/proc/{pid}/stat")), switches(pids))
    return (after[0] - before[0]) / dt, (after[1] - before[1]) / dt


def watch(url: str, stop: threading.Event, events: list[int]) -> None:
    with urllib.request.urlopen(url.replace("/?", "/api/events?"), timeout=60) as r:
        for line in r:
            if line.startswith(b"data: "):
                events[0] += 1
            if stop.is_set():
                return


def net_up(work: Path, args: argparse.Namespace, *extra: str
           ) -> tuple[subprocess.Popen[bytes], str, live.NetworkRecord]:
    """`innet net up --no-cli` in its own state folder: the process, the view's address and
    the network's record, once it says it is ready."""
    env = {**os.environ, "INNET_STATE_DIR": str(work / "state")}
    log = work / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 args.topology, *extra, "--no-cli", "--out", str(work / "run")],
                                stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    deadline = time.monotonic() + 300
    while "innet net: ready" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(log.read_text())
        time.sleep(0.5)
    url = re.search(r"^view: (\S+)$", log.read_text(), re.M).group(1)  # type: ignore[union-attr]
    record = live.running(work / "state")
    assert record is not None
    return proc, url, record


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(120)


def cpu_phases(args: argparse.Namespace) -> None:
    """The view's CPU: nobody watching, then one page open, on a deployed --workload plan."""
    work = Path(tempfile.mkdtemp(prefix="innet-view-cpu-"))
    proc, url, record = net_up(work, args, "--workload", args.workload, "-k", "4")
    try:
        pids = list(record.footprint.switch_pids)
        time.sleep(5)  # the network settles
        print(f"{'phase':<22} {'net up':>8} {'switches':>9} {'events':>7}   (CPU s per s)")
        idle = measure(proc.pid, pids, args.seconds)
        print(f"{'nobody watching':<22} {idle[0]:>8.3f} {idle[1]:>9.3f} {'-':>7}")
        halt, events = threading.Event(), [0]
        client = threading.Thread(target=watch, args=(url, halt, events), daemon=True)
        client.start()
        time.sleep(2)
        watched = measure(proc.pid, pids, args.seconds)
        halt.set()
        print(f"{'one page open (SSE)':<22} {watched[0]:>8.3f} {watched[1]:>9.3f} "
              f"{events[0]:>7}")
        print(f"the view with a page open: +{watched[0] - idle[0]:.3f} CPU s/s in net up, "
              f"+{watched[1] - idle[1]:.3f} in the {len(pids)} switches")
    finally:
        stop(proc)


def one_job(record: live.NetworkRecord, name: str, iterations: int) -> dict[str, Any]:
    """Submit a job and wait for it to end; its `job list` row."""
    answer = live.ask(record, {"op": "job_submit", "job": {
        "name": name, "model": "VGG19", "workers": 6, "iterations": iterations}})
    if "error" in answer:
        raise SystemExit(f"job {name}: {answer['error']}")
    while True:
        time.sleep(1)
        rows: list[dict[str, Any]] = live.ask(record, {"op": "job_list"})["jobs"]
        row = next(r for r in rows if r["name"] == name)
        if row["state"] not in ("queued", "running"):
            if row["state"] != "done" or row["sums_exact"] is not True:
                raise SystemExit(f"job {name} ended {row['state']}: {row['why']}")
            return row


def aggregation_ms(run: Path, name: str) -> float:
    """The job's mean communication phase (ms, the emulation's clock), over every worker's
    every iteration, from the agents' progress lines in the run folder."""
    phases = [json.loads(line)["comm_ms"] for path in run.glob(f"**/{name}/progress-*.jsonl")
              for line in path.read_text().splitlines() if '"comm_ms"' in line]
    if not phases:
        raise SystemExit(f"job {name}: no progress lines under {run}")
    return float(statistics.mean(phases))


def order(rounds: int) -> list[bool]:
    """Which jobs run with a page open: ABBA blocks (closed, open, open, closed, ...), so
    a drift of the machine that is linear in time falls equally on both sides."""
    return [(i % 4) in (1, 2) for i in range(2 * rounds)]


def drift_free(values: list[float], opened: list[bool]) -> tuple[float, float, float]:
    """Least squares of value = base + trend x job index + effect x (page open): the
    page's effect with the trend taken out, the base and the trend per job."""
    import numpy as np

    x = np.array([[1.0, i, float(o)] for i, o in enumerate(opened)])
    (base, trend, effect), *_ = np.linalg.lstsq(x, np.array(values), rcond=None)
    return float(effect), float(base), float(trend)


def aggregation_phases(args: argparse.Namespace) -> None:
    """The same job with nobody watching and with a page open, in ABBA order."""
    work = Path(tempfile.mkdtemp(prefix="innet-view-agg-"))
    proc, url, record = net_up(work, args)
    opened = order(args.rounds)
    figures: list[tuple[float, float, float]] = []
    try:
        time.sleep(5)
        print(f"\n{'job':<12} {'page':>5} {'aggregation ms':>15} {'iteration ms':>13} "
              f"{'run s':>7}")
        for i, watched in enumerate(opened):
            halt, events = threading.Event(), [0]
            if watched:
                threading.Thread(target=watch, args=(url, halt, events), daemon=True).start()
                time.sleep(2)
            row = one_job(record, f"view-{i}", args.iterations)
            halt.set()
            run_s = row["ended_at"] - row["started_at"]
            comm = aggregation_ms(work / "run", f"view-{i}")
            figures.append((comm, row["mean_iteration_ms"], run_s))
            print(f"view-{i:<7} {'open' if watched else '-':>5} {comm:>15.1f} "
                  f"{row['mean_iteration_ms']:>13.1f} {run_s:>7.2f}", flush=True)
    finally:
        stop(proc)
    for k, what in ((0, "mean aggregation"), (1, "mean iteration"), (2, "run time")):
        values = [f[k] for f in figures]
        off = statistics.median(v for v, o in zip(values, opened, strict=True) if not o)
        on = statistics.median(v for v, o in zip(values, opened, strict=True) if o)
        effect, base, trend = drift_free(values, opened)
        print(f"{what} with a page open / without: medians {on / off:.3f} "
              f"({100 * (on / off - 1):+.1f}%); trend taken out {100 * effect / base:+.1f}% "
              f"(trend {100 * trend / base:+.2f}% a job)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per phase (default 30)")
    parser.add_argument("--topology", default=str(ROOT / "topologies" / "bt15.json"),
                        help="default topologies/bt15.json")
    parser.add_argument("--workload", default=str(ROOT / "examples" / "workload-bt15.json"),
                        help="default examples/workload-bt15.json")
    parser.add_argument("--rounds", type=int, default=4,
                        help="jobs without and with a page open, ABBA (default 4 each; "
                             "at least 2)")
    parser.add_argument("--iterations", type=int, default=30, help="per job (default 30)")
    parser.add_argument("--skip-cpu", action="store_true",
                        help="only the jobs, not the CPU phases")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (an ABBA block)")
    if not args.skip_cpu:
        cpu_phases(args)
    aggregation_phases(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
