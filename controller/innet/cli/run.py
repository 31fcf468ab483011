"""`innet run aggregation|cassini|cluster`: the experiments on BMv2 switches in Mininet."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from innet.cli.argtypes import SEED, K, float_in, int_in, probability
from innet.cli.oldflags import renamed
from innet.cli.options import add_json, add_seed, add_tls
from innet.cli.outpaths import output_dir
from innet.emulation.aggregation import (
    DEFAULT_INFLIGHT,
    DEFAULT_STRATEGIES,
    DEFAULT_VALUES,
    DEFAULT_WINDOW,
    QUEUE_BUDGET,
    AggregationRunOptions,
    Timers,
)
from innet.emulation.cassini_run import DEFAULT_SLOWDOWN, MAX_SLOWDOWN, CassiniRunOptions
from innet.emulation.net import EmulationError, require_bmv2, require_mininet
from innet.errors import InputError
from innet.jsonout import print_json
from innet.soar.baselines import STRATEGIES

NEEDS = ("Needs root, Debian's mininet (./setup.sh installs it) and BMv2's simple_switch_grpc "
         "on PATH (./setup.sh installs them; `innet doctor` says what is missing).")


MAX_VALUES = 1 << 24  # per worker: 2^19 chunks, hours of BMv2 at its few thousand packets/s
MAX_ITERATIONS = 10_000
MAX_PPS = 100_000  # BMv2 forwards a few thousand packets/s per port in software


def default_out(kind: str) -> Path:
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


AGGREGATION_DESCRIPTION = (
    "Start the topology in Mininet, then for each strategy: plan (SOAR or a baseline),\n"
    "deploy the plan (only the difference from the previous one is written), let every\n"
    "worker stream --values floats (fixed point) with the reliable protocol of\n"
    "docs/aggregation-protocol.md, check every worker's result and the destination's\n"
    "sums against the host-side fixed-point sum, and turn the switches' egress\n"
    "counters into the measured cost (sum over uplinks of first transmissions per\n"
    "chunk / rate: every switch of the tree counts what it sends again apart), next\n"
    "to the predicted phi, and the cost with that overhead. --loss makes every switch\n"
    "drop that share of the aggregation packets it receives (in the P4 program); the\n"
    "protocol retransmits, and the measured cost is still phi.\n\n"
    "Writes to --out: topology.json, plan.json, logs/ (switch logs, host outputs),\n"
    "results.json (per strategy: strategy, k, blue, rounds (= chunks),\n"
    "predicted_cost, measured_cost, total_cost, sums_exact, values, chunks,\n"
    "retransmissions, duration_s, goodput_values_per_s, events, link_packets (first\n"
    "transmissions per uplink), link_repeats, ...), aggregation.png and summary.md.\n"
    "Exit status 0 when every sum is exact and every measured cost == phi; otherwise\n"
    "1, with the strategies that departed named on stderr.\n\n"
    + NEEDS
)

CASSINI_DESCRIPTION = (
    "CASSINI places the jobs of --jobs on --topology and computes time shifts. In\n"
    "Mininet, every switch port drains --capacity-pps packets/s (the slowest link's\n"
    "capacity; Gbps scale to packets/s by the same factor), the switches mark CE above\n"
    "--ecn-threshold queued packets, and each job's ring flows send paced UDP (ECT(0))\n"
    "in its Up phases from epoch + shift, cutting its rate on echoed CE marks\n"
    "(DCTCP-like). Three arms on the same hosts: the base's placement without shifts,\n"
    "the same with CASSINI's shifts, CASSINI's placement with its shifts. Writes\n"
    "results.json (per arm: CE marks at receivers and switches, mean_ms, p99_ms,\n"
    "iteration times), cassini.png, summary.md, plan.json and logs/ to --out.\n\n"
    + NEEDS
)


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="Mininet experiments on BMv2 switches",
                         description="Experiments on an emulated network of BMv2 switches. "
                                     + NEEDS)
    rsub = run.add_subparsers(dest="run_command", metavar="EXPERIMENT", required=True)
    _register_aggregation(rsub)
    _register_cassini(rsub)
    _register_cluster(rsub)


def _register_aggregation(rsub: Any) -> None:
    agg = rsub.add_parser(
        "aggregation",
        help="deploy each strategy's plan, send vectors, compare measured cost with phi",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=AGGREGATION_DESCRIPTION,
    )
    agg.add_argument("--topology", required=True, help="topology JSON (e.g. topologies/bt15.json)")
    agg.add_argument("--workload", help="workload JSON {job, destination, workers}; default: "
                                        "every host but the topology's destination, job 1")
    agg.add_argument("--strategy", action="append", choices=list(STRATEGIES),
                     help="strategy to run (repeat for several; default: all)")
    agg.add_argument("-k", type=K, default=4,
                     help="at most this many blue (aggregating) switches per job (default 4)")
    _add_stream_options(agg)
    agg.add_argument("--pcap", action="store_true", help="capture every switch port")
    add_tls(agg, starts=True)
    agg.add_argument("--out", type=output_dir, default=None,
                     help="run folder (default runs/aggregation-DATE)")
    add_json(agg, 'print {"run_folder", "ok", "strategies": [{"strategy", "k", "blue", '
                          '"rounds", "predicted_cost", "measured_cost", "sums_exact", "writes", '
                          '...}]}')
    agg.set_defaults(func=cmd_aggregation)


def _add_stream_options(agg: argparse.ArgumentParser) -> None:
    """What each worker streams and how: tensor size, loss, window, timers, rates."""
    agg.add_argument("--values", type=int_in(1, MAX_VALUES), default=DEFAULT_VALUES,
                     help=f"values each worker streams (default {DEFAULT_VALUES}: "
                          f"{DEFAULT_VALUES // 32} chunks of 32)")
    agg.add_argument("--loss", type=probability, default=0.0,
                     help="share of aggregation packets every switch drops (default 0)")
    agg.add_argument("--window", type=int_in(1, 128), default=None,
                     help="how far ahead of its oldest unanswered chunk a worker may go: the "
                          "stream goes on that far while a chunk is repaired; a job takes "
                          f"2 x window slots of a switch's pool of 256 (default "
                          f"{DEFAULT_WINDOW}; less when --concurrent-jobs needs it)")
    agg.add_argument("--inflight", type=int_in(1, 128), default=None,
                     help="chunks a worker keeps in flight (sent after its newest result) at "
                          "most: enough to keep the switches busy, few enough that BMv2's "
                          "queues and the round trips stay short (default: per plan, so that "
                          f"its busiest uplink queues about {QUEUE_BUDGET} packets, at most "
                          f"{DEFAULT_INFLIGHT}: 16 for SOAR k=4 on bt15, 8 for all-red)")
    agg.add_argument("--concurrent-jobs", type=int_in(1, 16), default=1, metavar="N",
                     help="jobs run at once over disjoint blocks of the workers (default 1)")
    renamed(agg, "--jobs", "--concurrent-jobs", "run aggregation",
            "--jobs names a jobs file in the cassini and run cassini commands")
    agg.add_argument("--seed", type=SEED, default=0, help="seeds the vectors and random")
    agg.add_argument("--rto-floor-ms", type=float_in(1.0, 60_000.0), default=5.0, metavar="MS",
                     help="the workers' retransmission timer follows their measured round "
                          "trips (RFC 6298) but never goes below this (default 5)")
    agg.add_argument("--rto-ceiling-ms", type=float_in(1.0, 60_000.0), default=1000.0,
                     metavar="MS", help="... nor above this, backoff included (default 1000)")
    agg.add_argument("--link-pps", type=int_in(1, 100_000), default=None, metavar="PPS",
                     help="the link-bound regime: every switch port drains PPS x (its link's "
                          "rate / the fastest link's) packets/s (BMv2 queue rates), so the "
                          "busiest link sets the goodput as in a real network and SOAR's "
                          "saving in messages shows as speed. Keep the switches' total below "
                          "what BMv2 sustains on this machine (benchmarks/aggregation_bench.py "
                          "measures it; 400 on bt15 with two cores). Default: no rates, the "
                          "CPU-bound regime")
    agg.add_argument("--unicast-results", action="store_true",
                     help="the destination sends each result to every worker itself instead "
                          "of once for the switches to copy down the tree (to compare)")


def _register_cassini(rsub: Any) -> None:
    cas = rsub.add_parser(
        "cassini",
        help="base vs CASSINI on BMv2, three arms: CE marks, iteration times",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=CASSINI_DESCRIPTION,
    )
    cas.add_argument("--topology", required=True,
                     help="topology JSON with link Mbps (e.g. topologies/leafspine24.json)")
    cas.add_argument("--jobs", required=True,
                     help="jobs JSON (e.g. examples/jobs-4-leafspine.json)")
    cas.add_argument("--iterations", type=int_in(1, MAX_ITERATIONS), default=30,
                     help="per job (default 30)")
    cas.add_argument("--capacity-pps", type=int_in(10, MAX_PPS), default=800,
                     help="packets/s standing for the slowest link's capacity (default 800)")
    cas.add_argument("--slowdown", type=float_in(1.0, MAX_SLOWDOWN), default=DEFAULT_SLOWDOWN,
                     help=f"run the emulation this many times slower than the jobs' clock: "
                          f"times x it, rates (the switches' too) / it, so each phase carries "
                          f"the same packets while the machine's jitter is small against it; "
                          f"times are reported on the jobs' clock (default "
                          f"{DEFAULT_SLOWDOWN:g})")
    cas.add_argument("--queue-depth", type=int_in(1, 2**19 - 1), default=100,
                     help="packets (default 100)")
    cas.add_argument("--ecn-threshold", type=int_in(0, 2**19 - 1), default=20,
                     help="queued packets above which ECT packets are marked CE (default 20)")
    add_seed(cas, "the placement")
    cas.add_argument("--pcap", action="store_true", help="capture every switch port")
    add_tls(cas, starts=True)
    cas.add_argument("--out", type=output_dir, default=None,
                     help="run folder (default runs/cassini-DATE)")
    add_json(cas, 'print {"run_folder", "runs": [{"label", "ce_received", '
                          '"switch_marks", "iteration_ms", ...}], ...} (results.json\'s '
                          "content)")
    cas.set_defaults(func=cmd_cassini)


def check_environment() -> None:
    """One line saying what is missing on a machine without Mininet or BMv2, instead of a
    failure halfway through starting the network (`innet net up` checks the same)."""
    for why in (require_mininet(), require_bmv2()):
        if why:
            raise InputError(f"cannot run the experiment: {why}. {NEEDS}")



def aggregation_options(args: argparse.Namespace) -> AggregationRunOptions:
    """`innet run aggregation`'s flags as the options the experiment takes."""
    return AggregationRunOptions(
        topology=args.topology,
        strategies=tuple(args.strategy) if args.strategy else DEFAULT_STRATEGIES,
        k=args.k, values=args.values, loss=args.loss, window=args.window,
        inflight=args.inflight, jobs=args.concurrent_jobs, workload=args.workload,
        seed=args.seed, pcap=args.pcap,
        timers=Timers(args.rto_floor_ms / 1e3, args.rto_ceiling_ms / 1e3),
        multicast=not args.unicast_results, link_pps=args.link_pps, tls=args.tls)


def cmd_aggregation(args: argparse.Namespace) -> int:
    from innet.emulation.aggregation import run_aggregation
    from innet.table import format_table

    check_environment()
    out = args.out or default_out("aggregation")
    try:
        results = run_aggregation(aggregation_options(args), out)
    except EmulationError as exc:
        raise InputError(str(exc)) from None
    # first transmissions are counted apart from what is sent again: cost == phi, lossy or not
    bad = [r for r in results if not (r.sums_exact and r.cost_matches)]
    if args.json:
        print_json({"run_folder": str(out), "ok": not bad,
                    "strategies": [r.to_dict() for r in results]})
    else:
        rows = [[r.strategy, ",".join(r.blue) or "-", r.predicted_cost, r.measured_cost,
                 r.total_cost, r.retransmissions, r.duration_s, r.goodput_values_per_s,
                 "yes" if r.sums_exact else "NO", r.writes] for r in results]
        print(format_table(["strategy", "blue", "predicted phi", "measured", "with overhead",
                            "retransmissions", "duration s", "values/s", "sums exact",
                            "writes"], rows, digits=4))
        print(f"\nrun folder: {out} (results.json, aggregation.png, summary.md)")
    for r in bad:
        why = [] if r.sums_exact else ["a sum is not exact"]
        if not r.cost_matches:
            why.append(f"measured cost {r.measured_cost:.6g} != predicted phi "
                       f"{r.predicted_cost:.6g}")
        print(f"innet: {r.strategy}: {'; '.join(why)} (see {out}/logs and summary.md)",
              file=sys.stderr)
    return 1 if bad else 0


def cassini_options(args: argparse.Namespace) -> CassiniRunOptions:
    """`innet run cassini`'s flags as the options the experiment takes."""
    return CassiniRunOptions(args.topology, args.jobs, iterations=args.iterations,
                             capacity_pps=args.capacity_pps, queue_depth=args.queue_depth,
                             ecn_threshold=args.ecn_threshold, seed=args.seed, pcap=args.pcap,
                             slowdown=args.slowdown, tls=args.tls)


def cmd_cassini(args: argparse.Namespace) -> int:
    from innet.emulation.cassini_run import run_cassini
    from innet.table import format_table

    check_environment()
    out = args.out or default_out("cassini")
    try:
        result = run_cassini(cassini_options(args), out)
    except EmulationError as exc:
        raise InputError(str(exc)) from None
    if args.json:
        print_json({"run_folder": str(out), **result.to_dict()})
        return 0
    rows = [[r.label, r.ce_total, r.switch_marks, r.mean_ms, r.p99_ms] for r in result.runs]
    print(format_table(["arm", "CE at receivers", "marked at switches", "mean iteration ms",
                        "p99 iteration ms"], rows, digits=1))
    print(f"\nrun folder: {out} (results.json, cassini.png, summary.md)")
    return 0


CLUSTER_DESCRIPTION = (
    "Replay a trace's arrivals on one BMv2 network, once per --policy, side by side.\n"
    "Each job (its GPUs as workers, one more host as destination) is submitted at its\n"
    "arrival to the network's job desk, as `innet job submit` would: planned jointly\n"
    "(base: the base scheduler's placement, all-red, no shift; cassini: CASSINI's\n"
    "placement and shift; soar: SOAR's blue switches among those with pool room;\n"
    "soar+cassini: both), installed as its difference, run by its hosts' agents\n"
    "(iterations on CASSINI's grid, gradients aggregated through the switches in\n"
    "ECT(0), windows cut on echoed CE marks) and released when it ends; a job that\n"
    "does not fit waits. Links are bound as in `run cassini`: every egress queue drains\n"
    "--capacity-pps / --slowdown packets/s. The fluid model replays the same jobs with\n"
    "the same plans and start times and predicts what BMv2 measured.\n\n"
    "Writes to --out: results.json ({\"policies\": {POLICY: {\"jobs\": [{\"name\",\n"
    "\"hosts\", \"blue\", \"shift_ms\", \"iterations\", \"jct_s\", \"iteration_ms\",\n"
    "\"marks\", \"retransmissions\", \"predicted_cost\", \"sums_exact\", ...}],\n"
    "\"link_marks\", \"measured_cost\", \"predicted_cost\", \"fluid\", ...}}}),\n"
    "cluster.png (JCT CDF, marks per link), timeline.png, summary.md, logs/. Exit\n"
    "status 0 when every job of every policy ended with exact sums, else 1.\n\n"
    + NEEDS
)


def _register_cluster(rsub: Any) -> None:
    from innet.plan.cluster import POLICIES

    clu = rsub.add_parser(
        "cluster", help="a trace's jobs on one BMv2 network, per policy: JCT, marks, sums",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=CLUSTER_DESCRIPTION)
    clu.add_argument("--topology", required=True,
                     help="topology JSON with link Mbps (e.g. topologies/leafspine24.json)")
    clu.add_argument("--trace", required=True,
                     help="a trace file as innet cassini trace writes (e.g. "
                          "examples/trace-cluster-leafspine.json)")
    clu.add_argument("--policy", action="append", choices=POLICIES, default=None,
                     help="repeat to compare (default: all four, in the order "
                          f"{', '.join(POLICIES)})")
    clu.add_argument("-k", type=K, default=4,
                     help="at most k blue switches per job (soar policies; default 4)")
    clu.add_argument("--capacity-pps", type=int_in(10, MAX_PPS), default=800,
                     help="packets/s every egress queue drains, on the jobs' clock "
                          "(default 800)")
    clu.add_argument("--slowdown", type=float_in(1.0, MAX_SLOWDOWN), default=DEFAULT_SLOWDOWN,
                     help=f"the emulation runs this many times slower than the jobs' clock "
                          f"(default {DEFAULT_SLOWDOWN:g})")
    clu.add_argument("--queue-depth", type=int_in(1, 2**19 - 1), default=100,
                     help="packets (default 100)")
    clu.add_argument("--ecn-threshold", type=int_in(0, 2**19 - 1), default=20,
                     help="queued packets above which ECT packets are marked CE (default 20)")
    add_tls(clu, starts=True)
    clu.add_argument("--out", type=output_dir, default=None,
                     help="run folder (default runs/cluster-DATE)")
    add_json(clu, 'print {"run_folder", "ok", "policies": {POLICY: ...}} (results.json\'s '
                  "policies)")
    clu.set_defaults(func=cmd_cluster)


def cmd_cluster(args: argparse.Namespace) -> int:
    from innet.emulation.cluster_run import ClusterRunOptions, run_cluster
    from innet.plan.cluster import POLICIES
    from innet.table import format_table

    check_environment()
    out = args.out or default_out("cluster")
    options = ClusterRunOptions(args.topology, args.trace,
                                tuple(args.policy) if args.policy else POLICIES,
                                capacity_pps=args.capacity_pps, slowdown=args.slowdown,
                                queue_depth=args.queue_depth, ecn_threshold=args.ecn_threshold,
                                k=args.k, tls=args.tls)
    try:
        runs = run_cluster(options, out)
    except EmulationError as exc:
        raise InputError(str(exc)) from None
    ok = all(r.sums_exact for r in runs)
    if args.json:
        print_json({"run_folder": str(out), "ok": ok,
                    "policies": {r.policy: r.to_dict() for r in runs}})
    else:
        rows = [[r.policy, sum(j["state"] == "done" for j in r.jobs), r.mean_jct_s,
                 r.predicted.get("mean_jct_s"), r.mean_iteration_ms,
                 r.predicted.get("mean_iteration_ms"), r.marks, r.measured_cost,
                 r.predicted_cost, "yes" if r.sums_exact else "NO"] for r in runs]
        print(format_table(["policy", "jobs done", "mean JCT s", "fluid JCT s",
                            "mean iteration ms", "fluid ms", "CE marks", "measured cost",
                            "predicted cost", "sums exact"], rows, digits=4))
        print(f"\nrun folder: {out} (results.json, cluster.png, timeline.png, summary.md)")
    for r in runs:
        if not r.sums_exact:
            print(f"innet: {r.policy}: a job did not end with exact sums (see {out}/summary.md)",
                  file=sys.stderr)
    return 0 if ok else 1
