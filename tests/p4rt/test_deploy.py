"""Deploy against the P4Runtime test server: full state, idempotence, plan changes, errors, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from p4rt_helpers import fake_addresses

from innet.bmv2.local import switch_addresses
from innet.cli import main
from innet.p4rt import entities as en
from innet.p4rt.client import (
    WRITER_ELECTION_ID,
    SwitchAddress,
    SwitchClient,
    SwitchError,
    WriteError,
)
from innet.p4rt.deploy import deploy, diff, read_status
from innet.p4rt.encode import normalise
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.fake_server import FakeP4RuntimeServer
from innet.topology import Topology, load_topology, topology_from_dict

ROOT = Path(__file__).resolve().parents[2]
BT15 = load_topology(ROOT / "topologies" / "bt15.json")
NAMES = list(BT15.switches)
PIPE = load_pipeline()
ALL = [f"h{i}" for i in range(1, 17)]


pytestmark = pytest.mark.usefixtures("no_p4runtime_threads_left")


def addrs(srv: FakeP4RuntimeServer) -> dict[str, SwitchAddress]:
    return fake_addresses(srv, NAMES)


def intent(k: int | None, topo: Topology = BT15, workers: list[str] = ALL,
           threshold: int | None = 20, job: int = 1) -> dict[str, tuple[en.Entry, ...]]:
    w = it.workload_from_dict({"job": job, "workers": workers}, topo)
    return it.derive(topo, [w], "soar", k, ecn_threshold=threshold).entries()


def held(srv: FakeP4RuntimeServer, name: str) -> set[en.Entry]:
    with SwitchClient(SwitchAddress(name, srv.address, NAMES.index(name)), PIPE.schema,
                      writer=False) as c:
        return set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES))


def updates(srv: FakeP4RuntimeServer) -> int:
    return sum(d.updates_written for d in srv.devices.values())


def test_first_deploy_loads_the_program_and_every_entry(server: FakeP4RuntimeServer) -> None:
    want = intent(4)
    result = deploy(addrs(server), want, PIPE)
    assert result.pipelines == 15
    # 17 routes per switch, the ECN default set, an agg_job entry on every switch of the
    # tree (all 15: aggregate on s4..s7, track on the others)
    assert result.writes == 15 * 19 + 15 == updates(server)  # + each job's result route
    for name in NAMES:
        assert held(server, name) == {normalise(PIPE.schema, e) for e in want[name]}
        assert server.device(NAMES.index(name)).cookie == PIPE.cookie
    assert {n for n, s in result.switches.items() if s.diff.insert and any(
        e.table == pg.T_AGG and e.action == pg.A_AGGREGATE for e in s.diff.insert)} \
        == {"s4", "s5", "s6", "s7"}
    # the default's modify, the aggregation entries and the other inserts travel in separate
    # requests
    assert all(len(d.write_requests) == 3 for d in server.devices.values())


def test_a_blank_switch_gets_its_aggregation_entries_before_its_routes(
        server: FakeP4RuntimeServer) -> None:
    """A batch is applied in no fixed order: routes in before agg_job would let a job's
    contributions through a blue switch unaggregated for that moment, and the destination
    could then never complete the chunk. So agg_job's entries go in a request of their own,
    before the routes'."""
    deploy(addrs(server), intent(4), PIPE)
    agg = PIPE.schema.table(pg.T_AGG).id
    routes = PIPE.schema.table(pg.T_ROUTES).id
    for name in NAMES:
        tables = [{u.entity.table_entry.table_id for u in r.updates}
                  for r in server.device(NAMES.index(name)).write_requests]
        first_agg = next(i for i, t in enumerate(tables) if agg in t)
        first_route = next(i for i, t in enumerate(tables) if routes in t)
        assert first_agg < first_route and tables[first_agg] == {agg}, (name, tables)


def test_the_same_plan_twice_writes_nothing(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    before = updates(server), [d.pipeline_loads for d in server.devices.values()]
    again = deploy(addrs(server), intent(4), PIPE)
    assert again.writes == 0 and again.pipelines == 0
    assert not any(s.changed for s in again.switches.values())
    assert (updates(server), [d.pipeline_loads for d in server.devices.values()]) == before


def test_a_new_plan_moves_with_the_fewest_writes(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    n0 = updates(server)
    moved = deploy(addrs(server), intent(2), PIPE)  # soar k=2: s2, s3 instead of s4..s7
    changed = {n: s.diff for n, s in moved.switches.items() if s.changed}
    assert set(changed) == {"s2", "s3", "s4", "s5", "s6", "s7"}
    # a switch turning blue or red keeps its agg_job entry (its cells): track <-> aggregate
    # is one modify each
    assert all(len(changed[s].modify) == 1 and not changed[s].insert and not changed[s].delete
               for s in changed)
    assert updates(server) - n0 == moved.writes == 6
    assert held(server, "s2") == {normalise(PIPE.schema, e) for e in intent(2)["s2"]}
    # the same keys with new data are modified in place, never deleted and re-inserted
    w = it.workload_from_dict({"job": 1, "workers": ALL[:6]}, BT15)
    fewer = it.network_intent(BT15, [it.plan_job(BT15, w, blue=["s2"])]).entries()
    before = held(server, "s2")
    step = deploy(addrs(server), fewer, PIPE)  # s2 now waits for h1..h6: same key, new data
    s2 = step.switches["s2"].diff
    assert (len(s2.insert), len(s2.delete), len(s2.modify)) == (0, 0, 1)
    old, new = s2.modify[0]
    assert old in before and (old.param("expected"), new.param("expected")) == (0xFF, 0x3F)
    # nothing of the job passes s3, s6, s7, s11..s15 any more: their entries go; s1 and s5
    # track fewer workers: their entries change in place
    gone = {n for n, d in step.switches.items() if d.diff.delete}
    assert gone == {"s3", "s6", "s7", "s11", "s12", "s13", "s14", "s15"}
    assert {n for n, d in step.switches.items() if d.diff.modify} == {"s1", "s2", "s5"}
    assert step.writes == 19  # 3 changed, 8 agg entries and their 8 result routes gone
    no_ecn = it.network_intent(BT15, [it.plan_job(BT15, w, blue=["s2"])], None).entries()
    threshold = deploy(addrs(server), no_ecn, PIPE)
    assert threshold.writes == 15 and all(len(s.diff.modify) == 1
                                         for s in threshold.switches.values())


def test_route_changes_are_modifies(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    data = BT15.to_dict()
    data["hosts"]["h5"]["mac"] = "08:00:00:00:aa:05"
    moved = deploy(addrs(server), intent(4, topology_from_dict(data)), PIPE)
    assert moved.writes == 15
    assert all(len(s.diff.modify) == 1 and not s.diff.insert and not s.diff.delete
               for s in moved.switches.values())


def test_entries_nobody_asked_for_are_removed(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    stray = [en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 0x0B000000, 8),), pg.A_FORWARD,
                      (("dst_mac", 1), ("port", 1))),
             en.Entry(pg.T_AGG, (en.Match("job", 77),), pg.A_AGGREGATE,
                      (("expected", 1), ("slot_base", 8), ("slots", 16)))]
    with SwitchClient(SwitchAddress("s9", server.address, NAMES.index("s9")), PIPE.schema) as c:
        c.write("insert", stray)
    fixed = deploy(addrs(server), intent(4), PIPE)
    assert fixed.writes == 2 and set(fixed.switches["s9"].diff.delete) == set(stray)


def test_a_switch_running_another_program_is_reloaded(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    dev = server.device(NAMES.index("s6"))
    dev.cookie = 12345  # as if someone loaded another build
    again = deploy(addrs(server), intent(4), PIPE)
    assert again.pipelines == 1 and again.switches["s6"].pipeline
    assert dev.pipeline_loads == 2 and dev.cookie == PIPE.cookie
    assert held(server, "s6") == {normalise(PIPE.schema, e) for e in intent(4)["s6"]}


def test_dry_run_reads_and_writes_nothing(server: FakeP4RuntimeServer) -> None:
    dry = deploy(addrs(server), intent(4), PIPE, dry_run=True)
    assert dry.dry_run and dry.pipelines == 15 and updates(server) == 0
    assert all(d.pipeline_loads == 0 for d in server.devices.values())
    real = deploy(addrs(server), intent(4), PIPE)
    dry2 = deploy(addrs(server), intent(2), PIPE, dry_run=True)
    assert dry2.writes == 6 and dry2.pipelines == 0 and updates(server) == real.writes


def test_open_sessions_can_be_reused(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    clients = {n: SwitchClient(a[n], PIPE.schema) for n in NAMES}
    try:
        deploy(a, intent(4), PIPE, clients=clients)
        assert deploy(a, intent(4), PIPE, clients=clients).writes == 0
        server.device(0).bump_counter("port_in", 1, 5, 500)
        st = read_status(clients["s1"], PIPE)
        assert st.runs_ours and st.counters["port_in"][1] == (5, 500)
        assert set(st.entries) == {normalise(PIPE.schema, e) for e in intent(4)["s1"]}
    finally:
        for c in clients.values():
            c.close()


def test_diff_is_pure_and_keys_decide() -> None:
    a = en.Entry(pg.T_AGG, (en.Match("job", 1),), pg.A_AGGREGATE, (("expected", 1),
                                                                    ("slot_base", 0)))
    b = en.Entry(pg.T_AGG, (en.Match("job", 1),), pg.A_AGGREGATE, (("expected", 3),
                                                                    ("slot_base", 0)))
    c = en.Entry(pg.T_AGG, (en.Match("job", 2),), pg.A_AGGREGATE, (("expected", 3),
                                                                    ("slot_base", 4)))
    d = diff([a, c, it.ecn_entry(None)], [b, it.ecn_entry(5)])
    assert d.insert == () and d.delete == (c,)
    assert d.modify == ((a, b), (it.ecn_entry(None), it.ecn_entry(5)))
    assert diff([it.ecn_entry(5)], []).writes == 0  # a default is never deleted
    assert diff([], [it.ecn_entry(5)]).modify == ((None, it.ecn_entry(5)),)
    with pytest.raises(ValueError, match="two different entries for one key"):
        diff([], [a, b])


# ---------------------------------------------------------------------------------------------
# Errors name the switch (and the entry)


def test_an_unreachable_switch_is_named_and_the_others_still_deploy(
        server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    a["s12"] = SwitchAddress("s12", "127.0.0.1:1", 0)
    a["s13"] = SwitchAddress("s13", "127.0.0.1:1", 0)
    result = deploy(a, intent(4), PIPE)
    # every switch has a result: the two unreachable ones their reason, the others their diff
    assert not result.ok and set(result.failed) == {"s12", "s13"}
    assert result.failed["s12"].startswith("switch s12 (127.0.0.1:1, device 0)")
    assert "UNAVAILABLE" in result.failed["s13"]
    assert set(result.switches) == set(NAMES) - {"s12", "s13"}
    assert all(s.pipeline for s in result.switches.values())
    assert server.device(NAMES.index("s11")).cookie == PIPE.cookie


def test_a_refused_write_names_switch_entry_and_reason(server: FakeP4RuntimeServer) -> None:
    deploy(addrs(server), intent(4), PIPE)
    route = next(e for e in intent(4)["s3"] if e.table == pg.T_ROUTES)
    with SwitchClient(SwitchAddress("s3", server.address, NAMES.index("s3")), PIPE.schema) as c:
        with pytest.raises(WriteError, match=r"switch s3 .*insert route 10\.0\.0\.2/32 -> "
                                             r"port 1 .*ALREADY_EXISTS"):
            c.write("insert", [route])
        with pytest.raises(SwitchError, match=r"switch s3 .*cannot insert route .*port: 600 "
                                              r"does not fit in 9 bits"):
            c.write("insert", [en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 32),),
                                        pg.A_FORWARD, (("dst_mac", 1), ("port", 600)))])


def test_another_writer_on_the_switch_is_reported(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    with SwitchClient(a["s5"], PIPE.schema, election_id=WRITER_ELECTION_ID):
        result = deploy(a, intent(4), PIPE)
    assert list(result.failed) == ["s5"] and len(result.switches) == 14
    assert "Election id already exists" in result.failed["s5"]
    with SwitchClient(a["s5"], PIPE.schema, election_id=(2, 0)):
        result = deploy(a, intent(4), PIPE)
    assert "higher election id is primary" in result.failed["s5"]


def test_deploying_to_a_switch_without_address_is_refused(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    del a["s7"]
    with pytest.raises(ValueError, match="no address for switch 's7'"):
        deploy(a, intent(4), PIPE)


# ---------------------------------------------------------------------------------------------
# Addresses and the CLI


def test_local_switches_follow_the_mininet_convention() -> None:
    data = BT15.to_dict()
    data["switches"]["s3"] = {"grpc": "192.0.2.3:9559", "device_id": 4, "thrift_port": 9999}
    a = switch_addresses(topology_from_dict(data))
    assert a["s1"] == SwitchAddress("s1", "127.0.0.1:50051", 0, 9090)
    assert a["s2"] == SwitchAddress("s2", "127.0.0.1:50052", 0, 9091)
    assert a["s3"] == SwitchAddress("s3", "192.0.2.3:9559", 4, 9999, "192.0.2.3")
    assert a["s4"] == SwitchAddress("s4", "127.0.0.1:50053", 0, 9092)  # local ones count on
    from innet.emulation.net import local_switch_ports  # the harness follows it too

    ports = local_switch_ports(topology_from_dict(data))
    assert all(a[n].grpc == p.grpc_address and a[n].thrift_port == p.thrift_port
               for n, p in ports.items())


def _remote_topology(tmp_path: Path, srv: FakeP4RuntimeServer) -> Path:
    data: dict[str, Any] = BT15.to_dict()
    for i, n in enumerate(NAMES):
        data["switches"][n] = {"grpc": srv.address, "device_id": i}
    path = tmp_path / "bt15-remote.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_deploy_and_status(server: FakeP4RuntimeServer, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    topo = _remote_topology(tmp_path, server)
    wl = ROOT / "examples" / "workload-bt15.json"
    args = ["deploy", "--topology", str(topo), "--workload", str(wl), "-k", "4"]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "job 1: soar, k = 4: blue s4, s5, s6, s7" in out
    assert "would write 330 entries" in out and updates(server) == 0  # 15 result groups
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "s4 (" in out and "load program; +19 ~1 -0; multicast groups +1 ~0 -0" in out
    assert "  + results 239.1.0.1/32 -> multicast group 1" in out
    assert "  + multicast group 1 -> port 2 (instance 0), port 3 (instance 0)" in out
    assert "  + aggregate job 1: wait for bitmap 0xf (4 workers), slots 0..15" in out
    assert "  ~ ECN: off  =>  ECN: mark CE at queue depth >= 20" in out
    assert "15 switches (15 changed, 0 unchanged, 0 failed), 15 program loads, wrote 315 " \
           "entries" in out
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.count(": unchanged") == 15 and "wrote 0 entries" in out
    assert main(["status", "--topology", str(topo), "--switch", "s4"]) == 0
    assert "slot pool: 16 of 256 cells used by 1 job(s); job 1: 0..15" in \
        capsys.readouterr().out
    assert main([*args[:-1], "2", "--no-ecn"]) == 0
    out = capsys.readouterr().out
    assert "s4 (" in out and "  ~ aggregate job 1: wait for bitmap 0xf (4 workers), slots 0..15" \
        "  =>  track job 1: forward, count first transmissions of bitmap 0xf" in out
    assert "  ~ ECN: mark CE at queue depth >= 20  =>  ECN: off" in out
    server.device(NAMES.index("s8")).bump_counter("port_in", 2, 3, 480)
    server.device(NAMES.index("s8")).bump_counter("ecn_marked", 1, 2, 0)
    server.device(NAMES.index("s8")).bump_counter("agg_events", 2, 4, 0)
    assert main(["status", "--topology", str(topo), "--switch", "s8"]) == 0
    out = capsys.readouterr().out
    assert "s8 (" in out and "route 10.0.0.3/32 -> port 2" in out and "ECN: off" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert ["1", "0", "0", "0", "0", "2", "0", "0"] in rows
    assert ["2", "3", "480", "0", "0", "0", "0", "0"] in rows
    assert "aggregation packets: held 0, emitted 0, duplicate 4, stale 0, malformed 0" in out
    assert "slot pool: 16 of 256 cells used by 1 job(s); job 1: 0..15" in out  # track


def test_cli_errors_are_one_line(server: FakeP4RuntimeServer, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    wl = ROOT / "examples" / "workload-bt15.json"
    bt = str(ROOT / "topologies" / "bt15.json")
    # every switch down: each is reported with its reason, the exit status says so
    code = main(["deploy", "--topology", str(_down(tmp_path)), "--workload", str(wl)])
    captured = capsys.readouterr()
    assert code == 1 and "innet: 15 of 15 switches failed: s1, s2" in captured.err
    assert captured.out.count(": failed: switch s") == 15 and "Traceback" not in captured.err
    assert main(["deploy", "--topology", bt, "--workload", str(tmp_path / "no.json")]) == 2
    assert "no.json: cannot read" in capsys.readouterr().err
    assert main(["deploy", "--topology", bt, "--workload", str(wl), "--from-empty"]) == 2
    assert "--from-empty only goes with --dry-run" in capsys.readouterr().err
    assert main(["status", "--topology", bt, "--switch", "s99"]) == 2
    assert "no switch 's99'" in capsys.readouterr().err
    # status reads what it can and says which switches it could not read
    topo = _remote_topology(tmp_path, server)
    data = json.loads(topo.read_text())
    data["switches"]["s2"]["grpc"] = "127.0.0.1:1"
    topo.write_text(json.dumps(data))
    assert main(["status", "--topology", str(topo), "--switch", "s1", "--switch", "s2"]) == 1
    captured = capsys.readouterr()
    assert "s1 (" in captured.out and "does not run the innet program" in captured.out
    assert "s2 (127.0.0.1:1): cannot read: switch s2" in captured.out
    assert "1 of 2 switches could not be read" in captured.err


def _down(tmp_path: Path) -> Path:
    data = BT15.to_dict()
    for n in NAMES:
        data["switches"][n] = {"grpc": "127.0.0.1:1", "device_id": 0}
    path = tmp_path / "down.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_dry_run_from_empty_contacts_nobody(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    wl = ROOT / "examples" / "workload-bt15-half.json"
    assert main(["deploy", "--topology", str(_down(tmp_path)), "--workload", str(wl),
                 "--strategy", "top", "-k", "1", "--dry-run", "--from-empty"]) == 0
    out = capsys.readouterr().out
    assert "job 2: top, k = 1: blue s1" in out
    assert "  + aggregate job 2: wait for bitmap 0xff (8 workers), slots 0..15" in out
    assert "  ~ (the program's default)  =>  ECN: mark CE at queue depth >= 20" in out
    assert "would write 312 entries" in out  # 9 tree switches: a result route and group each


def test_cli_deploy_keeps_the_slots_a_job_holds(server: FakeP4RuntimeServer, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Job 2 streams; job 1 (a lower id) is admitted: job 2's cells must not move."""
    topo = _remote_topology(tmp_path, server)
    one, two = ROOT / "examples" / "workload-bt15.json", ROOT / "examples" / \
        "workload-bt15-half.json"
    base = ["deploy", "--topology", str(topo), "-k", "4", "--strategy", "all-blue"]
    assert main([*base, "--workload", str(two)]) == 0
    capsys.readouterr()
    assert main([*base, "--workload", str(one), "--workload", str(two)]) == 0
    out = capsys.readouterr().out
    assert "aggregate job 2" not in out  # not one of job 2's entries was touched
    assert "  + aggregate job 1: wait for bitmap 0x3 (2 workers), slots 16..31" in out


def test_a_switch_that_failed_exits_3_not_2(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input is exit 2; a switch or network that failed is exit 3 (docs/inputs.md)."""
    from innet.cli import deploy as deploy_cli
    from innet.errors import InputError, NetworkError

    assert issubclass(SwitchError, NetworkError) and not issubclass(SwitchError, InputError)

    def unreachable(_args: Any) -> int:
        raise SwitchError("switch s1 (127.0.0.1:1): unreachable: connection refused")

    monkeypatch.setattr(deploy_cli, "cmd_status", unreachable)
    bt = str(ROOT / "topologies" / "bt15.json")
    assert main(["status", "--topology", bt]) == 3
    err = capsys.readouterr().err
    assert err == "innet: switch s1 (127.0.0.1:1): unreachable: connection refused\n"
