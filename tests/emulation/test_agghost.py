"""The host side of the aggregation experiment without a network: tensors, digests, jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet import aggpacket as ap
from innet.aggproto import Destination, Worker
from innet.emulation.agghost import chunks_of, digest, expected_digest, worker_tensor
from innet.emulation.aggregation import Workload, split_workload
from innet.errors import InputError


def test_fixed_point_tensors_sum_to_the_expected_digest_through_the_protocol() -> None:
    seed, job, n, values = 3, 1, 5, 1000
    tensors = [worker_tensor(seed, job, i, values, n) for i in range(n)]
    scale = ap.fixed_point_scale(1.0, n)
    assert all(abs(int(v)) <= scale for t in tensors for v in t)
    workers = [Worker(job, i, chunks_of(t), 4, 8) for i, t in enumerate(tensors)]
    dest = Destination(job, n, len(workers[0].chunks))
    now = 0.0
    while not all(w.done for w in workers):  # a lossless network that delivers at once
        for w in workers:
            for pkt in w.poll(now):
                for wi, res in dest.receive(pkt):
                    workers[wi].receive(res, now)
        now += 0.001
    want = expected_digest(seed, job, n, values)
    assert digest(dest.sums()) == want
    assert all(digest(w.results[i].values for i in range(len(w.chunks))) == want
               for w in workers)
    # and it is the digest of the float sums, scaled: one value changed changes it
    other = [*chunks_of(sum(tensors))]  # type: ignore[arg-type]
    other[0] = (other[0][0] + 1, *other[0][1:])
    assert digest(other) != want


def test_jobs_split_the_workers_into_disjoint_blocks() -> None:
    base = Workload(1, "h0", tuple(f"h{i}" for i in range(1, 17)))
    jobs = split_workload(base, 3, 16)
    assert [j.job for j in jobs] == [1, 2, 3]
    assert [len(j.workers) for j in jobs] == [5, 5, 6]
    assert sorted(w for j in jobs for w in j.workers) == sorted(base.workers)
    assert all(j.slots == 16 for j in jobs)
    with pytest.raises(InputError, match=r"--concurrent-jobs must be in 1\.\.16"):
        split_workload(base, 17, 16)


def test_link_bound_rates_follow_the_links_and_the_bottleneck_is_the_busiest_uplink() -> None:
    """Each link drains link_pps x its rate / the fastest link's, at both switch ends; the
    bottleneck is the uplink with the most messages per chunk over its rate (a slow link
    with fewer messages can be it)."""
    from innet.emulation.aggregation import (
        bottleneck,
        link_rates_pps,
        plan_job,
        switch_setup,
    )
    from innet.topology import topology_from_dict

    topo = topology_from_dict({
        "name": "lb",
        "hosts": {f"h{i}": {"ip": f"10.0.0.{i + 1}", "mac": f"08:00:00:00:00:0{i + 1}"}
                  for i in range(4)},
        "switches": {"s1": {}, "s2": {}, "s3": {}},
        "links": [{"a": "h0", "b": "s1-p1", "rate": 4},
                  {"a": "s2-p1", "b": "s1-p2", "rate": 4},
                  {"a": "s3-p1", "b": "s1-p3", "rate": 1},
                  {"a": "h1", "b": "s2-p2", "rate": 4}, {"a": "h2", "b": "s3-p2", "rate": 4},
                  {"a": "h3", "b": "s3-p3", "rate": 4}],
        "aggregation": {"destination": "h0"}})
    rates = link_rates_pps(topo, 400)
    assert rates == {"s1": {1: 400, 2: 400, 3: 100}, "s2": {1: 400, 2: 400},
                     "s3": {1: 100, 2: 400, 3: 400}}
    assert switch_setup(topo, 400)["s3"] == ("set_queue_depth 1024", "set_queue_rate 100 1",
                                             "set_queue_rate 400 2", "set_queue_rate 400 3")
    assert switch_setup(topo, None)["s3"] == ("set_queue_depth 1024",)
    work = Workload(1, "h0", ("h1", "h2", "h3"))
    red = bottleneck([plan_job(topo, work, "all-red", 0)])
    # all red: s1 sends 3 messages per chunk at rate 4 (0.75), s3 sends 2 at rate 1 (2.0)
    assert (red.switch, red.messages, red.load) == ("s3", 2, 2.0)
    blue = bottleneck([plan_job(topo, work, "all-blue", 3)])
    assert (blue.switch, blue.messages, blue.load) == ("s3", 1, 1.0)


def test_chunks_in_flight_follow_the_plans_busiest_uplink() -> None:
    """Per worker, the chunks in flight are what keeps the busiest uplink's queue near the
    budget: a plan that sends 16 messages per chunk through bt15's root (all red) gets half
    the chunks of one that sends 4 (SOAR k=4), whose share hits the cap; concurrent jobs
    count together, and the window bounds it."""
    from innet.emulation.aggregation import (
        DEFAULT_INFLIGHT,
        QUEUE_BUDGET,
        default_inflight,
        default_workload,
        plan_job,
    )
    from innet.topology import load_topology

    topo = load_topology(Path(__file__).resolve().parents[2] / "topologies" / "bt15.json")
    work = default_workload(topo)
    soar, red = (plan_job(topo, work, s, 4, seed=0) for s in ("soar", "all-red"))
    assert (soar.msgs["s1"], red.msgs["s1"]) == (4, 16)
    assert QUEUE_BUDGET // 16 == default_inflight([red], 128) == 8
    assert default_inflight([soar], 128) == DEFAULT_INFLIGHT == 16
    assert default_inflight([soar], 4) == 4
    halves = split_workload(work, 2, 128)
    both = [plan_job(topo, w, "all-red", 4, seed=0) for w in halves]
    assert default_inflight(both, 64) == 8   # 8 + 8 messages per chunk through the root


def test_a_send_on_a_link_that_is_down_is_a_loss_not_a_crash() -> None:
    """With its interface down a host's sendto fails (ENETUNREACH): the pacer counts the
    packet as lost, as any link may lose it, and the protocol's timers send it again;
    other errors still raise."""
    import errno as errnos

    from innet import aggpacket as ap
    from innet.emulation.agghost import Pacer

    class DownSocket:
        def __init__(self, code: int) -> None:
            self.code = code

        def sendto(self, data: bytes, where: object) -> int:
            raise OSError(self.code, "refused")

    pkt = ap.contribution(1, 0, 0, [1] * ap.VECTOR_LEN)
    pacer = Pacer(DownSocket(errnos.ENETUNREACH))
    pacer.send("10.0.0.1", pkt)
    assert pacer.dropped == 1
    with pytest.raises(OSError):
        Pacer(DownSocket(errnos.EBADF)).send("10.0.0.1", pkt)
