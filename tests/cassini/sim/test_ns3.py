"""The ns-3 engine: its config follows innet's routes, and its runs do what packets do.

The runs need the ns3 wheel, g++ and nlohmann-json (setup.sh installs them); without them
these tests skip with the reason (and fail under INNET_REQUIRE_P4=1, as in CI).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from ns3_helpers import needs_ns3

from innet.cassini.experiments.evaluation import evaluate_cluster, evaluate_link
from innet.cassini.experiments.settings import EvaluationSettings
from innet.cassini.model.profiles import load_jobs, zoo_job
from innet.cassini.placement.cluster import ring_hops
from innet.cassini.placement.scheduler import PlannerSettings, schedule
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.guard import PacketGuard
from innet.cassini.sim.ns3 import (
    Ns3Engine,
    Ns3Settings,
    build_config,
    build_program,
    network_of,
    path_of,
    run_config,
    run_of_plan,
    trace_config,
)
from innet.cassini.sim.trace import TraceJobRun, TraceSchedule, traffic_of
from innet.cli import main
from innet.errors import InputError
from innet.routing import host_path, next_hops
from innet.topogen import fat_tree_topology
from innet.topology import load_topology, topology_from_dict

ROOT = Path(__file__).resolve().parents[3]
PAIR = ROOT / "examples" / "jobs-vgg19-pair.json"  # two VGG19: 240 ms, Up 150-240 ms at 44 Gbps
FOUR = ROOT / "examples" / "jobs-4-leafspine.json"
LEAFSPINE = ROOT / "topologies" / "leafspine24.json"




# ------------------------------------------------------------------------- the config


def test_config_routes_follow_innet_routing() -> None:
    """Every flow of every job, walked hop by hop through the config's next hops, takes the
    path innet.routing computes (and the plan counts)."""
    topo = load_topology(LEAFSPINE)
    jobs = load_jobs(FOUR)
    plan = schedule(topo, jobs, PlannerSettings(candidates=4, checked=0)).cassini
    run = run_of_plan(plan)
    hosts = sorted({h for hs in run.placement.values() for h in hs})
    network = network_of(topo, hosts)
    cfg = build_config(network, run, FluidConfig(iterations=3), Ns3Settings(), 1000.0)
    walked = 0
    for job in cfg["jobs"]:
        assert [tuple(p) for p in plan.routes.get(job["name"], ())] == [
            host_path(topo, a, b, next_hops(topo, b)) for a, b in job["flows"]]
        for a, b in job["flows"]:
            node, path = a, [a]
            while node != b:  # the config's own tables, not the engine's helper
                node = (cfg["next_hops"][node][b] if node in cfg["next_hops"]
                        else next(lk["b"] if lk["a"] == node else lk["a"]
                                  for lk in cfg["links"] if node in (lk["a"], lk["b"])))
                path.append(node)
            assert tuple(path) == host_path(topo, a, b, next_hops(topo, b)) == \
                path_of(network, a, b)
            walked += 1
    assert walked >= 4
    # rates scaled so the fastest (50 Gbps) becomes 0.1, delays (1 us default) stretched alike
    assert cfg["rate_scale"] == pytest.approx(0.002)
    assert [lk["gbps"] for lk in cfg["links"]] == pytest.approx([0.1] * len(topo.links))
    assert [lk["delay_us"] for lk in cfg["links"]] == pytest.approx([500.0] * len(topo.links))
    # K = C x RTT / 7 for h-leaf-spine-leaf-h at 50 Gbps: per link 2 x 1 us + a 1502-byte
    # packet (0.2403 us) + a 66-byte ACK (0.0106 us) = 2.2509 us; x4 = 9.0035 us;
    # 50e9 x 9.0035e-6 / 12016 bits = 37.46 packets; / 7 = 5.35 -> 6
    assert cfg["queue"] == {"k_packets": 6, "buffer_packets": 300}
    vgg = next(j for j in cfg["jobs"] if j["name"] == "vgg19-a")
    # VGG19: Down 150 ms, then 44 Gbps x 90 ms = 3960 Mbit, scaled x0.002 -> 990,000 bytes;
    # the Down phase gives up what packets take at these rates: one 131.6 us sender tick and,
    # per link of the ring's longest hop, 500 us of propagation + 120.2 us of serialisation
    links = max(len(path_of(network, a, b)) - 1 for a, b in vgg["flows"])
    packet_ms = 1448 * 8 / 88e6 * 1e3 + links * (0.5 + 1502 * 8 / 0.1e9 * 1e3)
    assert vgg["segments"] == [{"up": False, "ms": pytest.approx(150.0 - packet_ms)},
                               {"up": True, "bytes": 990_000, "gbps": pytest.approx(0.088)}]
    raw = build_config(network, run, FluidConfig(iterations=3), Ns3Settings(compensate=False),
                       1000.0)
    assert next(j for j in raw["jobs"] if j["name"] == "vgg19-a")["segments"][0] == \
        {"up": False, "ms": 150.0}


def test_ecmp_is_an_option_and_bad_settings_are_refused() -> None:
    topo = load_topology(LEAFSPINE)
    plan = schedule(topo, load_jobs(FOUR), PlannerSettings(candidates=2, checked=0)).cassini
    run = run_of_plan(plan)
    network = network_of(topo)
    cfg = build_config(network, run, FluidConfig(iterations=2), Ns3Settings(routing="ecmp"), 1.0)
    assert cfg["routing"] == "ecmp"
    with pytest.raises(InputError, match="routing"):
        build_config(network, run, FluidConfig(), Ns3Settings(routing="ospf"), 1.0)
    with pytest.raises(InputError, match="rate-scale"):
        build_config(network, run, FluidConfig(), Ns3Settings(rate_scale=2.0), 1.0)


# --------------------------------------------------------------------------- the runs


@needs_ns3
def test_without_contention_every_job_keeps_its_own_iteration_time() -> None:
    """Two VGG19 jobs half an iteration apart never overlap on their shared link. A packet
    simulator then adds to each Up phase exactly what packets take (derived, not tuned):
    the sender writes one 1448-byte segment per 1448 x 8 / 88 Mbps = 131.6 us, so the last
    leaves at most one tick late; it crosses 3 links of 0.1 Gbps, each 500 us of propagation
    and 1502 x 8 / 0.1e9 = 120.2 us of serialisation. Bound: 131.6 + 3 x 620.2 = 1992 us."""
    jobs = load_jobs(PAIR)
    raw = Ns3Engine(Ns3Settings(compensate=False))
    run = raw.link(jobs, 50.0, {"vgg19-b": 120.0}, FluidConfig(iterations=6), "apart")
    slack_ms = 1448 * 8 / 88e6 * 1e3 + 3 * (0.5 + 1502 * 8 / 0.1e9 * 1e3)
    assert slack_ms == pytest.approx(1.992, abs=1e-3)
    for job in run.jobs:
        assert len(job.iterations_ms) == 6
        for t in job.iterations_ms:
            assert 240.0 <= t <= 240.0 + slack_ms
    assert run.marks == 0
    # by default that bound comes out of the compute before the phase (packet_time_ms) and
    # no iteration ends before T (min_iteration_ms): alone a job iterates at exactly its T
    run = Ns3Engine().link(jobs, 50.0, {"vgg19-b": 120.0}, FluidConfig(iterations=6), "apart")
    for job in run.jobs:
        assert len(job.iterations_ms) == 6
        for t in job.iterations_ms:
            assert t == pytest.approx(240.0, abs=1e-5)
        assert job.realignments == 0
    assert run.marks == 0


@needs_ns3
def test_packets_cross_exactly_the_links_of_innet_routes() -> None:
    """On a k=4 fat-tree (four equal paths between pods, so ns-3's own routing would pick
    other links than innet.routing), every queue that sends a packet is on a flow's path
    (data) or on innet.routing's path back to its sender (ACKs), and every link of those
    paths sends: the program forwards by innet.routing's next hops, switch by switch."""
    topo = topology_from_dict(fat_tree_topology(4, mbps=50_000))
    hosts = {"a": ("h1", "h5", "h9", "h13"), "b": ("h2", "h7"), "c": ("h3", "h16")}
    profiles = {"a": zoo_job("VGG19", "a", 4), "b": zoo_job("DLRM", "b", 2),
                "c": zoo_job("VGG16", "c", 2)}
    jobs = tuple(TraceJobRun(profiles[n], 0.0, 0.0, (), 1) for n in hosts)
    routes = {n: tuple(host_path(topo, a, b, next_hops(topo, b)) for a, b in ring_hops(hs))
              for n, hs in hosts.items()}
    traffic = traffic_of(routes)
    sched = TraceSchedule("t", jobs, hosts, traffic, dict.fromkeys(traffic, 50.0), 1)
    network = network_of(topo, sorted({h for hs in hosts.values() for h in hs}))
    # uncompensated: the pinned figures below predate the packet-time compensation
    cfg = trace_config(network, sched, FluidConfig(iterations=1),
                       Ns3Settings(compensate=False), 10_000.0)
    assert sum(len(t) for t in cfg["next_hops"].values()) >= 8 * len(network.switches)
    raw = run_config(build_program(), cfg, 60.0)
    assert raw["complete"]

    def links(paths: list[tuple[str, ...]]) -> set[tuple[str, str]]:
        return {(p[i], p[i + 1]) for p in paths for i in range(len(p) - 1)}

    data = links([p for ps in routes.values() for p in ps])
    # ACKs go back on the routes toward the sender, which need not be the reverse path
    acks = links([host_path(topo, b, a, next_hops(topo, a))
                  for hs in hosts.values() for a, b in ring_hops(hs)])
    assert acks != {(b, a) for a, b in data}  # so the test tells the two apart
    sent = {(q["from"], q["to"]) for q in raw["queues"] if q["packets"] > 0}
    assert sent == data | acks
    assert any(n.startswith("c") for hop in data for n in hop)  # some flows cross the core
    # the figures of the same config with the routes in ns-3's own Ipv4StaticRouting list
    # (the program before its hash table): the same packets on the same links, to the ns
    assert {j["name"]: (j["iterations_ms"], j["bytes"]) for j in raw["jobs"]} == {
        "a": ([pytest.approx(352.836893, abs=1e-6)], 3_960_000),
        "b": ([pytest.approx(149.172758, abs=1e-6)], 1_035_000),
        "c": ([pytest.approx(431.215433, abs=1e-6)], 2_520_000)}
    assert sum(q["packets"] for q in raw["queues"]) == 47_320
    assert sum(q["marks"] for q in raw["queues"]) == 2_181


@needs_ns3
def test_a_window_cut_below_one_segment_does_not_stall_the_connection() -> None:
    """Two jobs of the 1,024-server fat-tree's snapshot draw (rate scale 0.001), cut down to
    the nodes on their paths: an ECN echo right after a timeout cut GPT-3's h912 -> h1024
    connection to 1,417 bytes (ns-3's DCTCP: (1 - alpha / 2) x one segment); with nothing in
    flight a 1,448-byte segment never fitted, no ACK came, and the job stalled in its third
    iteration with 3.36 of 9.71 MB delivered until stop_ms. The program keeps the window at
    one segment or more, and both jobs train every iteration and leave."""
    cfg = json.loads((Path(__file__).parent / "ns3-window-stall.json").read_text())
    raw = run_config(build_program(), cfg, 60.0)
    assert raw["complete"]
    jobs = {j["name"]: j for j in raw["jobs"]}
    assert jobs["gpt-3-248"]["bytes"] == 9_712_500  # 7 iterations x 2 flows x 693,750
    assert len(jobs["gpt-3-248"]["iterations_ms"]) == 7
    assert jobs["vgg11-237"]["bytes"] == 8_400_000
    assert all(j["finish_ms"] is not None and j["finish_ms"] < cfg["stop_ms"]
               for j in raw["jobs"])


@needs_ns3
def test_colliding_jobs_stretch_and_cassini_shifts_cut_the_marks() -> None:
    """Unshifted, both want 44 of 50 Gbps at once: DCTCP shares the link, the queue passes
    K and marks, and iterations stretch (max-min would give 308.4 ms: 90 ms of 44 Gbps at
    25). CASSINI's shifts separate the phases: no marks, no stretch."""
    jobs = load_jobs(PAIR)
    ev = evaluate_link(jobs, 50.0, EvaluationSettings(PlannerSettings(precision_deg=5.0),
                                                 Ns3Engine(), FluidConfig(iterations=8)))
    base, cassini = ev.arms[0].run, ev.arms[-1].run
    base_mean, base_p99 = base.summary(False)
    mean, p99 = cassini.summary(False)
    assert base_mean > 240 * 1.15 and base_p99 > base_mean
    assert base.marks > 100
    assert cassini.marks * 10 < base.marks
    assert mean < base_mean and p99 < base_p99
    assert all(not math.isnan(t) for j in cassini.jobs for t in j.iterations_ms)


@needs_ns3
def test_four_jobs_on_the_leaf_spine_go_the_way_bmv2_measured() -> None:
    """The four-job scenario on BMv2 (docs/results/emulation/cassini.md, every run there):
    CASSINI's placement and shifts cut the base's CE marks to nearly none and its p99
    iteration by more than 3x, while CASSINI's shifts on the base's placement leave the marks
    where they were (three jobs of 90-100 ms Up phases on one circle of 240 ms cannot
    interleave). ns-3 must go the same way on all three arms (docs/cassini-ns3.md gives the
    tables side by side)."""
    ev = evaluate_cluster(load_topology(LEAFSPINE), load_jobs(FOUR), EvaluationSettings(
        PlannerSettings(candidates=20, checked=20, precision_deg=5.0), Ns3Engine(),
        FluidConfig(iterations=8)))
    base, shifted, cassini = (arm.run for arm in ev.arms)
    (base_mean, base_p99), (mean, p99) = base.summary(False), cassini.summary(False)
    assert base.marks > 1000 and cassini.marks * 100 < base.marks
    assert shifted.marks > 0.9 * base.marks               # shifts alone do not cut them
    assert mean < base_mean and p99 * 1.5 < base_p99


@needs_ns3
def test_the_packet_guard_keeps_a_pick_packets_agree_with_and_turns_down_a_worse_one() -> None:
    """On the four-job scenario packets agree with the fluid check (the test above): the
    guard runs the base's plan and CASSINI's pick once each, briefly, and the pick stands.
    Asked the other way round (the base's plan as the option against CASSINI's), it turns
    the option down."""
    topo, jobs = load_topology(LEAFSPINE), load_jobs(FOUR)
    settings = PlannerSettings(candidates=20, checked=20, precision_deg=5.0)
    plain = schedule(topo, jobs, settings)
    guard = PacketGuard(Ns3Engine())
    guarded = schedule(topo, jobs, replace(settings, guard=guard))
    assert guarded.guard_runs == 2
    assert [c.guard for c in guarded.checked if c.guard] == ["accepted"]
    assert dict(guarded.cassini.placement) == dict(plain.cassini.placement)
    assert dict(guarded.cassini.shifts_ms) == dict(plain.cassini.shifts_ms)
    config = PlannerSettings().config
    assert guard.first_accepted(topo, plain.cassini, [plain.base], None, config) == (None, 2)


# ------------------------------------------------------------------------- bad input


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_bad_engine_options_are_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["cassini", "evaluate", "--jobs", str(PAIR), "--capacity", "50", "--out",
            str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--engine", "packets"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'packets'" in err and len(err.strip().splitlines()) == 1
    code, err = _cli(capsys, *base, "--rate-scale", "0.01")
    assert code == 2 and "--engine ns3 only" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("INNET_NS3_DIR", str(tmp_path / "nowhere"))
    code, err = _cli(capsys, *base, "--engine", "ns3")
    assert code == 2 and "pip install --no-deps ns3==3.44.post0" in err
    assert len(err.strip().splitlines()) == 1


@needs_ns3
def test_a_run_past_the_machine_is_refused_with_its_estimate(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _cli(capsys, "cassini", "evaluate", "--jobs", str(PAIR), "--capacity", "50",
                     "--out", str(tmp_path), "--engine", "ns3", "--iterations", "10000")
    assert code == 2 and "would take up to" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1


def test_unreachable_dask_is_one_line(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, err = _cli(capsys, "cassini", "sweep", "--topology", str(LEAFSPINE), "--jobs",
                     str(ROOT / "examples" / "jobs-13.json"), "--draws", "1", "--iterations",
                     "2", "--out", str(tmp_path), "--dask", f"tcp://127.0.0.1:{port}")
    assert code == 2 and "cannot reach the Dask scheduler" in err
    assert len(err.strip().splitlines()) == 1
