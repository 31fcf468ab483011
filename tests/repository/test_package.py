"""innet as a package: the wheel carries the compiled P4 program, the topologies and the
examples, and an install outside the clone runs the commands that need them.

The install test makes a fresh venv in a temporary folder and installs the wheel into it
without dependencies; the venv sees the dependencies of the running interpreter through a
.pth line that names its site-packages folder (a plain path line: the .pth files inside it,
such as an editable install of the clone, are not processed). So the test needs no network
for numpy and friends, and the only innet it can import is the wheel's. Building the wheel
takes a few seconds (pip's isolated build fetches setuptools once, then uses its cache).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from innet.testing.netns import outside_network

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {"p4src": ("innet.json", "innet.p4info.txtpb", "innet.p4"),
           "topologies": ("bt15.json", "fattree4.json", "leafspine24.json"),
           "examples": ("workload-bt15.json", "jobs-13.json", "jobs-vgg19-pair.json",
                        "api_plan_and_deploy.py")}


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH (the tests run with the clone on it) and no virtualenv of ours."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # pip's isolated build fetches the build backend: the machine's network, not the run's own
    proc = subprocess.run(outside_network([sys.executable, "-m", "pip", "wheel", "--no-deps",
                                           "-q", "--disable-pip-version-check", "-w", str(out),
                                           str(ROOT)]),
                          capture_output=True, text=True, env=_clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob("innet-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_package_list_matches_the_source_tree() -> None:
    """pyproject lists the packages by hand (the shipped folders are mapped into innet): every
    folder of controller/innet with an __init__.py, or with data, must be in it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    src = ROOT / "controller"
    on_disk = {".".join(p.parent.relative_to(src).parts)
               for p in src.glob("innet/**/__init__.py")}
    on_disk.add("innet.data")
    assert on_disk <= listed, f"missing from pyproject's packages: {sorted(on_disk - listed)}"
    for folder in SHIPPED:
        assert config["package-dir"][f"innet.shipped.{folder}"] == folder


def test_the_wheel_carries_the_program_topologies_examples_and_license(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, files in SHIPPED.items():
        for name in files:
            assert f"innet/shipped/{folder}/{name}" in names, f"{folder}/{name} not in {wheel}"
        for path in (ROOT / folder).iterdir():  # every committed file of those folders
            if path.suffix in (".json", ".txtpb", ".p4", ".py"):
                assert f"innet/shipped/{folder}/{path.name}" in names, path
    assert "innet/data/model_zoo.json" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # scapy only for the tests, Mininet only for the emulation
    for line in requires:
        if "scapy" in line:
            assert "extra == \"dev\"" in line, line
        if "mininet" in line:
            assert "extra == \"emulation\"" in line, line


def test_an_install_outside_the_clone_runs_solve_and_a_dry_run_deploy(
        wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   env=_clean_env(), timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=_clean_env()).stdout.strip())
    # the running interpreter's dependencies, but not its innet (a path line only)
    deps = sysconfig.get_paths()["purelib"]
    (purelib / "zz-innet-test-deps.pth").write_text(deps + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", "-q", "--disable-pip-version-check",
                           str(wheel)], capture_output=True, text=True, env=_clean_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=work,
                              env=_clean_env(), timeout=300)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        return done.stdout

    where = json.loads(run(str(python), "-c", (
        "import json, innet, innet.shipped as s; print(json.dumps({'innet': innet.__file__, "
        "'p4src': str(s.p4src_dir()), 'topologies': str(s.topologies_dir())}))")))
    for path in where.values():
        assert Path(path).is_relative_to(venv), where
        assert not Path(path).is_relative_to(ROOT), where
    innet = str(venv / "bin" / "innet")
    run(innet, "soar", "gen", "-n", "64", "--seed", "1", "-o", "bt64.json")
    solved = json.loads(run(innet, "soar", "solve", "bt64.json", "-k", "4", "--json"))
    assert solved["k"] == 4 and len(solved["blue"]) <= 4 and solved["cost"] > 0
    examples = Path(where["topologies"]).parent / "examples"
    deployed = json.loads(run(innet, "deploy", "--topology",
                              str(Path(where["topologies"]) / "bt15.json"), "--workload",
                              str(examples / "workload-bt15.json"), "-k", "4", "--dry-run",
                              "--from-empty", "--json"))
    assert deployed["dry_run"] is True and not deployed["failed"]
    assert len(deployed["switches"]) == 15
    assert all(s["load_program"] for s in deployed["switches"].values())
    # the API example runs from the installed package too
    out = run(str(python), str(examples / "api_plan_and_deploy.py"))
    assert "dry run" in out
