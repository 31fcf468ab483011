"""Time CASSINI's two hot paths against the issue's budgets.

    python benchmarks/cassini_bench.py            # both, a few repetitions
    python benchmarks/cassini_bench.py --repeat 20

1. The best-shift search for two jobs on one link at 5 degrees (budget 5 ms): two VGG19
   jobs (one 240 ms circle, 72 x 72 grid) and two jobs of different iteration times
   (VGG16 300 ms with BERT 480 ms: a 2400 ms circle of 576 samples).
2. Ranking 20 candidate placements of the 13 jobs of examples/jobs-13.json on the 24-server
   leaf-spine (budget 2 s): the Themis-like candidates, every shared link's best shifts, the
   Affinity-graph traversal and the plans. Each run starts cold (no memo of link solutions).

Best, median and worst of R runs, wall clock. Run it alone: the other core's load shows.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from innet.cassini.model.geometry import best_shifts
from innet.cassini.model.profiles import load_jobs, zoo_job
from innet.cassini.placement.scheduler import PlannerSettings, schedule
from innet.table import format_table
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    fn()  # warm caches (imports, the zoo)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="runs per case (default 10)")
    args = parser.parse_args()

    rows = []
    pair = [zoo_job("VGG19", "a"), zoo_job("VGG19", "b")]
    mixed = [zoo_job("VGG16", "a"), zoo_job("BERT", "b")]
    for label, jobs in (("link: 2 x VGG19, 5 deg", pair), ("link: VGG16 + BERT, 5 deg", mixed)):
        sol = best_shifts(jobs, 50.0)
        times = timed(functools.partial(best_shifts, jobs, 50.0), args.repeat * 10)
        rows.append([label, f"{sol.circle.samples} samples, {sol.method}",
                     1e3 * min(times), 1e3 * statistics.median(times), 1e3 * max(times), "5 ms"])

    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    jobs13 = load_jobs(ROOT / "examples" / "jobs-13.json")
    paper = timed(lambda: schedule(topo, jobs13, PlannerSettings(candidates=20, checked=0)),
                  args.repeat)
    rows.append(["rank 20 placements, 13 jobs (paper)", "20 candidates", 1e3 * min(paper),
                 1e3 * statistics.median(paper), 1e3 * max(paper), "2000 ms"])
    result = schedule(topo, jobs13, PlannerSettings(candidates=20))
    times = timed(lambda: schedule(topo, jobs13, PlannerSettings(candidates=20)), args.repeat)
    plan = result.cassini
    rows.append(["rank + fluid-check 20 placements, 13 jobs", f"{len(plan.candidates)} candidates, "
                 f"picked #{plan.candidate}", 1e3 * min(times), 1e3 * statistics.median(times),
                 1e3 * max(times), "2000 ms"])
    print(format_table(["case", "size", "best (ms)", "median (ms)", "worst (ms)", "budget"],
                       rows, digits=2))


if __name__ == "__main__":
    main()
