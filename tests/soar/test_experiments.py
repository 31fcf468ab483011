"""The quick versions of SOAR's evaluation: the paper's claims hold on every point."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from innet.cli import main
from innet.soar.experiments import run_experiment


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name in ("fig6", "fig7", "fig8", "fig9"):
        folder = tmp_path_factory.mktemp(name)
        out[name] = (folder, run_experiment(name, folder, quick=True, jobs=2))
    return out


def test_fig6_soar_is_never_beaten_and_never_rises_with_k(runs: Any) -> None:
    raw = runs["fig6"][1]["raw"]
    by_case: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for r in raw:
        by_case[(r["rates"], r["distribution"], r["seed"], r["k"])][r["strategy"]] = r["ratio"]
    assert len(by_case) == 3 * 2 * 2 * 6
    for case, ratios in by_case.items():
        for name, ratio in ratios.items():
            if name != "all-blue":
                assert ratios["soar"] <= ratio + 1e-12, (case, name)
            assert ratios["all-blue"] <= ratio + 1e-12, (case, name)
    for (rates, dist, seed, k), ratios in by_case.items():
        bigger = [c for c in by_case if c[:3] == (rates, dist, seed) and c[3] > k]
        for c in bigger:
            assert by_case[c]["soar"] <= ratios["soar"] + 1e-12


def test_fig6_writes_the_documented_csv_plots_and_summary(runs: Any) -> None:
    folder, result = runs["fig6"]
    with (folder / "fig6.csv").open() as f:
        rows = list(csv.DictReader(f))
    for column in ("rates", "distribution", "k", "strategy", "ratio_mean", "ratio_std"):
        assert column in rows[0]
    assert {r["strategy"] for r in rows} == {"soar", "top", "max", "level", "random", "all-blue"}
    assert len(result["pngs"]) == 7
    for png in result["pngs"]:
        assert (folder / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (folder / "summary.md").read_text()
    assert "SOAR is the best strategy at every point" in summary


def test_results_do_not_depend_on_parallelism(tmp_path: Path, runs: Any) -> None:
    serial = run_experiment("fig6", tmp_path, quick=True, jobs=1)
    assert serial["points"] == runs["fig6"][1]["points"]


def test_fig7_online_ratios_climb_toward_one_when_capacity_runs_out(runs: Any) -> None:
    points = runs["fig7"][1]["points"]
    last = max(p["workloads"] for p in points)
    for p in points:
        if p["capacity"] == 1 and p["workloads"] == last:
            first = next(q for q in points if q["capacity"] == 1 and q["workloads"] == 1
                         and q["rates"] == p["rates"] and q["strategy"] == p["strategy"])
            assert p["ratio_mean"] > first["ratio_mean"]
            assert p["ratio_mean"] > 0.8  # mostly all-red once every switch is used up
    # and more capacity never makes SOAR's long-run ratio worse
    for rates in ("constant", "linear", "exponential"):
        by_cap = sorted((p["capacity"], p["ratio_mean"]) for p in points
                        if p["strategy"] == "soar" and p["workloads"] == last
                        and p["rates"] == rates)
        ratios = [r for _, r in by_cap]
        assert ratios == sorted(ratios, reverse=True)


def test_fig8_bytes_never_below_all_blue_and_utilisation_independent_of_use_case(
    runs: Any,
) -> None:
    raw = runs["fig8"][1]["raw"]
    for r in raw:
        assert r["bytes"] >= r["all_blue_bytes"] - 1e-12
        assert r["bytes"] >= r["util"] - 1e-12 or r["strategy"] == "all-red"
    util: dict[tuple[Any, ...], set[float]] = defaultdict(set)
    for r in raw:
        util[(r["distribution"], r["seed"], r["k"], r["strategy"])].add(round(r["util"], 12))
    assert all(len(v) == 1 for v in util.values())


def test_fig9_times_both_methods_on_every_point(runs: Any) -> None:
    folder, result = runs["fig9"]
    points = result["points"]
    grid = {(p["n"], p["k"]) for p in points}
    assert grid == {(n, k) for n in (256, 512) for k in (4, 8, 16)}
    for n, k in grid:
        methods = {p["method"] for p in points if (p["n"], p["k"]) == (n, k)}
        assert methods == {"soar", "reference"}
    assert all(p["seconds"] > 0 for p in points)
    assert (folder / "fig9.png").exists()


def test_experiment_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["soar", "experiment", "fig8", "--quick", "--out", str(tmp_path),
                 "--processes", "1"]) == 0
    assert "fig8.csv" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["soar", "experiment", "fig8", "--quick", "--seeds", "0", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "argument --seeds: expected an integer in 1..100, got 0" in capsys.readouterr().err
