"""What the live view of `net up` costs: CPU of its server with no page open and with one,
and how much a page open slows the gradient aggregation of a job running on the network.

    sudo .venv/bin/python benchmarks/view_cpu.py [--seconds 30] [--topology topologies/bt15.json]
        [--iterations 200] [--block 5] [--skip-cpu]

Starts `innet net up --no-cli` (k = 4 on bt15 by default, its own INNET_STATE_DIR), then for
--seconds each: nobody watching, then one client on /api/events (what an open page does).
Per phase it prints the CPU seconds per second of wall time of the `net up` process (the
view's threads run in it beside the controller's and the job monitor's: the view costs the
difference between the phases) and of the network's simple_switch_grpc processes (the
switches answering the counter reads; the pids its record names), and the events received.

Then, on a second `net up` without a workload (a network runs a --workload plan or
submitted jobs, never both), one long job (VGG19 on 6 workers, SOAR k = 4 by the network's
admission, --iterations iterations of its gradient aggregated through the switches) while a
page is closed and opened in turn, --block seconds at a time, in ABBA order (closed, open,
open, closed, ...) until the job ends. Each worker's every communication phase (its
gradient through the switches and the sums back, from the agents' progress lines) falls in
the block it started in (the first second of a block, while the page's last sample may
still run, is left out). Per block it prints the mean aggregation time; the page's effect
is fitted by least squares with a linear trend over the blocks and given with its standard
error. Blocks of one job, rather than separate jobs, keep out what differs from job to job
(the earlier form of this benchmark saw jobs spread from 81 to 115 ms, which no eight jobs
could tell from a 5% effect).

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


def by_thread(pid: int) -> dict[str, float]:
    """CPU seconds of each of a process's threads so far, summed by thread name (gRPC's
    pollers, the view's loop and executor threads, the controller's per-switch workers)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended between the listing and the read
            continue
        out[name] = out.get(name, 0.0) + cpu(task / "stat")
    return out


def measure(pid: int, pids: list[int], seconds: float
            ) -> tuple[float, float, dict[str, float]]:
    """CPU seconds per second of `pid`, of the switches `pids`, and of `pid` by thread."""
    before = (cpu(Path(f"/proc/{pid}/stat")), switches(pids), by_thread(pid))
    t0 = time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    after = (cpu(Path(f"/proc/{pid}/stat")), switches(pids), by_thread(pid))
    threads = {k: (v - before[2].get(k, 0.0)) / dt for k, v in after[2].items()}
    return (after[0] - before[0]) / dt, (after[1] - before[1]) / dt, threads


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
        names = sorted(set(idle[2]) | set(watched[2]),
                       key=lambda n: idle[2].get(n, 0.0) - watched[2].get(n, 0.0))
        print("net up's threads by name (CPU s per s): nobody watching -> one page open")
        for n in names:
            a, b = idle[2].get(n, 0.0), watched[2].get(n, 0.0)
            if max(a, b) >= 0.001:
                print(f"  {n:<18} {a:7.3f} -> {b:7.3f}  ({b - a:+.3f})")
    finally:
        stop(proc)


def page_open(block: int) -> bool:
    """ABBA blocks (closed, open, open, closed, ...): a drift of the machine that is linear
    in time falls equally on both sides."""
    return (block % 4) in (1, 2)


def drift_free(values: list[float], opened: list[bool]
               ) -> tuple[float, float, float, float]:
    """Least squares of value = base + trend x job index + effect x (page open): the
    page's effect with the trend taken out, the base, the trend per job, and the effect's
    standard error (from the residuals), so a reader sees whether a bound is established
    or only not contradicted."""
    import numpy as np

    x = np.array([[1.0, i, float(o)] for i, o in enumerate(opened)])
    y = np.array(values)
    (base, trend, effect), *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ np.array([base, trend, effect])
    dof = max(1, len(values) - 3)
    covariance = float(residual @ residual) / dof * np.linalg.inv(x.T @ x)
    return float(effect), float(base), float(trend), float(np.sqrt(covariance[2, 2]))


def state_of(record: live.NetworkRecord, name: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = live.ask(record, {"op": "job_list"})["jobs"]
    return next(r for r in rows if r["name"] == name)


def phases(run: Path, name: str) -> list[tuple[float, float]]:
    """(start, ms) of every worker's every communication phase of the job."""
    return [(x["comm_start"], x["comm_ms"])
            for path in run.glob(f"**/{name}/progress-*.jsonl")
            for x in map(json.loads, path.read_text().splitlines()) if "comm_ms" in x]


BLOCK_SETTLE_S = 1.0  # a block's first second: a closed page's last sample may still run


def aggregation_phases(args: argparse.Namespace) -> None:
    """One long job while the page is closed and opened in ABBA blocks."""
    work = Path(tempfile.mkdtemp(prefix="innet-view-agg-"))
    proc, url, record = net_up(work, args)
    name = "view-0"
    blocks: list[tuple[float, float, bool]] = []
    try:
        time.sleep(5)
        answer = live.ask(record, {"op": "job_submit", "job": {
            "name": name, "model": "VGG19", "workers": 6, "iterations": args.iterations}})
        if "error" in answer:
            raise SystemExit(f"job {name}: {answer['error']}")
        while not phases(work / "run", name):  # its first iteration has aggregated
            time.sleep(0.5)
        i = 0
        while state_of(record, name)["state"] == "running":
            watched = page_open(i)
            halt, events = threading.Event(), [0]
            if watched:
                threading.Thread(target=watch, args=(url, halt, events), daemon=True).start()
            start = time.time()
            time.sleep(args.block)
            halt.set()
            blocks.append((start, time.time(), watched))
            i += 1
        row = state_of(record, name)
        if row["state"] != "done" or row["sums_exact"] is not True:
            raise SystemExit(f"job {name} ended {row['state']}: {row['why']}")
        measured = phases(work / "run", name)
    finally:
        stop(proc)
    print(f"\n{'block':>5} {'page':>5} {'phases':>7} {'aggregation ms':>15}")
    means: list[float] = []
    opened: list[bool] = []
    for b, (start, end, watched) in enumerate(blocks):
        inside = [ms for t, ms in measured if start + BLOCK_SETTLE_S <= t < end]
        if not inside:
            continue  # the job ended during this block
        means.append(statistics.mean(inside))
        opened.append(watched)
        print(f"{b:>5} {'open' if watched else '-':>5} {len(inside):>7} {means[-1]:>15.2f}")
    effect, base, trend, error = drift_free(means, opened)
    off = statistics.mean(m for m, o in zip(means, opened, strict=True) if not o)
    on = statistics.mean(m for m, o in zip(means, opened, strict=True) if o)
    print(f"job {name}: {args.iterations} iterations, 6 workers, sums exact; "
          f"{len(means)} blocks of {args.block:g} s")
    print(f"mean aggregation with a page open / without: means of blocks {on / off:.3f} "
          f"({100 * (on / off - 1):+.1f}%); trend taken out {100 * effect / base:+.1f}% "
          f"+- {100 * error / base:.1f}% (standard error; trend {100 * trend / base:+.3f}% "
          f"a block)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per phase (default 30)")
    parser.add_argument("--topology", default=str(ROOT / "topologies" / "bt15.json"),
                        help="default topologies/bt15.json")
    parser.add_argument("--workload", default=str(ROOT / "examples" / "workload-bt15.json"),
                        help="default examples/workload-bt15.json")
    parser.add_argument("--iterations", type=int, default=200,
                        help="of the one job (default 200, about 3 minutes)")
    parser.add_argument("--block", type=float, default=5.0,
                        help="seconds the page stays closed or open (default 5)")
    parser.add_argument("--skip-cpu", action="store_true",
                        help="only the jobs, not the CPU phases")
    args = parser.parse_args()
    if args.block < 2 * BLOCK_SETTLE_S:
        parser.error(f"--block: at least {2 * BLOCK_SETTLE_S:g} seconds")
    if not args.skip_cpu:
        cpu_phases(args)
    aggregation_phases(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
