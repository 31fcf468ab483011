"""`innet cassini ...`: JSON shapes, files written, one-line refusals with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from innet.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAIR = str(ROOT / "examples" / "jobs-vgg19-pair.json")
THIRTEEN = str(ROOT / "examples" / "jobs-13.json")
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_link_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cassini", "link", PAIR, "--capacity", "50", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"score", "shifts_ms", "period_ms"}
    assert data == {"score": 1.0, "shifts_ms": {"vgg19-a": 0.0, "vgg19-b": 120.0},
                    "period_ms": 240.0}
    code, out, _ = run(capsys, "cassini", "link", PAIR, "--capacity", "100", "--json",
                       "--precision-deg", "10")
    assert json.loads(out)["score"] == 1.0  # 88 Gbps never exceeds 100
    code, out, _ = run(capsys, "cassini", "link", PAIR, "--capacity", "50")
    assert code == 0 and "vgg19-b" in out and "0.715" in out and "1.000" in out


def test_plan_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cassini", "plan", "--topology", LEAFSPINE, "--jobs", THIRTEEN,
                       "--json", "--candidates", "8")
    assert code == 0
    data = json.loads(out)
    assert {"placement", "shifts_ms", "shared_links", "routes", "jobs", "score", "candidate",
            "candidates", "waiting", "conflicts", "loops", "warnings"} <= set(data)
    assert len(data["placement"]) == 13 and set(data["shifts_ms"]) == set(data["placement"])
    assert len(data["candidates"]) == 8
    for link in data["shared_links"]:
        assert {"links", "jobs", "score", "score_unshifted", "relative_shifts_ms"} <= set(link)
    for job in data["jobs"]:
        assert job["phases"] and job["iteration_ms"] > 0
    code, out, _ = run(capsys, "cassini", "plan", "--topology", LEAFSPINE, "--jobs", THIRTEEN,
                       "--candidates", "4")
    assert code == 0 and "CASSINI keeps #" in out and "shared link(s)" in out


def test_evaluate_writes_the_table_and_plots(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    code, out, _ = run(capsys, "cassini", "evaluate", "--jobs", PAIR, "--capacity", "50",
                       "--out", str(tmp_path), "--iterations", "10")
    assert code == 0 and "CASSINI vs base" in out
    for suffix in ("cdf.png", "circle.png", "summary.json"):
        path = tmp_path / f"cassini-jobs-vgg19-pair-{suffix}"
        assert path.exists() and path.stat().st_size > 0
    summary = json.loads((tmp_path / "cassini-jobs-vgg19-pair-summary.json").read_text())
    assert summary["gain"]["mean"] > 1.2 and summary["runs"][-1]["marks"] == 0
    code, out, _ = run(capsys, "cassini", "evaluate", "--jobs", THIRTEEN, "--topology",
                       LEAFSPINE, "--out", str(tmp_path), "--iterations", "10", "--candidates",
                       "6", "--prefix", "x-", "--json")
    data = json.loads(out)
    assert [r["label"] for r in data["runs"]] == ["base", "base+shifts", "cassini"]
    assert (tmp_path / "x-cdf.png").exists() and (tmp_path / "x-circle.png").exists()


def test_profile_writes_a_jobs_file_the_planner_reads(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    from captures import write_bursts

    capture = tmp_path / "job.pcap"
    write_bursts(capture, period_ms=100, on_ms=40, iterations=12)
    jobs = tmp_path / "measured.json"
    code, out, _ = run(capsys, "cassini", "profile", str(capture), "--host", "10.0.0.2",
                       "-o", str(jobs), "--name", "m")
    assert code == 0 and "iteration time 100" in out
    code, out, _ = run(capsys, "cassini", "profile", str(capture), "--json")
    assert json.loads(out)["period_ms"] == pytest.approx(100, abs=1)
    code, out, _ = run(capsys, "cassini", "link", str(jobs), "--capacity", "1", "--json")
    assert code == 0 and json.loads(out)["shifts_ms"] == {"m": 0.0}


def test_zoo_lists_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cassini", "zoo", "--json")
    assert code == 0 and len(json.loads(out)["models"]) == 13


def test_help_teaches_the_score_and_units(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cassini", "link", "--help"])
    out = capsys.readouterr().out
    assert "1 - mean over the unified circle" in out and "Gbps" in out and "shift" in out


BAD = [
    (["cassini", "link", "{bad}", "--capacity", "50"], "job 'a': phases[0].gbps must be > 0"),
    (["cassini", "link", "{missing}", "--capacity", "50"], "cannot read"),
    (["cassini", "plan", "--topology", LEAFSPINE, "--jobs", "{pinned}"],
     "job 'a': hosts: unknown host 'h77'"),
    (["cassini", "plan", "--topology", "{missing}", "--jobs", PAIR], "cannot read"),
    (["cassini", "profile", "{missing}"], "cannot read"),
    (["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{tmp}",
      "--threshold-kb", "9000"], "threshold"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          argv: list[str], message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"jobs": [{"name": "a", "iteration_ms": 100, "phases": [
        {"start_ms": 0, "duration_ms": 10, "gbps": -3}]}]}))
    pinned = tmp_path / "pinned.json"
    pinned.write_text(json.dumps({"jobs": [{"name": "a", "model": "VGG19",
                                            "hosts": ["h1", "h77"]}]}))
    names = {"bad": str(bad), "pinned": str(pinned), "missing": str(tmp_path / "nope.json"),
             "tmp": str(tmp_path / "out")}
    code, _, err = run(capsys, *[a.format(**names) for a in argv])
    assert code == 2
    assert err.startswith("innet: ") and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("argv", [
    ["cassini", "link", PAIR, "--capacity", "0"],
    ["cassini", "link", PAIR, "--capacity", "50", "--precision-deg", "0"],
    ["cassini", "plan", "--topology", LEAFSPINE, "--jobs", PAIR, "--candidates", "0"],
    ["cassini", "evaluate", "--jobs", PAIR, "--out", "x"],
])
def test_bad_flags_are_refused_by_argparse(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as err:
        main(argv)
    assert err.value.code == 2
