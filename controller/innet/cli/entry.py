"""The `innet` command: one entry point, a subcommand per job.

Each feature module registers its own subcommands (`register(subparsers)`), so this file only
wires them together and turns bad input into one line on stderr with exit status 2, a switch
or network that failed into one line with exit status 3 (docs/inputs.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from innet import __version__
from innet.cli import cassini, demo, deploy, doctor, job, net, pcap, run, soar, topo, view
from innet.cli.parsing import Parser, printable_streams, say
from innet.errors import EXIT_INPUT, EXIT_NETWORK, InputError, NetworkError

DESCRIPTION = """\
innet: in-network computing on P4 switches.

  soar      where to aggregate: the optimal k switches (SOAR) and the simple strategies
  cassini   when each ML job communicates: link compatibility, time shifts, placement
  deploy    install a plan on P4Runtime switches (only the difference)
  status    what each switch holds and counts (--json: reachable, program, entries, primary)
  controller run: keep every switch in its intended state (restarts, drift, mastership)
  run       Mininet experiments on BMv2 (aggregation, CASSINI ECN)
  net       an emulated network that stays up: Mininet's CLI, plans changed live
  job       jobs submitted to, listed on and cancelled from the network that is up
  view      a finished run folder's results and plots in the browser (net up serves its own)
  pcap      summarise a packet capture
  topo      generate and check topology files
  demo      everything this machine can run, one command
  doctor    what this machine has and lacks for innet, and how to fix each part

Run `innet COMMAND --help` for the options of each.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="innet", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"innet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for front_end in (soar, topo, cassini, deploy, pcap, run, net, job, view, demo, doctor):
        front_end.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    printable_streams()
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

