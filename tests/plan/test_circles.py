"""CASSINI's circles as the live view draws them: the unified circle of the jobs sharing a
link, one arc per communication phase per turn of each job, rotated by its shift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from innet.cassini.model.profiles import JobProfile, Phase, zoo_job
from innet.plan.circles import OnLink, job_circles, link_circle
from innet.plan.cluster import Admission, ClusterState, JobRequest, admit
from innet.plan.linkdemand import Demand, choose_shift, link_messages
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
KEY = ("l1", "sp1")


def profile(name: str, iteration_ms: float, *phases: tuple[float, float]) -> JobProfile:
    return JobProfile(name, iteration_ms, tuple(Phase(s, d, 30.0) for s, d in phases))


def overlap(a: dict[str, Any], b: dict[str, Any], period: float) -> float:
    """How long two arcs of a circle of perimeter `period` cover the same time."""
    return sum(max(0.0, min(a["end_ms"], b["end_ms"] + k * period)
                   - max(a["start_ms"], b["start_ms"] + k * period)) for k in (-1, 0, 1))


def test_known_shifts_rotate_the_arcs() -> None:
    a, b = profile("a", 100, (0, 40)), profile("b", 100, (0, 40))
    circle = link_circle("l1->sp1", [OnLink(1, "a", a, 0.0, 1), OnLink(2, "b", b, 50.0, 3)])
    assert circle["link"] == "l1->sp1" and circle["period_ms"] == 100 and circle["exact"]
    assert circle["jobs"] == ["a", "b"]
    assert [(x["job"], x["name"], x["start_ms"], x["end_ms"], x["messages"])
            for x in circle["arcs"]] == [(1, "a", 0, 40, 1), (2, "b", 50, 90, 3)]
    wrapped = link_circle("l1->sp1", [OnLink(1, "a", a, 80.0, 1)])["arcs"][0]
    assert (wrapped["start_ms"], wrapped["end_ms"]) == (80, 120)  # through 0


def test_arcs_cassini_interleaved_do_not_overlap_and_last_the_phases() -> None:
    """Two jobs whose phases together exceed the link (30 + 30 Gbps on 40): the shift
    CASSINI chooses for the second puts its arc in the first's gaps, on the circle of
    LCM(100, 200) = 200 ms where the first comes round twice."""
    a = profile("a", 100, (0, 30))
    b = profile("b", 200, (0, 60))
    choice = choose_shift(Demand("b", b, 0.0, {KEY: 1}), [Demand("a", a, 0.0, {KEY: 1})],
                          {KEY: 40.0})
    assert choice.score == 1.0 and choice.score_unshifted < 1.0
    circle = link_circle("l1->sp1", [OnLink(1, "a", a, 0.0, 1),
                                     OnLink(2, "b", b, choice.shift_ms, 1)])
    assert circle["period_ms"] == 200
    arcs = circle["arcs"]
    assert [x["name"] for x in arcs] == ["a", "a", "b"]
    assert [x["end_ms"] - x["start_ms"] for x in arcs] == [30, 30, 60]
    assert all(overlap(x, y, 200) == 0 for x in arcs for y in arcs if x is not y)
    unshifted = link_circle("l1->sp1", [OnLink(1, "a", a, 0.0, 1), OnLink(2, "b", b, 0.0, 1)])
    assert overlap(unshifted["arcs"][0], unshifted["arcs"][2], 200) == 30


def test_running_jobs_get_the_circles_of_the_links_they_share() -> None:
    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    state = ClusterState(topo)
    running = []
    for name, hosts in (("a", ("h1", "h5", "h6", "h7", "h8")),
                        ("b", ("h2", "h9", "h10", "h11", "h12")),
                        ("c", ("h17", "h18", "h19", "h20", "h21"))):
        got = admit(state, JobRequest(name, zoo_job("VGG19"), 4, 10, 2016, hosts=hosts),
                    "soar+cassini")
        assert isinstance(got, Admission)
        state = state.with_job(got)
        running.append(got)
    circles = job_circles(topo, running)
    used = [set(link_messages(topo, a.plan)) for a in running]
    shared = sorted(f"{x}->{y}" for x, y in used[0] & used[1])
    assert shared and not used[2] & (used[0] | used[1])  # c shares nothing
    assert sorted(c["link"] for c in circles["a"]) == shared == sorted(
        c["link"] for c in circles["b"])
    assert circles["c"] == []
    vgg = zoo_job("VGG19")
    for c in circles["a"]:
        assert c["period_ms"] == vgg.iteration_ms and c["jobs"] == ["a", "b"]
        assert [(x["job"], x["start_ms"]) for x in c["arcs"]] == [
            (running[0].job, vgg.phases[0].start_ms),
            (running[1].job, (vgg.phases[0].start_ms + running[1].shift_ms) % vgg.iteration_ms)]
