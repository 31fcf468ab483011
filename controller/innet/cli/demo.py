"""`innet demo`: everything this machine can run, in one command, into one folder.

With Mininet and BMv2 present it runs both experiments on the shipped topologies (SOAR's
plans measured on switches, CASSINI's shifts against ECN marks). Whatever is present, it runs
the model-level evaluations (SOAR against the baselines, SOAR's fig6, CASSINI's fluid
evaluation) and says what it skipped and how to get the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from innet.cli.options import add_json
from innet.cli.outpaths import output_dir
from innet.jsonout import print_json
from innet.shipped import examples_dir, shipped_file, topologies_dir

TOPOLOGIES = topologies_dir()
EXAMPLES = examples_dir()


def _shipped(path: Path) -> str:
    return str(shipped_file(path))


def register(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="run everything this machine can: the models always, BMv2 experiments if possible",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "1. SOAR against every strategy on the 15-switch tree and on BT(256)\n"
            "2. SOAR's fig6 (reduced with --quick)\n"
            "3. CASSINI's fluid evaluation: the two-job VGG19 example and 13 jobs on the\n"
            "   24-server leaf-spine\n"
            "4. with root, Mininet and BMv2: `innet run aggregation` on topologies/bt15.json\n"
            "   and `innet run cassini` on the leaf-spine with four zoo jobs (three arms)\n"
            "Everything lands in --out (default runs/demo-DATE), one folder per part."
        ),
    )
    demo.add_argument("--out", type=output_dir, default=None,
                      help="folder (default runs/demo-DATE)")
    demo.add_argument("--quick", action="store_true", help="smaller runs (about a minute)")
    demo.add_argument("--skip-emulation", action="store_true",
                      help="do not start Mininet even if it could run")
    add_json(demo, 'print {"out", "ran", "skipped"} at the end (the progress goes to '
                           "standard error)")
    demo.set_defaults(func=cmd_demo)


def _section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    if not args.json:
        _run_demo(args)
        return 0
    with contextlib.redirect_stdout(sys.stderr):
        out, done, skipped = _run_demo(args)
    print_json({"out": str(out), "ran": done, "skipped": skipped})
    return 0


def _run_demo(args: argparse.Namespace) -> tuple[Path, list[str], list[str]]:
    out: Path = args.out or Path("runs") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    done = [*_soar_sections(out, args.quick), *_cassini_fluid_section(out, args.quick)]
    skipped: list[str] = []
    _section("Emulation: BMv2 switches in Mininet")
    from innet.emulation.net import require_bmv2, require_mininet

    why = None if not args.skip_emulation else "--skip-emulation"
    why = why or require_mininet() or require_bmv2()
    if why:
        skipped.append(f"the BMv2 experiments (innet run aggregation / cassini): {why}")
        print(f"skipped: {why}")
    else:
        done += _emulation_section(out, args.quick)
    _done_section(done, skipped)
    return out, done, skipped


def _soar_sections(out: Path, quick: bool) -> list[str]:
    """SOAR against every strategy on bt15 and BT(256), then the paper's fig6."""
    from innet.emulation.aggregation import default_workload
    from innet.plan.intent import aggregation_tree
    from innet.soar.baselines import compare_text
    from innet.soar.experiments import run_experiment
    from innet.soar.generate import binary_tree
    from innet.topology import load_topology

    _section("SOAR: where to aggregate (model)")
    topo = load_topology(_shipped(TOPOLOGIES / "bt15.json"))
    tree, _ = aggregation_tree(topo, default_workload(topo))
    for label, t, k in (("bt15 (16 workers to h0)", tree, 4),
                        ("BT(256), uniform loads, linear rates", binary_tree(256,
                         rates="linear"), 16)):
        print(f"{label}, k = {k}:")
        print(compare_text(t, k)[1])
    _section("SOAR: fig6 of the paper" + (" (quick)" if quick else ""))
    res = run_experiment("fig6", out / "soar-fig6", quick=quick)
    print(f"{len(res['points'])} points in {res['seconds']:.1f} s: {out / 'soar-fig6'}")
    print((out / "soar-fig6" / "summary.md").read_text().split("Against the paper")[0].strip())
    return ["SOAR comparison", f"SOAR fig6 -> {out / 'soar-fig6'}"]


def _cassini_fluid_section(out: Path, quick: bool) -> list[str]:
    """CASSINI's fluid evaluation of the VGG19 pair on one link and of 13 jobs placed on the
    24-server leaf-spine, each with its report in a folder of its own."""
    from innet.cassini.experiments.evaluation import (
        evaluate_cluster,
        evaluate_link,
        evaluation_text,
        write_report,
    )
    from innet.cassini.experiments.settings import EvaluationSettings
    from innet.cassini.model.geometry import DEFAULT_PRECISION_DEG
    from innet.cassini.model.profiles import load_jobs
    from innet.cassini.placement.scheduler import PlannerSettings
    from innet.cassini.sim.engine import FluidEngine
    from innet.cassini.sim.fluid import FluidConfig
    from innet.topology import load_topology

    _section("CASSINI: fluid evaluation (model)")
    config = FluidConfig(iterations=30 if quick else 100)
    config.check()
    done = []
    for name, jobs_file in (("vgg19-pair", "jobs-vgg19-pair.json"), ("13-jobs", "jobs-13.json")):
        folder = out / f"cassini-{name}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs = load_jobs(_shipped(EXAMPLES / jobs_file))
        if name == "vgg19-pair":  # two jobs on one 50 Gbps link
            ev = evaluate_link(jobs, 50.0, EvaluationSettings(
                PlannerSettings(precision_deg=DEFAULT_PRECISION_DEG), FluidEngine(), config))
        else:  # 13 jobs placed on the 24-server leaf-spine
            leafspine = load_topology(_shipped(TOPOLOGIES / "leafspine24.json"))
            ev = evaluate_cluster(leafspine, jobs, EvaluationSettings(
                PlannerSettings(candidates=20, checked=20, precision_deg=DEFAULT_PRECISION_DEG),
                FluidEngine(), config))
        print(f"{name} ({jobs_file} on {ev.where}):")
        print(evaluation_text(ev))
        for path in write_report(ev, folder, f"cassini-{Path(jobs_file).stem}-",
                                 f"{jobs_file} on {ev.where}"):
            print(f"wrote {path}")
        done.append(f"CASSINI fluid {name} -> {folder}")
    return done


def _emulation_section(out: Path, quick: bool) -> list[str]:
    """Both experiments on BMv2 in Mininet: SOAR's plans measured, CASSINI's three arms."""
    from innet.emulation.aggregation import AggregationRunOptions, run_aggregation
    from innet.emulation.cassini_run import CassiniRunOptions, run_cassini
    from innet.table import format_table

    results = run_aggregation(AggregationRunOptions(
        _shipped(TOPOLOGIES / "bt15.json"), strategies=("soar", "top", "max", "all-red"), k=4,
        values=1024 if quick else 8192), out / "run-aggregation")
    # BMv2 drops a packet now and then under load; the protocol retransmits it, and the
    # switches count it apart: measured == phi, the overhead beside it
    print(format_table(["strategy", "predicted phi", "measured", "with overhead",
                        "retransmissions", "sums exact"],
                       [[r.strategy, r.predicted_cost, r.measured_cost, r.total_cost,
                         r.retransmissions, "yes" if r.sums_exact else "NO"]
                        for r in results], digits=4))
    res2 = run_cassini(CassiniRunOptions(
        _shipped(TOPOLOGIES / "leafspine24.json"), _shipped(EXAMPLES / "jobs-4-leafspine.json"),
        iterations=15 if quick else 30), out / "run-cassini")
    for r in res2.runs:
        print(f"{r.label}: {r.ce_total} CE marks at the receivers, iterations mean "
              f"{r.mean_ms:.0f} ms, p99 {r.p99_ms:.0f} ms")
    return [f"innet run aggregation -> {out / 'run-aggregation'}",
            f"innet run cassini -> {out / 'run-cassini'}"]


def _done_section(done: list[str], skipped: list[str]) -> None:
    _section("Done")
    for line in done:
        print(f"  ran: {line}")
    for line in skipped:
        print(f"  skipped: {line}")
    if skipped:
        print("  To run the rest: as root, INNET_P4_BUNDLE=PATH/innet-p4-toolchain-debian12-"
              "amd64.tar.xz ./setup.sh (Debian 12), ./setup.sh (Ubuntu, with the p4lang apt "
              "packages) or the Vagrantfile's VM (vagrant up); `innet doctor` lists what is "
              "missing and the command for each part.")
