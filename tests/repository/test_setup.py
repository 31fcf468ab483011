"""setup.sh's front door, without touching this machine: how it finds the toolchain bundle and
picks Python (its functions, sourced), and a whole run with no bundle, as a user and as root,
where apt-get, id and Python are stand-ins on a PATH of the test's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "setup.sh"
BASH = shutil.which("bash") or "/bin/bash"


def _sh(script: str, *, env: dict[str, str] | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, "-c", f"source {SETUP}; {script}"], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60)


def _os_release(tmp_path: Path, id_: str = "debian", version: str = "12") -> Path:
    path = tmp_path / "os-release"
    path.write_text(f'ID={id_}\nVERSION_ID="{version}"\n')
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("INNET_P4_BUNDLE", "PYTHON")}
    env.update(extra)
    return env


def _system(release: Path) -> str:
    return _sh("this_system", env=_env(OS_RELEASE=str(release))).stdout.strip()


def test_this_system_names_the_bundle_suffix(tmp_path: Path) -> None:
    system = _system(_os_release(tmp_path))
    assert system.startswith("debian12-") and system != "debian12-"
    assert _system(_os_release(tmp_path, "ubuntu", "22.04")).startswith("ubuntu22-")


def test_the_bundle_beside_the_clone_is_found(tmp_path: Path) -> None:
    release = _os_release(tmp_path)
    clone = tmp_path / "work" / "innet"
    clone.mkdir(parents=True)
    shared = tmp_path / "work" / "shared" / "p4-toolchain"
    shared.mkdir(parents=True)
    bundle = shared / f"innet-p4-toolchain-{_system(release)}.tar.xz"
    env = _env(OS_RELEASE=str(release))
    assert _sh(f"find_bundle {clone}", env=env).stdout.strip() == ""  # none yet
    bundle.write_bytes(b"")
    assert _sh(f"find_bundle {clone}", env=env).stdout.strip() == str(bundle)
    # INNET_P4_BUNDLE wins over what lies beside the clone
    env["INNET_P4_BUNDLE"] = "/somewhere/else.tar.xz"
    assert _sh(f"find_bundle {clone}", env=env).stdout.strip() == "/somewhere/else.tar.xz"


def test_a_bundle_for_another_system_is_not_installed(tmp_path: Path) -> None:
    clone = tmp_path / "innet"
    clone.mkdir()
    other = tmp_path / "p4-toolchain" / "innet-p4-toolchain-debian12-amd64.tar.xz"
    other.parent.mkdir()
    other.write_bytes(b"")
    env = _env(OS_RELEASE=str(_os_release(tmp_path, "ubuntu", "22.04")))
    assert _sh(f"find_bundle {clone}", env=env).stdout.strip() == ""
    assert _sh(f"other_bundles {clone}", env=env).stdout.strip().endswith(other.name)


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def _tools(tmp_path: Path) -> Path:
    """The plain commands setup.sh uses, and nothing else (no python, no P4 tool)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("dirname", "head", "tr", "uname", "cat", "sed", "grep", "touch", "rm",
                 "mkdir", "chmod", "cp"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    return tools


def _pythons(tmp_path: Path, versions: dict[str, bool]) -> Path:
    """A PATH folder of python stand-ins: each passes the 3.11 check or not."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, ok in versions.items():
        _stub(folder, name, f'case "$*" in *version_info*) exit {0 if ok else 1};; '
                            f'--version) echo "Python {"3.12.1" if ok else "3.10.12"}";; esac')
    return folder


@pytest.mark.parametrize(("versions", "picked"), [
    ({"python3": True, "python3.13": True}, "python3"),           # the system's own first
    ({"python3": False, "python3.12": True, "python3.11": True}, "python3.12"),
    ({"python3": False, "python3.11": True}, "python3.11"),
    ({"python3": False}, None),
    ({}, None),
])
def test_python_3_11_or_newer_is_picked(tmp_path: Path, versions: dict[str, bool],
                                        picked: str | None) -> None:
    env = _env(PATH=f"{_pythons(tmp_path, versions)}:{_tools(tmp_path)}")
    proc = _sh("pick_python", env=env)
    if picked is None:
        assert proc.returncode == 1 and proc.stdout == ""
        why = _sh("explain_python", env=env).stderr
        assert "3.11 or newer" in why and "deadsnakes" in why and "pyenv" in why
    else:
        assert proc.returncode == 0 and proc.stdout.strip() == picked


def test_python_named_by_the_user_must_qualify(tmp_path: Path) -> None:
    folder = _pythons(tmp_path, {"python3": True, "oldpy": False, "newpy": True})
    assert _sh("pick_python", env=_env(PATH=str(folder), PYTHON="newpy")).stdout.strip() == "newpy"
    assert _sh("pick_python", env=_env(PATH=str(folder), PYTHON="oldpy")).returncode == 1


def _fake_machine(tmp_path: Path, uid: int) -> tuple[Path, dict[str, str], Path]:
    """A clone with setup.sh alone, and a PATH where id says `uid`, apt-get and dpkg-query
    only log, no P4 tool exists, and python3 makes a .venv whose pip only logs."""
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copy(SETUP, clone / "setup.sh")
    (clone / "pyproject.toml").write_text("")
    log = tmp_path / "log"
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    _stub(stubs, "id", f'[ "$1" = -u ] && echo {uid} || echo "uid={uid}"')
    _stub(stubs, "apt-get", f'echo "apt-get $*" >> {log}')
    _stub(stubs, "dpkg-query", "exit 1")
    # what `python3 -m venv .venv` leaves: a python whose pip only logs
    _stub(stubs, "venv-python", f'case "$*" in *version_info*) exit 0;; *"import innet"*) '
                                f'exit 1;; --version) echo "Python 3.11.9";; '
                                f'*) echo "venv $*" >> {log};; esac')
    _stub(stubs, "python3", f'case "$*" in *version_info*|*"import venv"*) exit 0;; '
                            '--version) echo "Python 3.11.9";; '
                            f'"-m venv .venv") mkdir -p .venv/bin; '
                            f'cp {stubs / "venv-python"} .venv/bin/python;; esac')
    env = _env(PATH=f"{stubs}:{_tools(tmp_path)}", OS_RELEASE=str(_os_release(tmp_path)),
               HOME=str(tmp_path))
    return clone, env, log


@pytest.mark.parametrize("uid", [1000, 0])
def test_without_a_bundle_setup_finishes_python_and_says_what_it_skipped(
        tmp_path: Path, uid: int) -> None:
    clone, env, log = _fake_machine(tmp_path, uid)
    proc = subprocess.run([BASH, str(clone / "setup.sh")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "setup: skipped: the P4 toolchain" in out
    assert "setup: ready" in out
    logged = log.read_text()
    assert "-e .[dev,emulation]" in logged  # the package, its emulation extra, the test tools
    if uid:
        assert "needs root" in out
        assert "skipped: the Debian packages" in out and "not root" in out
        assert "apt-get" not in logged
    else:
        assert "no bundle for debian12-" in out  # said plainly, with the ways to get one
        assert "INNET_P4_BUNDLE=PATH" in out
        installed = [line for line in logged.splitlines() if line.startswith("apt-get install")]
        assert installed and "tmux" in installed[0] and "mininet" in installed[0]
