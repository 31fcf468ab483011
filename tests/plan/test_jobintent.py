"""The intent of admitted jobs: each admission's own slot bases, so admitting one job adds
only its entries on its tree and releasing it removes exactly them; and the same intent as
the same jobs built in one go."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from innet.cassini.model.profiles import zoo_job
from innet.errors import InputError
from innet.plan import cluster as cl
from innet.plan.intent import network_intent
from innet.plan.jobintent import cluster_intent, intent_changes
from innet.topology import Topology, load_topology

LEAFSPINE = Path(__file__).resolve().parents[2] / "topologies" / "leafspine24.json"


@pytest.fixture(scope="module")
def topo() -> Topology:
    return load_topology(LEAFSPINE)


def admitted(state: cl.ClusterState, name: str, model: str = "VGG19",
             workers: int = 6) -> cl.ClusterState:
    got = cl.admit(state, cl.JobRequest(name, zoo_job(model), workers, 20, 2048))
    assert isinstance(got, cl.Admission), got
    return state.with_job(got)



def test_the_intent_equals_the_same_jobs_built_in_one_go(topo: Topology) -> None:
    state = admitted(admitted(cl.ClusterState(topo), "a"), "b", "ResNet50")
    one_go = network_intent(topo, [a.plan for a in state.running])
    assert cluster_intent(state).entries() == one_go.entries()
    assert cluster_intent(state).replication() == one_go.replication()
    assert cluster_intent(cl.ClusterState(topo)).entries() == network_intent(topo, []).entries()


def test_admitting_a_job_changes_only_its_tree_by_its_own_entries(topo: Topology) -> None:
    one = admitted(cl.ClusterState(topo), "a")
    two = admitted(one, "b", "ResNet50")
    b = two.running[-1]
    before, after = cluster_intent(one), cluster_intent(two)
    changed = intent_changes(before, after)
    assert set(changed) == set(b.plan.tree.ids[1:])
    for s in changed:
        new = set(after.entries()[s]) - set(before.entries()[s])
        assert set(before.entries()[s]) <= set(after.entries()[s])  # nothing else moved
        roles = {r.job for r in after.switches[s].aggregations} - {
            r.job for r in before.switches[s].aggregations}
        assert roles == {b.job}
        assert changed[s] == len(new) + len(after.replication()[s]) - len(
            before.replication()[s])
        base = {r.job: r.slot_base for r in after.switches[s].aggregations}
        assert base[b.job] == b.slot_bases[s]


def test_releasing_a_job_removes_exactly_its_entries(topo: Topology) -> None:
    two = admitted(admitted(cl.ClusterState(topo), "a"), "b", "ResNet50")
    a, b = two.running
    left = two.without("a")
    after = cluster_intent(left)
    assert set(intent_changes(cluster_intent(two), after)) == set(a.plan.tree.ids[1:])
    # b keeps its cells where they were, even where a's range below it is free again
    alone = network_intent(topo, [b.plan], held=left.held())
    assert after.entries() == alone.entries()
    assert {s: r.slot_base for s, si in after.switches.items() for r in si.aggregations} == \
        dict(b.slot_bases)
    # the room a left takes a new job at the bases a had
    again = admitted(left, "c")
    c = again.running[-1]
    assert all(c.slot_bases[s] == a.slot_bases[s] for s in set(c.slot_bases) & set(a.slot_bases))


def test_an_untracked_switch_is_refused(topo: Topology) -> None:
    one = admitted(cl.ClusterState(topo), "a")
    bad = replace(one, running=(replace(one.running[0], untracked=("sp1",)),))
    with pytest.raises(InputError, match="without a slot range"):
        cluster_intent(bad)


def test_results_go_down_the_jobs_own_tree_not_the_unicast_routes(topo: Topology) -> None:
    """With two spines the unicast route from l1 to h5 may leave by the other spine than the
    one the job's tree goes up through; the RESULT multicast must follow the tree, or the
    spine it reaches has no group for the job and the far workers never get a sum (seen on
    BMv2: a job on h1..h7 stalled at its first window)."""
    from innet.plan.intent import Workload, plan_job

    jp = plan_job(topo, Workload(1, "h1", ("h2", "h3", "h4", "h5", "h6", "h7")),
                  blue=("l1", "l2"))
    intent = network_intent(topo, [jp])
    groups = {s: [r.port for g in gs for r in g.replicas]
              for s, gs in intent.replication().items() if gs}
    up = {s: jp.tree.ids[int(jp.tree.parent[jp.tree.index[s]])] for s in jp.tree.ids[1:]}
    spine = up["l2"]
    port_to = {far.node: link.end("l1").port for link, far in topo.neighbours("l1")}
    assert groups["l1"] == sorted([port_to["h2"], port_to["h3"], port_to["h4"],
                                   port_to[spine]])
    assert set(groups) == {"l1", spine, "l2"}
