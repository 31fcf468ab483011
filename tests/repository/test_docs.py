"""The README and the docs: the two commands, CI running the test command, links that resolve,
no example writing into docs/, and the Python API page and example actually running."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SETUP_AND_MAIN = "./setup.sh && .venv/bin/innet demo"
TESTS = "./setup.sh && .venv/bin/python -m pytest"


def test_the_readme_states_the_two_commands_and_ci_runs_the_test_one() -> None:
    assert SETUP_AND_MAIN in README
    assert TESTS in README
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-1] == TESTS, ci[-1]


def test_the_readme_is_short_and_cites_the_papers() -> None:
    assert len(README.splitlines()) <= 170
    text = " ".join(README.split())  # undo the wrapping
    assert "SOAR: Minimizing Network Utilization with Bounded In-network Computing" in text
    assert "CASSINI: Network-Aware Job Scheduling in Machine Learning Clusters" in text
    assert "](docs/results/" in README  # a picture of what a run produces


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_and_image_resolves() -> None:
    broken = []
    for page in _markdown():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_no_example_writes_into_docs() -> None:
    for page in _markdown():
        for line in page.read_text().splitlines():
            assert not re.search(r"(--out|-o|--plot|--output)[ =]docs/", line), \
                f"{page.relative_to(ROOT)}: {line}"


def test_the_api_page_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) == 3
    namespace: dict[str, object] = {}
    for block in blocks:  # one after the other, as in a notebook
        exec(compile(block, "docs/api.md", "exec"), namespace)
    assert "route" in capsys.readouterr().out


def test_the_api_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(ROOT / "examples" / "api_plan_and_deploy.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "SOAR picks" in out and "dry run: 15 program loads" in out


def test_the_ns3_page_stays_a_design_document() -> None:
    """Its measurement log moved to docs/results/ once (866 lines, most of them before/after
    runs); a page past this length is growing into one again."""
    assert len((ROOT / "docs" / "cassini-ns3.md").read_text().splitlines()) < 250


_SHARES = re.compile(r"summed over draws: JCT mean (\S+) \(of ([^)]+)\), p99 (\S+) \(of ([^)]+)\)")


def _printed_shares(name: str) -> tuple[str, str, str, str]:
    """The mean and p99 shares (and their pooled gaps) that a committed sweep printed."""
    text = (ROOT / "docs" / "results" / "cassini-traces" / name).read_text()
    found = _SHARES.search(text)
    assert found, name
    mean, mean_gap, p99, p99_gap = found.groups()
    return mean.rstrip(","), mean_gap, p99, p99_gap


@pytest.mark.parametrize("page", ["docs/cassini-ns3.md", "docs/results/README.md"])
def test_the_sweep_shares_quoted_are_the_ones_the_sweep_printed(page: str) -> None:
    """A share the sweep printed as n/a (the base within noise of the ideal) must not be
    quoted as a number, nor a number changed: each table row naming a sweep's raw output
    carries that output's mean / p99 shares."""
    rows = [line for line in (ROOT / page).read_text().splitlines()
            if line.startswith("|") and re.search(r"`(fluid|ns3)-[\w.-]+\.txt`", line)]
    assert rows, page
    for row in rows:
        name = re.search(r"`((?:fluid|ns3)-[\w.-]+\.txt)`", row)
        assert name
        mean, mean_gap, p99, p99_gap = _printed_shares(name.group(1))
        assert (f"{mean} / {p99}" in row
                or f"{mean} ({mean_gap}) / {p99} ({p99_gap})" in row), (page, row)
