"""Progress bars are drawn on a terminal only: a log or a pipe gets no carriage-return frames."""

from __future__ import annotations

import io
import sys

import pytest

from innet.progress import bar, on_terminal


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _draw(stream: io.StringIO, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> str:
    monkeypatch.setattr(sys, "stderr", stream)
    for _ in bar(range(50), desc="work", mininterval=0, **kwargs):
        pass
    return stream.getvalue()


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _draw(io.StringIO(), monkeypatch) == ""


def test_a_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _draw(_Tty(), monkeypatch)
    assert "work" in out and "\r" in out


def test_show_false_turns_it_off_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _draw(_Tty(), monkeypatch, show=False) == ""


def test_a_caller_cannot_force_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """run aggregation used to pass disable=False: that is ignored off a terminal."""
    assert _draw(io.StringIO(), monkeypatch, disable=False) == ""


def test_a_closed_or_odd_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    assert on_terminal() is False
    monkeypatch.setattr(sys, "stderr", object())
    assert on_terminal() is False


def test_every_bar_of_innet_comes_from_the_helper() -> None:
    """No module but innet.progress makes a tqdm bar of its own."""
    from pathlib import Path

    import innet

    root = Path(innet.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "progress.py" and "from tqdm" in p.read_text()]
    assert not offenders, offenders
