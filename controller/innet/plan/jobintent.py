"""The network intent of the jobs a running network has admitted, as a pure function.

Each admission (innet.plan.cluster) carries its own slot base on every switch of its tree;
the intent of the running jobs is built with exactly those bases held, so admitting a job
adds only its own entries and multicast group on the switches of its tree, and releasing it
removes exactly them: the other jobs' cells never move (they may hold live sums).
`intent_changes` counts what a move between two intents writes, switch by switch, the way
the controller's diff does (entries by key, groups by id), so a test or a caller can compare
a deploy's writes with the plan's difference.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from innet.errors import InputError, quote
from innet.plan.cluster import Admission, ClusterState
from innet.plan.intent import DEFAULT_ECN_THRESHOLD, NetworkIntent, network_intent


def cluster_intent(state: ClusterState, ecn_threshold: int | None = DEFAULT_ECN_THRESHOLD,
                   drop_probability: float = 0.0) -> NetworkIntent:
    """Routes everywhere and every running job's aggregation entries at its admission's slot
    bases. A job admitted with untracked red switches (`untracked_red`) is refused: its
    entries there would need cells its admission did not reserve."""
    for a in state.running:
        if a.untracked:
            raise InputError(f"job {quote(a.name)} has switches without a slot range "
                             f"({', '.join(a.untracked)}); a running network installs only "
                             "jobs tracked on every switch of their tree")
    intent = network_intent(state.topology, [a.plan for a in state.running], ecn_threshold,
                            held=state.held(), drop_probability=drop_probability)
    check_bases(intent, state.running)
    return intent


def check_bases(intent: NetworkIntent, running: Iterable[Admission]) -> None:
    """Every job's entries sit where its admission put them (a planner bug otherwise)."""
    bases = {(s, a.job): b for a in running for s, b in a.slot_bases.items()}
    for s, si in intent.switches.items():
        for role in si.aggregations:
            want = bases.get((s, role.job))
            if want != role.slot_base:
                raise AssertionError(f"switch {s}: job {role.job} at slot {role.slot_base}, "
                                     f"its admission says {want}")


def intent_changes(before: NetworkIntent, after: NetworkIntent) -> dict[str, int]:
    """switch -> entries and multicast groups inserted, modified or deleted between the two
    intents (switches with none left out)."""
    out: dict[str, int] = {}
    old_e, new_e = before.entries(), after.entries()
    old_g, new_g = before.replication(), after.replication()
    for s in sorted(set(old_e) | set(new_e)):
        n = keyed_changes({e.key: e for e in old_e.get(s, ())},
                          {e.key: e for e in new_e.get(s, ())})
        n += keyed_changes({g.key: g for g in old_g.get(s, ())},
                           {g.key: g for g in new_g.get(s, ())})
        if n:
            out[s] = n
    return out


def keyed_changes(old: Mapping[Hashable, object], new: Mapping[Hashable, object]) -> int:
    """Inserts + deletes + modifies between two keyed sets."""
    return sum(1 for k in set(old) | set(new) if old.get(k) != new.get(k))
