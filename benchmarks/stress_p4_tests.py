"""Run the data-plane tests (p4c, BMv2, Mininet) several times on a busy machine, per test
how often it passed.

A BMv2 test that passes on a quiet machine and fails on a busy one fails in CI some day:
run this before you stop. It clones the commit you are on (HEAD, uncommitted changes are
not in it) into a fresh folder beside this checkout, sets it up with ./setup.sh as CI does,
then runs `pytest -m dataplane` `--runs` times while a CPU-bound process keeps one of the two
cores busy, and prints one row per test: passed / runs. Exit status 1 when any test failed
in any run.

    sudo .venv/bin/python benchmarks/stress_p4_tests.py            # 5 runs, one core busy
    sudo .venv/bin/python benchmarks/stress_p4_tests.py --quick    # 1 run, for routine stops

Needs root and the P4 toolchain (as the tests do); INNET_REQUIRE_P4=1 is set, so a test that
would skip fails instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _clone(where: Path | None) -> Path:
    """A clean clone of HEAD in a folder beside the checkout (so ../shared is found as in
    CI), set up with ./setup.sh."""
    dest = Path(tempfile.mkdtemp(prefix="stress-", dir=ROOT.parent)) if where is None \
        else where
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    env = dict(os.environ)
    bundle = ROOT.parent / "shared" / "p4-toolchain" / "innet-p4-toolchain-debian12-amd64.tar.xz"
    if bundle.exists():
        env["INNET_P4_BUNDLE"] = str(bundle)
    print(f"stress: setting up a clean clone in {dest} ...", file=sys.stderr, flush=True)
    subprocess.run(["./setup.sh"], cwd=dest, env=env, check=True, stdout=subprocess.DEVNULL)
    return dest


def _outcomes(junit: Path) -> dict[str, str]:
    """test id -> passed | failed | skipped, from pytest's JUnit XML."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            out[name] = "failed"
        elif case.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def _failures(junit: Path) -> list[tuple[str, str]]:
    """(test id, the end of its failure text) for every failed test: printed as the run
    ends, since the clone (and pytest's own output) is gone afterwards."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            out.append((name, (bad.text or bad.get("message", ""))[-4000:]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of the tests (default 5)")
    parser.add_argument("--quick", action="store_true", help="one run (same as --runs 1)")
    parser.add_argument("--no-hog", action="store_true",
                        help="leave both cores to the tests (default: keep one busy)")
    parser.add_argument("--keep", action="store_true", help="keep the clone afterwards")
    parser.add_argument("--clone", type=Path, default=None,
                        help="clone into this (new) folder instead of a temporary one")
    parser.add_argument("pytest_args", nargs="*",
                        help="more pytest arguments, after -- (e.g. -- -k cassini)")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    if runs < 1:
        parser.error("--runs must be >= 1")
    if os.geteuid() != 0:
        print("stress: the data-plane tests need root (namespaces, veths, BMv2)",
              file=sys.stderr)
        return 2
    clone = _clone(args.clone)
    hog = None if args.no_hog else subprocess.Popen(
        [sys.executable, "-c", "while True: pass"])
    passed: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    times = []
    try:
        for r in range(runs):
            junit = clone / f"stress-{r}.xml"
            t0 = time.monotonic()
            proc = subprocess.run(
                [str(clone / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-m",
                 "dataplane", "-p", "no:cacheprovider", f"--junitxml={junit}",
                 *args.pytest_args],
                cwd=clone, env={**os.environ, "INNET_REQUIRE_P4": "1"},
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            times.append(time.monotonic() - t0)
            summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "?"
            print(f"stress: run {r + 1}/{runs}: {summary} ({times[-1]:.0f} s)",
                  file=sys.stderr, flush=True)
            if not junit.exists():
                print(proc.stdout[-3000:], file=sys.stderr)
                return 1
            for name, text in _failures(junit):
                print(f"stress: run {r + 1} FAILED {name}:\n{text}\n", file=sys.stderr,
                      flush=True)
            for name, outcome in _outcomes(junit).items():
                seen[name] += 1
                passed[name] += outcome == "passed"
            if proc.returncode not in (0, 1):
                print(proc.stdout[-3000:], file=sys.stderr)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        if not args.keep:
            shutil.rmtree(clone, ignore_errors=True)
    width = max(len(n) for n in seen) if seen else 10
    print(f"{'test':<{width}}  passed")
    for name in sorted(seen):
        print(f"{name:<{width}}  {passed[name]}/{seen[name]}")
    failing = [n for n in seen if passed[n] < seen[n]]
    busy = "one core kept busy" if hog is not None else "no extra load"
    print(f"\n{len(seen)} tests x {runs} run(s), {busy}: "
          f"{len(seen) - len(failing)} passed every time, {len(failing)} failed at least once; "
          f"runs took {min(times):.0f}-{max(times):.0f} s")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
