"""Check the premise of CASSINI's packet-level guard on ns-3: a group of jobs run alone
goes as it goes among all the others (docs/cassini-guard.md).

The guard runs only the jobs a pick can change, with every job they share links with, and
trusts that the rest would not have moved them. This script takes a snapshot trace's base
placement, runs every job together once on ns-3, then each group alone, and prints for
each way of grouping the largest difference of any iteration between the group's run and
the full run:

- by directed link, as the fluid model sees sharing (the first guard's grouping);
- by cable, either direction (the guard's: a job's ACKs queue behind the data sent the
  other way on its links).

Usage:

    PYTHONPATH=controller python benchmarks/cassini_guard_split.py --trace T.json
        --topology topologies/fattree8-50g.json [--rate-scale 0.001] [--seed 1]

T is a snapshot (`innet cassini trace snapshot ... -o T.json`): every job placed at once,
so each group's run starts where the full run does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from innet.cassini.experiments.replay import plan_trace
from innet.cassini.experiments.traces import load_trace
from innet.cassini.placement.scheduler import DEFAULT_CHECK, PlannerSettings
from innet.cassini.sim.engine import Engine, make_engine
from innet.cassini.sim.guard import cable_groups
from innet.cassini.sim.steady import components
from innet.cassini.sim.trace import TraceSchedule
from innet.errors import InputError
from innet.topology import Topology, load_topology


@dataclass(frozen=True)
class Split:
    """How far the groups' own runs strayed from the full run."""

    grouping: str
    groups: int
    largest_ms: float
    largest_pct: float
    where: str  # job and iteration of the largest difference


def _part(sched: TraceSchedule, names: set[str]) -> TraceSchedule:
    traffic = {link: dict(per) for link, per in sched.traffic.items() if names & set(per)}
    return TraceSchedule(sched.mode, tuple(r for r in sched.jobs if r.name in names),
                         {n: sched.placement[n] for n in names}, traffic,
                         {link: sched.capacity_gbps[link] for link in traffic}, 1)


def split(engine: Engine, topology: Topology, sched: TraceSchedule, grouping: str,
          groups: Sequence[set[str]], full: dict[str, tuple[float, ...]]) -> Split:
    worst = (0.0, 0.0, "-")
    for k, names in enumerate(groups, 1):
        print(f"  {grouping}: group {k}/{len(groups)} ({len(names)} jobs)", file=sys.stderr,
              flush=True)
        run = engine.trace(topology, _part(sched, names), DEFAULT_CHECK.without_agents())
        for o in run.jobs:
            for i, (mine, whole) in enumerate(zip(o.iterations_ms, full[o.name],
                                                  strict=True)):
                if abs(mine - whole) > worst[0]:
                    worst = (abs(mine - whole), 100 * abs(mine - whole) / whole,
                             f"{o.name} iteration {i + 1}: {whole:.1f} ms among all, "
                             f"{mine:.1f} alone")
    return Split(grouping, len(groups), *worst)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", required=True, help="a snapshot trace (JSON)")
    p.add_argument("--topology", required=True, help="the topology (JSON)")
    p.add_argument("--rate-scale", type=float, default=0.001,
                   help="ns-3's rate scale (default 0.001, as the 128-server sweeps)")
    p.add_argument("--seed", type=int, default=1,
                   help="the planner's and ns-3's seed (default 1)")
    args = p.parse_args(argv)
    try:
        topology, trace = load_topology(args.topology), load_trace(args.trace)
        sched = plan_trace(topology, trace, PlannerSettings(seed=args.seed, checked=0)).base
        if sched.rounds != 1:
            raise InputError(f"{args.trace}: not a snapshot ({sched.rounds} rounds); "
                             "only a snapshot's groups start where the full run does")
        engine = make_engine("ns3", rate_scale=args.rate_scale, seed=args.seed)
    except InputError as e:
        print(f"cassini_guard_split: {e}", file=sys.stderr)
        return 2
    engine = engine.with_transport("dctcp")
    start = time.monotonic()
    print(f"{args.trace}: the base's placement, {len(sched.jobs)} jobs, all together",
          file=sys.stderr, flush=True)
    full = {o.name: o.iterations_ms for o in
            engine.trace(topology, sched, DEFAULT_CHECK.without_agents()).jobs}
    profiles = [r.profile for r in sched.jobs]
    rows = [split(engine, topology, sched, "directed link",
                  [{j.name for j in m} for m, _ in components(profiles, sched.traffic)], full),
            split(engine, topology, sched, "cable",
                  cable_groups(profiles, sched.traffic), full)]
    print(f"{args.trace}: {len(sched.jobs)} jobs on the base's placement, ns-3 "
          f"(rate x{args.rate_scale}); {time.monotonic() - start:.0f} s")
    print(f"{'grouping':<14} {'groups':>6} {'largest ms':>10} {'largest %':>9}  where")
    for r in rows:
        print(f"{r.grouping:<14} {r.groups:>6} {r.largest_ms:>10.3f} {r.largest_pct:>9.2f}  "
              f"{r.where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
