"""The `innet` command: one entry point, a subcommand per job.

Each feature module registers its own subcommands (`register(subparsers)`), so this file only
wires them together and turns bad input into one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller import __version__
from controller.errors import InputError

DESCRIPTION = """\
innet: in-network computing on P4 switches.

  soar      where to aggregate: the optimal k switches (SOAR) and the simple strategies
  cassini   when each ML job communicates: link compatibility, time shifts, placement
  deploy    install a plan on P4Runtime switches (only the difference)
  status    what each switch holds and counts (--json: reachable, program, entries, primary)
  controller run: keep every switch in its intended state (restarts, drift, mastership)
  run       Mininet experiments on BMv2 (aggregation, CASSINI ECN)
  pcap      summarise a packet capture
  topo      generate and check topology files
  demo      everything this machine can run, one command
  doctor    what this machine has and lacks for innet, and how to fix each part

Run `innet COMMAND --help` for the options of each.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="innet", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"innet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from controller.soar import cli as soar_cli

    soar_cli.register(sub)
    from controller import topo_cli

    topo_cli.register(sub)
    from controller.cassini import cli as cassini_cli

    cassini_cli.register(sub)
    from controller.p4rt import cli as p4rt_cli

    p4rt_cli.register(sub)
    from controller import pcap

    pcap.register(sub)
    from controller.emulation import cli as emulation_cli

    emulation_cli.register(sub)
    from controller import demo

    demo.register(sub)
    from controller import doctor

    doctor.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except InputError as exc:
        print(f"innet: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("innet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `innet ... | head` closed our stdout: not an error; keep Python from complaining
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
