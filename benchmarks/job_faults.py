"""What each fault does to a job running on the network that is up (as root, alone).

    sudo .venv/bin/python benchmarks/job_faults.py [--out runs/job-faults]

Brings `innet net up` up on the leaf-spine (its own state folder) and runs one VGG19 job of six
workers per fault, the fault injected after its third iteration:
- restart: the job's first blue switch killed (SIGKILL) and started blank;
- link: the last worker's link to its leaf down for 5 s, then up;
- worker: the agent of the job's third worker killed (SIGKILL);
- destination: the job's destination process killed (SIGKILL).
Prints, per fault: the job's end state and why, whether its sums are exact, the longest
iteration (emulation clock; the period is 960 ms) and how long after the fault the job moved
again (its next finished iteration) or was ended, and whether the switches read back equal to
the intent afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "controller"))

from innet.emulation import live  # noqa: E402  (the package from this checkout)
from innet.topology import load_topology  # noqa: E402

LEAFSPINE = ROOT / "topologies" / "leafspine24.json"
READY = "innet net: ready"


def kill(pattern: str) -> None:
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True
                          ).stdout.split()
    for p in pids:
        os.kill(int(p), signal.SIGKILL)


def row(record: live.NetworkRecord, name: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = live.ask(record, {"op": "job_list"})["jobs"]
    return next(r for r in rows if r["name"] == name)


def wait(record: live.NetworkRecord, name: str, test: Any, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = row(record, name)
        if test(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def inject(kind: str, record: live.NetworkRecord, job: dict[str, Any]) -> None:
    hosts, name = job["hosts"], job["name"]
    if kind == "restart":
        live.ask(record, {"op": "restart", "switch": job["blue"][0]})
    elif kind == "link":
        edge = load_topology(str(LEAFSPINE)).host_switch(hosts[-1])[0]
        live.ask(record, {"op": "link", "a": hosts[-1], "b": edge, "up": False})
        time.sleep(5)
        live.ask(record, {"op": "link", "a": hosts[-1], "b": edge, "up": True})
    elif kind == "worker":
        kill(f"jobagent .*{name}/worker-{hosts[3]}.json")
    else:
        kill(f"agghost dest .*{name}/dest.json")


def one_fault(kind: str, record: live.NetworkRecord, run: Path) -> dict[str, Any]:
    name = f"fault-{kind}"
    job = live.ask(record, {"op": "job_submit", "job": {
        "name": name, "model": "VGG19", "workers": 6, "iterations": 15}})
    wait(record, name, lambda r: r["iterations_done"] >= 3, 60)
    at = time.time()
    inject(kind, record, job)
    done = wait(record, name, lambda r: r["state"] != "running", 180)
    lines = [json.loads(x) for f in (run / "jobs" / name).glob("progress-*.jsonl")
             for x in f.read_text().splitlines() if '"iteration"' in x]
    after = [x["comm_end"] for x in lines if x["comm_end"] > at and x["complete"]]
    moved = (min(after) - at) if after else None
    ended = done["closed_at"] - at if done["closed_at"] else None
    back = live.ask(record, {"op": "readback"})
    return {"fault": kind, "state": done["state"], "why": done["why"] or "",
            "sums_exact": done["sums_exact"],
            "longest_iteration_ms": max((x["iteration_ms"] for x in lines), default=None),
            "moved_after_s": moved, "ended_after_s": ended,
            "equal": back["equal"], "retransmissions": done["retransmissions"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs") / "job-faults")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="innet-faults-"))
    env = {**os.environ, "INNET_STATE_DIR": str(state)}
    log, run = args.out / "net-up.log", args.out / "run"
    proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                             str(LEAFSPINE), "--no-cli", "--out", str(run)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        while READY not in log.read_text():
            if proc.poll() is not None:
                print(log.read_text()[-2000:])
                return 2
            time.sleep(1)
        record = live.running(state)
        assert record is not None
        results = [one_fault(k, record, run) for k in ("restart", "link", "worker",
                                                        "destination")]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    print("| fault | job ends | sums exact (what ended) | longest iteration ms | next "
          "iteration done after s | job ended after s | retransmissions | switches = intent "
          "| why |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        moved = "-" if r["moved_after_s"] is None else f"{r['moved_after_s']:.2f}"
        print(f"| {r['fault']} | {r['state']} | {r['sums_exact']} | "
              f"{r['longest_iteration_ms']:.0f} | {moved} | {r['ended_after_s']:.2f} | "
              f"{r['retransmissions']} | {'yes' if r['equal'] else 'NO'} | {r['why']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
