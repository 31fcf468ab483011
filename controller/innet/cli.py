"""The `innet` command: one entry point, a subcommand per job.

Each feature module registers its own subcommands (`register(subparsers)`), so this file only
wires them together and turns bad input into one line on stderr with exit status 2, a switch
or network that failed into one line with exit status 3 (docs/inputs.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from innet import __version__, demo, deploy_cli, doctor, net_cli, pcap, topo_cli
from innet.cassini import cli as cassini_cli
from innet.emulation import cli as emulation_cli
from innet.errors import EXIT_INPUT, EXIT_NETWORK, InputError, NetworkError, one_line
from innet.soar import cli as soar_cli

DESCRIPTION = """\
innet: in-network computing on P4 switches.

  soar      where to aggregate: the optimal k switches (SOAR) and the simple strategies
  cassini   when each ML job communicates: link compatibility, time shifts, placement
  deploy    install a plan on P4Runtime switches (only the difference)
  status    what each switch holds and counts (--json: reachable, program, entries, primary)
  controller run: keep every switch in its intended state (restarts, drift, mastership)
  run       Mininet experiments on BMv2 (aggregation, CASSINI ECN)
  net       an emulated network that stays up: Mininet's CLI, plans changed live
  pcap      summarise a packet capture
  topo      generate and check topology files
  demo      everything this machine can run, one command
  doctor    what this machine has and lacks for innet, and how to fix each part

Run `innet COMMAND --help` for the options of each.
"""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless the help already says it (or there
    is none to say: a flag, or a default of None that the help explains); a required option's
    help says "required" (tests/test_cli_help.py walks every parser). A description
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


def _printable_streams() -> None:
    """Names from files and the command line may hold lone surrogates (a file name in no
    valid encoding, a JSON escape): printed as escapes rather than a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="innet", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"innet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for front_end in (soar_cli, topo_cli, cassini_cli, deploy_cli, pcap, emulation_cli, net_cli,
                      demo, doctor):
        front_end.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    _printable_streams()
    parser = build_parser()
    args = parser.parse_args(argv)  # a bad flag exits 2 here, after one line (Parser.error)
    try:
        result = args.func(args)
    except InputError as exc:
        say(str(exc))
        return EXIT_INPUT
    except NetworkError as exc:
        say(str(exc))
        return EXIT_NETWORK
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BrokenPipeError:
        # `innet ... | head` closed our stdout: not an error; keep Python from complaining
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # a file or folder the user named that the system refused after all (full disk, a
        # read-only mount found out only on write): the user's to fix, so one line, exit 2
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"{where}{exc.strerror or exc}")
        return 2
    except MemoryError:
        say("out of memory: the input is too large for this machine")
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
