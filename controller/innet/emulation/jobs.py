"""Jobs admitted to and released from the network that is up (`innet job ...`).

`JobDesk` holds what the running network knows of its jobs: the planner's `ClusterState`
(the admitted jobs), the queue of jobs that wait (arrival order) and one `JobRecord` per
job. It plans with the pure `innet.plan.cluster.admit` and hands the resulting cluster
state to `install`, which moves the switches (through the network's reconciling controller,
only the difference) and says how many writes that took; then `launch` starts the job's
processes on its hosts (innet.emulation.jobrun). A job is `queued`, `running`, `done`,
`failed` or `cancelled`; `tick` (the network's monitor calls it) ends the jobs whose
processes ended, releases their entries, groups and cells, and admits the queued jobs that
now fit, in arrival order (docs/cluster-planner.md).

A network stays up for days of jobs, so the desk keeps only the latest `keep_ended` ended
jobs in memory: each ended job's last row goes to `archive` (the network writes it into the
job's folder as job.json) and the oldest ended records beyond the bound are let go. Kept
without bound, every `job list` (and every sample of the live view) built a row for every job
ever run, a transient that grew with the network's age and left the process's heap larger
after each one (the hour soak's growing memory, docs/cluster-planner.md "Hours of jobs").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from innet.aggpacket import DEFAULT_JOB_SLOTS
from innet.cassini.model.profiles import JOB_NAME, JobProfile, load_jobs, zoo_job
from innet.emulation.jobclient import ENDED_KEPT
from innet.emulation.jobrun import RunScale
from innet.errors import InputError, quote
from innet.memory import release_freed_memory
from innet.plan.circles import job_circles
from innet.plan.cluster import POLICIES, Admission, ClusterState, JobRequest, Wait, admit
from innet.topology import Topology

DEFAULT_POLICY = "soar+cassini"
DEFAULT_K = 4
JOB_FIELDS = {"name", "model", "profile_file", "workers", "iterations", "values", "k", "slots"}


@dataclass(frozen=True)
class Installed:
    """What one move of the switches did: writes in all, and `+i ~m -d` per switch changed."""

    writes: int
    switches: Mapping[str, str]


Install = Callable[[ClusterState], Installed]


class JobRun(Protocol):
    """A job's processes as the desk sees them (innet.emulation.jobrun.AgentRun)."""

    def outcome(self) -> tuple[str, str | None] | None:
        """None while it runs; ("done", None) or ("failed", why) once it ended."""

    def stats(self) -> dict[str, Any]:
        """iterations_done, mean_iteration_ms, marks, retransmissions, sums_exact, ..."""

    def stop(self) -> None:
        """Every process of the job ended."""


Launch = Callable[[Admission], JobRun]
# keeps an ended job's last `job list` row on disk; False when it could not (nothing let go)
Archive = Callable[[dict[str, Any]], bool]
ENDED = ("done", "failed", "cancelled")
NO_TRAFFIC = {"iterations_done": 0, "mean_iteration_ms": None, "marks": None,
              "retransmissions": None, "sums_exact": None}


@dataclass
class JobRecord:
    """One job as `job list` shows it: its request, state, plan once admitted, its writes."""

    request: JobRequest
    policy: str
    model: str
    state: str = "queued"
    admission: Admission | None = None
    writes: int = 0  # what admitting it wrote
    release_writes: int = 0  # what releasing it wrote
    switches: Mapping[str, str] = field(default_factory=dict)
    why: str | None = None
    # the job's processes while it runs; None once it ended, when `stats` holds their last
    # figures: a run keeps every progress line of every worker (about 1 kB each), which a
    # network up for hours of jobs must not hold for the jobs that left
    run: JobRun | None = None
    submitted_at: float = field(default_factory=time.time)
    arrives_at: float | None = None  # a later arrival (--at, a trace): queued until then
    planned: bool = False  # the planner has seen it since it arrived
    admitted_at: float | None = None
    closed_at: float | None = None  # when the desk ended it (done, failed, cancelled)
    stats: dict[str, Any] = field(default_factory=lambda: dict(NO_TRAFFIC))
    on_disk: bool = False  # its last row is archived: the desk may let it go

    @property
    def name(self) -> str:
        return self.request.name

    def to_dict(self, circles: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The `job list --json` row (traffic fields empty until its processes report);
        `circles`: CASSINI's circles of the links it shares with running jobs (the desk
        knows them: they depend on the other jobs)."""
        if self.run is not None and self.state == "running":
            self.stats = self.run.stats()
        a = self.admission
        return {"name": self.name, "state": self.state, "policy": self.policy,
                "model": self.model, "workers": self.request.workers,
                "hosts": list(a.hosts) if a else [], "blue": list(a.blue) if a else [],
                "shift_ms": a.shift_ms if a else None, "job": a.job if a else None,
                "slots": self.request.slots,
                "slot_bases": dict(a.slot_bases) if a else {},
                "phi": a.phi if a else None,
                "iterations": self.request.iterations, "values": self.request.values,
                **self.stats, "writes": self.writes, "release_writes": self.release_writes,
                "closed_at": self.closed_at,
                "switches": dict(self.switches), "why": self.why,
                "circles": list(circles or [])}


@dataclass
class JobDesk:
    """The running network's jobs; every change of the admitted set goes through `install`."""

    state: ClusterState
    install: Install
    launch: Launch
    records: dict[str, JobRecord] = field(default_factory=dict)
    archive: Archive | None = None
    # ended jobs kept in `records` (the oldest let go first, once archived); None: all of
    # them, for a run that reads every job at its end (innet run cluster)
    keep_ended: int | None = ENDED_KEPT
    archived: int = 0  # ended jobs let go from memory
    _names: set[str] = field(default_factory=set)  # every name used, so none is given twice

    def names(self) -> Container[str]:
        """Every job name this desk has seen, the let-go ones included (a default name is
        never one of them: two jobs would share a folder)."""
        return self._names

    def active(self) -> list[str]:
        """Jobs that run or wait (what a --workload deploy would fight with)."""
        return [r.name for r in self.records.values() if r.state not in ENDED]

    def queue(self, now: float | None = None) -> list[JobRecord]:
        """The jobs that have arrived and wait, in arrival order."""
        now = time.time() if now is None else now
        waiting = [r for r in self.records.values() if r.state == "queued"
                   and (r.arrives_at is None or r.arrives_at <= now)]
        return sorted(waiting, key=lambda r: r.arrives_at or r.submitted_at)

    def submit(self, request: JobRequest, policy: str, model: str,
               at: float | None = None) -> dict[str, Any]:
        """Admit the job now (installing its difference) or queue it with the reason;
        `at`: a later arrival (wall-clock time), when the monitor's tick takes it."""
        old = self.records.get(request.name)
        if old is not None and old.state not in ENDED:
            raise InputError(f"job {quote(request.name)} is already {old.state}")
        if policy not in POLICIES:
            raise InputError(f"unknown policy {quote(policy)}; choose from "
                             f"{', '.join(POLICIES)}")
        request.check(self.state.topology)
        record = JobRecord(request, policy, model)
        self.records.pop(request.name, None)
        self.records[request.name] = record
        self._names.add(request.name)
        if at is not None and at > time.time():
            record.arrives_at = at
            record.why = f"arrives at {time.strftime('%H:%M:%S', time.localtime(at))}"
        else:
            self.try_admit(record)
        return record.to_dict(self.circles().get(record.name))

    def try_admit(self, record: JobRecord) -> bool:
        """Plan the job on the network as it is; install it, or leave it queued saying why."""
        record.planned = True
        got = admit(self.state, record.request, record.policy)
        if isinstance(got, Wait):
            record.why = got.reason
            return False
        self.state = self.state.with_job(got)
        record.state, record.admission, record.why = "running", got, None
        record.admitted_at = time.time()
        done = self.install(self.state)
        record.writes, record.switches = done.writes, dict(done.switches)
        try:
            record.run = self.launch(got)
        except (OSError, RuntimeError) as exc:
            self.end(record, "failed", f"its processes did not start: {exc}")
        return True

    def end(self, record: JobRecord, state: str, why: str | None) -> list[str]:
        """Stop a running job's processes, keep their last figures, release its entries,
        groups and cells; then admit the queued jobs, in arrival order, that fit now."""
        if record.run is not None:
            record.run.stop()
            record.stats = record.run.stats()
            record.run = None  # its figures are kept; its lines and processes go
        record.state, record.why, record.closed_at = state, why, time.time()
        self.state = self.state.without(record.name)
        record.release_writes = self.install(self.state).writes
        self.retire(record)
        admitted = [r.name for r in self.queue() if self.try_admit(r)]
        release_freed_memory()  # what the job's run and plan held, back to the kernel
        return admitted

    def retire(self, record: JobRecord) -> None:
        """An ended job's row to the archive; then the oldest ended records beyond
        `keep_ended` let go (only those archived: a row that could not be written, or a desk
        without an archive, stays in memory)."""
        if self.archive is None:
            return
        record.on_disk = self.archive(record.to_dict())
        if self.keep_ended is None:
            return
        ended = [r for r in self.records.values() if r.state in ENDED and r.on_disk]
        ended.sort(key=lambda r: r.closed_at or 0.0)
        for old in ended[:max(0, len(ended) - self.keep_ended)]:
            del self.records[old.name]
            self.archived += 1

    def tick(self) -> list[str]:
        """End the jobs whose processes ended (done, or failed saying why); returns the
        queued jobs that were admitted into the room they left."""
        admitted: list[str] = []
        for record in list(self.records.values()):
            if record.state == "running" and record.run is not None:
                got = record.run.outcome()
                if got is not None:
                    admitted += self.end(record, *got)
        now = time.time()
        for record in self.queue(now):  # jobs whose arrival has come (--at, a trace)
            if not record.planned and self.try_admit(record):
                admitted.append(record.name)
        return admitted

    def shutdown(self) -> None:
        """The network is going down: every running job's processes stopped, and every job
        not ended (running or still waiting) cancelled, its last row archived, so that the
        folder holds every job the network was given."""
        for record in self.records.values():
            if record.state in ENDED:
                continue
            if record.run is not None:
                record.run.stop()
                record.stats = record.run.stats()
                record.run = None
            record.why = ("the network went down" if record.state == "running"
                          else "the network went down before it ran")
            record.state, record.closed_at = "cancelled", time.time()
            if self.archive is not None:
                record.on_disk = self.archive(record.to_dict())

    def cancel(self, name: str) -> dict[str, Any]:
        """Release the job (entries, group, slot cells) or take it off the queue; then admit
        the queued jobs, in arrival order, that fit into the room it left."""
        record = self.records.get(name)
        if record is None or record.state in ENDED:
            known = ", ".join(self.active()) or "none"
            raise InputError(f"no queued or running job {quote(name)} (jobs: {known})")
        admitted: list[str] = []
        if record.state == "running":
            admitted = self.end(record, "cancelled", None)
        else:  # it waited: nothing to release
            record.state, record.why, record.closed_at = "cancelled", None, time.time()
            self.retire(record)
        return {"cancelled": record.to_dict(), "admitted": admitted}

    def circles(self) -> dict[str, list[dict[str, Any]]]:
        """Per running job, CASSINI's circles of the links it shares with the others."""
        return job_circles(self.state.topology, self.state.running)

    def listing(self) -> dict[str, Any]:
        """The `job list` answer: the jobs in memory, and how many ended ones were let go."""
        circles = self.circles()
        return {"jobs": [r.to_dict(circles.get(r.name)) for r in self.records.values()],
                "archived": self.archived}


def job_request(data: Any, topo: Topology, taken: Container[str],
                scale: RunScale | None = None) -> tuple[JobRequest, str]:
    """The job of a `job_submit` request, checked field by field; and its model's name.
    `profile_file` is read here, at the edge (the front end sends it resolved). Values per
    iteration default to the profile's volume at the run's scale."""
    if not isinstance(data, dict):
        raise InputError('a job is a JSON object {"model" or "profile_file", "workers", '
                         '"iterations", ...}')
    unknown = set(data) - JOB_FIELDS
    if unknown:
        raise InputError(f"unknown job field(s) {', '.join(sorted(unknown))}; the fields are "
                         f"{', '.join(sorted(JOB_FIELDS))}")
    profile = job_profile(data)
    name = data.get("name") or default_name(profile.model or profile.name, taken)
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise InputError(f"job name {quote(name)} is not a name (letters, digits, . _ + -)")
    ints: dict[str, int] = {}
    for f, d in (("workers", None), ("iterations", None),
                 ("values", (scale or RunScale()).values(profile, topo)),
                 ("k", DEFAULT_K), ("slots", DEFAULT_JOB_SLOTS)):
        v = data.get(f, d)
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"job {quote(name)}: {f} must be an integer, got {quote(v)}")
        ints[f] = v
    request = JobRequest(name, profile, ints["workers"], ints["iterations"], ints["values"],
                         ints["slots"], ints["k"])
    request.check(topo)
    return request, profile.model or profile.name


def job_profile(data: Mapping[str, Any]) -> JobProfile:
    """The zoo model's profile, or the first job of a jobs file."""
    model, path = data.get("model"), data.get("profile_file")
    if (model is None) == (path is None):
        raise InputError("give the job a model of the zoo or a profile file (one of them)")
    if model is not None:
        if not isinstance(model, str):
            raise InputError(f"model must be a name, got {quote(model)}")
        return zoo_job(model)
    if not isinstance(path, str):
        raise InputError(f"profile_file must be a file name, got {quote(path)}")
    return load_jobs(Path(path))[0]


def default_name(model: str, taken: Container[str]) -> str:
    """`vgg19-1`, `vgg19-2`, ...: the model in lower case and the first free number."""
    stem = re.sub(r"[^a-z0-9_.+-]", "", model.lower()) or "job"
    n = 1
    while f"{stem}-{n}" in taken:
        n += 1
    return f"{stem}-{n}"
