"""Scheduling on the leaf-spine: Themis-like candidates, CASSINI's ranking, the plan."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from innet.cassini.model.geometry import score_at
from innet.cassini.model.profiles import JobProfile, jobs_from_data, load_jobs, zoo_job
from innet.cassini.placement.candidates import Placement, Proposal, themis_candidates
from innet.cassini.placement.cluster import Cluster, cluster_from_topology, ring_hops
from innet.cassini.placement.scheduler import PlannerSettings, Schedule, plan_cluster, schedule
from innet.errors import InputError
from innet.topology import Topology, load_topology

ROOT = Path(__file__).resolve().parents[3]
LEAFSPINE = ROOT / "topologies" / "leafspine24.json"


@pytest.fixture(scope="module")
def leafspine() -> Topology:
    return load_topology(LEAFSPINE)


@pytest.fixture(scope="module")
def thirteen(leafspine: Topology) -> Schedule:
    return schedule(leafspine, load_jobs(ROOT / "examples" / "jobs-13.json"))


def test_the_cluster_is_the_papers_testbed(leafspine: Topology) -> None:
    cluster = cluster_from_topology(leafspine)
    assert cluster.gpus == 24 and len(cluster.racks) == 6
    assert all(len(slots) == 4 for _, slots in cluster.racks)
    assert cluster.capacity_gbps[("l1", "sp1")] == 50.0
    assert ring_hops(["h1", "h1", "h2"]) == [("h1", "h2"), ("h2", "h1")]
    assert ring_hops(["h3", "h3"]) == []


def test_13_jobs_are_all_placed_and_the_plan_is_complete(thirteen: Schedule,
                                                         leafspine: Topology) -> None:
    jobs = load_jobs(ROOT / "examples" / "jobs-13.json")
    plan = thirteen.cassini
    assert not plan.waiting and len(plan.jobs) == 13
    used = Counter(h for hosts in plan.placement.values() for h in hosts)
    assert all(n <= leafspine.hosts[h].gpus for h, n in used.items())
    for job in jobs:
        assert len(plan.placement[job.name]) == job.gpus
        if job.hosts is not None:
            assert plan.placement[job.name] == job.hosts  # running jobs keep their servers
        assert 0 <= plan.shifts_ms[job.name] < job.iteration_ms
        assert plan.phases(job.name) == job.phases
    # single-host jobs send nothing; the links two jobs share are leaf-spine links
    assert plan.routes["resnet50"] == ()
    for link in plan.shared_links():
        a, b = link.split("->")
        assert a.startswith("sp") or b.startswith("sp"), link
    for shared in plan.shared:
        assert len(shared.jobs) >= 2 and set(shared.jobs) <= set(plan.placement)


@pytest.fixture(scope="module")
def crowded(leafspine: Topology) -> Schedule:
    """The 13 jobs with the four running ones on other servers: there, the best-scoring
    candidate has a conflicting loop in its Affinity graph."""
    data = json.loads((ROOT / "examples" / "jobs-13.json").read_text())
    running = {"vgg11": ["h21", "h9"], "vgg16": ["h13", "h22"], "vgg19": ["h6", "h16"],
               "wideresnet101": ["h17", "h14"]}
    for job in data["jobs"]:
        if job["name"] in running:
            job["hosts"] = running[job["name"]]
    # the paper's ranking alone
    return schedule(leafspine, jobs_from_data(data), PlannerSettings(checked=0))


def test_cassini_drops_conflicts_and_beats_the_base(crowded: Schedule) -> None:
    plan, base = crowded.cassini, crowded.base
    assert base.candidate == 0 and all(s == 0 for s in base.shifts_ms.values())
    chosen = plan.candidates[plan.candidate]
    assert chosen.conflicts == 0 and not plan.conflicts
    clean = [c for c in plan.candidates if c.conflicts == 0]
    assert chosen.score == max(c.score for c in clean)
    # some candidate scores higher but has a conflicting loop: it was dropped
    assert any(c.score > chosen.score and c.conflicts for c in plan.candidates)
    assert plan.score > base.score
    # no conflict: every shared link gets its best score at the assigned shifts
    jobs = {j.name: j for j in plan.jobs}
    for shared in plan.shared:
        assert shared.score == pytest.approx(shared.score_best, abs=1e-9)
        again = score_at([jobs[j] for j in shared.jobs], plan.shifts_ms, shared.capacity_gbps,
                         weights=shared.weights)
        assert again == pytest.approx(shared.score, abs=1e-9)


def test_candidates_are_distinct_and_deterministic(leafspine: Topology) -> None:
    jobs = load_jobs(ROOT / "examples" / "jobs-13.json")
    cluster = cluster_from_topology(leafspine)
    first = themis_candidates(cluster, jobs, 20, seed=3)
    again = themis_candidates(cluster, jobs, 20, seed=3)
    assert [c.key() for c in first.candidates] == [c.key() for c in again.candidates]
    assert len({c.key() for c in first.candidates}) == len(first.candidates) == 20
    plan = plan_cluster(leafspine, jobs, PlannerSettings(seed=3))
    assert plan.to_dict()["placement"] == plan_cluster(leafspine, jobs,
                                                       PlannerSettings(seed=3)).to_dict()["placement"]


def test_candidates_include_best_fit_with_two_jobs_trading_gpus(leafspine: Topology) -> None:
    """Two 6-GPU jobs must span racks; which of them crosses which uplink is what CASSINI's
    ranking weighs, so the base offers best-fit with the two trading GPUs. Every candidate
    gives every job its GPU count (equal fairness); two jobs inside racks never trade (no
    link would see it)."""
    jobs = [zoo_job("DLRM", "wide-a", 6), zoo_job("VGG19", "wide-b", 6),
            zoo_job("ResNet50", "in-rack-a", 4), zoo_job("BERT", "in-rack-b", 4)]
    cluster = cluster_from_topology(leafspine)
    proposal = themis_candidates(cluster, jobs, 8, seed=0)
    first = proposal.candidates[0].hosts
    assert all(len({cluster.rack_of(h) for h in first[j]}) == 2 for j in ("wide-a", "wide-b"))
    traded = {**first, "wide-a": first["wide-b"], "wide-b": first["wide-a"]}
    keys = [sorted(c.hosts.items()) for c in proposal.candidates]
    assert sorted(traded.items()) in keys
    untouched = {**first, "in-rack-a": first["in-rack-b"], "in-rack-b": first["in-rack-a"]}
    assert sorted(untouched.items()) not in keys
    for c in proposal.candidates:
        assert {j: len(h) for j, h in c.hosts.items()} == {j.name: j.gpus for j in jobs}


def test_candidates_include_packings_that_leave_whole_racks_free(leafspine: Topology) -> None:
    """Jobs of 6, 5 and 5 GPUs on six racks of four: best-fit and random packings each
    span into a fresh rack and leave fragments in all six, next to busy uplinks. With 8
    GPUs to spare the base also offers packings into the fewest racks (four), leaving two
    whole racks for later jobs; a full cluster gets none (nothing would be left whole)."""
    jobs = [zoo_job("ResNet50", "a", 6), zoo_job("WideResNet101", "b", 5),
            zoo_job("VGG11", "c", 5)]
    cluster = cluster_from_topology(leafspine)

    def untouched(p: Placement) -> int:
        used = {cluster.rack_of(h) for hs in p.hosts.values() for h in hs}
        return sum(1 for rack, _ in cluster.racks if rack not in used)

    proposal = themis_candidates(cluster, jobs, 20, seed=0)
    assert untouched(proposal.candidates[0]) < 2
    whole = [p for p in proposal.candidates if untouched(p) == 2]
    assert len(whole) >= 3
    for c in proposal.candidates:
        assert {j: len(h) for j, h in c.hosts.items()} == {j.name: j.gpus for j in jobs}
    fill = [*jobs, zoo_job("BERT", "d", 4), zoo_job("DLRM", "e", 4)]
    assert all(untouched(p) == 0 for p in themis_candidates(cluster, fill, 20, 0).candidates)


def test_jobs_furthest_behind_get_gpus_first(leafspine: Topology) -> None:
    jobs = jobs_from_data({"jobs": [
        {"name": "fresh", "model": "VGG19", "gpus": 10},
        {"name": "waited", "model": "VGG19", "gpus": 10, "waited_ms": 600000},
        {"name": "waited-more", "model": "VGG19", "gpus": 10, "waited_ms": 900000},
        {"name": "small", "model": "ResNet50", "gpus": 2},
    ]})
    plan = plan_cluster(leafspine, jobs, PlannerSettings(candidates=4))
    assert plan.waiting == ("fresh",)
    assert set(plan.placement) == {"waited", "waited-more", "small"}
    assert any("fresh" in w for w in plan.warnings)


def test_base_best_fit_keeps_jobs_in_one_rack_when_they_fit(leafspine: Topology) -> None:
    jobs = [zoo_job("VGG19", f"v{i}", 2) for i in range(6)]
    plan = schedule(leafspine, jobs).base
    cluster = cluster_from_topology(leafspine)
    for hosts in plan.placement.values():
        assert len({cluster.rack_of(h) for h in hosts}) == 1
    assert not plan.shared and plan.score == 1.0


def test_a_two_rack_pair_on_a_shared_uplink_is_shifted_apart(leafspine: Topology) -> None:
    """Two VGG19 jobs pinned across the same two racks, their rings hashed onto one spine:
    the plan must shift them half an iteration apart."""
    jobs = jobs_from_data({"jobs": [
        {"name": "a", "model": "VGG19", "hosts": ["h1", "h5"]},
        {"name": "b", "model": "VGG19", "hosts": ["h2", "h6"]},
    ]})
    plan = plan_cluster(leafspine, jobs, PlannerSettings(candidates=1))
    assert plan.shared  # the ECMP hash (crc32 of the host pair) is deterministic
    assert min(s.score_unshifted for s in plan.shared) < 1
    assert all(s.score == pytest.approx(1.0) for s in plan.shared)
    gap = abs(plan.shifts_ms["a"] - plan.shifts_ms["b"]) % 240
    assert gap == pytest.approx(120.0)


def test_the_base_scheduler_is_pluggable(leafspine: Topology) -> None:
    jobs = [zoo_job("VGG19", "a"), zoo_job("VGG19", "b")]

    def fixed(cluster: Cluster, jobs: Sequence[JobProfile], count: int, seed: int) -> Proposal:
        return Proposal((Placement({"a": ("h1", "h5"), "b": ("h2", "h6")}),), ())

    plan = plan_cluster(leafspine, jobs, base_scheduler=fixed)
    assert plan.placement == {"a": ("h1", "h5"), "b": ("h2", "h6")}


def test_among_placements_without_contention_the_shorter_rings_win(leafspine: Topology) -> None:
    """Candidates 1 and 2 both keep the jobs apart, so the fluid check scores them the same;
    candidate 1 sends job a across two racks for nothing. CASSINI must take candidate 2:
    its rings cross fewer links (less latency on a real network, uplinks left free). The
    base spreads its jobs over three racks, so both may replace it (the next test)."""
    jobs = [zoo_job("VGG19", "a"), zoo_job("VGG19", "b")]
    apart_across = {"a": ("h1", "h5"), "b": ("h9", "h10")}
    apart_inside = {"a": ("h1", "h2"), "b": ("h9", "h10")}

    def fixed(cluster: Cluster, jobs: Sequence[JobProfile], count: int, seed: int) -> Proposal:
        return Proposal((Placement({"a": ("h1", "h5"), "b": ("h2", "h9")}),
                         Placement(apart_across), Placement(apart_inside)), ())

    result = schedule(leafspine, jobs, base_scheduler=fixed)
    assert result.cassini.placement == apart_inside
    costs = {(o.candidate, o.shifted): o.cost for o in result.checked}
    assert costs[(1, False)] == pytest.approx(costs[(2, False)], abs=1e-9)
    assert result.cassini.candidate == 2


def test_free_gpus_are_left_where_the_uplinks_are_quiet(leafspine: Topology) -> None:
    """Job a spans racks 1 and 2 whatever happens; b fits in a rack. Both candidates run
    without contention, but candidate 0 leaves two free GPUs in a's second rack, where a job
    arriving next would share a's uplink. CASSINI must fill that rack with b."""
    jobs = [zoo_job("VGG19", "a", 6), zoo_job("ResNet50", "b", 2)]
    exposed = {"a": ("h1", "h2", "h3", "h4", "h5", "h6"), "b": ("h9", "h10")}
    filled = {"a": ("h1", "h2", "h3", "h4", "h5", "h6"), "b": ("h7", "h8")}

    def fixed(cluster: Cluster, jobs: Sequence[JobProfile], count: int, seed: int) -> Proposal:
        return Proposal((Placement(exposed), Placement(filled)), ())

    result = schedule(leafspine, jobs, base_scheduler=fixed)
    assert result.base.placement == exposed
    assert result.cassini.placement == filled
    costs = {(o.candidate, o.shifted): o.cost for o in result.checked}
    assert costs[(0, False)] == pytest.approx(costs[(1, False)], abs=1e-9)


BAD_PINS = [
    ({"name": "a", "model": "VGG19", "hosts": ["h1", "h99"]}, "job 'a': hosts: unknown host 'h99'"),
    ({"name": "a", "model": "VGG19", "hosts": ["h1", "h1"]},
     "job 'a': hosts: host 'h1' has no free"),
    ({"name": "a", "model": "VGG19", "gpus": 30}, "job 'a': gpus 30 is more than the cluster's 24"),
]


@pytest.mark.parametrize("job,message", BAD_PINS)
def test_bad_placements_are_refused(leafspine: Topology, job: dict[str, object],
                                    message: str) -> None:
    with pytest.raises(InputError) as err:
        plan_cluster(leafspine, jobs_from_data({"jobs": [job]}))
    assert message in str(err.value)


def test_links_without_capacity_are_refused(tmp_path: Path) -> None:
    topo = tmp_path / "t.json"
    topo.write_text('{"hosts": {"h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:00:01"},'
                    '"h2": {"ip": "10.0.0.2", "mac": "08:00:00:00:00:02"}},'
                    '"switches": {"s1": {}}, "links": [["h1", "s1-p1"], ["h2", "s1-p2"]]}')
    with pytest.raises(InputError, match="has no Mbps"):
        plan_cluster(load_topology(topo), [zoo_job("VGG19", "a")])
    with pytest.raises(InputError, match="candidates"):
        schedule(load_topology(LEAFSPINE), [zoo_job("VGG19", "a")], PlannerSettings(candidates=0))


def _round_among(topology: Topology, jobs: Sequence[JobProfile],
                 *placements: Mapping[str, tuple[str, ...]]) -> Schedule:
    """A trace's round (later jobs may arrive) whose base proposes `placements`, the first
    its own pick."""
    def fixed(cluster: Cluster, jobs: Sequence[JobProfile], count: int, seed: int) -> Proposal:
        return Proposal(tuple(Placement(p) for p in placements), ())

    return schedule(topology, jobs, base_scheduler=fixed,
                    finishing={j.name: (0.0, 20) for j in jobs})


def test_a_pick_never_leaves_more_free_gpus_by_busy_uplinks_than_the_base(
        leafspine: Topology) -> None:
    """Candidate 1 keeps the two jobs apart, so this round's check scores it better than the
    base's placement, where they share the uplinks of racks 1 and 2 (each sends 70% of its
    iteration: no shift interleaves them); but it spreads them over
    four racks and leaves 12 free GPUs beside busy uplinks against the base's 4, where the
    next arrivals would share a running job's uplink. CASSINI must keep the base's placement
    (with its own shifts at most) and not even check candidate 1."""
    busy = {"iteration_ms": 100, "gpus": 2, "phases": [{"start_ms": 0, "duration_ms": 70,
                                                         "gbps": 40}]}
    jobs = jobs_from_data({"jobs": [{"name": "a", **busy}, {"name": "b", **busy}]})
    together = {"a": ("h1", "h5"), "b": ("h2", "h6")}
    spread = {"a": ("h1", "h5"), "b": ("h9", "h13")}

    result = _round_among(leafspine, jobs, together, spread)
    assert result.cassini.placement == together
    assert {o.candidate for o in result.checked} == {0}


def test_a_pick_never_moves_a_heavier_job_beside_the_free_gpus(leafspine: Topology) -> None:
    """In the base's placement a and h share the uplinks of racks 1 and 2 and collide (each
    sends 70% of its iteration); candidate 1 trades h's GPUs with the light job l, so no link
    is shared and this round's check prefers it. Both leave 10 free GPUs beside busy uplinks,
    but candidate 1 puts heavy h beside six of them (racks 3 and 4), where the base had l:
    jobs arriving there would meet h's traffic. CASSINI must keep the base's placement."""
    def job(name: str, ms: int, gbps: int) -> dict[str, object]:
        return {"name": name, "iteration_ms": 100, "gpus": 2,
                "phases": [{"start_ms": 0, "duration_ms": ms, "gbps": gbps}]}

    jobs = jobs_from_data({"jobs": [job("a", 70, 40), job("h", 70, 40), job("l", 10, 5)]})
    base = {"a": ("h1", "h5"), "h": ("h2", "h6"), "l": ("h9", "h13")}
    traded = {"a": ("h1", "h5"), "h": ("h9", "h13"), "l": ("h2", "h6")}

    result = _round_among(leafspine, jobs, base, traded)
    assert result.cassini.placement == base
    assert {o.candidate for o in result.checked} == {0}
    alone = _round_among(leafspine, jobs, traded, base)
    assert alone.cassini.placement == traded  # the other way round, nothing to forbid
