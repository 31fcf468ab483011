"""`innet doctor` names every missing part with its fix, and says ready only when it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from innet.cli import doctor

ROOT = Path(__file__).resolve().parents[2]

# an interpreter that sees none of innet's dependencies: isolated (-I), no site-packages (-S)
BARE = [sys.executable, "-I", "-S", "-c",
        f"import sys; sys.path.insert(0, {str(ROOT / 'controller')!r}); "
        "from innet.cli.doctor import main; sys.exit(main())"]


def _bare_doctor(*args: str, path: str) -> tuple[int, str]:
    proc = subprocess.run([*BARE, *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": path})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout


def test_nothing_installed_names_every_missing_part(tmp_path: Path) -> None:
    status, out = _bare_doctor("--json", path=str(tmp_path))  # an empty folder as PATH
    assert status == 1
    report = json.loads(out)
    assert report["ready"] is False
    missing = {c["name"] for c in report["checks"] if not c["ok"]}
    for part in ("numpy", "networkx", "scapy", "grpcio", "p4runtime-shell", "pytest",
                 "mnexec", "ip", "ethtool", "mininet Python package",
                 "simple_switch_grpc (BMv2)", "simple_switch_CLI (thrift)", "p4c-bm2-ss (p4c)"):
        assert part in missing, f"{part} not reported missing: {sorted(missing)}"
    for check in report["checks"]:
        if not check["ok"] and check["part"] != "kernel":
            assert check["fix"], f"no fix given for {check['name']}"


def test_human_output_lists_each_missing_part_with_a_fix(tmp_path: Path) -> None:
    status, out = _bare_doctor(path=str(tmp_path))
    assert status == 1
    assert "not ready:" in out
    lines = out.splitlines()
    for name in ("simple_switch_grpc (BMv2)", "mnexec", "numpy"):
        i = next(i for i, line in enumerate(lines) if name in line)
        assert lines[i].split()[0] == "MISS"
        assert "fix:" in lines[i + 1]


def test_switch_cli_whose_interpreter_lacks_thrift_is_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The classic trap: the CLI's `env python3` finds an interpreter without thrift."""
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(f"#!{sys.executable} -I -S\nprint('hi')\n")
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor._check_switch_cli()
    assert not check.ok
    assert "thrift" in check.found or "No module" in check.found
    assert "python3-thrift" in check.fix


def test_busy_port_is_reported() -> None:
    import socket

    base = doctor.PORT_BASES["BMv2 thrift"]
    with socket.socket() as s:
        # hold the first port of the range that nothing else holds (a switch may be up)
        for port in range(base, base + doctor.PORTS_CHECKED):
            try:
                s.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        else:
            pytest.fail(f"every port {base}+ is taken; the check must have said so")
        s.listen()
        checks = {c.name: c for c in doctor.check_ports()}
    thrift = next(c for name, c in checks.items() if name.startswith("BMv2 thrift"))
    assert not thrift.ok
    assert str(port) in thrift.found.split("in use: ")[1].split(", ")


def test_demo_readiness_ignores_optional_parts() -> None:
    needed = doctor.Check("p4", "simple_switch_grpc", True, "1.15.5", "")
    optional = doctor.Check("kernel", "qdisc netem", False, "unknown", "x", needed_for_demo=False)
    assert doctor.demo_ready([needed, optional])
    assert not doctor.demo_ready([needed, optional,
                                  doctor.Check("mininet", "mnexec", False, "not on PATH", "x")])


def test_this_machine_report_is_consistent_with_exit_status(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    """In CI (INNET_REQUIRE_P4=1) the machine set up by ./setup.sh must be ready."""
    import os

    from innet.cli import main

    status = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == (0 if report["ready"] else 1)
    if os.environ.get("INNET_REQUIRE_P4", "") not in ("", "0"):
        missing = [c["name"] for c in report["checks"] if c["needed_for_demo"] and not c["ok"]]
        assert report["ready"], f"setup left these missing: {missing}"


def test_mnexec_that_cannot_make_a_namespace_is_refused_not_hung(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a chroot whose / is no mount point, `mnexec -n` fails and Mininet would wait for a
    dead shell's prompt forever: the harness must refuse up front with mnexec's words."""
    from innet.emulation.net import mnexec_namespace_problem

    fake = tmp_path / "mnexec"
    fake.write_text("#!/bin/sh\necho 'remount: Invalid argument' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    problem = mnexec_namespace_problem()
    assert problem is not None and "remount: Invalid argument" in problem
    fake.write_text("#!/bin/sh\nexit 0\n")
    assert mnexec_namespace_problem() is None
