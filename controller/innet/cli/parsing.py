"""The parser every `innet` command shares: one-line errors (exit 2) and help that states each
option's default, so that no front end formats errors or help its own way."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any, NoReturn

from innet.errors import one_line


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless the help already says it (or there
    is none to say: a flag, or a default of None that the help explains); a required option's
    help says "required" (tests/cli/test_help.py walks every parser). A description
    written with line breaks is kept as written; one without is wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.required and action.option_strings and "required" not in text:
            # an option one must give says so; argparse's usage line alone is easy to miss
            text = f"{text} (required)" if text else "required"
        if ("default" in text.lower() or action.default is None
                or action.default is argparse.SUPPRESS or isinstance(action.default, bool)
                or not action.option_strings):
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `innet soar solve: argument -k: expected ...`, exit 2.

    Subcommand parsers are made with this class too (argparse uses the parent's class), and
    every one formats its help with `HelpFormatter` whatever its caller asked for.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, one_line(f"{self.prog}: {message} (see {self.prog} --help)") + "\n")


def say(message: str) -> None:
    """One line on stderr, `innet: <message>`, escaped and bounded (errors.one_line): the
    only way the top level reports, so no input can make it print several lines."""
    print(one_line(f"innet: {message}"), file=sys.stderr)


def printable_streams() -> None:
    """Names from files and the command line may hold lone surrogates (a file name in no
    valid encoding, a JSON escape): printed as escapes rather than a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
