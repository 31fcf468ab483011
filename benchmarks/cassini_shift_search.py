"""How much could any shifts gain for the running jobs of the 13-job scenario alone?

    python benchmarks/cassini_shift_search.py [--draws 12] [--samples 80]

For each draw of the four running jobs' servers (as `innet cassini sweep` draws them, seed 0),
only their traffic runs in the fluid model: once without shifts, then with `--samples`
random shift vectors (5 ms steps) for each agent setting (no agents; re-alignment on the
partners' grid with a 10% and with a 100% budget). Prints per draw the unshifted and the best
mean and p99 slowdowns, and the geometric mean of the gains. It backs the bound in
docs/cassini-planner.md: the running jobs' own collisions stay whatever the shifts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from innet.cassini.experiments.placement_sweep import draw_pinned
from innet.cassini.model.profiles import load_jobs
from innet.cassini.placement.scheduler import PlannerSettings, schedule
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.steady import simulate_parts
from innet.table import format_table
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=12)
    parser.add_argument("--samples", type=int, default=80)
    args = parser.parse_args()
    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    jobs = load_jobs(ROOT / "examples" / "jobs-13.json")
    rows, gains = [], []
    for idx in range(args.draws):
        drawn = draw_pinned(topo, jobs, np.random.default_rng([0, idx]))
        plan = schedule(topo, drawn, PlannerSettings(checked=0)).base
        running = {j.name for j in drawn if j.hosts is not None}
        traffic = {link: {k: v for k, v in per.items() if k in running}
                   for link, per in plan.traffic.items()}
        traffic = {link: per for link, per in traffic.items() if per}
        members = [j for j in plan.jobs if j.name in running]
        base = simulate_parts(members, traffic, plan.capacity_gbps, {},
                              FluidConfig(iterations=40)).summary(True)
        rng = np.random.default_rng(1)
        best = base
        for budget in (None, 10.0, 100.0):
            config = FluidConfig(iterations=40, realign_pct=5.0 if budget else None,
                                 realign_budget_pct=budget or 100.0)
            for _ in range(args.samples):
                shifts = {j.name: 5.0 * float(rng.integers(0, int(j.iteration_ms / 5)))
                          for j in members}
                got = simulate_parts(members, traffic, plan.capacity_gbps, shifts,
                                     config).summary(True)
                if got[0] + got[1] < best[0] + best[1]:
                    best = got
        gains.append((base[0] / best[0], base[1] / best[1]))
        rows.append([idx, base[0], best[0], base[1], best[1]])
    print(format_table(["draw", "mean, no shifts", "mean, best shifts", "p99, no shifts",
                        "p99, best shifts"], rows, digits=3))
    g = np.exp(np.log(np.array(gains)).mean(axis=0))
    print(f"\nbest of {3 * args.samples} shift vectors per draw: geometric-mean gain "
          f"{g[0]:.4f}x (mean), {g[1]:.4f}x (p99)")


if __name__ == "__main__":
    main()
