"""`innet doctor`: what this machine has and lacks for each part of innet.

Every check is a plain function returning a `Check` (what, ok, what was found, the one command
that fixes it), so that the test suite, `innet demo` and this command judge a machine the same
way. Checks only look: the queueing-discipline probe works in a throwaway network namespace
(`unshare -n`) that vanishes with its process, and the port probe binds and closes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SETUP = "./setup.sh"
BUNDLE_FIX = ("INNET_P4_BUNDLE=../shared/p4-toolchain/innet-p4-toolchain-debian12-amd64.tar.xz "
              "./setup.sh   (as root; other systems: ./setup.sh --help)")

# the Python distributions innet imports, by import name -> pip name
PYTHON_PACKAGES = {
    "numpy": "numpy",
    "networkx": "networkx",
    "matplotlib": "matplotlib",
    "tqdm": "tqdm",
    "grpc": "grpcio",
    "google.protobuf": "protobuf",
    "p4runtime_sh": "p4runtime-shell",
}
# the queueing disciplines the emulation may use; only tbf/htb are needed (BMv2 does the rest)
QDISCS = {
    "tbf": "rate 1mbit burst 32kbit latency 400ms",
    "htb": "default 1",
    "netem": "delay 1ms",
    "red": "limit 400000 min 30000 max 90000 avpkt 1000 burst 55 bandwidth 10mbit",
    "fq_codel": "",
}
NEEDED_QDISCS = ("tbf", "htb")
# switch i listens on these (innet.bmv2.local.local_switch_ports): the first few must be free
PORT_BASES = {"P4Runtime gRPC": 50051, "BMv2 thrift": 9090}
PORTS_CHECKED = 16


@dataclass(frozen=True, slots=True)
class Check:
    """One finding. `needed_for_demo` says whether `innet demo` needs it to run in full."""

    part: str
    name: str
    ok: bool
    found: str
    fix: str
    needed_for_demo: bool = True


def _run(argv: list[str], timeout: float = 10.0) -> tuple[int, str]:
    """Run a command and return (status, combined output); 127 when it cannot start."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)}: no answer in {timeout:.0f} s"
    except OSError as exc:
        return 126, f"{argv[0]}: {exc.strerror}"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def check_python_packages() -> list[Check]:
    checks = []
    for module, dist in PYTHON_PACKAGES.items():
        try:
            importlib.import_module(module)
            found, ok = _dist_version(dist), True
        except Exception as exc:
            found, ok = f"cannot import {module}: {exc}", False
        checks.append(Check("python", dist, ok, found, f"{SETUP}   (pip install -e '.[dev]')"))
    try:
        importlib.import_module("google.protobuf")
        version = _dist_version("protobuf")
        ok = version.startswith("3.20.")
        checks.append(Check("python", "protobuf 3.20.x (p4runtime-shell pins it)", ok, version,
                            "pip install 'protobuf>=3.20,<3.21'"))
    except ImportError:
        pass
    # scapy writes the tests' captures; innet itself reads pcaps with its own reader
    for module, dist in (("pytest", "pytest"), ("ruff", "ruff"), ("mypy", "mypy"),
                         ("scapy", "scapy")):
        try:
            importlib.import_module(module)
            ok, found = True, _dist_version(dist)
        except ImportError:
            ok, found = False, "not installed"
        checks.append(Check("tests", dist, ok, found, f"{SETUP}   (pip install -e '.[dev]')",
                            needed_for_demo=False))
    return checks


def check_root() -> Check:
    root = os.geteuid() == 0
    return Check("system", "root (Mininet, namespaces, veths)", root,
                 "root" if root else f"uid {os.geteuid()}", "sudo .venv/bin/innet ...")


def check_mininet() -> list[Check]:
    checks = []
    for tool, package in (("mnexec", "mininet"), ("ip", "iproute2"), ("ethtool", "ethtool")):
        path = shutil.which(tool)
        checks.append(Check("mininet", tool, path is not None, path or "not on PATH",
                            f"apt-get install {package}   (or {SETUP} as root)"))
    if os.geteuid() == 0 and shutil.which("mnexec"):
        status, out = _run(["mnexec", "-n", "true"])
        checks.append(Check("mininet", "mnexec makes a network namespace", status == 0,
                            "yes" if status == 0 else (out or f"exit {status}"),
                            "run on the machine itself or in a VM; in a chroot, make its root "
                            "a mount point first (mount --bind ROOT ROOT)"))
    try:
        import mininet.net  # noqa: F401

        ok, found = True, "importable"
    except Exception as exc:
        ok, found = False, f"cannot import mininet: {exc}"
    checks.append(Check("mininet", "mininet Python package", ok, found,
                        "pip install -e '.[emulation]'   (or ./setup.sh)"))
    return checks


def check_bmv2() -> list[Check]:
    checks = []
    path = shutil.which("simple_switch_grpc")
    if path is None:
        checks.append(Check("p4", "simple_switch_grpc (BMv2)", False, "not on PATH", BUNDLE_FIX))
    else:
        status, out = _run([path, "--version"])
        checks.append(Check("p4", "simple_switch_grpc (BMv2)", status == 0,
                            out.splitlines()[0] if out else f"exit {status}",
                            BUNDLE_FIX + "; missing libraries: ldconfig"))
    checks.append(_check_switch_cli())
    path = shutil.which("p4c-bm2-ss")
    if path is None:
        checks.append(Check("p4", "p4c-bm2-ss (p4c)", False, "not on PATH", BUNDLE_FIX,
                            needed_for_demo=False))
    else:
        status, out = _run([path, "--version"])
        line = next((s for s in out.splitlines() if "ersion" in s), out[:80])
        checks.append(Check("p4", "p4c-bm2-ss (p4c)", status == 0, line.strip(), BUNDLE_FIX,
                            needed_for_demo=False))
    return checks


def _check_switch_cli() -> Check:
    """simple_switch_CLI is a script: it runs only if its interpreter imports thrift and BMv2's
    modules (pyenv's python3 shadowing Debian's is the classic way this breaks)."""
    name = "simple_switch_CLI (thrift)"
    path = shutil.which("simple_switch_CLI")
    if path is None:
        return Check("p4", name, False, "not on PATH", BUNDLE_FIX)
    try:
        first = Path(path).read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return Check("p4", name, False, f"cannot read {path}", BUNDLE_FIX)
    interpreter = re.sub(r"^#!\s*(/usr/bin/env\s+)?", "", first).split()
    if not interpreter:
        return Check("p4", name, False, f"{path} has no #! line", BUNDLE_FIX)
    status, out = _run([*interpreter, "-c", "import thrift, runtime_CLI, sswitch_CLI"])
    if status == 0:
        return Check("p4", name, True, f"{path} ({' '.join(interpreter)} imports thrift)", "")
    last = out.splitlines()[-1] if out else f"exit {status}"
    return Check("p4", name, False, f"{' '.join(interpreter)}: {last}",
                 "apt-get install python3-thrift; " + BUNDLE_FIX)


def check_qdiscs() -> list[Check]:
    """Try each discipline on the loopback of a throwaway namespace (needs root and unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("tc") is None:
        return [Check("kernel", "queueing disciplines", False,
                      "not checked: needs root, unshare and tc", "apt-get install iproute2",
                      needed_for_demo=False)]
    checks = []
    for qdisc, params in QDISCS.items():
        status, out = _run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", qdisc,
                            *params.split()])
        needed = qdisc in NEEDED_QDISCS
        fix = ("the kernel lacks it (sch_" + qdisc + "); innet needs only tbf and htb"
               if not needed else "a kernel with sch_" + qdisc)
        checks.append(Check("kernel", f"qdisc {qdisc}", status == 0,
                            "available" if status == 0 else (out or f"exit {status}"),
                            fix, needed_for_demo=False))
    return checks


def check_ports() -> list[Check]:
    checks = []
    for what, base in PORT_BASES.items():
        busy = [p for p in range(base, base + PORTS_CHECKED) if not _port_free(p)]
        checks.append(Check(
            "ports", f"{what} {base}-{base + PORTS_CHECKED - 1}", not busy,
            "free" if not busy else f"in use: {', '.join(map(str, busy))}",
            f"stop the process holding them: ss -ltnp 'sport >= :{base}'"))
    return checks


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_ns3() -> list[Check]:
    """`cassini evaluate|sweep --engine ns3`: the ns3 wheel, g++ and nlohmann-json, and that
    the scenario program compiles (once; cached by its content)."""
    from innet.errors import InputError

    try:
        from innet.cassini.sim.ns3 import NS3_FIX, build_program, compiler, find_ns3
    except ImportError as exc:  # numpy missing: the Python packages' check says how
        return [Check("ns-3", "ns3 wheel (headers, libraries)", False,
                      f"innet's models do not load: {exc}", f"{SETUP}   (then innet doctor)",
                      needed_for_demo=False)]
    out = []
    try:
        install = find_ns3()
        out.append(Check("ns-3", "ns3 wheel (headers, libraries)", True, str(install.lib),
                         NS3_FIX, needed_for_demo=False))
    except InputError as exc:
        return [Check("ns-3", "ns3 wheel (headers, libraries)", False, str(exc), NS3_FIX,
                      needed_for_demo=False)]
    gxx_fix = "apt-get install -y g++ nlohmann-json3-dev   (or ./setup.sh as root)"
    try:
        out.append(Check("ns-3", "g++", True, compiler(), gxx_fix, needed_for_demo=False))
        program = build_program(install)
        out.append(Check("ns-3", "cassini-sim compiles", True, str(program), gxx_fix,
                         needed_for_demo=False))
    except InputError as exc:
        out.append(Check("ns-3", "cassini-sim compiles", False, str(exc), gxx_fix,
                         needed_for_demo=False))
    return out


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_python_packages, check_root, check_mininet, check_bmv2, check_qdiscs, check_ports,
    check_ns3,
)


def run_checks() -> list[Check]:
    found: list[Check] = []
    for check in CHECKS:
        result = check()
        found.extend(result if isinstance(result, list) else [result])
    return found


def demo_ready(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.needed_for_demo)


def register(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="what this machine has and lacks for each part of innet, and how to fix it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Checks the Python packages, root, Mininet (mnexec), BMv2 (simple_switch_grpc and\n"
            "simple_switch_CLI with thrift), p4c-bm2-ss, the kernel's queueing disciplines and\n"
            "the local ports switches listen on. Each missing part comes with the one command\n"
            "that fixes it. Exit status 0 when everything `innet demo` needs is there, 1\n"
            "otherwise (p4c, the test tools and the optional qdiscs are reported, not required)."
        ),
    )
    doctor.add_argument("--json", action="store_true",
                        help="one JSON object: {ready, checks: [{part, name, ok, found, fix, "
                             "needed_for_demo}]}")
    doctor.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks()
    ready = demo_ready(checks)
    if args.json:
        print(json.dumps({"ready": ready, "checks": [asdict(c) for c in checks]}, indent=2))
        return 0 if ready else 1
    width = max(len(c.name) for c in checks)
    part = ""
    for c in checks:
        if c.part != part:
            part = c.part
            print(f"{part}:")
        mark = "ok  " if c.ok else ("MISS" if c.needed_for_demo else "warn")
        print(f"  {mark} {c.name:<{width}}  {c.found}")
        if not c.ok and c.fix:
            print(f"       {'':<{width}}  fix: {c.fix}")
    missing = [c for c in checks if not c.ok and c.needed_for_demo]
    print()
    if ready:
        print("ready: innet demo can run everything, BMv2 experiments included")
    else:
        print(f"not ready: {len(missing)} part(s) that innet demo needs are missing: "
              + ", ".join(c.name for c in missing), file=sys.stdout)
    return 0 if ready else 1


def main(argv: list[str] | None = None) -> int:
    """Run the doctor alone: it imports nothing but the standard library, so it can report on
    an interpreter that lacks every one of innet's dependencies."""
    parser = argparse.ArgumentParser(prog="innet")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["doctor", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
