"""`innet cassini ...`: score a link, plan a cluster, evaluate, extract profiles from captures."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from innet.cassini.experiments.evaluation import (
    evaluate_cluster,
    evaluate_link,
    evaluation_text,
    write_report,
)
from innet.cassini.experiments.settings import EvaluationSettings, SweepSettings, TraceSpec
from innet.cassini.experiments.traces import (
    DEFAULT_ITERATIONS,
    DEFAULT_LOAD,
    DEFAULT_OCCUPANCY,
    DEFAULT_POISSON_JOBS,
    KINDS,
    MAX_TRACE_JOBS,
)
from innet.cassini.model.geometry import (
    DEFAULT_PRECISION_DEG,
    best_shifts,
    check_capacity,
    check_precision,
)
from innet.cassini.model.profiles import (
    JOB_NAME,
    JOB_NAME_RULE,
    JobProfile,
    load_jobs,
    load_zoo,
    zoo_assumptions,
)
from innet.cassini.placement.scheduler import (
    DEFAULT_CHECK,
    PlanGuard,
    PlannerSettings,
    Schedule,
    schedule,
)
from innet.cassini.sim.engine import (
    ENGINES,
    MLTCP_INTERCEPT,
    MLTCP_POLICIES,
    MLTCP_SLOPE,
    Engine,
    make_engine,
)
from innet.cassini.sim.fluid import FluidConfig
from innet.cassini.sim.guard import GUARD_ITERATIONS, PacketGuard
from innet.cli.argtypes import SEED, float_in, int_in, positive_float
from innet.cli.options import add_force, add_json, add_seed
from innet.cli.outpaths import output_dir, output_file
from innet.errors import InputError, one_line, quote
from innet.jsonout import dumps, print_json
from innet.table import format_table
from innet.topology import load_topology

JOBS_FORMAT = """\
A jobs file (JSON; YAML with PyYAML installed):

  {"jobs": [
    {"name": "a", "iteration_ms": 200, "gpus": 2,
     "phases": [{"start_ms": 0, "duration_ms": 80, "gbps": 40}]},
    {"name": "b", "model": "VGG19"},
    {"name": "c", "iteration_ms": 100, "demand_gbps": [0, 0, 30, 30]}]}

phases are the Up (communication) phases of one iteration: they start start_ms after the
iteration starts, last duration_ms and want gbps; the gaps are compute (no traffic).
demand_gbps is a sampled curve instead: one value per equal slice of the iteration.
model takes the profile from the model zoo (`innet cassini zoo`; illustrative numbers).
gpus (default: the model's, else 2) is what a job asks of the scheduler; hosts pins a job
that already runs; waited_ms and work_ms feed the fairness (jobs that waited longest
relative to their work get GPUs first)."""

SCORE_HELP = """\
The compatibility score of jobs sharing a link of capacity C is
  1 - mean over the unified circle of max(0, demand(t) - C) / C,
with each job's demand rolled around a circle of its iteration time (jobs with different
iteration times share a circle of their LCM). 1: the jobs never ask for more than the link
carries; lower: they collide (it can go below 0). A shift of s ms means the job's traffic
(its iteration) starts s ms after the common epoch; the first job is at 0."""


TRACE_HELP = """\
Write a trace: jobs of the model zoo, each with the time it arrives (arrival_ms) and the
iterations it trains (iterations). `cassini evaluate --trace FILE --topology T` replays it;
`cassini sweep --trace KIND` draws one per draw (draw i = --seed S --index i here).

  snapshot  every job present at time 0, the cluster exactly full, none pinned: the
            scheduler places them all at once (GPU counts 2-6, so on racks of 4 servers
            many jobs span racks and share uplinks)
  dynamic   jobs of every model take --occupancy of the GPUs at time 0 (2/3 unless told)
            and train 3x as long; once they run, DLRM and ResNet50 jobs (the paper's
            stress test) arrive together and take every GPU left (fragments across
            racks: the fuller the cluster, the likelier an arrival must share an uplink
            with a running job whatever the scheduler does)
  poisson   --trace-jobs jobs arrive with exponential gaps at --load; a job that does not
            fit waits; each leaves when trained

Replaying: at every arrival and departure the running jobs keep their GPUs, the queued ones
go to the GPUs free then (the Themis-like base, or CASSINI's pick among its candidates),
and CASSINI re-plans every running job's shift (its agents apply a new shift at the next
iteration). Departures are predicted at each job's own pace; when the measured run is
slower, a job waits for the GPUs it was given. Reported: job completion time (arrival to
leaving), mean and p99, per arm, with the no-contention ideal and CASSINI's share of the
ideal's gain."""


MIN_PRECISION_DEG = 0.001  # 360,000 steps per iteration: finer is noise, and slow
_precision_range = float_in(MIN_PRECISION_DEG, 360.0)


def _precision(text: str) -> float:
    try:
        return check_precision(_precision_range(text))
    except (argparse.ArgumentTypeError, InputError) as exc:
        raise argparse.ArgumentTypeError(f"precision must be a number of degrees in "
                                         f"[{MIN_PRECISION_DEG:g}, 360], got {text!r}") from exc


def _prefix(text: str) -> str:
    """A file name prefix: it must not lead out of --out."""
    if "/" in text or "\\" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"a file name prefix has no folder in it, got {text!r} "
                                         "(use --out for the folder)")
    return text


def _ipv4(text: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IPv4 address, got {text!r}") from None


_positive = positive_float
_count = int_in(1, 10_000)  # candidates, iterations: 10,000 is minutes already
_MAX_GPUS = 1024


def register(sub: Any) -> None:
    cas = sub.add_parser(
        "cassini",
        help="when each ML job communicates: link compatibility, time shifts, placement",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("CASSINI places training jobs and shifts their start times so that jobs "
                     "sharing a link take turns communicating.\n\n" + SCORE_HELP),
    )
    csub = cas.add_subparsers(dest="cassini_command", metavar="SUBCOMMAND", required=True)
    _register_link(csub)
    _register_plan(csub)
    _register_evaluate(csub)
    _register_sweep(csub)
    _register_trace(csub)
    _register_profile(csub)
    _register_zoo(csub)


def _register_link(sub: Any) -> None:
    link = sub.add_parser(
        "link", help="best shifts for jobs that share one link",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="All jobs of the file share one link: find the shifts that interleave "
                    "them best.\n\n" + SCORE_HELP + "\n\n" + JOBS_FORMAT)
    link.add_argument("jobs", metavar="JOBS.json", help="the jobs file (format below)")
    link.add_argument("--capacity", type=_positive, required=True, metavar="GBPS",
                      help="the link's capacity in Gbps (e.g. 50)")
    _geometry_args(link)
    add_force(link, "search even when the estimate is past 20 s or the memory "
                           "available (see docs/inputs.md)")
    add_json(link, 'print {"score", "shifts_ms": {job: ms}, "period_ms"}')
    link.set_defaults(func=cmd_link)


def _register_plan(sub: Any) -> None:
    plan = sub.add_parser(
        "plan", help="place jobs on a topology and shift them (Themis-like base + CASSINI)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A Themis-like base proposes candidate placements of equal fairness "
                    "(jobs\nfurthest behind get GPUs first, each in the tightest rack that "
                    "holds it);\nCASSINI scores each by the mean compatibility of the links "
                    "it shares\nbetween jobs, drops those whose per-link shifts contradict "
                    "each other\naround a loop, keeps the best and gives each job its shift. "
                    "Jobs spanning\nhosts run a ring all-reduce over shortest paths.\n\n"
                    + SCORE_HELP + "\n\n" + JOBS_FORMAT)
    _cluster_args(plan, required=True)
    add_json(plan, "print the plan: placement, shifts_ms, shared_links, routes, ...")
    plan.set_defaults(func=cmd_plan)


_MLTCP_HELP = ("mltcp and cassini+mltcp (--engine ns3): also measure the base's placement "
               "without shifts, or CASSINI's plan, with MLTCP on every sender, beside the "
               "arms above (docs/cassini-mltcp.md)")


def _cluster_policy_arg(ev: Any) -> None:
    ev.add_argument("--policy", action="append", default=None, metavar="POLICY",
                    choices=("base", "cassini", "soar", "soar+cassini", *MLTCP_POLICIES),
                    help="repeat to compare. base, cassini, soar, soar+cassini (with "
                         "--trace): predict `innet run cluster` under this policy of the "
                         "live cluster's joint plan: jobs admitted at arrival or when room "
                         "frees, aggregation plans' link demands, run cluster's defaults for "
                         "the links (800 packets/s, 4x slowdown, queue 100, ECN at 20); "
                         "writes DIR/cluster-prediction.json. " + _MLTCP_HELP
                         + " (default: no policy, the arms above)")


def _mltcp_policies(args: argparse.Namespace) -> tuple[str, ...]:
    """The MLTCP policies asked for, once each, in order."""
    return tuple(dict.fromkeys(p for p in args.policy or () if p in MLTCP_POLICIES))


def _register_evaluate(sub: Any) -> None:
    ev = sub.add_parser(
        "evaluate", help="fluid evaluation: base vs base + CASSINI, table and plots",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the jobs in a fluid model (no packets): Up phases that exceed a "
                    "link's capacity\nshare it max-min fairly and stretch; marks count the "
                    "volume a link sends while\nits queue (fed by the offered demand) is "
                    "above a threshold, in 1500-byte packets.\nWith --capacity all jobs "
                    "share one link: no shifts vs CASSINI's shifts. With\n--topology: the "
                    "base's placement without shifts, the same with CASSINI's shifts,\nand "
                    "CASSINI's placement with its shifts. Writes to --out a CDF of iteration "
                    "times\n(PREFIXcdf.png), a polar plot of a link's circle before and after "
                    "the shifts\n(PREFIXcircle.png) and the figures (PREFIXsummary.json).")
    what = ev.add_mutually_exclusive_group(required=True)
    what.add_argument("--jobs", metavar="JOBS.json",
                      help="the jobs file (give this or --trace; no default)")
    what.add_argument("--trace", metavar="TRACE.json",
                      help="a trace file (`cassini trace` writes one; needs --topology): jobs "
                           "arrive, are placed on the GPUs free then, train and leave; prints "
                           "job completion times per arm with the no-contention ideal (give "
                           "this or --jobs; no default)")
    where = ev.add_mutually_exclusive_group(required=True)
    where.add_argument("--capacity", type=_positive, metavar="GBPS",
                       help="all jobs share one link of this many Gbps (give this or "
                            "--topology; no default)")
    where.add_argument("--topology", metavar="TOPO.json",
                       help="place the jobs on this topology, e.g. topologies/leafspine24.json "
                            "(give this or --capacity; no default)")
    ev.add_argument("--out", type=output_dir, required=True, metavar="DIR",
                    help="directory for the plots (created if missing; required)")
    _cluster_policy_arg(ev)
    ev.add_argument("--prefix", type=_prefix,
                    help="file name prefix (default: cassini-<jobs file name>-)")
    ev.add_argument("--iterations", type=_count, default=100,
                    help="iterations measured per job (default 100)")
    ev.add_argument("--threshold-kb", type=_positive, default=100.0,
                    help="queue depth above which the link marks, KB (default 100)")
    ev.add_argument("--realign-pct", type=float_in(0, 100, low_open=True), default=None,
                    metavar="PCT",
                    help="model CASSINI's agents: a job later than the grid of its "
                         "interleaving by more than PCT%% of its iteration waits for the "
                         "grid's next point (default: off)")
    ev.add_argument("--realign-budget-pct", type=float_in(0, 100, low_open=True), default=10.0,
                    metavar="PCT",
                    help="the agents never wait more than PCT%% of the iteration to re-align "
                         "(default 10)")
    add_force(ev, "run even when the fluid model's bound is past 2 million steps "
                         "(about 20 s here); a run past 28 simulated hours is refused anyway")
    ev.add_argument("--candidates", type=_count, default=20,
                    help="candidate placements (with --topology; default 20)")
    _engine_args(ev)
    _checked_arg(ev)
    _geometry_args(ev)
    add_json(ev, 'print the figures: {"unit", "runs": [{"label", "score", "mean", '
                         '"p99", "marks", "realignments", "jobs"}], "gain": {"mean", "p99", '
                         '"marks_ratio" (null when CASSINI leaves no marks but the base has '
                         'some)}, "plots", ...}')
    ev.set_defaults(func=cmd_evaluate)


def _register_sweep(sub: Any) -> None:
    sw = sub.add_parser(
        "sweep", help="random placements of the running jobs: is CASSINI better in every one?",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The jobs with hosts in --jobs are already running. Draw their servers "
                    "at random\n--draws times (distinct GPU slots, uniformly over the "
                    "cluster); in every draw the\nbase places the other jobs and CASSINI "
                    "plans, and the fluid model runs three arms:\nthe base's placement "
                    "without shifts, the same with CASSINI's shifts, and CASSINI's\nplan. "
                    "Prints the per-draw table and the summary: geometric means of base /\n"
                    "CASSINI (above 1: CASSINI faster) for mean and p99 iteration time, in ms "
                    "and as a\nslowdown (iteration time / the job's own), marks in total, and "
                    "the draws where\nCASSINI is worse than the base by more than 1% in any "
                    "of them. Writes sweep.json,\nsweep.txt (the table) and sweep-cdf.png to "
                    "--out.\n\nWith --trace KIND instead of --jobs, draw i is a fresh trace "
                    "of that kind\n(`cassini trace KIND --index i`), replayed through the base "
                    "and CASSINI, and the\ntable is job completion times (mean, p99) per "
                    "arm beside the no-contention ideal\nand CASSINI's share of the ideal's "
                    "gain; a loss is more than 2% worse in any of\nthem. Writes sweep.json "
                    "and sweep.txt.")
    _cluster_args(sw, required=True, trace=True)
    _trace_args(sw)
    sw.add_argument("--draws", type=_count, default=40, help="random draws (default 40)")
    sw.add_argument("--iterations", type=_count, default=40,
                    help="iterations measured per job and arm (default 40)")
    sw.add_argument("--out", type=output_dir, metavar="DIR",
                    help="directory for sweep.json, sweep.txt and sweep-cdf.png "
                         "(default runs/cassini-sweep-DATE)")
    _engine_args(sw)
    sw.add_argument("--policy", action="append", default=None, metavar="POLICY",
                    choices=MLTCP_POLICIES,
                    help="repeat for both. " + _MLTCP_HELP
                         + " (default: none, the three arms alone)")
    add_force(sw, "run even when a run's estimate is past the machine's patience")
    sw.add_argument("--workers", type=int_in(1, 256), default=None,
                    help="draws run in this many processes (default: one per CPU)")
    sw.add_argument("--dask", metavar="tcp://HOST:PORT",
                    help="run the draws on this Dask scheduler instead (same numbers; "
                         "default: local processes)")
    add_json(sw, 'print one JSON object: {"draws": [{"base": {"mean_ms", "p99_ms", '
                         '"marks", ...}, "cassini": {...}, ...}], "summary": {...}}')
    sw.set_defaults(func=cmd_sweep)


def _register_trace(sub: Any) -> None:
    tr = sub.add_parser(
        "trace", help="write one of the paper's traces: snapshot, dynamic or poisson",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=TRACE_HELP)
    tr.add_argument("kind", choices=KINDS, help="the trace's kind")
    tr.add_argument("--topology", required=True, metavar="TOPO.json",
                    help="the cluster the trace is for (its GPUs size the trace)")
    tr.add_argument("-o", "--output", type=output_file(), required=True, metavar="TRACE.json",
                    help="the trace file to write")
    tr.add_argument("--seed", type=SEED, default=0, help="the draw's seed (default 0)")
    tr.add_argument("--index", type=int_in(0, 1_000_000), default=0,
                    help="which draw of that seed (a sweep's draw i is index i; default 0)")
    _trace_args(tr)
    add_json(tr, 'print {"wrote", "trace", "jobs", "gpus"}')
    tr.set_defaults(func=cmd_trace)


def _register_profile(sub: Any) -> None:
    prof = sub.add_parser(
        "profile", help="a job profile from a packet capture of its traffic",
        description="Read a capture of one job's traffic (pcap or pcapng, streamed: it may be "
                    "larger than memory), find the iteration time by autocorrelation and "
                    "average the demand per time bin over the iterations. Prints a summary; "
                    "-o writes a jobs file the other commands read.")
    prof.add_argument("capture", metavar="CAPTURE.pcap", help="the capture (pcap or pcapng)")
    prof.add_argument("--bin-ms", type=float_in(0.001, 60_000, low_open=False), default=1.0,
                      help="time bin in ms, 0.001 to 60000 (default 1)")
    prof.add_argument("--host", type=_ipv4, metavar="IPv4",
                      help="only packets from or to this address (default: all packets)")
    prof.add_argument("--name", help="job name (default: the capture's file name)")
    prof.add_argument("--gpus", type=int_in(1, _MAX_GPUS), default=2,
                      help="gpus of the job (default 2)")
    prof.add_argument("--min-period-ms", type=_positive, default=None,
                      help="shortest iteration time to consider (default: 2 bins)")
    prof.add_argument("--max-period-ms", type=_positive, default=None,
                      help="longest iteration time to consider (default: half the capture)")
    prof.add_argument("-o", "--output", type=output_file(), metavar="JOBS.json",
                      help="write a jobs file (default: write nothing)")
    add_force(prof, "search even when the estimate is past 20 s or the memory "
                           "available (see docs/inputs.md)")
    add_json(prof, 'print {"period_ms", "confidence", "iterations", "packets", '
                           '"bytes", "bin_ms", "job"}')
    prof.set_defaults(func=cmd_profile)


def _register_zoo(sub: Any) -> None:
    zoo = sub.add_parser("zoo", help="the shipped model profiles (illustrative)",
                          description="The 13 models of the paper with illustrative profiles "
                                      "and the assumptions behind them.")
    add_json(zoo, 'print {"assumptions", "models": {name: {"iteration_ms", "gpus", '
                          '"parallelism", "phases"}}}')
    zoo.set_defaults(func=cmd_zoo)


def _iteration_span(text: str) -> tuple[int, int]:
    parts = text.split("-")
    try:
        lo, hi = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        lo, hi = 0, -1
    if not 1 <= lo <= hi <= 100_000:
        raise argparse.ArgumentTypeError(f"expected N or LO-HI with 1 <= LO <= HI <= 100000, "
                                         f"got {text!r}")
    return lo, hi


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace-jobs", type=int_in(1, MAX_TRACE_JOBS),
                   default=DEFAULT_POISSON_JOBS,
                   help=f"poisson: jobs that arrive (default {DEFAULT_POISSON_JOBS})")
    p.add_argument("--load", type=float_in(0, 100, low_open=True), default=DEFAULT_LOAD,
                   help="poisson: GPU demand over the cluster's GPUs; sets the mean gap "
                        f"between arrivals (default {DEFAULT_LOAD:g})")
    p.add_argument("--occupancy", type=float_in(0, 1, low_open=True, high_open=True),
                   default=None, metavar="SHARE",
                   help="dynamic: the share of the GPUs the running jobs hold at time 0; "
                        f"the arrivals take the rest (default {DEFAULT_OCCUPANCY:.3g})")
    p.add_argument("--trace-iterations", type=_iteration_span, default=DEFAULT_ITERATIONS,
                   metavar="LO-HI",
                   help="iterations each job trains, drawn in [LO, HI] (dynamic: the running "
                        f"jobs train 3x as long; default {DEFAULT_ITERATIONS[0]}-"
                        f"{DEFAULT_ITERATIONS[1]})")


def _geometry_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision-deg", type=_precision, default=DEFAULT_PRECISION_DEG,
                   metavar="D", help="angle step of the shift search, in degrees of the "
                                     "shortest iteration (default 5: 72 steps)")
    add_seed(p, "the search's random restarts and of the candidates")


def _cluster_args(p: argparse.ArgumentParser, *, required: bool,
                  trace: bool = False) -> None:
    p.add_argument("--topology", required=required, metavar="TOPO.json",
                   help="hosts (with gpus), switches and links with Mbps")
    if not trace:
        p.add_argument("--jobs", required=True, metavar="JOBS.json", help="the jobs file")
    else:
        what = p.add_mutually_exclusive_group(required=True)
        what.add_argument("--jobs", metavar="JOBS.json",
                          help="the jobs file: its jobs with hosts are the running ones "
                               "(give this or --trace; no default)")
        what.add_argument("--trace", choices=KINDS,
                          help="draw a trace of this kind per draw instead (`cassini trace "
                               "--help` says what each is); prints job completion times "
                               "(give this or --jobs; no default)")
    p.add_argument("--candidates", type=_count, default=20,
                   help="candidate placements the base proposes (default 20)")
    _geometry_args(p)
    _checked_arg(p)


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, default="fluid",
                   help="what measures the arms: the fluid model (default), or ns-3 packets "
                        "(TCP DCTCP, RED queues marking ECN; docs/cassini-ns3.md)")
    p.add_argument("--rate-scale", type=float_in(0, 1, low_open=True), default=None,
                   metavar="S",
                   help="ns3: multiply link and phase rates by S, delays by 1/S (default: the "
                        "fastest link becomes 0.1 Gbps)")
    p.add_argument("--ecmp", action="store_true",
                   help="ns3: ns-3's random per-packet ECMP instead of innet's routes")
    p.add_argument("--mltcp-slope", type=float_in(0, 100), default=None, metavar="S",
                   help=f"ns3: MLTCP's F(r) = S r + I, r the share of the iteration sent "
                        f"(default {MLTCP_SLOPE:g})")
    p.add_argument("--mltcp-intercept", type=float_in(0, 100, low_open=True), default=None,
                   metavar="I", help=f"ns3: MLTCP's I (default {MLTCP_INTERCEPT:g})")
    p.add_argument("--guard", choices=("ns3", "none"), default=None,
                   help="before CASSINI commits a pick the fluid check prefers to the base's, "
                        "run both briefly on ns-3 where they differ and keep the base's "
                        "unless the pick is no worse there (docs/cassini-guard.md; default: "
                        "ns3 with --engine ns3, none otherwise)")
    p.add_argument("--guard-iterations", type=_count, default=GUARD_ITERATIONS, metavar="N",
                   help=f"the guard runs each job at most N of the iterations it has left "
                        f"(default {GUARD_ITERATIONS})")


def _engine(args: argparse.Namespace) -> Engine:
    """The engine the options ask for; for one of separate runs (ns-3), one line on what it
    runs (the rate scale)."""
    engine = make_engine(args.engine, rate_scale=args.rate_scale, ecmp=args.ecmp,
                         seed=args.seed, mltcp_slope=args.mltcp_slope,
                         mltcp_intercept=args.mltcp_intercept)
    policies = _mltcp_policies(args)
    mltcp = engine.with_transport("mltcp") if policies else None  # fluid: refused, one line
    if engine.separate_runs:
        if getattr(args, "capacity", None) is not None:
            fastest = float(args.capacity)
        else:
            topo = load_topology(args.topology)
            fastest = max((link.mbps or 0.0) for link in topo.links) / 1000.0
        trace = getattr(args, "trace", None) is not None
        where = sys.stderr if getattr(args, "json", False) else sys.stdout
        print(f"engine: {engine.describe(fastest, trace)}", file=where)
        if mltcp is not None:
            print(f"{' and '.join(policies)}: {mltcp.describe(fastest, trace)}", file=where)
    return engine


def _checked_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checked", type=int_in(0, 10_000), default=20,
                   help="candidates CASSINI runs in the fluid model (with and without its "
                        "shifts) before choosing; it keeps the base's placement when none "
                        "beats it. 0: the paper's ranking by mean link score alone "
                        "(default 20)")


def _warn(messages: Sequence[str]) -> None:
    for message in messages:
        print(one_line(f"innet: warning: {message}"), file=sys.stderr)


# ------------------------------------------------------------------------------------ link


def cmd_link(args: argparse.Namespace) -> int:
    jobs = load_jobs(args.jobs)
    solution = best_shifts(jobs, check_capacity(args.capacity),
                           precision_deg=args.precision_deg, seed=args.seed, force=args.force)
    if solution.circle.warning:
        _warn([solution.circle.warning])
    if args.json:
        print_json({"score": solution.score, "shifts_ms": solution.shift_map(),
                    "period_ms": solution.circle.period_ms})
        return 0
    circle = solution.circle
    print(f"{len(jobs)} jobs on one {args.capacity:g} Gbps link; unified circle "
          f"{circle.period_ms:g} ms, step {circle.step_ms:.3g} ms ({args.precision_deg:g} "
          f"degrees of the shortest iteration), {solution.method} search")
    rows = [[j.name, j.model or "-", j.iteration_ms, j.peak_gbps, round(100 * j.comm_fraction),
             s, 360.0 * s / p]
            for j, s, p in zip(jobs, solution.shifts_ms, circle.periods_ms, strict=True)]
    print(format_table(["job", "model", "iteration (ms)", "peak Gbps", "Up %", "shift (ms)",
                        "shift (deg)"], rows, digits=1))
    print(f"score without shifts: {solution.score_unshifted:.3f}   with the shifts: "
          f"{solution.score:.3f}   (1 = never above capacity)")
    return 0


# ------------------------------------------------------------------------------------ plan


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    """A bar over the candidates, on a terminal only; yields the callback that advances it."""
    from innet.progress import bar as progress_bar

    with progress_bar(total=total, desc="scoring candidates", unit="placement",
                      leave=False) as bar:
        yield lambda _i: bar.update(1)


def _planner(args: argparse.Namespace, config: FluidConfig = DEFAULT_CHECK,
             precision_deg: float | None = None, engine: Engine | None = None
             ) -> PlannerSettings:
    """The planner the options ask for, checking with `config`; `precision_deg` overrides
    --precision-deg (the sweeps and trace replays have always searched at the default);
    `engine`: the evaluation's, whose packets the guard uses when it is ns-3."""
    return PlannerSettings(args.candidates, args.checked,
                           args.precision_deg if precision_deg is None else precision_deg,
                           args.seed, config, _guard(args, engine))


def _guard(args: argparse.Namespace, engine: Engine | None) -> PlanGuard | None:
    """--guard: ns-3 by default when the arms are measured on ns-3 (with their settings)."""
    which = getattr(args, "guard", None)
    if which is None:
        which = "ns3" if engine is not None and engine.name == "ns3" else "none"
    if which == "none" or args.checked == 0:
        return None
    if engine is None or engine.name != "ns3":
        engine = make_engine("ns3", seed=args.seed)
    guard = PacketGuard(engine.with_transport("dctcp"), args.guard_iterations)
    guard.check()
    return guard


def _schedule(args: argparse.Namespace) -> tuple[Schedule, Any, tuple[JobProfile, ...]]:
    topo = load_topology(args.topology)
    jobs = load_jobs(args.jobs)
    with _progress(args.candidates) as progress:
        result = schedule(topo, jobs, _planner(args), progress=progress)
    return result, topo, jobs


def cmd_plan(args: argparse.Namespace) -> int:
    result, topo, jobs = _schedule(args)
    plan = result.cassini
    _warn(plan.warnings)
    if args.json:
        print_json(plan.to_dict())
        return 0
    gpus = sum(h.gpus for h in topo.hosts.values())
    print(f"topology {topo.name}: {len(topo.hosts)} hosts, {gpus} GPUs; {len(jobs)} jobs "
          f"asking for {sum(j.gpus for j in jobs)} GPUs")
    base = result.base
    print(f"{len(plan.candidates)} candidate placements; the base's own (#0) scores "
          f"{base.score:.3f} without shifts. CASSINI keeps #{plan.candidate}: score "
          f"{plan.score:.3f}, {len(plan.shared_links())} shared links, {plan.loops} loop(s), "
          f"{len(plan.conflicts)} conflict(s)")
    print()
    rows = [[j.name, j.model or "-", j.gpus, ",".join(plan.placement[j.name]),
             plan.shifts_ms[j.name]] for j in plan.jobs]
    print(format_table(["job", "model", "gpus", "hosts", "shift (ms)"], rows, digits=1))
    if plan.shared:
        print()
        rows = [[" ".join(s.links), ",".join(s.jobs), s.score_unshifted, s.score_best, s.score]
                for s in plan.shared]
        print(format_table(["shared link(s)", "jobs", "no shifts", "best", "plan"], rows))
    else:
        print("\nno link carries two jobs: nothing to interleave")
    print()
    rows = [[c.index, c.score, c.achieved, c.shared_links, c.loops, c.conflicts]
            for c in plan.candidates]
    print(format_table(["candidate", "score", "at shifts", "shared links", "loops",
                        "conflicts"], rows))
    for conflict in plan.conflicts:
        print(f"conflict: {conflict.describe()}")
    if plan.waiting:
        print(f"waiting (no free GPUs): {', '.join(plan.waiting)}")
    return 0


# -------------------------------------------------------------------------------- evaluate


def _occupancy(args: argparse.Namespace, kind: str | None) -> float:
    if args.occupancy is not None and kind != "dynamic":
        raise InputError(f"--occupancy is for the dynamic trace, not "
                         f"{kind or 'a sweep of --jobs'}")
    return DEFAULT_OCCUPANCY if args.occupancy is None else float(args.occupancy)


def cmd_trace(args: argparse.Namespace) -> int:
    from innet.cassini.experiments.traces import make_trace

    topo = load_topology(args.topology)
    trace = make_trace(args.kind, topo, args.seed, args.index, count=args.trace_jobs,
                       load=args.load, iterations=args.trace_iterations,
                       occupancy=_occupancy(args, args.kind))
    lo, hi = args.trace_iterations
    extra = (f" --trace-jobs {args.trace_jobs} --load {args.load:g}" if args.kind == "poisson"
             else f" --occupancy {args.occupancy:g}" if args.occupancy is not None else "")
    data = trace.to_dict() | {"comment": f"innet cassini trace {args.kind} --topology "
                                         f"{args.topology} --seed {args.seed} --index "
                                         f"{args.index} --trace-iterations {lo}-{hi}{extra}"}
    try:
        Path(args.output).write_text(dumps(data, indent=1) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", source=args.output) from None
    gpus = sum(h.gpus for h in topo.hosts.values())
    if args.json:
        print_json({"wrote": str(args.output), "trace": args.kind, "jobs": len(trace.jobs),
                    "gpus": gpus})
        return 0
    print(f"wrote {args.output}: {trace.description}")
    return 0


def _evaluate_trace(args: argparse.Namespace, config: FluidConfig, engine: Engine) -> int:
    from innet.cassini.experiments.trace_sweep import evaluate_trace, evaluation_trace_text
    from innet.cassini.experiments.traces import check_fits, load_trace
    if args.topology is None:
        raise InputError("--trace needs --topology (the cluster the jobs arrive in)")
    topo = load_topology(args.topology)
    trace = load_trace(args.trace)
    from innet.cassini.placement.cluster import cluster_from_topology

    check_fits(trace, cluster_from_topology(topo))
    # the trace is planned and measured with CASSINI's agents on (the base has none)
    config = replace(DEFAULT_CHECK, threshold_kb=config.threshold_kb,
                     realign_pct=config.realign_pct if config.realign_pct is not None else 5.0,
                     realign_budget_pct=config.realign_budget_pct, force=config.force)
    planner = _planner(args, config, precision_deg=DEFAULT_PRECISION_DEG, engine=engine)
    draw = evaluate_trace(topo, trace, EvaluationSettings(planner, engine, config,
                                                         _mltcp_policies(args)))
    _warn(draw.warnings)
    out = Path(args.out)
    prefix = args.prefix if args.prefix is not None else f"cassini-{Path(args.trace).stem}-"
    path = out / f"{prefix}summary.json"
    path.write_text(dumps(draw.to_dict(), indent=1) + "\n")
    if args.json:
        print_json(draw.to_dict())
        return 0
    print(f"{Path(args.trace).name} on {args.topology}: {trace.description or trace.kind}; "
          f"{len(trace.jobs)} jobs, "
          + f"{engine.name} engine"
          + f"; CASSINI's agents re-align past {config.realign_pct:g}%")
    print(evaluation_trace_text(draw))
    print(f"wrote {path}")
    return 0


def _predict_cluster(args: argparse.Namespace) -> int:
    """`--trace --policy P`: what `innet run cluster` will measure, from the fluid model."""
    from innet.emulation.cluster_run import ClusterRunOptions, predict_trace

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create: {exc.strerror}", source=str(out)) from None
    policies = tuple(dict.fromkeys(args.policy))
    if set(policies) & set(MLTCP_POLICIES):
        raise InputError("mltcp policies are measured on ns-3, not predicted for the live "
                         "cluster: give them without base, cassini, soar or soar+cassini")
    got = predict_trace(ClusterRunOptions(args.topology, args.trace, policies))
    (out / "cluster-prediction.json").write_text(json.dumps({"policies": got}, indent=1))
    if args.json:
        print_json({"policies": got})
        return 0
    print(format_table(["policy", "jobs placed", "mean JCT s", "mean iteration ms", "marks",
                        "SOAR cost"],
                       [[p, r["placed"], r["mean_jct_s"], r["mean_iteration_ms"], r["marks"],
                         r["predicted_cost"]] for p, r in got.items()], digits=4))
    print(f"wrote {out / 'cluster-prediction.json'} (compare: innet run cluster --topology "
          f"{args.topology} --trace {args.trace})")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    config = FluidConfig(iterations=args.iterations, threshold_kb=args.threshold_kb,
                         realign_pct=args.realign_pct,
                         realign_budget_pct=args.realign_budget_pct, force=args.force)
    config.check()
    predict = [p for p in args.policy or () if p not in MLTCP_POLICIES]
    if predict and args.trace is None:
        raise InputError(f"--policy {predict[0]} predicts a trace's live cluster run: give "
                         "--trace")
    if args.trace is not None:
        if args.capacity is not None:
            raise InputError("--trace needs --topology, not --capacity")
        if predict:
            return _predict_cluster(args)
        engine = _engine(args)
        try:
            Path(args.out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create: {exc.strerror}", source=str(args.out)) from None
        return _evaluate_trace(args, config, engine)
    jobs = load_jobs(args.jobs)
    engine = _engine(args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create: {exc.strerror}", source=str(out)) from None
    prefix = args.prefix if args.prefix is not None else f"cassini-{Path(args.jobs).stem}-"
    if args.capacity is not None:
        ev = evaluate_link(jobs, check_capacity(args.capacity),
                           EvaluationSettings(_planner(args, engine=engine), engine, config,
                                              _mltcp_policies(args)), force=args.force)
        where = ev.where
    else:
        topo = load_topology(args.topology)
        with _progress(args.candidates) as progress:
            settings = EvaluationSettings(_planner(args, engine=engine), engine, config,
                                          _mltcp_policies(args))
            ev = evaluate_cluster(topo, jobs, settings, progress)
        assert ev.plan is not None
        where = f"{args.topology}, CASSINI keeps candidate #{ev.plan.candidate}"
    _warn(ev.warnings)
    paths = write_report(ev, out, prefix, f"{Path(args.jobs).name} on {where}")
    if args.json:
        print_json(ev.to_dict() | {"plots": [str(p) for p in paths]})
        return 0
    print(f"{Path(args.jobs).name} on {where}; {config.iterations} iterations per job, "
          + engine.marks_note(config)
          + (f", agents re-align past {config.realign_pct:g}%" if config.realign_pct else ""))
    print(evaluation_text(ev))
    for p in paths:
        print(f"wrote {p}")
    return 0


# ----------------------------------------------------------------------------------- sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    import time

    from innet.cassini.experiments.placement_sweep import summarise, sweep, sweep_text
    topo = load_topology(args.topology)
    jobs = load_jobs(args.jobs) if args.jobs is not None else ()
    occupancy = _occupancy(args, args.trace)
    out = (Path(args.out) if args.out
           else Path("runs") / time.strftime("cassini-sweep-%Y%m%d-%H%M%S"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create: {exc.strerror}", source=str(out)) from None
    # the draws are planned and measured with the same fluid run, at the default step
    config = replace(DEFAULT_CHECK, iterations=args.iterations, force=args.force)
    if args.policy and args.trace is None:
        raise InputError("--policy applies to trace sweeps (--trace) and to evaluate, not to "
                         "sweeps of a jobs file's placements")
    engine = _engine(args)
    evaluation = EvaluationSettings(
        _planner(args, config, precision_deg=DEFAULT_PRECISION_DEG, engine=engine), engine,
        config, _mltcp_policies(args))
    settings = SweepSettings(evaluation, args.draws, args.workers or os.cpu_count() or 1,
                             args.dask)
    from innet.progress import bar as progress_bar

    if args.trace is not None:
        return _sweep_traces(args, topo, out, settings, occupancy)

    with progress_bar(total=args.draws, desc="draws", unit="draw", leave=False) as bar:
        draws = sweep(topo, jobs, settings, progress=lambda _i: bar.update(1))
    summary = summarise(draws)
    data = {"topology": args.topology, "jobs": args.jobs, "seed": args.seed,
            "engine": args.engine, "rate_scale": args.rate_scale, "ecmp": args.ecmp,
            "iterations": args.iterations, "candidates": args.candidates,
            "checked": args.checked, "draws": [d.to_dict() for d in draws],
            "summary": summary}
    from innet.cassini.experiments.plots import plot_sweep

    plot_sweep(draws, out / "sweep-cdf.png",
               title=f"{Path(args.jobs).name} on {Path(args.topology).name}: "
                     f"{len(draws)} draws of the running jobs' servers")
    return _write_sweep(out, data, sweep_text(draws, summary), args.json,
                        f"wrote {out / 'sweep.txt'}, {out / 'sweep.json'}, "
                        f"{out / 'sweep-cdf.png'}")


def _sweep_traces(args: argparse.Namespace, topo: Any, out: Path, settings: SweepSettings,
                  occupancy: float) -> int:
    import time

    from innet.cassini.experiments.trace_sweep import (
        summarise_traces,
        trace_sweep,
        trace_sweep_text,
    )
    from innet.progress import bar as progress_bar

    t0 = time.monotonic()
    with progress_bar(total=args.draws, desc="draws", unit="draw", leave=False) as bar:
        spec = TraceSpec(args.trace, args.trace_jobs, args.load, args.trace_iterations,
                         occupancy)
        draws = trace_sweep(topo, spec, settings, progress=lambda _i: bar.update(1))
    summary = summarise_traces(draws)
    wall = time.monotonic() - t0
    data = {"topology": args.topology, "trace": args.trace, "seed": args.seed,
            "engine": args.engine, "rate_scale": args.rate_scale, "ecmp": args.ecmp,
            "policies": list(settings.evaluation.policies),
            "trace_iterations": list(args.trace_iterations), "trace_jobs": args.trace_jobs,
            "load": args.load, "occupancy": occupancy if args.trace == "dynamic" else None,
            "candidates": args.candidates, "checked": args.checked, "wall_s": wall,
            "draws": [d.to_dict() for d in draws], "summary": summary}
    return _write_sweep(out, data, trace_sweep_text(draws, summary), args.json,
                        f"{len(draws)} draws in {wall:.0f} s; wrote {out / 'sweep.txt'}, "
                        f"{out / 'sweep.json'}")


def _write_sweep(out: Path, data: dict[str, Any], text: str, as_json: bool,
                 wrote: str) -> int:
    """A sweep's files (sweep.json, sweep.txt), then the JSON or the table on stdout."""
    (out / "sweep.json").write_text(dumps(data, indent=1) + "\n")
    (out / "sweep.txt").write_text(text + "\n")
    if as_json:
        print_json(data)
        return 0
    print(text)
    print(f"\n{wrote}")
    return 0


# ------------------------------------------------------------------------- profile and zoo


def cmd_profile(args: argparse.Namespace) -> int:
    from innet.cassini.model.pcap_profile import job_name, profile_capture

    if (args.min_period_ms is not None and args.max_period_ms is not None
            and args.min_period_ms >= args.max_period_ms):
        raise InputError(f"--min-period-ms ({args.min_period_ms:g}) must be below "
                         f"--max-period-ms ({args.max_period_ms:g})")
    if args.name is not None and not JOB_NAME.fullmatch(args.name):
        raise InputError(f"--name must be {JOB_NAME_RULE}, got {quote(args.name)}")
    # the file name is only a default: made valid ("my capture" -> "my-capture") up front
    name = args.name or job_name(Path(args.capture).stem)
    prof = profile_capture(args.capture, bin_ms=args.bin_ms, host=args.host,
                           min_period_ms=args.min_period_ms, max_period_ms=args.max_period_ms,
                           force=args.force)
    entry = prof.to_job_dict(name, args.gpus)
    prof.job(name, args.gpus)  # refuse a profile the other commands would refuse
    if args.output:
        try:
            Path(args.output).write_text(dumps({"jobs": [entry]}, indent=1) + "\n")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", source=args.output) from None
    if args.json:
        print_json({"period_ms": prof.period_ms, "confidence": prof.confidence,
                    "iterations": prof.iterations, "packets": prof.packets,
                    "bytes": prof.bytes, "bin_ms": prof.bin_ms, "job": entry})
        return 0
    peak = max(prof.demand_gbps)
    busy = sum(1 for v in prof.demand_gbps if v > 0.1 * peak) * prof.bin_ms
    print(f"{args.capture}: {prof.packets} packets, {prof.bytes / 1e6:.3g} MB over "
          f"{prof.duration_ms / 1e3:.3g} s")
    print(f"iteration time {prof.period_ms:.5g} ms (confidence {prof.confidence:.2f}: share of "
          f"the variance one period explains, "
          f"{prof.iterations} whole iterations); peak {peak:.3g} Gbps, above 10% of it for "
          f"{busy:.4g} ms per iteration")
    if args.output:
        print(f"wrote {args.output} (job {name!r}, {len(prof.demand_gbps)} bins of "
              f"{prof.bin_ms:g} ms)")
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    zoo = load_zoo()
    if args.json:
        print_json({"assumptions": zoo_assumptions(),
                    "models": {m.model: {"iteration_ms": m.iteration_ms, "gpus": m.gpus,
                                         "parallelism": m.parallelism,
                                         "phases": [p.__dict__ for p in m.phases]}
                               for m in zoo.values()}})
        return 0
    rows = []
    for m in zoo.values():
        up = sum(p.duration_ms for p in m.phases)
        rows.append([m.model, m.parallelism, m.iteration_ms, len(m.phases), up,
                     max(p.gbps for p in m.phases), m.gpus])
    print(format_table(["model", "parallelism", "iteration (ms)", "Up phases", "Up (ms)",
                        "peak Gbps", "gpus"], rows, digits=0))
    print("\nIllustrative numbers, not measurements. Assumptions:")
    for line in zoo_assumptions():
        print(f"- {line}")
    return 0
