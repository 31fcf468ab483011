"""`python -m innet.cli.agghost worker|dest`: the command line of one host of the aggregation
protocol, run inside an emulated host by `innet run aggregation`
(innet.emulation.aggregation). The host's loop is innet.emulation.agghost."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from innet.cli.outpaths import output_file
from innet.emulation.agghost import (
    DestinationJob,
    DestinationSettings,
    WorkerSettings,
    run_destination,
    run_worker,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m innet.cli.agghost",
                                     description="a worker or the destination of the "
                                                 "aggregation protocol, on one host")
    sub = parser.add_subparsers(dest="role", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--dest", required=True, help="destination IPv4 address")
    w.add_argument("--job", type=int, required=True)
    w.add_argument("--worker", type=int, required=True, help="index in the job's workers")
    w.add_argument("--workers", type=int, required=True, help="workers in the job")
    w.add_argument("--values", type=int, required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--window", type=int, required=True,
                   help="how far ahead of its oldest unanswered chunk the worker may go")
    w.add_argument("--inflight", type=int, default=None,
                   help="chunks kept unanswered at most (default: the window)")
    w.add_argument("--slots", type=int, required=True)
    w.add_argument("--first-chunk", type=int, default=0)
    w.add_argument("--start-at", type=float, default=0.0, help="wall-clock time to start")
    w.add_argument("--rto", type=float, default=0.5, help="initial timeout (s)")
    w.add_argument("--min-rto", type=float, default=0.2)
    w.add_argument("--max-rto", type=float, default=0.5)
    w.add_argument("--backoff", type=float, default=1.5)
    w.add_argument("--stall-timeout", type=float, default=120.0,
                   help="give up when no RESULT came for this long (seconds)")
    w.add_argument("--local-ip", default=None,
                   help="this host's address: join the job's result group on it (default: "
                        "results come unicast)")
    w.add_argument("--out", type=output_file(), required=True)
    d = sub.add_parser("dest")
    d.add_argument("--job", action="append", required=True,
                   help="JOB:IP,IP,...:CHUNKS:SLOTS (worker i at the i-th address; SLOTS: the "
                        "job's cells per switch); repeat")
    d.add_argument("--first-chunk", type=int, default=0)
    d.add_argument("--ready", type=output_file(), required=True,
                   help="file touched once the socket is bound")
    d.add_argument("--multicast-from", default=None, metavar="IP",
                   help="send each completed chunk's RESULT once, to the job's group address, "
                        "from this address (default: one unicast per worker)")
    d.add_argument("--out", type=output_file(), required=True)
    args = parser.parse_args(argv)
    result = (run_worker(worker_settings(args)) if args.role == "worker"
              else run_destination(destination_settings(args)))
    Path(args.out).write_text(json.dumps(result))
    return 0


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    return WorkerSettings(
        dest=args.dest, job=args.job, worker=args.worker, workers=args.workers,
        values=args.values, window=args.window, slots=args.slots, seed=args.seed,
        inflight=args.inflight, first_chunk=args.first_chunk, start_at=args.start_at,
        rto=args.rto, min_rto=args.min_rto, max_rto=args.max_rto, backoff=args.backoff,
        stall_timeout=args.stall_timeout, local_ip=args.local_ip)


def destination_settings(args: argparse.Namespace) -> DestinationSettings:
    return DestinationSettings(jobs=tuple(DestinationJob.parse(spec) for spec in args.job),
                               ready=Path(args.ready), first_chunk=args.first_chunk,
                               multicast_from=args.multicast_from)


if __name__ == "__main__":
    sys.exit(main())
