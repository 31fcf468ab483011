"""`python -m innet.cli.agent send|receive`: the CASSINI traffic agent's command line, run
inside an emulated host by `innet run cassini` (innet.emulation.cassini_run). The agent
itself (pacing, CE reaction, counting) is innet.emulation.agent."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from innet.aggpacket import ECT0
from innet.cli.outpaths import output_file
from innet.emulation.agent import WINDOW_S, Phase, SenderSettings, receive, send


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m innet.cli.agent",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send", help="one job's paced on/off traffic")
    s.add_argument("--dest", required=True)
    s.add_argument("--job", type=int, required=True)
    s.add_argument("--iteration-ms", type=float, required=True)
    s.add_argument("--phases", required=True,
                   help='JSON list of {"start_ms", "duration_ms", "pps"}')
    s.add_argument("--shift-ms", type=float, default=0.0)
    s.add_argument("--epoch", type=float, required=True, help="UNIX time of iteration 0")
    s.add_argument("--iterations", type=int, required=True)
    s.add_argument("--tos", type=int, default=ECT0)
    s.add_argument("--out", type=output_file(), required=True)
    s.add_argument("--no-react", action="store_true",
                   help="send at the phase's full rate whatever the CE echoes say")
    s.add_argument("--no-realign", action="store_true", help="never wait for the grid")
    s.add_argument("--grid-ms", type=float, default=None,
                   help="re-alignment grid (default: the iteration time)")
    s.add_argument("--budget-pct", type=float, default=100.0,
                   help="longest wait a re-alignment may cost, %% of T (default 100)")
    s.add_argument("--window-ms", type=float, default=WINDOW_S * 1000,
                   help=f"one rate decision per this many ms (default {WINDOW_S * 1000:g})")
    r = sub.add_parser("receive", help="count packets and CE marks, answer acknowledgements")
    r.add_argument("--duration", type=float, required=True, help="listen at most this long (s)")
    r.add_argument("--idle", type=float, default=None,
                   help="stop once nothing has arrived for this long (s) after the first packet")
    r.add_argument("--out", type=output_file(), required=True)
    args = parser.parse_args(argv)
    if args.mode == "send":
        send(sender_settings(args), Path(args.out))
    else:
        receive(args.duration, Path(args.out), idle_s=args.idle)
    return 0


def sender_settings(args: argparse.Namespace) -> SenderSettings:
    phases = tuple(Phase(float(p["start_ms"]), float(p["duration_ms"]), float(p["pps"]))
                   for p in json.loads(args.phases))
    return SenderSettings(args.dest, args.job, args.iteration_ms, phases, args.shift_ms,
                          args.epoch, args.iterations, args.tos, react=not args.no_react,
                          realign=not args.no_realign, grid_ms=args.grid_ms,
                          budget_pct=args.budget_pct, window_s=args.window_ms / 1000)


if __name__ == "__main__":
    sys.exit(main())
