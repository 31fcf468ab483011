"""The long-running controller against the P4Runtime test server: it reaches the intent on
every reachable switch while one is down, repairs drift, notices a switch that lost its
program, follows a new intent, stands by under a higher election id, and stops cleanly."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from p4rt_helpers import eventually, fake_addresses

from innet.cli import main
from innet.p4rt import entities as en
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.controller import PRIMARY, STANDBY, Controller, SwitchTarget
from innet.p4rt.encode import normalise
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.fake_server import FakeP4RuntimeServer
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
BT15 = load_topology(ROOT / "topologies" / "bt15.json")
NAMES = list(BT15.switches)[:4]
PIPE = load_pipeline()

pytestmark = pytest.mark.usefixtures("no_p4runtime_threads_left")


def addrs(srv: FakeP4RuntimeServer) -> dict[str, SwitchAddress]:
    return fake_addresses(srv, NAMES)


def targets(k: int | None = 4, threshold: int | None = 20) -> dict[str, SwitchTarget]:
    w = it.workload_from_dict({"job": 1, "workers": [f"h{i}" for i in range(1, 17)]}, BT15)
    entries = it.derive(BT15, [w], "soar", k, ecn_threshold=threshold).entries()
    return {n: SwitchTarget(entries[n]) for n in NAMES}


def held(srv: FakeP4RuntimeServer, name: str) -> set[en.Entry]:
    with SwitchClient(SwitchAddress(name, srv.address, NAMES.index(name)), PIPE.schema,
                      writer=False) as c:
        return set(c.read_entries(pg.MANAGED_TABLES, pg.DEFAULT_TABLES))


def want(t: dict[str, SwitchTarget], name: str) -> set[en.Entry]:
    return {normalise(PIPE.schema, e) for e in t[name].entries}


def no_worker_threads() -> bool:
    return not [t for t in threading.enumerate() if t.name.startswith("innet-ctl-")]


def test_reaches_the_intent_while_a_switch_is_down(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    a["s4"] = SwitchAddress("s4", "127.0.0.1:1", 0)
    t = targets()
    with Controller(a, PIPE, t, interval=0.2) as ctl:
        with pytest.raises(SwitchError, match=r"1 switches not in the intended state.*s4: "
                                              r"down \(cannot open a P4Runtime session"):
            ctl.wait_synced(3.0)
        for n in NAMES[:3]:
            assert held(server, n) == want(t, n)
        views = ctl.views()
        assert [views[n].state for n in NAMES] == [PRIMARY, PRIMARY, PRIMARY, "down"]
        assert ctl.session("s1").primary
        with pytest.raises(SwitchError, match="switch s4: no session"):
            ctl.session("s4")
    assert no_worker_threads()
    assert all(v.state == "stopped" for v in ctl.views().values())


def test_drift_and_a_blank_switch_are_repaired(server: FakeP4RuntimeServer) -> None:
    t = targets()
    with Controller(addrs(server), PIPE, t, interval=0.1) as ctl:
        ctl.wait_synced(5.0)
        loads = server.device(1).pipeline_loads
        writes = server.device(1).updates_written
        gone = server.drop_entry(1, pg.T_ROUTES)
        assert eventually(lambda: held(server, "s2") == want(t, "s2"))
        # exactly the one missing entry went back: no reload, one insert
        assert server.device(1).pipeline_loads == loads
        assert server.device(1).updates_written == writes + 1
        assert server.device(1).write_requests[-1].updates[0].entity.table_entry.match == \
            gone.match
        server.wipe(2)  # restarted blank under an open session: only the cookie says so
        assert eventually(lambda: server.device(2).cookie == PIPE.cookie
                          and held(server, "s3") == want(t, "s3"))
        assert eventually(lambda: ctl.views()["s3"].restores == 1)
        assert ctl.views()["s1"].restores == 0


def test_a_new_intent_is_applied_with_the_fewest_writes(server: FakeP4RuntimeServer) -> None:
    with Controller(addrs(server), PIPE, targets(4), interval=5.0) as ctl:
        ctl.wait_synced(5.0)
        new = targets(None, threshold=None)  # aggregation everywhere, ECN off
        ctl.set_targets(new)
        done = ctl.wait_synced(5.0)  # well before the next periodic pass
        assert all(held(server, n) == want(new, n) for n in NAMES)
        assert all(not d.pipeline and d.diff.modify for d in done.values())
        with pytest.raises(SwitchError, match="fixed set of switches"):
            ctl.set_targets({"s1": new["s1"]})


def test_under_a_higher_election_id_it_stands_by(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    with SwitchClient(a["s2"], PIPE.schema, election_id=(2, 0)) as other:
        assert other.primary
        with Controller(a, PIPE, targets(), interval=0.1) as ctl:
            assert eventually(lambda: ctl.views()["s2"].state == STANDBY)
            assert eventually(lambda: all(ctl.views()[n].state == PRIMARY
                                          for n in ("s1", "s3", "s4")))
            time.sleep(0.4)  # several intervals: nothing is written where it stands by
            assert server.device(1).updates_written == 0
            assert server.device(1).pipeline_loads == 0
            assert ctl.views()["s2"].primary_election_id == (2, 0)
    assert no_worker_threads()


def test_takeover_and_back_and_a_backup_taking_over(server: FakeP4RuntimeServer) -> None:
    a = addrs(server)
    t = targets()
    with Controller(a, PIPE, t, interval=0.1) as ours:
        ours.wait_synced(5.0)
        with SwitchClient(a["s2"], PIPE.schema, election_id=(2, 0)) as other:
            assert other.primary
            assert eventually(lambda: ours.views()["s2"].state == STANDBY)
            assert ours.views()["s2"].primary_election_id == (2, 0)
            server.drop_entry(1, pg.T_ROUTES)  # while the other is primary: not ours to fix
            writes = server.device(1).updates_written
            time.sleep(0.5)  # five of our intervals
            assert server.device(1).updates_written == writes
            assert held(server, "s2") != want(t, "s2")
            assert ours.views()["s1"].state == PRIMARY  # the other switches are unaffected
        # the other controller left: the switch makes ours primary, which repairs at once
        assert eventually(lambda: held(server, "s2") == want(t, "s2"))
        assert ours.views()["s2"].state == PRIMARY
        with Controller(a, PIPE, t, interval=0.1, backup=True) as standby:
            assert eventually(lambda: all(v.state == STANDBY
                                          for v in standby.views().values()))
            ours.stop()
            assert eventually(lambda: all(v.state == PRIMARY
                                          for v in standby.views().values()))
            server.drop_entry(3, pg.T_ROUTES)
            assert eventually(lambda: held(server, "s4") == want(t, "s4"))
            assert standby.views()["s4"].primary_election_id == (0, 1 << 40)
    assert no_worker_threads()


def test_status_json(server: FakeP4RuntimeServer, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    data = BT15.to_dict()
    for i, n in enumerate(BT15.switches):
        data["switches"][n] = ({"grpc": server.address, "device_id": i} if n in NAMES
                               else {"grpc": "127.0.0.1:1"})
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps(data))
    t = targets()
    with Controller(addrs(server), PIPE, t, interval=5.0) as ctl:
        ctl.wait_synced(5.0)
        server.drop_entry(0, pg.T_ROUTES)
        # s5..s15 are unreachable: exit 1, as without --json, and the document says which
        assert main(["status", "--topology", str(topo), "--json"]) == 1
        captured = capsys.readouterr()
        doc = json.loads(captured.out)
        assert "11 of 15 switches could not be read: s5, s6" in captured.err
        s1, s5 = doc["switches"]["s1"], doc["switches"]["s5"]
        assert set(doc["switches"]) == set(BT15.switches)
        assert (s1["reachable"], s1["pipeline"], s1["primary_election_id"]) == \
            (True, PIPE.cookie, 1 << 64)
        # the table entries it holds: 17 routes, one dropped, job 1's result route and its
        # track entry; the ECN default is no entry
        assert s1["entries"] == 18 and "difference" not in s1
        assert (s5["reachable"], s5["pipeline"], s5["entries"],
                s5["primary_election_id"]) == (False, None, 0, None)
        assert "cannot open a P4Runtime session" in s5["error"]
        wl = ROOT / "examples" / "workload-bt15.json"
        assert main(["status", "--topology", str(topo), "--json", "--workload", str(wl),
                     "-k", "4"]) == 1
        doc = json.loads(capsys.readouterr().out)
        d1 = doc["switches"]["s1"]["difference"]
        assert (d1["load_program"], len(d1["missing"]), d1["wrong"], d1["extra"],
                d1["in_intent"]) == (False, 1, [], [], False)
        assert d1["missing"][0].startswith("route 10.0.0.")
        assert doc["switches"]["s2"]["difference"]["in_intent"] is True
    # no controller connected: the reader itself is primary, which is no controller's id
    assert main(["status", "--topology", str(topo), "--json", "--switch", "s1"]) == 0
    s1 = json.loads(capsys.readouterr().out)["switches"]["s1"]
    assert (s1["reachable"], s1["pipeline"], s1["primary_election_id"]) == \
        (True, PIPE.cookie, None)


def test_cli_runs_until_sigterm_and_exits_0(server: FakeP4RuntimeServer, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    data = BT15.to_dict()
    for i, n in enumerate(BT15.switches):
        data["switches"][n] = {"grpc": server.address if n in NAMES else "127.0.0.1:1",
                               "device_id": i}
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps(data))
    wl = ROOT / "examples" / "workload-bt15.json"
    log = tmp_path / "ctl.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "controller", "run",
                                 "--topology", str(topo), "--workload", str(wl), "-k", "4",
                                 "--interval", "0.5"], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT)
    try:
        # four switches served, eleven down: the four reach the intent all the same
        assert eventually(lambda: all(server.device(i).cookie == PIPE.cookie
                                      and server.device(i).updates_written > 0
                                      for i in range(len(NAMES))), 20), log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "s1: connected to" in text and "s1: program loaded; cookie" in text
    assert "s5: no session (cannot open a P4Runtime session: UNAVAILABLE" in text
    assert text.count("s5: no session") == 1  # one line per outage, not one per retry
    assert "controller: stopped on SIGTERM; every session closed" in text
    assert "Traceback" not in text


def test_cli_bad_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    bt = str(ROOT / "topologies" / "bt15.json")
    for bad, says in ((["--interval", "0"], "--interval: expected a number in [0.05, 86400]"),
                      (["--election-id", "x"], "--election-id: expected HIGH[:LOW]"),
                      (["--backup", "--election-id", "3"], "not allowed with argument")):
        with pytest.raises(SystemExit) as exc:
            main(["controller", "run", "--topology", bt, *bad])
        assert exc.value.code == 2 and says in capsys.readouterr().err
    assert main(["controller", "run", "--topology", bt, "--workload", "nope.json"]) == 2
    assert "nope.json: cannot read" in capsys.readouterr().err
