"""The CASSINI experiment on BMv2 repeated, quiet and with one core kept busy: the arms' spread.

Each run is `innet run cassini` on the four-job leaf-spine scenario (three arms on the same
network). The figures per arm, over the runs: CE marks at the receivers and at the switches,
mean and p99 iteration (ms, on the jobs' clock), and the ratio base / CASSINI of the marks.
An experiment measures the plan when these do not move with the machine's load.

    sudo .venv/bin/python benchmarks/cassini_spread.py --runs 4 --iterations 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from innet.emulation.cassini_run import DEFAULT_SLOWDOWN, CassiniRunOptions, run_cassini

ROOT = Path(__file__).resolve().parent.parent


def _row(label: str, values: list[float]) -> str:
    return (f"{label} | {min(values):.0f} | {statistics.median(values):.0f} | "
            f"{max(values):.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4, help="runs per load (default 4)")
    parser.add_argument("--iterations", type=int, default=30, help="per job (default 30)")
    parser.add_argument("--slowdown", type=float, default=DEFAULT_SLOWDOWN)
    parser.add_argument("--loads", default="quiet,busy",
                        help="quiet (nothing else running), busy (one core kept busy)")
    parser.add_argument("--out", type=Path, default=None, help="write every run's JSON here")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each run's folder (logs, plots) as KEEP/LOAD-N")
    args = parser.parse_args(argv)
    topo = str(ROOT / "topologies" / "leafspine24.json")
    jobs = str(ROOT / "examples" / "jobs-4-leafspine.json")
    every: dict[str, list[dict[str, object]]] = {}
    for load in args.loads.split(","):
        hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
               if load == "busy" else None)
        try:
            for r in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    where = args.keep / f"{load}-{r + 1}" if args.keep else Path(tmp)
                    options = CassiniRunOptions(topo, jobs, iterations=args.iterations,
                                                progress=False, slowdown=args.slowdown)
                    res = run_cassini(options, where).to_dict()
                every.setdefault(load, []).append(res)
                arms = {a["label"]: a for a in res["runs"]}
                print(f"{load} run {r + 1}: " + "; ".join(
                    f"{k} {a['ce_total']} CE, p99 {a['p99_ms']:.0f} ms"
                    for k, a in arms.items()), file=sys.stderr, flush=True)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
    print(f"{args.runs} runs per load, {args.iterations} iterations per job, slowdown "
          f"{args.slowdown:g}\n")
    for load, results in every.items():
        print(f"## {load}\n\n| arm, figure | min | median | max |\n|---|---|---|---|")
        for label in ("base", "base+shifts", "cassini"):
            arms = [next(a for a in res["runs"] if a["label"] == label) for res in results]
            print(_row(f"| {label}: CE at receivers", [a["ce_total"] for a in arms]) + " |")
            print(_row(f"| {label}: marked at switches", [a["switch_marks"] for a in arms])
                  + " |")
            print(_row(f"| {label}: mean iteration ms", [a["mean_ms"] for a in arms]) + " |")
            print(_row(f"| {label}: p99 iteration ms", [a["p99_ms"] for a in arms]) + " |")
        ratios = []
        for res in results:
            arms = {a["label"]: a for a in res["runs"]}
            ratios.append(arms["base"]["ce_total"] / max(1, arms["cassini"]["ce_total"]))
        print(_row("| base / CASSINI CE (CASSINI's 0 counted as 1)", ratios) + " |\n")
    if args.out:
        args.out.write_text(json.dumps(every, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
