"""The front ends: every command line of innet (the `innet` command and the host agents').

Only this package parses arguments or imports argparse, and nothing outside it imports it
(import-linter keeps both rules, docs/architecture.md): a front end parses, calls one function
of the layers below with plain options objects, and prints. `main` and `build_parser` load
the command tree only when called, so that `python -m innet.cli.agent` on an emulated host
does not import every front end.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `innet` command (`innet.cli.entry.main`)."""
    from innet.cli.entry import main as run

    return run(argv)


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser, as `innet --help` shows them."""
    from innet.cli.entry import build_parser as build

    return build()
