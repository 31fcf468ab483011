"""Jobs files and the model zoo: good files load, every bad one is refused by name."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from innet.cassini.model.profiles import (
    JobProfile,
    jobs_from_data,
    load_jobs,
    load_zoo,
    zoo_assumptions,
    zoo_job,
)
from innet.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PAPER_MODELS = ["VGG11", "VGG16", "VGG19", "ResNet50", "WideResNet101", "BERT", "RoBERTa",
                "XLM", "CamemBERT", "GPT-1", "GPT-2", "GPT-3", "DLRM"]


def good() -> dict[str, Any]:
    return {"jobs": [
        {"name": "a", "iteration_ms": 200, "gpus": 2,
         "phases": [{"start_ms": 0, "duration_ms": 80, "gbps": 40}]},
        {"name": "b", "model": "VGG19"},
        {"name": "c", "iteration_ms": 100, "demand_gbps": [0, 0, 30, 30, 10]},
    ]}


def test_a_good_file_loads_with_every_kind_of_profile() -> None:
    a, b, c = jobs_from_data(good())
    assert (a.name, a.iteration_ms, a.gpus) == ("a", 200.0, 2)
    assert a.phases[0].volume_mbit == 80 * 40
    assert b.model == "VGG19" and b.iteration_ms == load_zoo()["VGG19"].iteration_ms
    # the sampled curve: five bins of 20 ms; equal neighbours merge into one phase
    assert [(p.start_ms, p.duration_ms, p.gbps) for p in c.phases] == [(40, 40, 30),
                                                                       (80, 20, 10)]
    assert c.demand_at(50) == 30 and c.demand_at(10) == 0 and c.demand_at(150) == 30


def test_the_zoo_has_the_papers_13_models_and_says_its_numbers_are_illustrative() -> None:
    zoo = load_zoo()
    assert sorted(zoo) == sorted(PAPER_MODELS)
    for name, model in zoo.items():
        if name == "GPT-3":
            assert model.parallelism == "model"
            assert len(model.phases) >= 3
            assert len({p.gbps for p in model.phases}) > 1  # phases of different demand
        else:
            assert model.parallelism == "data" and len(model.phases) == 1
    text = " ".join(zoo_assumptions()).lower()
    assert "illustrative" in text or "not a measurement" in text
    assert zoo_job("gpt3").model == "GPT-3" and zoo_job("vgg_19").model == "VGG19"


def test_shipped_examples_load() -> None:
    pair = load_jobs(EXAMPLES / "jobs-vgg19-pair.json")
    assert [j.model for j in pair] == ["VGG19", "VGG19"]
    thirteen = load_jobs(EXAMPLES / "jobs-13.json")
    assert len(thirteen) == 13 and {j.model for j in thirteen} == set(PAPER_MODELS)


def mutate(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(good())
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


DELETE = object()

BAD = [
    ("not an object", [1, 2], "jobs[0] must be an object"),
    ("no jobs key", {"job": []}, 'a jobs file is an object {"jobs"'),
    ("empty jobs", {"jobs": []}, "jobs must be a non-empty list"),
    ("unknown top field", {**good(), "links": 1}, "unknown field(s): links"),
    ("bad name", mutate("jobs.0.name", "a b"), "jobs[0].name must be"),
    ("missing name", mutate("jobs.0.name", DELETE), "jobs[0].name must be"),
    ("duplicate", mutate("jobs.2.name", "a"), "job 'a': name is used twice (jobs[0] and jobs[2])"),
    ("unknown job field", mutate("jobs.0.colour", "red"), "job 'a': unknown field(s) colour"),
    ("negative gbps", mutate("jobs.0.phases.0.gbps", -1), "job 'a': phases[0].gbps must be > 0"),
    ("zero gbps", mutate("jobs.0.phases.0.gbps", 0), "job 'a': phases[0].gbps must be > 0"),
    ("text gbps", mutate("jobs.0.phases.0.gbps", "40"), "job 'a': phases[0].gbps must be a numb"),
    ("bool duration", mutate("jobs.0.phases.0.duration_ms", True),
     "job 'a': phases[0].duration_ms must be a number > 0"),
    ("negative start", mutate("jobs.0.phases.0.start_ms", -5),
     "job 'a': phases[0].start_ms must be >= 0"),
    ("missing gbps", mutate("jobs.0.phases.0.gbps", DELETE), "job 'a': phases[0].gbps is missing"),
    ("phase past iteration", mutate("jobs.0.phases.0.duration_ms", 250),
     "job 'a': phases[0] ends at 250 ms, after the iteration (200 ms)"),
    ("overlap", mutate("jobs.0.phases", [{"start_ms": 0, "duration_ms": 50, "gbps": 1},
                                         {"start_ms": 40, "duration_ms": 20, "gbps": 1}]),
     "job 'a': phases[1] overlaps phases[0]"),
    ("no phases", mutate("jobs.0.phases", []), "job 'a': phases must be a non-empty list"),
    ("phase not object", mutate("jobs.0.phases", [[0, 80, 40]]), "job 'a': phases[0] must be"),
    ("unknown phase field", mutate("jobs.0.phases.0.rate", 3),
     "job 'a': phases[0]: unknown field(s) rate"),
    ("zero iteration", mutate("jobs.0.iteration_ms", 0), "job 'a': iteration_ms must be > 0"),
    ("missing iteration", mutate("jobs.0.iteration_ms", DELETE),
     "job 'a': iteration_ms is missing"),
    ("both profiles", mutate("jobs.0.demand_gbps", [1]), "job 'a': give exactly one of phases"),
    ("model and phases", mutate("jobs.1.phases", []), "job 'b': give either model or phases"),
    ("unknown model", mutate("jobs.1.model", "VGG20"), "job 'b': model 'VGG20' is not in the zoo"),
    ("model not text", mutate("jobs.1.model", 19), "job 'b': model must be a zoo model name"),
    ("zero gpus", mutate("jobs.0.gpus", 0), "job 'a': gpus must be an integer >= 1"),
    ("float gpus", mutate("jobs.0.gpus", 1.5), "job 'a': gpus must be an integer >= 1"),
    ("hosts count", mutate("jobs.0.hosts", ["h1"]), "job 'a': hosts lists 1 host(s) for 2 GPU(s)"),
    ("hosts type", mutate("jobs.0.hosts", "h1,h2"), "job 'a': hosts must be a list"),
    ("negative wait", mutate("jobs.0.waited_ms", -1), "job 'a': waited_ms must be >= 0"),
    ("zero work", mutate("jobs.0.work_ms", 0), "job 'a': work_ms must be > 0"),
    ("curve negative", mutate("jobs.2.demand_gbps", [1, -1]),
     "job 'c': demand_gbps[1] must be >= 0"),
    ("curve zeros", mutate("jobs.2.demand_gbps", [0, 0]), "job 'c': demand_gbps is all zeros"),
    ("curve empty", mutate("jobs.2.demand_gbps", []), "job 'c': demand_gbps must be a non-empty"),
    ("nan", mutate("jobs.0.phases.0.gbps", float("nan")), "job 'a': phases[0].gbps must be"),
]


@pytest.mark.parametrize("label,data,message", BAD, ids=[b[0] for b in BAD])
def test_each_bad_jobs_file_is_refused_by_name(tmp_path: Path, label: str, data: Any,
                                               message: str) -> None:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load_jobs(path)
    assert str(err.value).startswith(f"{path}: "), str(err.value)
    assert message in str(err.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_jobs(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"jobs\": [")
    with pytest.raises(InputError, match="not valid JSON"):
        load_jobs(bad)


def test_yaml_needs_pyyaml_or_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - name: b\n    model: VGG19\n")
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="PyYAML"):
            load_jobs(path)
    else:  # pragma: no cover - PyYAML is not a dependency
        assert load_jobs(path)[0].model == "VGG19"


def test_profile_round_trips_through_to_dict() -> None:
    for job in jobs_from_data(good()):
        again = jobs_from_data({"jobs": [job.to_dict()]})[0]
        assert isinstance(again, JobProfile)
        assert (again.iteration_ms, again.phases, again.gpus) == (job.iteration_ms,
                                                                  job.phases, job.gpus)
