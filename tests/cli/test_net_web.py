"""`net up --web HOST:PORT` and `--no-web`: what they parse to, and bad addresses refused in
one line naming the flag (exit 2) before any network starts."""

from __future__ import annotations

import pytest

from innet.cli import build_parser, main


def parsed(*extra: str) -> object:
    return build_parser().parse_args(["net", "up", "--topology", "t.json", *extra])


def test_the_view_is_on_a_free_loopback_port_by_default() -> None:
    args = parsed()
    assert args.web == ("127.0.0.1", 0) and args.no_web is False  # type: ignore[attr-defined]
    assert parsed("--no-web").no_web is True  # type: ignore[attr-defined]
    assert parsed("--web", "0.0.0.0:8080").web == ("0.0.0.0", 8080)  # type: ignore[attr-defined]
    assert parsed("--web", "[::1]:8080").web == ("::1", 8080)  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", ["8080", ":8080", "localhost:", "localhost:http",
                                 "127.0.0.1:65536", "127.0.0.1:-1"])
def test_a_bad_address_is_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["net", "up", "--topology", "t.json", f"--web={bad}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--web" in err[0], err
