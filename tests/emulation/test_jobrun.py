"""How `AgentRun` reads a job's end from its processes and progress files (no Mininet: the
processes are stand-ins that end when the test says)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from innet.cassini.model.profiles import load_jobs
from innet.emulation.jobrun import AgentRun, RunScale
from innet.plan.cluster import Admission, ClusterState, JobRequest, admit
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


class Process:
    """A process that is running until `exit_on_poll` says on which poll() it exits; it
    can run a last action (an agent's last progress line) just before it exits."""

    def __init__(self, exit_on_poll: int | None = None, last: Any = None) -> None:
        self.polls, self.exit_on_poll, self.last, self.code = 0, exit_on_poll, last, None

    def poll(self) -> int | None:
        self.polls += 1
        if self.code is None and self.exit_on_poll is not None \
                and self.polls >= self.exit_on_poll:
            if self.last is not None:
                self.last()
            self.code = 0
        return self.code


def admission() -> Admission:
    topo = load_topology(ROOT / "topologies" / "leafspine24.json")
    profile = load_jobs(str(ROOT / "examples" / "jobs-vgg19-pair.json"))[0]
    got = admit(ClusterState(topo), JobRequest("a", profile, 2, 1, 64), "soar")
    assert isinstance(got, Admission)
    return got


def test_an_agent_that_ends_while_its_job_is_read_is_not_taken_for_dead(tmp_path: Path
                                                                        ) -> None:
    """The agent writes its end line and exits just as the job is looked at: the job is
    done, not `failed: agent died before the end` (the soak met this once its controller
    was slow)."""
    a = admission()
    workers = dict.fromkeys(a.workers)
    run = AgentRun(a, tmp_path, RunScale(), Process(), {})
    for h in workers:
        def finish(h: str = h) -> None:
            with run.progress_file(h).open("a") as f:
                f.write(json.dumps({"end": True, "complete": True, "worker": h}) + "\n")
        run.workers[h] = Process(exit_on_poll=2, last=finish)
    assert run.outcome() is None  # first look: every agent runs
    assert run.outcome() == ("done", None)


def test_an_agent_gone_without_its_end_line_fails_the_job(tmp_path: Path) -> None:
    a = admission()
    run = AgentRun(a, tmp_path, RunScale(), Process(),
                   {h: Process(exit_on_poll=1) for h in a.workers})
    state, why = run.outcome() or (None, None)
    assert state == "failed" and why == f"worker {a.workers[0]}'s agent died (exit 0) " \
                                        "before the end"


def test_progress_is_read_once_and_a_line_being_written_waits(tmp_path: Path) -> None:
    a = admission()
    h = a.workers[0]
    run = AgentRun(a, tmp_path, RunScale(), Process(), {h: Process()})
    line = json.dumps({"iteration": 0, "complete": True})
    with run.progress_file(h).open("w") as f:
        f.write(line + "\n" + line.replace("0", "1") + "\n" + line[:10])
    run.read()
    assert [x["iteration"] for x in run.lines[h]] == [0, 1]
    run.read()  # nothing new: nothing added twice
    assert len(run.lines[h]) == 2
    with run.progress_file(h).open("a") as f:
        f.write(line.replace("0", "2")[10:] + "\n")
    run.read()
    assert [x["iteration"] for x in run.lines[h]] == [0, 1, 2]
