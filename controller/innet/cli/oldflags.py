"""Old spellings of renamed options: refused in one line that names the new one.

Each flag means one thing across innet's commands (docs/inputs.md, "One meaning per flag"):
`--processes` is parallelism, `--jobs` a jobs file, `--concurrent-jobs` a count of jobs run at
once. An option renamed to get there stays in its parser, hidden from --help, so that an old
command line fails with the hint instead of argparse's "unrecognized arguments" (or, worse,
with a prefix of another option silently matched).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class _Renamed(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, hint: str = "",
                 **kwargs: Any) -> None:
        self.hint = hint
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(self.hint)


def renamed(parser: Any, old: str, new: str, command: str, why: str = "") -> None:
    """Refuse `old` in `parser` with "OLD is now NEW for COMMAND (WHY)"."""
    hint = f"{old} is now {new} for {command}" + (f" ({why})" if why else "")
    parser.add_argument(old, action=_Renamed, hint=hint, dest=f"_renamed_{old.lstrip('-')}",
                        default=argparse.SUPPRESS)
