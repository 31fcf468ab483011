"""The fluid prediction of a live cluster run, against figures worked out by hand: a job's
Up phase carries chunks x messages packets over its busiest link, and stretches when that is
more than the link's packets/s allow in the phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.cassini.model.profiles import zoo_job
from innet.plan.cluster import ClusterState, JobRequest, admit
from innet.plan.clusterfluid import LinkBound, RanJob, cluster_schedule, predict
from innet.plan.intent import Workload, plan_job
from innet.plan.linkdemand import chunks_per_iteration
from innet.topology import Topology, load_topology

LEAFSPINE = Path(__file__).resolve().parents[2] / "topologies" / "leafspine24.json"
BOUND = LinkBound(capacity_pps=800, queue_depth=100, ecn_threshold=20)
VALUES = 63 * 32  # VGG19's 90 ms at 44 of 50 Gbps, at 800 packets/s: 63 chunks


@pytest.fixture(scope="module")
def topo() -> Topology:
    return load_topology(LEAFSPINE)


def ran(topo: Topology, policy: str, hosts: tuple[str, ...], name: str = "a") -> RanJob:
    request = JobRequest(name, zoo_job("VGG19"), len(hosts) - 1, 5, VALUES, hosts=hosts)
    got = admit(ClusterState(topo), request, policy)
    assert not hasattr(got, "reason"), got
    return RanJob(got, 0.0, 0.0, 5)  # type: ignore[arg-type]


HOSTS = ("h1", "h2", "h3", "h4", "h5", "h6", "h7")  # destination h1 on l1, 3 workers on l2


def test_all_red_the_destination_link_carries_every_workers_chunks(topo: Topology) -> None:
    """Six workers, no aggregation: the leaf above the destination sends 6 x 63 packets
    down to it in each Up phase, at 800 packets/s: 472.5 ms instead of 90, so each
    iteration takes 240 - 90 + 472.5 ms."""
    result = predict(topo, [ran(topo, "base", HOSTS)], "base", BOUND)
    [job] = result.jobs
    assert chunks_per_iteration(VALUES) == 63
    assert job.iterations_ms == pytest.approx((240 - 90 + 6 * 63 / 800 * 1000,) * 5)
    assert result.marks > 0  # the queue stays above 20 packets for most of the phase


def test_soar_leaves_one_message_per_chunk_and_the_phase_its_own_length(
        topo: Topology) -> None:
    """Blue leaves: every link carries 63 packets a phase, 700 packets/s < 800: no link
    bounds the phase (it sends at its profile's 44 Gbps), the iteration is its 240 ms."""
    r = ran(topo, "soar", HOSTS)
    assert set(r.admission.blue) >= {"l1", "l2"}
    result = predict(topo, [r], "soar", BOUND)
    assert result.jobs[0].iterations_ms == pytest.approx((240.0,) * 5)
    assert result.marks == 0


def test_only_switch_egress_links_and_agents_only_for_cassini(topo: Topology) -> None:
    r = ran(topo, "cassini", HOSTS)
    sched = cluster_schedule(topo, [r], "cassini", BOUND)
    assert sched.traffic and all(link.split("->")[0] in topo.switches for link in sched.traffic)
    assert "l1->h1" in sched.traffic and "h2->l1" not in sched.traffic
    assert sched.agents and sched.jobs[0].shifts == ((0.0, r.admission.shift_ms),)
    assert set(sched.capacity_gbps.values()) == {BOUND.capacity_gbps}
    assert not cluster_schedule(topo, [ran(topo, "soar", HOSTS)], "soar", BOUND).agents
    # the same plan's messages as the intent's tree says: 6 from l1 to h1 when all red
    jp = plan_job(topo, Workload(1, "h1", HOSTS[1:]), blue=())
    assert sched.traffic["l1->h1"]["a"] == jp.msgs["l1"] == 6


def test_a_queued_job_starts_on_its_grid_once_the_job_before_it_leaves(
        topo: Topology) -> None:
    """Two jobs of 13 hosts on 24: the second waits for the first's hosts, is admitted when
    the model says the first's last iteration ends, and starts at the first point of its
    grid after the start margin; the first starts at its own grid point after arriving."""
    from innet.plan.clusterfluid import Arrival, replay_trace

    a = JobRequest("a", zoo_job("VGG19"), 12, 3, VALUES)
    b = JobRequest("b", zoo_job("VGG19"), 12, 3, VALUES)
    ran, result = replay_trace(topo, [Arrival(b, 100.0), Arrival(a, 0.0)], "soar", BOUND,
                               start_margin_ms=750.0)
    assert [r.admission.name for r in ran] == ["a", "b"]
    assert ran[0].ready_ms == 960.0  # 0 + 750 ms, on the 240 ms grid
    first = {j.name: j for j in result.jobs}["a"]
    assert first.finish_ms == pytest.approx(960.0 + 3 * first.iterations_ms[0])
    margin_end = first.finish_ms + 750.0
    assert ran[1].ready_ms == pytest.approx(240.0 * -(-margin_end // 240.0))
    assert {j.name for j in result.jobs} == {"a", "b"}

