"""An independent oracle for the dynamic trace: is sharing with a running job forced?

When the arrivals come, the running jobs hold their GPUs. An arrival that spans racks
loads the uplinks of every rack it uses; a running job that spans racks loads its racks'
uplinks too. Whether some placement of all the arrivals keeps every spanning arrival off
every rack whose uplink a running job loads is a question about GPU counts per rack only,
answered here by exhaustive search; nothing of the scheduler or the planner is used. Rack
level is conservative: two rings over one rack may take different uplinks, and a running job
on a shared uplink may interleave with the arrival. So "forced" means only that no
scheduler could keep the arrivals to themselves.

Run as a script it prints, per occupancy, the draws of the 24-server leaf-spine's dynamic
trace (seed 0 unless told, 10-20 iterations, the running jobs where CASSINI placed them)
where sharing is forced: `python tests/helpers/dynamic_oracle.py 0.5 0.6667 [--seed S] [--draws N]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def _placements(gpus: int, free: Sequence[int], busy: Sequence[bool]) -> list[tuple[int, ...]]:
    """Every per-rack GPU count for one job of `gpus` GPUs within `free` that either stays
    in one rack or spans only racks whose uplinks no running job loads."""
    out: list[tuple[int, ...]] = []

    def walk(i: int, left: int, counts: list[int]) -> None:
        if left == 0:
            full = counts + [0] * (len(free) - len(counts))
            used = [r for r, c in enumerate(full) if c]
            if len(used) == 1 or not any(busy[r] for r in used):
                out.append(tuple(full))
            return
        if i == len(free):
            return
        for c in range(min(left, free[i]), -1, -1):
            walk(i + 1, left - c, [*counts, c])

    walk(0, gpus, [])
    return out


def avoidable(free: Sequence[int], busy: Sequence[bool], sizes: Sequence[int]) -> bool:
    """Whether jobs of `sizes` GPUs all fit in `free` (GPUs per rack) with no spanning job
    on a busy rack."""
    if not sizes:
        return True
    first, rest = sizes[0], sizes[1:]
    for counts in _placements(first, free, busy):
        left = [f - c for f, c in zip(free, counts, strict=True)]
        if avoidable(left, busy, rest):
            return True
    return False


def forced(racks: Mapping[str, Sequence[str]], running: Mapping[str, Sequence[str]],
           sizes: Sequence[int]) -> bool:
    """`racks`: rack -> its GPU slots (hosts, one per GPU); `running`: job -> its hosts."""
    names = list(racks)
    rack_of = {h: r for r, slots in racks.items() for h in slots}
    free = {r: len(slots) for r, slots in racks.items()}
    busy = dict.fromkeys(names, False)
    for hosts in running.values():
        used = {rack_of[h] for h in hosts}
        for h in hosts:
            free[rack_of[h]] -= 1
        if len(used) > 1:
            for r in used:
                busy[r] = True
    return not avoidable([free[r] for r in names], [busy[r] for r in names],
                         sorted(sizes, reverse=True))


def forced_draws(occupancy: float, draws: int = 20,
                 seed: int = 0) -> dict[str, list[int]]:
    """Per arm ("base", "cassini"), the draws where the running jobs, where that arm's first
    round placed them, leave the arrivals no placement of their own (one plan per draw)."""
    from innet.cassini.experiments.replay import plan_trace
    from innet.cassini.experiments.traces import make_trace
    from innet.cassini.placement.cluster import cluster_from_topology
    from innet.topology import load_topology

    topo = load_topology(Path(__file__).resolve().parents[2] / "topologies" /
                         "leafspine24.json")
    racks = dict(cluster_from_topology(topo).racks)
    out: dict[str, list[int]] = {"base": [], "cassini": []}
    for i in range(draws):
        trace = make_trace("dynamic", topo, seed, i, iterations=(10, 20),
                           occupancy=occupancy)
        plan = plan_trace(topo, trace)
        sizes = [j.profile.gpus for j in trace.jobs if j.arrival_ms > 0]
        for arm, found in out.items():
            placement = getattr(plan, arm).placement
            running = {j.name: placement[j.name] for j in trace.jobs if j.arrival_ms == 0}
            if forced(racks, running, sizes):
                found.append(i)
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Draws of the dynamic trace where sharing with a "
                                 "running job is forced, per occupancy.")
    ap.add_argument("occupancy", nargs="*", type=float, default=[0.3333, 0.5, 0.6667],
                    help="shares of the GPUs the running jobs hold (default 0.3333 0.5 "
                         "0.6667)")
    ap.add_argument("--seed", type=int, default=0, help="the sweep's seed (default 0)")
    ap.add_argument("--draws", type=int, default=20, help="draws per occupancy (default 20)")
    args = ap.parse_args()
    for occ in args.occupancy:
        found = forced_draws(occ, args.draws, args.seed)["cassini"]
        print(f"occupancy {occ:g} (seed {args.seed}): sharing with a running job forced in "
              f"{len(found)} of {args.draws} draws: {found}", flush=True)
