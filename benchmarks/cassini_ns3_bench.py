"""Time CASSINI's ns-3 engine at datacenter scale: whole commands, loading included.

Two runs, each one `innet cassini sweep --trace snapshot --engine ns3` process timed from
start to exit (Python start-up, topology loading, trace drawing, both schedulers' rounds,
every arm's ns-3 run, the tables):

- one draw on the 1,024-server k=16 fat-tree (target: 20 minutes on this machine);
- a 20-draw sweep on the 128-server k=8 fat-tree (target: 30 minutes).

Both with the sweep's default workers, one per CPU: the 20 draws run in that many
processes, and the one large draw runs its engine's runs (three arms and the measured
ideal) that many at a time.

The snapshot fills every GPU (1,024 GPUs: some 250 jobs of 2-6 GPUs). The rate scale, the
candidates and the fluid-checked candidates (4 and 2 at 1,024 servers, 20 and 4 at 128) are
printed with the times and CASSINI's share of the ideal's gain, as is the load of the
machine before and after (the runs are niced: they share it). Usage:

    PYTHONPATH=controller python benchmarks/cassini_ns3_bench.py [--only 1024|128]
        [--rate-scale S] [--iterations LO-HI] [--candidates N] [--checked N]
        [--guard ns3|none] [--out DIR]

The fat-trees are written first if missing (`innet topo gen fattree --ports K --mbps
50000`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# k, draws, seconds, (candidates, fluid-checked): at 128 servers the swap candidates and the
# round's check capture what 4 and 2 leave (fluid: 27% / 56% of the ideal's JCT gain against
# 13% / 13%) at a planning cost that is small beside the ns-3 runs; at 1,024 the plan of
# 4 and 2 already takes half a minute
TARGETS = {"1024": (16, 1, 20 * 60, ("4", "2")), "128": (8, 20, 30 * 60, ("20", "4"))}


def _innet(*argv: str) -> list[str]:
    return ["nice", "-n", "19", sys.executable, "-m", "innet.cli", *argv]


def _topology(k: int) -> Path:
    path = ROOT / "topologies" / f"fattree{k}-50g.json"
    if not path.exists():
        subprocess.run(_innet("topo", "gen", "fattree", "--ports", str(k), "--mbps", "50000",
                              "-o", str(path)), check=True, env=_env())
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "controller") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _pct(summary: dict[str, object], key: str) -> str:
    value = summary.get(key)
    return f"{value:.0%}" if isinstance(value, float) and value == value else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(TARGETS), default=None)
    ap.add_argument("--rate-scale", default="0.001",
                    help="ns-3 rate scale (default 0.001: 50 Gbps links run at 50 Mbps, "
                         "delays x1000; half the packets of the engine's default)")
    ap.add_argument("--iterations", default="5-10", help="iterations each job trains")
    ap.add_argument("--candidates", default=None,
                    help="candidate placements (default 4 at 1,024 servers, 20 at 128)")
    ap.add_argument("--checked", default=None,
                    help="fluid-checked candidates (default 2 at 1,024 servers, 4 at 128)")
    ap.add_argument("--guard", choices=("ns3", "none"), default="ns3",
                    help="CASSINI's packet-level guard (default ns3, as `cassini sweep "
                         "--engine ns3`; none: the fluid check's pick alone, as before it)")
    ap.add_argument("--out", default="runs/cassini-ns3-bench")
    args = ap.parse_args()
    for name, (k, draws, target, (candidates, checked)) in TARGETS.items():
        if args.only is not None and name != args.only:
            continue
        candidates = args.candidates or candidates
        checked = args.checked or checked
        topo = _topology(k)
        out = Path(args.out) / f"fattree{k}"
        argv = _innet("cassini", "sweep", "--trace", "snapshot", "--topology", str(topo),
                      "--draws", str(draws), "--engine", "ns3", "--rate-scale",
                      args.rate_scale, "--trace-iterations", args.iterations,
                      "--candidates", candidates, "--checked", checked,
                      "--guard", args.guard, "--out", str(out))
        before = _load()
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=_env())
        wall = time.monotonic() - t0
        after = _load()
        if proc.returncode != 0:
            print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed",
                  file=sys.stderr)
            return 1
        engine = next((ln for ln in proc.stdout.splitlines() if ln.startswith("engine:")),
                      "engine: ?")
        data = json.loads((out / "sweep.json").read_text())
        jobs = [len(d["trace"]["jobs"]) for d in data["draws"]]
        summary = data["summary"]
        print(f"{name} servers (k={k} fat-tree), {draws} draw(s) of {min(jobs)}-{max(jobs)} "
              f"jobs: {wall:.0f} s (target {target} s: {'met' if wall <= target else 'MISSED'})"
              f"; load before {before}, after {after}")
        print(f"  {engine}")
        print(f"  candidates {candidates}, fluid-checked {checked}, iterations "
              f"{args.iterations}; CASSINI/base JCT mean "
              f"{summary['cassini']['jct_mean_ms']:.3f}x, p99 "
              f"{summary['cassini']['jct_p99_ms']:.3f}x, ideal "
              f"{summary['ideal']['jct_mean_ms']:.3f}x / {summary['ideal']['jct_p99_ms']:.3f}x"
              f"; share of the ideal's gain {_pct(summary, 'share_jct_mean_ms')} / "
              f"{_pct(summary, 'share_jct_p99_ms')}; worse draws {summary['worse_draws']}")
        print(f"  command: innet {' '.join(argv[argv.index('innet.cli') + 1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
