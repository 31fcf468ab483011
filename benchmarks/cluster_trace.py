"""The live cluster's whole-trace run, four policies in one command, checked against what it
must show (as root, alone on the machine: it keeps BMv2 busy for several minutes).

    sudo .venv/bin/python benchmarks/cluster_trace.py [--out runs/cluster-bench] \
        [--trace examples/trace-cluster-leafspine.json] [--from RUN_FOLDER]

Runs `innet run cluster --topology topologies/leafspine24.json --trace TRACE` with every
policy (or reads the results.json of a finished run with --from), then prints each policy's
mean JCT, mean iteration time beside the fluid model's, CE marks and SOAR's cost, and the
checks: every sum exact; measured cost == predicted; soar+cassini's marks at most a fifth
of base's; its mean JCT within 2% of the better single policy's; each policy's fluid mean
iteration time within 20% of BMv2's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run(trace: str, out: Path) -> None:
    cmd = [sys.executable, "-m", "innet.cli", "run", "cluster", "--topology",
           str(ROOT / "topologies" / "leafspine24.json"), "--trace", trace, "--out", str(out)]
    print("$", " ".join(cmd), flush=True)
    t = time.monotonic()
    subprocess.run(cmd, check=False, cwd=ROOT)
    print(f"(whole command: {time.monotonic() - t:.0f} s)")


def checks(policies: dict[str, Any]) -> list[tuple[str, bool]]:
    out = [(f"{p}: every job done with exact sums", r["sums_exact"]) for p, r in
           policies.items()]
    out += [(f"{p}: measured cost {r['measured_cost']:.6g} == predicted "
             f"{r['predicted_cost']:.6g}",
             abs(r["measured_cost"] - r["predicted_cost"]) <= 1e-9 * r["predicted_cost"])
            for p, r in policies.items()]
    for p, r in policies.items():
        alone = [j for j in r["jobs"] if j.get("measured_cost") is not None]
        same = all(abs(j["measured_cost"] - j["predicted_cost"]) <= 1e-9 * j["predicted_cost"]
                   for j in alone)
        out.append((f"{p}: each job's measured cost == its phi x chunks sent ({len(alone)} of "
                    f"{len(r['jobs'])} jobs had their ports to themselves)", same and bool(alone)))
    for p, r in policies.items():
        fluid, bmv2 = r["fluid"].get("mean_iteration_ms"), r["mean_iteration_ms"]
        ok = fluid is not None and bmv2 and abs(fluid - bmv2) <= 0.2 * bmv2
        out.append((f"{p}: fluid mean iteration {fluid:.1f} ms within 20% of BMv2's "
                    f"{bmv2:.1f} ms", bool(ok)))
    if {"base", "soar+cassini"} <= set(policies):
        both, base = policies["soar+cassini"], policies["base"]
        out.append((f"soar+cassini marks {both['marks']} <= base's {base['marks']} / 5",
                    both["marks"] * 5 <= base["marks"]))
    singles = [p for p in ("soar", "cassini") if p in policies]
    if "soar+cassini" in policies and singles:
        best = min(policies[p]["mean_jct_s"] for p in singles)
        jct = policies["soar+cassini"]["mean_jct_s"]
        out.append((f"soar+cassini mean JCT {jct:.3f} s within 2% of the best single "
                    f"policy's {best:.3f} s", jct <= 1.02 * best))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=str(ROOT / "examples" / "trace-cluster-leafspine.json"))
    p.add_argument("--out", type=Path, default=Path("runs") / "cluster-bench")
    p.add_argument("--from", dest="folder", type=Path, default=None,
                   help="read a finished run's folder instead of running")
    args = p.parse_args()
    folder = args.folder or args.out
    if args.folder is None:
        run(args.trace, folder)
    policies = json.loads((folder / "results.json").read_text())["policies"]
    print((folder / "summary.md").read_text().split("\n\n![")[0])
    failed = 0
    for text, ok in checks(policies):
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
