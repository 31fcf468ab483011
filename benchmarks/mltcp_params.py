"""MLTCP's two parameters on the development scenario: the VGG19 pair on one 50 Gbps link.

First the window rule on two transfers (2 MB each at the link's rate on one link, B
starting 80 ms after A, about half through): A's share of the link from 110 to 280 ms and
when its bytes are in, under DCTCP and under MLTCP's defaults. Then, for DCTCP and for each
(slope, intercept) of MLTCP's F(r) = slope x r + intercept, the pair's mean and p99
iteration time and the link's CE marks over ITERATIONS iterations (one warm-up iteration
first), unshifted: MLTCP alone has to interleave them. This is where innet's defaults were
chosen (docs/cassini-mltcp.md); results are reported on other scenarios and seeds.

    python benchmarks/mltcp_params.py [--iterations 150] [--grid 1:1 2:1 ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from innet.cassini.model.profiles import load_jobs
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.ns3 import (
    Ns3Engine,
    Ns3Settings,
    build_program,
    check_available,
    run_config,
    transfers_config,
)
from innet.table import format_table

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "examples" / "jobs-vgg19-pair.json"
GRID = ("0:1", "0.5:1", "1:1", "2:1", "1:0.75", "1.5:0.25", "1.75:0.25", "2:0.5")


def _point(text: str) -> tuple[float, float]:
    try:
        slope, intercept = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SLOPE:INTERCEPT, got {text!r}") from None
    return slope, intercept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=150,
                        help="measured iterations per job (default 150)")
    parser.add_argument("--grid", type=_point, nargs="+", default=[_point(g) for g in GRID],
                        metavar="S:I", help="MLTCP's slope:intercept points (default: "
                                            + " ".join(GRID) + ")")
    args = parser.parse_args()
    print(check_available())
    jobs = load_jobs(PAIR)
    shares = []
    for settings in (Ns3Settings(), Ns3Settings(transport="mltcp")):
        raw = run_config(build_program(),
                         transfers_config(jobs, 50.0, (0.0, 80.0), 2_000_000, settings), 60.0)
        a, b = (j["flow_samples"][0] for j in raw["jobs"])
        got_a, got_b = a[28] - a[11], b[28] - b[11]  # samples every 10 ms: 110 to 280 ms
        shares.append([settings.transport, 100 * got_a / (got_a + got_b),
                       10 * a.index(2_000_000)])
    print("two transfers of 2 MB on one link, B 80 ms after A")
    print(format_table(["transport", "A's share 110-280 ms (%)", "A's bytes in by (ms)"],
                       shares, digits=1))
    config = FluidConfig(iterations=args.iterations).without_agents()
    rows = []
    runs: list[tuple[str, Ns3Settings]] = [("dctcp", Ns3Settings())]
    runs += [(f"mltcp {s:g}:{i:g}",
              Ns3Settings(transport="mltcp", mltcp_slope=s, mltcp_intercept=i))
             for s, i in args.grid]
    for name, settings in runs:
        t0 = time.monotonic()
        result = Ns3Engine(settings).link(jobs, 50.0, {}, config, name)
        mean, p99 = result.summary(False)
        rows.append([name, mean, p99, result.marks, time.monotonic() - t0])
        print(f"  {name}: done", file=sys.stderr, flush=True)
    print(f"{PAIR.name} on one 50 Gbps link, unshifted, {args.iterations} iterations "
          "(alone: 240 ms)")
    print(format_table(["transport (slope:intercept)", "mean ms", "p99 ms", "marks",
                        "wall s"], rows, digits=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
