"""Job profiles: what one training job puts on the network during one iteration.

A profile is data, never code: an iteration time and the Up phases (offset, duration, Gbps)
within it; the Down phases (compute) are the gaps, at demand 0. It comes from a jobs file,
from the shipped model zoo (`controller/innet/data/model_zoo.json`, illustrative numbers) or from a
packet capture (`innet.cassini.model.pcap_profile`). Everything a user can get wrong is refused
here with the job and field named, so the planners downstream can trust their input.

```json
{"jobs": [{"name": "a", "iteration_ms": 200, "gpus": 2,
           "phases": [{"start_ms": 0, "duration_ms": 80, "gbps": 40}]},
          {"name": "b", "model": "VGG19"},
          {"name": "c", "iteration_ms": 100, "demand_gbps": [0, 0, 30, 30]}]}
```
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from innet.errors import InputError, finite_number, parse_json, quote, read_text

DEFAULT_GPUS = 2
DEFAULT_WORK_MS = 3_600_000.0
# matched whole and in ASCII: `$` lets a trailing newline through, `\w` takes any script
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
JOB_NAME_RULE = "a letter or digit then letters, digits, '.', '_', '+' or '-' (ASCII)"
_JOB_FIELDS = {"name", "model", "iteration_ms", "phases", "demand_gbps", "gpus", "hosts",
               "waited_ms", "work_ms", "comment"}
_PROFILE_FIELDS = {"iteration_ms", "phases", "demand_gbps"}
_TOP_FIELDS = {"jobs", "description", "comment"}
_EPS = 1e-9
# Sane magnitudes: beyond them a number is a typo or a unit mix-up, and sums over a circle of
# a million samples could overflow to infinity and make every score NaN.
MAX_ITERATION_MS = 1e7  # 2.8 hours per iteration
MIN_ITERATION_MS = 1e-3
MAX_GBPS = 1e5  # 100 Tbps
MAX_MS = 1e15  # waited_ms, work_ms: 30,000 years
MAX_CURVE = 1_000_000  # demand_gbps samples per iteration
MAX_GPUS = 1024  # a topology host has at most 1024 (controller/innet/topology.py)


@dataclass(frozen=True)
class Phase:
    """One Up phase: the job sends `gbps` from `start_ms` for `duration_ms` in each iteration."""

    start_ms: float
    duration_ms: float
    gbps: float

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.duration_ms

    @property
    def volume_mbit(self) -> float:
        """Gbps x ms = Mbit: what the phase must carry, however long it ends up taking."""
        return self.gbps * self.duration_ms


@dataclass(frozen=True)
class JobProfile:
    """A training job: its iteration time, Up phases, GPU request and fairness state.

    `hosts` pins a job that already runs (its lease continues): the scheduler keeps it there.
    `waited_ms` and `work_ms` feed the Themis-like finish-time fairness: a job that has waited
    longer relative to its work is further behind its fair share and gets GPUs first.
    """

    name: str
    iteration_ms: float
    phases: tuple[Phase, ...]
    gpus: int = DEFAULT_GPUS
    model: str | None = None
    hosts: tuple[str, ...] | None = None
    waited_ms: float = 0.0
    work_ms: float = DEFAULT_WORK_MS

    @property
    def volume_mbit(self) -> float:
        """Mbit sent per iteration."""
        return sum(p.volume_mbit for p in self.phases)

    @property
    def peak_gbps(self) -> float:
        return max((p.gbps for p in self.phases), default=0.0)

    @property
    def comm_fraction(self) -> float:
        """Share of the iteration spent in Up phases when the network is not a bottleneck."""
        return sum(p.duration_ms for p in self.phases) / self.iteration_ms

    def demand_at(self, t_ms: float) -> float:
        """Gbps wanted at time t of an unshifted, unstretched run (t taken mod T)."""
        x = t_ms % self.iteration_ms
        return sum(p.gbps for p in self.phases if p.start_ms <= x < p.end_ms)

    def renamed(self, name: str) -> JobProfile:
        return replace(self, name=name)

    def to_dict(self) -> dict[str, Any]:
        """A jobs-file entry with the full profile (a zoo job's model goes in the comment)."""
        out: dict[str, Any] = {"name": self.name, "iteration_ms": self.iteration_ms,
                               "phases": [{"start_ms": p.start_ms, "duration_ms": p.duration_ms,
                                           "gbps": p.gbps} for p in self.phases],
                               "gpus": self.gpus}
        if self.hosts is not None:
            out["hosts"] = list(self.hosts)
        if self.waited_ms:
            out["waited_ms"] = self.waited_ms
        if self.work_ms != DEFAULT_WORK_MS:
            out["work_ms"] = self.work_ms
        if self.model:
            out["comment"] = f"zoo model {self.model}"
        return out


# ---------------------------------------------------------------------------------- parsing


def _number(value: Any, where: str, source: str | None, *, minimum: float = 0.0,
            strict: bool = True, maximum: float = MAX_MS) -> float:
    bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
    if not finite_number(value):
        raise InputError(f"{where} must be a number {bound}, got {quote(value)}", source=source)
    if not (value > minimum if strict else value >= minimum):
        raise InputError(f"{where} must be {bound}, got {quote(value)}", source=source)
    if value > maximum:
        raise InputError(f"{where} must be at most {maximum:g}, got {quote(value)}", source=source)
    return float(value)


def _phases(raw: Any, iteration_ms: float, where: str, source: str | None) -> tuple[Phase, ...]:
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}phases must be a non-empty list of "
                         '{"start_ms", "duration_ms", "gbps"}', source=source)
    phases: list[tuple[int, Phase]] = []
    for i, item in enumerate(raw):
        at = f"{where}phases[{i}]"
        if not isinstance(item, dict):
            raise InputError(f'{at} must be {{"start_ms", "duration_ms", "gbps"}}, got '
                             f'{quote(item)}',
                             source=source)
        extra = set(item) - {"start_ms", "duration_ms", "gbps"}
        if extra:
            raise InputError(f"{at}: unknown field(s) {', '.join(sorted(extra))}", source=source)
        for key in ("start_ms", "duration_ms", "gbps"):
            if key not in item:
                raise InputError(f"{at}.{key} is missing", source=source)
        start = _number(item["start_ms"], f"{at}.start_ms", source, strict=False)
        duration = _number(item["duration_ms"], f"{at}.duration_ms", source)
        gbps = _number(item["gbps"], f"{at}.gbps", source, maximum=MAX_GBPS)
        if start + duration > iteration_ms + _EPS:
            raise InputError(f"{at} ends at {start + duration:g} ms, after the iteration "
                             f"({iteration_ms:g} ms)", source=source)
        phases.append((i, Phase(start, duration, gbps)))
    phases.sort(key=lambda ip: ip[1].start_ms)
    for (i, a), (j, b) in itertools.pairwise(phases):
        if b.start_ms < a.end_ms - _EPS:
            raise InputError(f"{where}phases[{j}] overlaps phases[{i}]", source=source)
    return tuple(p for _, p in phases)


def _demand_curve(raw: Any, iteration_ms: float, where: str,
                  source: str | None) -> tuple[Phase, ...]:
    """A sampled curve (one value per equal bin of the iteration) becomes phases, merging
    neighbouring bins of equal demand, so everything downstream sees one representation."""
    at = f"{where}demand_gbps"
    if not isinstance(raw, list) or not raw or len(raw) > MAX_CURVE:
        raise InputError(f"{at} must be a non-empty list of at most {MAX_CURVE} Gbps values, one "
                         "per time bin", source=source)
    values = [_number(v, f"{at}[{i}]", source, strict=False, maximum=MAX_GBPS)
              for i, v in enumerate(raw)]
    if not any(v > 0 for v in values):
        raise InputError(f"{at} is all zeros: the job never communicates", source=source)
    width = iteration_ms / len(values)
    phases: list[Phase] = []
    i = 0
    while i < len(values):
        if values[i] <= 0:
            i += 1
            continue
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        phases.append(Phase(i * width, (j - i + 1) * width, values[i]))
        i = j + 1
    return tuple(phases)


def _profile_from_dict(raw: Mapping[str, Any], where: str,
                       source: str | None) -> tuple[float, tuple[Phase, ...]]:
    if "iteration_ms" not in raw:
        raise InputError(f"{where}iteration_ms is missing (or give a zoo model)", source=source)
    iteration = _number(raw["iteration_ms"], f"{where}iteration_ms", source,
                        maximum=MAX_ITERATION_MS)
    if iteration < MIN_ITERATION_MS:
        raise InputError(f"{where}iteration_ms must be at least {MIN_ITERATION_MS:g}, got "
                         f"{quote(raw['iteration_ms'])}", source=source)
    has_phases, has_curve = "phases" in raw, "demand_gbps" in raw
    if has_phases == has_curve:
        raise InputError(f"{where}give exactly one of phases and demand_gbps", source=source)
    if has_phases:
        return iteration, _phases(raw["phases"], iteration, where, source)
    return iteration, _demand_curve(raw["demand_gbps"], iteration, where, source)


def job_from_dict(raw: Any, index: int, *, source: str | None = None) -> JobProfile:
    """One entry of a jobs file; errors read `job 'a': phases[0].gbps must be > 0`."""
    if not isinstance(raw, dict):
        raise InputError(f"jobs[{index}] must be an object with a name, got {quote(raw)}",
                         source=source)
    name = raw.get("name")
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise InputError(f"jobs[{index}].name must be {JOB_NAME_RULE}, got {quote(name)}",
                         source=source)
    where = f"job {quote(name)}: "
    extra = set(raw) - _JOB_FIELDS
    if extra:
        raise InputError(f"{where}unknown field(s) {', '.join(sorted(extra))}", source=source)
    model = raw.get("model")
    default_gpus = DEFAULT_GPUS
    if model is not None:
        if not isinstance(model, str):
            raise InputError(f"{where}model must be a zoo model name, got {quote(model)}",
                             source=source)
        clash = _PROFILE_FIELDS & set(raw)
        if clash:
            raise InputError(f"{where}give either model or {'/'.join(sorted(clash))}, not both",
                             source=source)
        entry = zoo_model(model, where=where, source=source)
        iteration, phases, model, default_gpus = (entry.iteration_ms, entry.phases, entry.model,
                                                  entry.gpus)
    else:
        iteration, phases = _profile_from_dict(raw, where, source)
    gpus = raw.get("gpus", default_gpus)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise InputError(f"{where}gpus must be an integer >= 1 (at most {MAX_GPUS}), got "
                         f"{quote(gpus)}",
                         source=source)
    hosts: tuple[str, ...] | None = None
    if "hosts" in raw:
        h = raw["hosts"]
        if not isinstance(h, list) or not all(isinstance(x, str) for x in h):
            raise InputError(f"{where}hosts must be a list of host names, got {quote(h)}",
                             source=source)
        if len(h) != gpus:
            raise InputError(f"{where}hosts lists {len(h)} host(s) for {gpus} GPU(s): give one "
                             "host per GPU", source=source)
        hosts = tuple(h)
    waited = _number(raw.get("waited_ms", 0.0), f"{where}waited_ms", source, strict=False)
    work = _number(raw.get("work_ms", DEFAULT_WORK_MS), f"{where}work_ms", source)
    return JobProfile(name, iteration, phases, gpus, model, hosts, waited, work)


def jobs_from_data(data: Any, *, source: str | None = None) -> tuple[JobProfile, ...]:
    if isinstance(data, list):
        data = {"jobs": data}
    if not isinstance(data, dict) or "jobs" not in data:
        raise InputError('a jobs file is an object {"jobs": [...]}', source=source)
    extra = set(data) - _TOP_FIELDS
    if extra:
        raise InputError(f"unknown field(s): {', '.join(sorted(extra))}", source=source)
    raw = data["jobs"]
    if not isinstance(raw, list) or not raw:
        raise InputError("jobs must be a non-empty list", source=source)
    jobs: list[JobProfile] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        job = job_from_dict(item, i, source=source)
        if job.name in seen:
            raise InputError(f"job {quote(job.name)}: name is used twice "
                             f"(jobs[{seen[job.name]}] and jobs[{i}])", source=source)
        seen[job.name] = i
        jobs.append(job)
    return tuple(jobs)


def load_jobs(path: str | Path) -> tuple[JobProfile, ...]:
    """Read a jobs file: JSON, or YAML (.yaml/.yml) when PyYAML is installed."""
    p = Path(path)
    text = read_text(p)
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise InputError("reading YAML needs PyYAML (pip install pyyaml); or write the jobs "
                             "file as JSON", source=str(p)) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"not valid YAML: {exc}", source=str(p)) from None
    else:
        data = parse_json(text, str(p))
    return jobs_from_data(data, source=str(p))


# ---------------------------------------------------------------------------------- the zoo


@dataclass(frozen=True)
class ZooModel:
    model: str
    iteration_ms: float
    phases: tuple[Phase, ...]
    gpus: int
    parallelism: str


@functools.lru_cache(maxsize=1)
def _zoo_data() -> dict[str, Any]:
    text = resources.files("innet").joinpath("data/model_zoo.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=1)
def load_zoo() -> dict[str, ZooModel]:
    """The 13 models of the paper with illustrative profiles (assumptions: `zoo_assumptions`)."""
    source = "model_zoo.json"
    out: dict[str, ZooModel] = {}
    for name, raw in _zoo_data()["models"].items():
        where = f"model {quote(name)}: "
        iteration, phases = _profile_from_dict(raw, where, source)
        out[name] = ZooModel(name, iteration, phases, int(raw.get("gpus", DEFAULT_GPUS)),
                             str(raw.get("parallelism", "data")))
    return out


def zoo_assumptions() -> list[str]:
    return list(_zoo_data()["assumptions"])


def zoo_model(name: str, *, where: str = "", source: str | None = None) -> ZooModel:
    """Case- and punctuation-insensitive lookup: `gpt3`, `GPT-3` and `Gpt_3` are one model."""
    zoo = load_zoo()

    def key(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    for model in zoo.values():
        if key(model.model) == key(name):
            return model
    raise InputError(f"{where}model {quote(name)} is not in the zoo (known: {', '.join(zoo)})",
                     source=source)


def zoo_job(model: str, name: str | None = None, gpus: int | None = None) -> JobProfile:
    entry = zoo_model(model)
    return JobProfile(name or entry.model, entry.iteration_ms, entry.phases,
                      entry.gpus if gpus is None else gpus, entry.model)


def single_phase_job(name: str, iteration_ms: float, start_ms: float, duration_ms: float,
                     gbps: float, gpus: int = DEFAULT_GPUS) -> JobProfile:
    """Shorthand for tests and examples: one Up phase per iteration."""
    return jobs_from_data({"jobs": [{"name": name, "iteration_ms": iteration_ms, "gpus": gpus,
                                     "phases": [{"start_ms": start_ms, "duration_ms": duration_ms,
                                                 "gbps": gbps}]}]})[0]


def check_names(jobs: Sequence[JobProfile]) -> None:
    """Programmatic callers bypass the file parser: keep names unique for them too."""
    seen: set[str] = set()
    for job in jobs:
        if job.name in seen:
            raise InputError(f"job {quote(job.name)}: name is used twice")
        seen.add(job.name)
