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
from innet.cli.argtypes import K, int_in
from innet.cli.options import add_json
from innet.emulation import live
from innet.errors import InputError, NetworkError
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
                                     "(with why), cancelled. "
                                     + TRAFFIC_NOTE)
    add_json(ls, 'print {"jobs": [{"name", "state", "hosts", "blue", "shift_ms", '
                 '"iterations", "iterations_done", "mean_iteration_ms", "marks", "writes", '
                 '"sums_exact", "why", ...}]}')
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
                                      "this or --profile is required (no default)")
    what.add_argument("--profile", metavar="FILE",
                      help="a jobs file (innet cassini's format): its first job's profile; "
                           "this or --model is required (no default)")
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), required=True,
                   help="workers; the job takes one more host as its destination")
    p.add_argument("--iterations", type=int_in(1, 10**9), required=True,
                   help="iterations to train")
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
    """The `job_submit` request of the parsed options (a profile file's path made absolute:
    the network's process has its own working directory)."""
    job: dict[str, Any] = {"workers": args.workers, "iterations": args.iterations}
    if args.model is not None:
        job["model"] = args.model
    else:
        job["profile_file"] = str(Path(args.profile).resolve())
    for key in ("values", "name", "k", "slots"):
        if getattr(args, key) is not None:
            job[key] = getattr(args, key)
    return {"op": "job_submit", "job": job, "policy": args.policy}


def ask(request: dict[str, Any]) -> dict[str, Any]:
    """One request to the network that is up; its refusal as the error it was."""
    record = live.running()
    if record is None:
        raise InputError("no network is up: start one with `innet net up --topology FILE` "
                         "(without --workload)")
    answer = live.ask(record, request)
    if "error" in answer:
        err = InputError if answer.get("exit") == 2 else NetworkError
        raise err(answer["error"])
    return answer


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
    row = ask(submit_request(args))
    if args.json:
        print_json(row)
    else:
        print(job_line(row))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    answer = ask({"op": "job_list"})
    if args.json:
        print_json(answer)
    else:
        print(jobs_table(answer["jobs"]))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    answer = ask({"op": "job_cancel", "name": args.name})
    if args.json:
        print_json(answer)
        return 0
    print(f"job {args.name} cancelled; released with {answer['cancelled']['release_writes']} "
          "writes")
    for name in answer["admitted"]:
        print(f"job {name} admitted from the queue")
    return 0
