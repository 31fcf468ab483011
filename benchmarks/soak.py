"""A network kept up for a long time with jobs arriving and leaving (as root, alone).

    sudo .venv/bin/python benchmarks/soak.py [--minutes 60] [--gap 4] [--seed 1] [--out DIR]

Brings `innet net up` up on the leaf-spine (its own state folder), then for --minutes submits a
job every --gap seconds (a zoo model, 2 to 6 workers, 5 to 30 iterations, drawn from --seed;
one in five later cancelled while it runs or waits) and samples, every --sample seconds, the
`net up` process's memory (RSS, and its anonymous and file-backed parts), open descriptors
and threads, the switches' memory, and the jobs' states as `job list` gives them (the latest
100 ended jobs, `let_go` counting the older ones, whose rows are in their folders). At the
end it cancels what is left and reads every switch back. Prints the samples and the checks:
- the controller's memory grows by less than 10% from the sample at 10 minutes (or the
  first third of a shorter run) to the last;
- descriptors and threads come back to their baseline (the first sample) once no job runs;
- every switch reads back equal to the intent, which is routes only (no entry, group or
  slot cell held by a job that left);
- every job that ended `done` has exact sums; the failed ones are listed with why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "controller"))

from innet.emulation import live  # noqa: E402  (the package from this checkout)

MODELS = ("VGG19", "ResNet50", "GPT-2", "CamemBERT", "VGG11", "DLRM")
READY = "innet net: ready"


def proc_status(pid: int) -> dict[str, int]:
    """RSS (kB), threads and descriptors of one process."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            fields[key] = int(value.split()[0])
    fields["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return fields


def fd_targets(pid: int) -> list[str]:
    """What each open descriptor of a process points at (a file, socket:[inode], pipe:...)."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed between the listing and the read
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return targets


def kinds(targets: list[str]) -> dict[str, int]:
    """Descriptors by kind: sockets, pipes, anonymous inodes, files by folder."""
    out: dict[str, int] = {}
    for t in targets:
        kind = t.split(":")[0] if ":" in t and not t.startswith("/") else str(Path(t).parent)
        out[kind] = out.get(kind, 0) + 1
    return out


def switches_rss_kb(record: live.NetworkRecord) -> int:
    """The memory of this network's switches (their PIDs are in its record)."""
    return sum(proc_status(p).get("VmRSS", 0) for p in record.footprint.switch_pids
               if Path(f"/proc/{p}").exists())


def submit(record: live.NetworkRecord, rng: random.Random, n: int) -> str:
    name = f"soak-{n}"
    live.ask(record, {"op": "job_submit", "job": {
        "name": name, "model": rng.choice(MODELS), "workers": rng.randint(2, 6),
        "iterations": rng.randint(5, 30)}})
    return name


def sample(pid: int, record: live.NetworkRecord, t0: float) -> dict[str, Any]:
    # the process first, then the request: a request's answering thread would count itself
    # (the 43 -> 44 "leak" of an earlier version of this benchmark)
    st = proc_status(pid)
    listing = live.ask(record, {"op": "job_list"})
    states: dict[str, int] = {}
    for r in listing["jobs"]:
        states[r["state"]] = states.get(r["state"], 0) + 1
    states["let_go"] = listing.get("archived", 0)  # ended jobs no longer listed
    return {"t_s": round(time.time() - t0), "rss_mb": st["VmRSS"] / 1024,
            "anon_mb": st.get("RssAnon", 0) / 1024, "file_mb": st.get("RssFile", 0) / 1024,
            "fds": st["fds"], "threads": st["Threads"],
            "switches_mb": switches_rss_kb(record) / 1024, **states}


def run(args: argparse.Namespace, out: Path) -> int:
    state = Path(tempfile.mkdtemp(prefix="innet-soak-"))
    env = {**os.environ, "INNET_STATE_DIR": str(state)}
    log = out / "net-up.log"
    proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                             str(ROOT / "topologies" / "leafspine24.json"), "--no-cli",
                             "--out", str(out / "run")], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        while READY not in log.read_text():
            if proc.poll() is not None:
                print(log.read_text())
                return 2
            time.sleep(1)
        time.sleep(2)  # the record gets the switches' PIDs once the network is up
        record = live.running(state)
        assert record is not None and record.footprint.switch_pids, record
        return soak(args, record, proc.pid, out)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


def soak(args: argparse.Namespace, record: live.NetworkRecord, pid: int, out: Path) -> int:
    rng = random.Random(args.seed)
    t0 = time.time()
    samples = [sample(pid, record, t0)]
    fds_before = kinds(fd_targets(pid))
    submitted, n, next_job, next_sample = [], 0, t0, t0 + args.sample
    while time.time() < t0 + args.minutes * 60:
        now = time.time()
        if now >= next_job:
            n += 1
            submitted.append(submit(record, rng, n))
            next_job = now + args.gap
            if rng.random() < 0.2 and len(submitted) > 1:
                victim = rng.choice(submitted[:-1])
                answer = live.ask(record, {"op": "job_cancel", "name": victim})
                if "error" in answer and "no queued or running job" not in answer["error"]:
                    print(f"cancel {victim}: {answer['error']}", file=sys.stderr)
        if now >= next_sample:
            samples.append(sample(pid, record, t0))
            print(json.dumps(samples[-1]), flush=True)
            next_sample = now + args.sample
        time.sleep(0.5)
    for row in live.ask(record, {"op": "job_list"})["jobs"]:
        if row["state"] in ("running", "queued"):
            live.ask(record, {"op": "job_cancel", "name": row["name"]})
    time.sleep(5)
    samples.append(sample(pid, record, t0))
    fds_after = kinds(fd_targets(pid))
    changed = {k: (fds_before.get(k, 0), fds_after.get(k, 0))
               for k in sorted(set(fds_before) | set(fds_after))
               if fds_before.get(k, 0) != fds_after.get(k, 0)}
    print("descriptors that differ from the baseline, by kind (before, after): "
          + (json.dumps(changed) if changed else "none"))
    back = live.ask(record, {"op": "readback"})
    rows = every_job(live.ask(record, {"op": "job_list"}))
    (out / "soak.json").write_text(json.dumps({"samples": samples, "jobs": rows,
                                               "descriptors_changed": changed,
                                               "readback": back}, indent=1))
    return report(samples, rows, back, args.minutes)


def every_job(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows `job list` still holds and those of the ended jobs it let go (each in its
    folder's job.json), so the checks see every job submitted."""
    rows = {r["name"]: r for r in listing["jobs"]}
    if listing.get("archive"):
        for path in sorted(Path(listing["archive"]).glob("*/job.json")):
            row = json.loads(path.read_text())
            rows.setdefault(row["name"], row)
    return list(rows.values())


def report(samples: list[dict[str, Any]], rows: list[dict[str, Any]], back: dict[str, Any],
           minutes: float) -> int:
    mark = min(600.0, minutes * 60 / 3)
    after = [s for s in samples if s["t_s"] >= mark] or samples
    growth = (samples[-1]["rss_mb"] - after[0]["rss_mb"]) / after[0]["rss_mb"]
    done = [r for r in rows if r["state"] == "done"]
    checks = [
        (f"controller memory {after[0]['rss_mb']:.1f} MB at {after[0]['t_s']} s -> "
         f"{samples[-1]['rss_mb']:.1f} MB at the end ({100 * growth:+.1f}%) < +10%",
         growth < 0.10),
        (f"descriptors {samples[0]['fds']} -> {samples[-1]['fds']} (baseline)",
         samples[-1]["fds"] <= samples[0]["fds"]),
        (f"threads {samples[0]['threads']} -> {samples[-1]['threads']} (baseline)",
         samples[-1]["threads"] <= samples[0]["threads"]),
        ("every switch reads back equal to the intent (routes only)", bool(back["equal"])),
        (f"{len(done)} jobs done, every one with exact sums",
         all(r["sums_exact"] is True for r in done))]
    print(f"switches' memory (all together, not a check): {samples[0]['switches_mb']:.0f} MB "
          f"at start, {after[0]['switches_mb']:.0f} MB at {after[0]['t_s']} s, "
          f"{samples[-1]['switches_mb']:.0f} MB at the end")
    failed = 0
    for text, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
        failed += not ok
    for r in rows:
        if r["state"] == "failed":
            print(f"failed: {r['name']}: {r['why']}")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    print(f"jobs: {len(rows)} submitted; " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--gap", type=float, default=4.0, help="seconds between submissions")
    p.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("runs") / "soak")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return run(args, args.out)


if __name__ == "__main__":
    sys.exit(main())
