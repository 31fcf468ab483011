"""`innet job submit|list|cancel`: jobs admitted to and released from the network that is up.

Each command is one request over the running network's control socket (innet.emulation.live),
answered by its own controller (innet.emulation.control); the `innet>` prompt sends the same
requests without the socket (`job ...`, `jobs`). Admission is the pure joint plan of
innet.plan.cluster (docs/cluster-planner.md). Once installed, a job runs: its hosts' agents
aggregate each iteration's gradient through the switches (innet.emulation.jobagent).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from innet.aggpacket import DEFAULT_JOB_SLOTS, MAX_WORKERS, SLOTS
from innet.cli.argtypes import K, float_in, int_in
from innet.cli.options import add_json
from innet.emulation import jobclient
from innet.emulation.jobclient import ENDED_KEPT, MAX_DELAY_S
from innet.errors import InputError
from innet.jsonout import print_json
from innet.plan.cluster import POLICIES
from innet.table import format_table

TRAFFIC_NOTE = ("A job runs once installed: every worker computes for the profile's compute "
                "time and aggregates its iteration's gradient through the switches (ECT(0), "
                "cutting its window on echoed CE marks), on CASSINI's grid (the network's "
                "epoch + shift + i x T, the profile's times 4x slower on BMv2). When its "
                "iterations end, or it fails, its entries, group and cells are released and "
                "the queue is admitted.")


def register(sub: Any) -> None:
    job = sub.add_parser(
        "job", help="submit, list and cancel jobs on the network that is up",
        description="Jobs on the network that `innet net up` holds (brought up without "
                    "--workload): each submit is planned jointly (CASSINI's placement among "
                    "the free hosts, SOAR's blue switches among those with pool room, "
                    "CASSINI's shift against the running jobs), only its difference is "
                    "installed; a job that does not fit waits in a queue, in arrival order, "
                    "and is admitted when a cancel leaves room. " + TRAFFIC_NOTE)
    jsub = job.add_subparsers(dest="job_command", metavar="SUBCOMMAND", required=True)
    add_submit(jsub)
    ls = jsub.add_parser("list", help="every job: state, hosts, blue switches, shift, writes",
                         description="Every job the network knows, in submission order. "
                                     "States: queued (with why), running, done, failed "
                                     "(with why), cancelled. A network keeps its latest "
                                     f"{ENDED_KEPT} ended jobs listed; an older one's last "
                                     "row is in RUN/jobs/NAME/job.json. "
                                     + TRAFFIC_NOTE)
    add_json(ls, 'print {"jobs": [{"name", "state", "hosts", "blue", "shift_ms", '
                 '"iterations", "iterations_done", "mean_iteration_ms", "marks", "writes", '
                 '"sums_exact", "why", ...}], "archived": N, "archive": FOLDER}')
    ls.set_defaults(func=cmd_list)
    cancel = jsub.add_parser("cancel", help="release a job (or take it off the queue)",
                             description="Release the job's entries, multicast group and "
                                         "slot cells on every switch of its tree, then admit "
                                         "the queued jobs that fit, in arrival order.")
    cancel.add_argument("name", metavar="NAME", help="the job's name (see innet job list)")
    add_json(cancel, 'print {"cancelled": JOB, "admitted": [NAME, ...]}')
    cancel.set_defaults(func=cmd_cancel)


def add_submit_options(p: Any) -> None:
    """The options of `job submit`, shared with the prompt's `job submit`."""
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="a model of the zoo (innet cassini zoo), e.g. VGG19; "
                                      "one of --model, --profile, --trace is required (no "
                                      "default)")
    what.add_argument("--profile", metavar="FILE",
                      help="a jobs file (innet cassini's format): its first job's profile; "
                           "one of --model, --profile, --trace is required (no default)")
    what.add_argument("--trace", metavar="FILE",
                      help="a trace file (innet cassini trace's format): every job, each "
                           "arriving at its arrival_ms (times the network's slowdown) from "
                           "now, its GPUs as workers; one of --model, --profile, --trace is "
                           "required (no default)")
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None,
                   help="workers; the job takes one more host as its destination (no default: "
                        "required with --model or --profile)")
    p.add_argument("--iterations", type=int_in(1, 10**9), default=None,
                   help="iterations to train (no default: required with --model or --profile)")
    p.add_argument("--at", type=float_in(0.0, MAX_DELAY_S), default=0.0, metavar="SECONDS",
                   help="the job (a trace's start) arrives SECONDS from now; it waits in the "
                        "queue until then (default 0: now)")
    p.add_argument("--values", type=int_in(1, 10**12), default=None,
                   help="gradient values per iteration (default: the profile's volume at the "
                        "emulation's scale, 800 packets/s for the slowest link: 2,016 for "
                        "VGG19)")
    p.add_argument("--slots", type=int_in(2, SLOTS), default=None,
                   help=f"cells of the {SLOTS}-cell pool the job takes on every switch of its "
                        f"tree (default {DEFAULT_JOB_SLOTS}: a window of "
                        f"{DEFAULT_JOB_SLOTS // 2} chunks)")
    p.add_argument("--name", default=None, help="the job's name (default MODEL-N)")
    p.add_argument("--policy", choices=POLICIES, default="soar+cassini",
                   help="which parts of the joint plan apply (default soar+cassini)")
    p.add_argument("-k", type=K, default=None,
                   help="at most k blue switches (soar policies; default 4)")


def add_submit(jsub: Any) -> None:
    submit = jsub.add_parser(
        "submit", help="plan a job on the running network and install it, or queue it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Plan the job jointly on the network that is up and install only its "
                    "difference\n(its aggregation entries and multicast group on its tree); "
                    "or queue it, saying why.\n\n  innet job submit --model VGG19 --workers 6 "
                    "--iterations 20\n  innet job submit --profile jobs.json --workers 2 "
                    "--iterations 5 --policy base\n\n" + textwrap.fill(TRAFFIC_NOTE, 79))
    add_submit_options(submit)
    add_json(submit, "print the job's row of `job list --json`")
    submit.set_defaults(func=cmd_submit)


def submit_request(args: argparse.Namespace) -> dict[str, Any]:
    """The `job_submit` (or `trace_submit`) request of the parsed options."""
    at = {"at_s": args.at} if args.at else {}
    if args.trace is not None:
        extra = [f for f in ("workers", "iterations", "values", "name", "k", "slots")
                 if getattr(args, f) is not None]
        if extra:
            raise InputError(f"--trace gives every job's size and length: drop "
                             f"{', '.join('--' + f for f in extra)}")
        return {"op": "trace_submit", "file": str(Path(args.trace).resolve()),
                "policy": args.policy, **at}
    if args.workers is None or args.iterations is None:
        raise InputError("job submit: --workers and --iterations are required with --model "
                         "or --profile")
    return jobclient.submit_request(args.model, args.workers, args.iterations,
                                    profile_file=args.profile, policy=args.policy,
                                    values=args.values, name=args.name, k=args.k,
                                    slots=args.slots) | at


def job_line(row: dict[str, Any]) -> str:
    """One job in words: where it runs and what admitting it wrote, or why it waits."""
    if row["state"] == "queued":
        return f"job {row['name']} queued: {row['why']}"
    if not row["hosts"]:
        return f"job {row['name']} {row['state']}"
    hosts = row["hosts"]
    changed = "; ".join(f"{n} {d}" for n, d in row.get("switches", {}).items())
    return (f"job {row['name']} {row['state']}: destination {hosts[0]}, workers "
            f"{', '.join(hosts[1:])}; blue {', '.join(row['blue']) or '(none)'}; shift "
            f"{row['shift_ms']:g} ms; {row['writes']} writes" + (f" ({changed})" if changed
                                                                  else ""))


def jobs_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no jobs (innet job submit --model VGG19 --workers 6 --iterations 20)"
    return format_table(
        ["job", "state", "hosts", "blue", "shift ms", "done", "mean ms", "marks", "exact",
         "writes", "why"],
        [[r["name"], r["state"], " ".join(r["hosts"]), " ".join(r["blue"]) or "-",
          "-" if r["shift_ms"] is None else f"{r['shift_ms']:g}",
          f"{r['iterations_done']}/{r['iterations']}",
          "-" if r["mean_iteration_ms"] is None else f"{r['mean_iteration_ms']:.0f}",
          "-" if r["marks"] is None else r["marks"],
          "-" if r["sums_exact"] is None else ("yes" if r["sums_exact"] else "NO"),
          r["writes"], r["why"] or ""] for r in rows])


def cmd_submit(args: argparse.Namespace) -> int:
    answer = jobclient.ask(submit_request(args))
    if args.json:
        print_json(answer)
    else:
        for row in answer.get("jobs", [answer]):
            print(job_line(row))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    answer = jobclient.ask({"op": "job_list"})
    if args.json:
        print_json(answer)
    else:
        print(jobs_table(answer["jobs"]))
        if answer.get("archived"):
            print(f"{answer['archived']} older ended jobs are no longer listed; their last "
                  f"rows are in {answer.get('archive') or 'their folders'}/NAME/job.json")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    answer = jobclient.ask({"op": "job_cancel", "name": args.name})
    if args.json:
        print_json(answer)
        return 0
    print(f"job {args.name} cancelled; released with {answer['cancelled']['release_writes']} "
          "writes")
    for name in answer["admitted"]:
        print(f"job {name} admitted from the queue")
    return 0
