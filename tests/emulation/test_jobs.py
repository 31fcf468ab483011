"""Jobs admitted to and released from a network that is up, through `LiveNetwork.handle`
with a stand-in for the network's controller (no Mininet): what each request installs, the
queue, and the rule that a --workload plan and admitted jobs never share the switches."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from innet.cli.entry import main
from innet.emulation import live
from innet.emulation.control import LiveNetwork
from innet.errors import InputError
from innet.p4rt.deploy import SwitchDeploy, diff, diff_replication
from innet.p4rt.entities import Entry, MulticastGroup
from innet.plan.cluster import Admission
from innet.plan.intent import IntentOptions, build_intent
from innet.plan.jobintent import intent_changes
from innet.topology import Topology, load_topology

ROOT = Path(__file__).resolve().parents[2]
LEAFSPINE = ROOT / "topologies" / "leafspine24.json"


class FakeNetwork:
    """What the reconciling controller does with an intent, without switches: it holds the
    entries and groups and writes only the difference."""

    def __init__(self, entries: Mapping[str, Sequence[Entry]],
                 groups: Mapping[str, Sequence[MulticastGroup]]) -> None:
        self.entries = {s: tuple(es) for s, es in entries.items()}
        self.groups = {s: tuple(gs) for s, gs in groups.items()}

    def set_intent(self, entries: Mapping[str, Sequence[Entry]],
                   replication: Mapping[str, Sequence[Any]]) -> dict[str, SwitchDeploy]:
        out = {}
        for s in entries:
            d = diff(self.entries.get(s, ()), entries[s])
            r = diff_replication(self.groups.get(s, ()), replication.get(s, ()))
            out[s] = SwitchDeploy(s, "fake", False, d, 0.0, replication=r)
        self.entries = {s: tuple(es) for s, es in entries.items()}
        self.groups = {s: tuple(gs) for s, gs in replication.items()}
        return out


class ScriptedRun:
    """A job's processes as the test scripts them: running until told how they ended."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.ended: tuple[str, str | None] | None = None
        self.iterations = 0
        self.stopped = False

    def outcome(self) -> tuple[str, str | None] | None:
        return self.ended

    def stats(self) -> dict[str, Any]:
        return {"iterations_done": self.iterations, "mean_iteration_ms": 100.0,
                "marks": 0, "retransmissions": 0, "sums_exact": True}

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def topo() -> Topology:
    return load_topology(LEAFSPINE)


def up(topo: Topology, options: IntentOptions | None = None, **live_options: Any
       ) -> LiveNetwork:
    intent = build_intent(options or IntentOptions(), topo)
    fake = FakeNetwork(intent.entries(), intent.replication())
    runs: dict[str, ScriptedRun] = {}

    def launch(a: Admission) -> ScriptedRun:
        runs[a.name] = ScriptedRun(a)
        return runs[a.name]

    net = LiveNetwork(topo, fake, intent, options or IntentOptions(),  # type: ignore[arg-type]
                      launch=launch, **live_options)
    net.runs = runs  # type: ignore[attr-defined]
    return net


def submit(net: LiveNetwork, name: str, workers: Any = 6, **extra: Any) -> dict[str, Any]:
    job = {"name": name, "model": "VGG19", "workers": workers, "iterations": 20, **extra}
    return net.handle({"op": "job_submit", "job": job})


def listed(net: LiveNetwork) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in net.handle({"op": "job_list"})["jobs"]}


def test_jobs_are_admitted_queued_and_released(topo: Topology) -> None:
    net = up(topo)
    a = submit(net, "a")
    assert a["state"] == "running" and a["policy"] == "soar+cassini" and a["writes"] > 0
    before = net.intent
    b = submit(net, "b")
    # b wrote only its own entries and group: as many as the intents differ, on its tree
    changes = intent_changes(before, net.intent)
    assert b["writes"] == sum(changes.values()) and set(b["switches"]) == set(changes)
    assert not set(a["hosts"]) & set(b["hosts"]) and len(b["hosts"]) == 7
    c = submit(net, "c", workers=10)  # 11 hosts; 10 are free
    assert c["state"] == "queued" and "no free hosts" in c["why"]
    rows = listed(net)
    assert [rows[n]["state"] for n in "abc"] == ["running", "running", "queued"]
    assert rows["c"]["iterations_done"] == 0 and rows["c"]["mean_iteration_ms"] is None
    assert rows["c"]["marks"] is None and rows["c"]["sums_exact"] is None
    assert rows["a"]["sums_exact"] is True  # what its processes report
    assert rows["b"]["blue"] and rows["b"]["shift_ms"] is not None
    gone = net.handle({"op": "job_cancel", "name": "a"})
    assert gone["cancelled"]["state"] == "cancelled" and gone["admitted"] == ["c"]
    assert net.runs["a"].stopped  # type: ignore[attr-defined]
    rows = listed(net)
    assert rows["c"]["state"] == "running" and rows["c"]["why"] is None
    assert rows["a"]["release_writes"] > 0
    fake = net.cn
    assert isinstance(fake, FakeNetwork)
    assert fake.entries == {s: tuple(es) for s, es in net.intent.entries().items()}
    assert {j.workload.job for j in net.intent.jobs} == {rows["b"]["job"], rows["c"]["job"]}


def test_a_job_that_ends_releases_its_room_to_the_queue(topo: Topology) -> None:
    """The monitor's tick: a job whose processes ended is done (or failed, saying why), its
    entries and group are gone from the switches, its figures stay in the list, and the
    queued job that needed its hosts starts."""
    net = up(topo)
    submit(net, "a")
    submit(net, "b")
    submit(net, "c", workers=10)
    runs = net.runs  # type: ignore[attr-defined]
    assert net.jobs.tick() == []  # nothing ended yet
    runs["a"].iterations = 20
    runs["a"].ended = ("done", None)
    assert net.jobs.tick() == ["c"]
    rows = listed(net)
    assert rows["a"]["state"] == "done" and rows["a"]["iterations_done"] == 20
    assert rows["a"]["release_writes"] > 0 and runs["a"].stopped
    assert rows["c"]["state"] == "running"
    runs["b"].ended = ("failed", "worker h9's agent died (exit -9) before the end")
    net.jobs.tick()
    rows = listed(net)
    assert rows["b"]["state"] == "failed" and "h9" in rows["b"]["why"]
    fake = net.cn
    assert isinstance(fake, FakeNetwork)
    assert fake.entries == {s: tuple(es) for s, es in net.intent.entries().items()}
    assert {j.workload.job for j in net.intent.jobs} == {rows["c"]["job"]}
    net.close()
    assert listed(net)["c"]["state"] == "cancelled" and runs["c"].stopped


def test_a_job_whose_processes_do_not_start_fails_and_is_released(topo: Topology) -> None:
    intent = build_intent(IntentOptions(), topo)
    fake = FakeNetwork(intent.entries(), intent.replication())

    def launch(a: Admission) -> ScriptedRun:
        raise RuntimeError("the destination did not start")

    net = LiveNetwork(topo, fake, intent, IntentOptions(),  # type: ignore[arg-type]
                      launch=launch)
    row = submit(net, "a")
    assert row["state"] == "failed" and "did not start" in row["why"]
    assert fake.entries == {s: tuple(es) for s, es in intent.entries().items()}


def test_cancelling_a_queued_job_takes_it_off_the_queue(topo: Topology) -> None:
    net = up(topo)
    submit(net, "big", workers=20)
    queued = submit(net, "late", workers=6)
    assert queued["state"] == "queued"
    assert net.handle({"op": "job_cancel", "name": "late"})["admitted"] == []
    assert listed(net)["late"]["state"] == "cancelled"
    with pytest.raises(InputError, match="no queued or running job"):
        net.handle({"op": "job_cancel", "name": "late"})
    again = submit(net, "late", workers=2)  # a cancelled name may be used again
    assert again["state"] == "running"


def test_a_default_name_and_bad_requests(topo: Topology) -> None:
    net = up(topo)
    first = net.handle({"op": "job_submit", "job": {"model": "vgg19", "workers": 2,
                                                    "iterations": 3}, "policy": "base"})
    assert first["name"] == "vgg19-1" and first["blue"] == [] and first["shift_ms"] == 0.0
    with pytest.raises(InputError, match="already running"):
        submit(net, "vgg19-1")
    with pytest.raises(InputError, match="unknown job field"):
        submit(net, "x", gpus=3)
    with pytest.raises(InputError, match="unknown policy"):
        net.handle({"op": "job_submit", "policy": "fastest",
                    "job": {"model": "VGG19", "workers": 2, "iterations": 3}})
    with pytest.raises(InputError, match="not in the zoo"):
        submit(net, "y", model="NoSuchNet")
    with pytest.raises(InputError, match="workers must be an integer"):
        submit(net, "z", workers="six")


def test_a_workload_plan_and_jobs_never_share_the_switches(topo: Topology,
                                                           tmp_path: Path) -> None:
    workload = tmp_path / "workload.json"
    workload.write_text('{"job": 1, "destination": "h1", "workers": ["h2", "h5"]}')
    planned = up(topo, IntentOptions(workloads=(str(workload),)))
    with pytest.raises(InputError, match="brought up without --workload"):
        submit(planned, "a")
    net = up(topo)
    submit(net, "a")
    with pytest.raises(InputError, match="cancel them first"):
        net.handle({"op": "deploy", "options": {"k": 2}})
    net.handle({"op": "job_cancel", "name": "a"})
    assert net.handle({"op": "deploy", "options": {"k": 2}})["writes"] == 0


def test_a_profile_file_gives_the_job_its_profile(topo: Topology) -> None:
    net = up(topo)
    jobs = ROOT / "examples" / "jobs-4-leafspine.json"
    row = net.handle({"op": "job_submit", "policy": "soar",
                      "job": {"profile_file": str(jobs), "workers": 3, "iterations": 2}})
    assert row["state"] == "running" and row["shift_ms"] == 0.0 and row["name"].endswith("-1")
    with pytest.raises(InputError, match="one of them"):
        net.handle({"op": "job_submit", "job": {"model": "VGG19", "profile_file": str(jobs),
                                                "workers": 3, "iterations": 2}})


@pytest.fixture
def served(topo: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[LiveNetwork]:
    """A LiveNetwork (over the stand-in) behind a real control socket, recorded as the
    network that is up in the test's own folder."""
    monkeypatch.setattr(live, "STATE_DIR", tmp_path / "state")
    net = up(topo)
    sock = tmp_path / "control.sock"
    record = live.NetworkRecord(os.getpid(), str(tmp_path), str(LEAFSPINE), str(sock), 0.0)
    with live.claimed(record):
        server = live.ControlServer(sock, net.handle)
        try:
            yield net
        finally:
            server.close()


def test_the_commands_reach_the_network_over_its_socket(
        served: LiveNetwork, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "submit", "--model", "VGG19", "--workers", "6", "--iterations", "20",
                 "--name", "a"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("job a running: destination h") and "writes" in line
    assert main(["job", "submit", "--model", "VGG19", "--workers", "20", "--iterations", "2",
                 "--name", "big", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "queued"
    assert main(["job", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["jobs"]
    assert [(r["name"], r["state"]) for r in rows] == [("a", "running"), ("big", "queued")]
    assert main(["job", "list"]) == 0
    assert "no free hosts" in capsys.readouterr().out
    assert main(["job", "cancel", "a"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"job a cancelled; released with {served.jobs.records['a'].release_writes} writes",
        "job big admitted from the queue"]
    assert main(["job", "cancel", "a"]) == 2
    assert "no queued or running job 'a'" in capsys.readouterr().err


def test_without_a_network_the_commands_say_how_to_start_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(live, "STATE_DIR", tmp_path / "state")
    assert main(["job", "list"]) == 2
    assert "no network is up" in capsys.readouterr().err


def test_the_prompt_builds_the_same_request() -> None:
    pytest.importorskip("mininet.cli")
    from innet.cli.net_prompt import prompt_submit

    request = prompt_submit(["--model", "VGG19", "--workers", "2", "--iterations", "3",
                             "-k", "1"])
    assert request == {"op": "job_submit", "policy": "soar+cassini",
                       "job": {"model": "VGG19", "workers": 2, "iterations": 3, "k": 1}}
    with pytest.raises(InputError, match="job submit: --workers and --iterations are required"):
        prompt_submit(["--model", "VGG19"])


def test_a_job_that_arrives_later_waits_for_its_time(topo: Topology) -> None:
    """`--at`: the job is queued, saying when it arrives, and not planned before then; the
    monitor's first tick after its time admits it."""
    net = up(topo)
    row = net.handle({"op": "job_submit", "at_s": 0.3,
                      "job": {"name": "later", "model": "VGG19", "workers": 2,
                              "iterations": 3}})
    assert row["state"] == "queued" and row["why"].startswith("arrives at")
    assert net.jobs.tick() == [] and listed(net)["later"]["state"] == "queued"
    time.sleep(0.35)
    assert net.jobs.tick() == ["later"] and listed(net)["later"]["state"] == "running"
    with pytest.raises(InputError, match="at_s"):
        net.handle({"op": "job_submit", "at_s": -1,
                    "job": {"model": "VGG19", "workers": 2, "iterations": 3}})


def test_a_trace_is_submitted_whole_with_its_arrivals_scaled(topo: Topology,
                                                             tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"trace": "t", "jobs": [
        {"name": "one", "model": "VGG19", "gpus": 3, "arrival_ms": 0.0, "iterations": 4},
        {"name": "two", "model": "GPT-2", "gpus": 2, "arrival_ms": 250.0,
         "iterations": 5}]}))
    net = up(topo)
    before = time.time()
    rows = net.handle({"op": "trace_submit", "file": str(trace), "policy": "soar"})["jobs"]
    assert [(r["name"], r["state"], r["workers"], r["iterations"]) for r in rows] == [
        ("one", "running", 3, 4), ("two", "queued", 2, 5)]
    second = net.jobs.records["two"]
    assert second.arrives_at is not None  # 250 ms on the jobs' clock, 4x slower here
    assert second.arrives_at - before == pytest.approx(1.0, abs=0.5)
    with pytest.raises(InputError, match="already run or wait: one, two"):
        net.handle({"op": "trace_submit", "file": str(trace)})


def test_the_command_line_refuses_sizes_with_a_trace(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["job", "submit", "--trace", str(tmp_path / "t.json"), "--workers", "3"]) == 2
    assert "drop --workers" in capsys.readouterr().err
    assert main(["job", "submit", "--model", "VGG19", "--workers", "3"]) == 2
    assert "--workers and --iterations are required" in capsys.readouterr().err


def test_an_ended_job_keeps_its_figures_not_its_processes(topo: Topology) -> None:
    """A network up for hours must not hold every progress line of every job that left:
    once a job ends (done, failed, cancelled, or the network going down) its record keeps
    the last figures and lets its run go."""
    net = up(topo)
    for name in ("a", "b", "c"):
        submit(net, name, workers=4)
    runs = net.runs  # type: ignore[attr-defined]
    runs["a"].iterations, runs["a"].ended = 20, ("done", None)
    net.jobs.tick()
    net.handle({"op": "job_cancel", "name": "b"})
    net.jobs.shutdown()
    records = net.jobs.records
    assert [records[n].state for n in "abc"] == ["done", "cancelled", "cancelled"]
    assert all(records[n].run is None for n in "abc")
    assert all(runs[n].stopped for n in "bc")
    rows = listed(net)
    assert rows["a"]["iterations_done"] == 20 and rows["a"]["sums_exact"] is True
    assert rows["c"]["why"] == "the network went down"


def test_a_network_keeps_the_latest_ended_jobs_and_the_rest_on_disk(topo: Topology,
                                                                    tmp_path: Path) -> None:
    """A network up for days lists (and holds) only its latest `keep_ended` ended jobs; every
    ended job's last row is in its folder's job.json, none lost, and a default name is never
    given again to a job that shares its folder with one let go."""
    net = up(topo, folder=tmp_path, keep_ended=2)
    runs = net.runs  # type: ignore[attr-defined]
    names = []
    for _ in range(5):
        row = net.handle({"op": "job_submit",
                          "job": {"model": "VGG19", "workers": 2, "iterations": 3}})
        names.append(row["name"])
        runs[row["name"]].iterations, runs[row["name"]].ended = 3, ("done", None)
        net.jobs.tick()
    queued = net.handle({"op": "job_submit", "at_s": 60, "job": {
        "name": "waits", "model": "VGG19", "workers": 2, "iterations": 3}})
    net.handle({"op": "job_cancel", "name": "waits"})
    assert queued["state"] == "queued"
    answer = net.handle({"op": "job_list"})
    assert [r["name"] for r in answer["jobs"]] == [names[4], "waits"]
    assert answer["archived"] == 4 and answer["archive"] == str(tmp_path / "jobs")
    on_disk = {p.parent.name: json.loads(p.read_text())
               for p in (tmp_path / "jobs").glob("*/job.json")}
    assert set(on_disk) == {*names, "waits"}
    assert all(on_disk[n]["state"] == "done" and on_disk[n]["iterations_done"] == 3
               and on_disk[n]["release_writes"] > 0 for n in names)
    assert on_disk["waits"]["state"] == "cancelled"
    assert len(set(names)) == 5  # vgg19-1 was let go, yet the next default is vgg19-6
    nxt = net.handle({"op": "job_submit",
                      "job": {"model": "VGG19", "workers": 2, "iterations": 3}})
    assert nxt["name"] == "vgg19-6"


def test_going_down_archives_every_job_it_had_not_ended(topo: Topology,
                                                        tmp_path: Path) -> None:
    """The network going down cancels the running job and the one still waiting for its
    time, and writes both rows to their folders beside the ended job's: none lost."""
    net = up(topo, folder=tmp_path)
    runs = net.runs  # type: ignore[attr-defined]
    submit(net, "ran", workers=2)
    runs["ran"].ended = ("done", None)
    net.jobs.tick()
    submit(net, "runs", workers=2)
    net.handle({"op": "job_submit", "at_s": 600, "job": {
        "name": "waits", "model": "VGG19", "workers": 2, "iterations": 3}})
    net.jobs.shutdown()
    on_disk = {p.parent.name: json.loads(p.read_text())
               for p in (tmp_path / "jobs").glob("*/job.json")}
    assert {n: (r["state"], r["why"]) for n, r in on_disk.items()} == {
        "ran": ("done", None), "runs": ("cancelled", "the network went down"),
        "waits": ("cancelled", "the network went down before it ran")}
    assert runs["runs"].stopped and "waits" not in runs


def test_without_a_folder_no_ended_job_is_let_go(topo: Topology) -> None:
    """With nowhere to keep them (a desk without an archive), ended jobs stay listed."""
    net = up(topo, keep_ended=1)
    runs = net.runs  # type: ignore[attr-defined]
    for name in "abc":
        submit(net, name, workers=2)
        runs[name].ended = ("done", None)
        net.jobs.tick()
    answer = net.handle({"op": "job_list"})
    assert [r["name"] for r in answer["jobs"]] == ["a", "b", "c"] and answer["archived"] == 0


def test_a_row_that_cannot_be_written_keeps_its_job_in_memory(topo: Topology,
                                                               tmp_path: Path) -> None:
    """Where the jobs' folder cannot be made (here a file stands in its place; a full disk
    alike) the monitor goes on ending jobs and lets none of them go: nothing is lost."""
    (tmp_path / "jobs").write_text("not a folder")
    net = up(topo, folder=tmp_path, keep_ended=1)
    runs = net.runs  # type: ignore[attr-defined]
    for name in "abc":
        submit(net, name, workers=2)
        runs[name].ended = ("done", None)
        assert net.jobs.tick() == []
    answer = net.handle({"op": "job_list"})
    assert [(r["name"], r["state"]) for r in answer["jobs"]] == [
        ("a", "done"), ("b", "done"), ("c", "done")]
    assert answer["archived"] == 0
