"""Every command's --help: a required option says "required", an option with a default shows
it; each flag has one meaning, and its old spellings are refused with the new name."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from innet.cli import build_parser, main


def _parsers(parser: argparse.ArgumentParser, path: str = "innet"
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def _help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help of one option as --help prints it (its default filled in)."""
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def _options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if (action.option_strings and action.help is not argparse.SUPPRESS
                and not isinstance(action, argparse._HelpAction | argparse._VersionAction)):
            yield action


def test_the_walk_finds_every_command() -> None:
    paths = {path for path, _ in _parsers(build_parser())}
    for command in ("innet soar solve", "innet cassini link", "innet deploy",
                    "innet run aggregation", "innet topo gen", "innet demo"):
        assert command in paths
    assert len(paths) > 25


def test_every_required_option_says_so() -> None:
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in _options(parser):
            if action.required and "required" not in _help_text(parser, action):
                missing.append(f"{path} {action.option_strings[0]}")
    assert not missing, f"required options whose help does not say so: {missing}"
    # and the ones the issue named, as a user reads them
    help_of = {path: p.format_help() for path, p in _parsers(build_parser())}
    assert "required" in help_of["innet cassini link"].split("--capacity", 2)[2][:200]
    assert "required" in help_of["innet deploy"].split("--topology", 2)[2][:200]


def test_every_option_with_a_default_shows_it() -> None:
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in _options(parser):
            default = action.default
            if (default is None or default is argparse.SUPPRESS or isinstance(default, bool)
                    or action.required):
                continue
            if "default" not in _help_text(parser, action).lower():
                missing.append(f"{path} {action.option_strings[0]} (default {default!r})")
    assert not missing, f"options whose help hides their default: {missing}"


@pytest.mark.parametrize(("argv", "hint"), [
    (["soar", "experiment", "fig6", "--out", "{tmp}", "--jobs", "2"],
     "--jobs is now --processes for soar experiment"),
    (["run", "aggregation", "--topology", "topologies/bt15.json", "--jobs", "2"],
     "--jobs is now --concurrent-jobs for run aggregation"),
    (["topo", "gen", "fattree", "-k", "4"], "-k is now --ports for topo gen fattree"),
])
def test_old_spellings_are_refused_with_the_new_name(
        argv: list[str], hint: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert hint in err
    assert len(err.strip().splitlines()) == 1, err


def test_one_meaning_per_flag() -> None:
    """--jobs is always a jobs file, --processes always parallelism, -k always the budget of
    aggregating switches (its default differs by command and the help says which)."""
    for path, parser in _parsers(build_parser()):
        for action in _options(parser):
            text = _help_text(parser, action).lower()
            if "--jobs" in action.option_strings:
                assert "jobs" in text and ("file" in text or "json" in text), (path, text)
            if "--processes" in action.option_strings:
                assert "process" in text, (path, text)
            if "-k" in action.option_strings:
                assert "blue" in text or "aggregating" in text, (path, text)


def test_the_new_spellings_parse() -> None:
    parser = build_parser()
    args = parser.parse_args(["soar", "experiment", "fig6", "--out", "x", "--processes", "1"])
    assert args.processes == 1
    args = parser.parse_args(["run", "aggregation", "--topology", "t.json",
                              "--concurrent-jobs", "3"])
    assert args.concurrent_jobs == 3
    args = parser.parse_args(["topo", "gen", "fattree", "--ports", "6"])
    assert args.ports == 6
