"""Where the files innet ships beside its code are: the compiled P4 program, the topologies
and the examples.

One resolver, so that every command finds them the same way whether innet runs from a clone
(the folders `p4src/`, `topologies/` and `examples/` at the top of the repository) or from an
installed wheel (the same folders as package data in `innet/shipped/`, mapped there by
pyproject.toml). Installed data comes first: a wheel's copy matches its code, and a clone has
no copy here, so it falls through to the repository's folders.
"""

from __future__ import annotations

from pathlib import Path

from innet.errors import InputError

_HERE = Path(__file__).resolve().parent
# controller/innet/shipped/__init__.py -> shipped, innet, controller, the repository
_CLONE = _HERE.parents[2]
FOLDERS = ("p4src", "topologies", "examples", "ns3")
# the ns-3 program's folder is ns3-sim/ in the clone: a folder named ns3 at the top would
# shadow the ns3 wheel for any Python started there
_IN_CLONE = {"ns3": "ns3-sim"}


def shipped_dir(name: str) -> Path:
    """The folder `name` (one of FOLDERS): the installed package data if present, else the
    clone's. When neither exists the clone's path is returned, so that the error a caller
    reports names where the file was looked for."""
    if name not in FOLDERS:
        raise ValueError(f"no shipped folder {name!r} (one of {', '.join(FOLDERS)})")
    installed = _HERE / name
    return installed if installed.is_dir() else _CLONE / _IN_CLONE.get(name, name)


def p4src_dir() -> Path:
    """The compiled P4 program (innet.json, innet.p4info.txtpb) and its sources."""
    return shipped_dir("p4src")


def topologies_dir() -> Path:
    """The shipped topologies (bt15.json, fattree4.json, leafspine24.json)."""
    return shipped_dir("topologies")


def examples_dir() -> Path:
    """The shipped workloads, jobs files and the Python API example."""
    return shipped_dir("examples")


def shipped_file(path: Path) -> Path:
    """`path` (a file under one of the shipped folders) if it exists, else InputError saying
    where it was looked for and why it should have been there."""
    if not path.exists():
        raise InputError(f"{path} is missing: innet's {path.parent.name}/ folder ships with the "
                         "repository and the installed package; reinstall innet or run from "
                         "a clone")
    return path
