"""What the live view of `net up` costs: CPU of its server with no page open and with one.

    sudo .venv/bin/python benchmarks/view_cpu.py [--seconds 30] [--topology topologies/bt15.json]

Starts `innet net up --no-cli` (k = 4 on bt15 by default, its own INNET_STATE_DIR), then for
--seconds each: nobody watching, then one client on /api/events (what an open page does).
Per phase it prints the CPU seconds per second of wall time of the `net up` process (the
view's threads run in it beside the controller's and the job monitor's: the view costs the
difference between the phases) and of the network's simple_switch_grpc processes (the
switches answering the counter reads; the pids its record names), and the events received.

Needs root, Mininet and BMv2. Run it alone on the machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per phase (default 30)")
    parser.add_argument("--topology", default=str(ROOT / "topologies" / "bt15.json"),
                        help="default topologies/bt15.json")
    parser.add_argument("--workload", default=str(ROOT / "examples" / "workload-bt15.json"),
                        help="default examples/workload-bt15.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="innet-view-cpu-"))
    env = {**os.environ, "INNET_STATE_DIR": str(work / "state")}
    log = work / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 args.topology, "--workload", args.workload, "-k", "4",
                                 "--no-cli", "--out", str(work / "run")], stdout=f,
                                stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 300
        while "innet net: ready" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                print(log.read_text())
                return 1
            time.sleep(0.5)
        url = re.search(r"^view: (\S+)$", log.read_text(), re.M).group(1)  # type: ignore[union-attr]
        record = live.running(work / "state")
        assert record is not None
        pids = list(record.footprint.switch_pids)
        time.sleep(5)  # the network settles
        print(f"{'phase':<22} {'net up':>8} {'switches':>9} {'events':>7}   (CPU s per s)")
        idle = measure(proc.pid, pids, args.seconds)
        print(f"{'nobody watching':<22} {idle[0]:>8.3f} {idle[1]:>9.3f} {'-':>7}")
        stop, events = threading.Event(), [0]
        client = threading.Thread(target=watch, args=(url, stop, events), daemon=True)
        client.start()
        time.sleep(2)
        watched = measure(proc.pid, pids, args.seconds)
        stop.set()
        print(f"{'one page open (SSE)':<22} {watched[0]:>8.3f} {watched[1]:>9.3f} "
              f"{events[0]:>7}")
        print(f"the view with a page open: +{watched[0] - idle[0]:.3f} CPU s/s in net up, "
              f"+{watched[1] - idle[1]:.3f} in the {len(pids)} switches")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
