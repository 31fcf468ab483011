"""Shared by the tests of refused inputs: run `innet` in-process and check a refusal is one
line of at most 300 characters with exit status 2 and no traceback."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import struct
import time
from pathlib import Path
from typing import Any

from innet.cli import main

ROOT = Path(__file__).resolve().parents[2]
BT15 = ROOT / "topologies" / "bt15.json"
WORKLOAD = ROOT / "examples" / "workload-bt15.json"
PAIR = ROOT / "examples" / "jobs-vgg19-pair.json"
JOBS13 = ROOT / "examples" / "jobs-13.json"


def run(argv: list[str]) -> tuple[int, str, str, float]:
    """main(argv) in-process: (exit status, stdout, stderr, seconds)."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def one_clean_line(err: str) -> str:
    """The single line on stderr, checked: printable, at most 300 characters."""
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, repr(err[:500])
    line = err[:-1]
    assert len(line) <= 300, (len(line), line[:400])
    assert line.isprintable(), repr(line)
    line.encode("utf-8")  # no lone surrogate
    return line


def refused(argv: list[str], *, within_s: float = 20.0) -> str:
    """Run argv, expect exit 2 with one clean line; the line."""
    code, _, err, seconds = run(argv)
    assert code == 2, (code, err[:500])
    assert seconds < within_s, seconds
    return one_clean_line(err)


def ok_or_refused(argv: list[str], *, within_s: float = 20.0) -> tuple[int, str, str]:
    """Run argv: exit 0 (stdout printable), 1 (partly failed, reported) or a clean refusal."""
    code, out, err, seconds = run(argv)
    assert seconds < within_s, seconds
    assert "Traceback" not in err, err
    out.encode("utf-8")
    if code == 2:
        one_clean_line(err)
    else:
        assert code in (0, 1), (code, err[:500])
    return code, out, err


def bt15() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(BT15.read_text())
    return data


def renamed(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The topology with node `old` renamed to `new` everywhere (hosts, switches, links)."""
    out = copy.deepcopy(data)
    for kind in ("hosts", "switches"):
        if old in out[kind]:
            out[kind] = {new if k == old else k: v for k, v in out[kind].items()}
    links = []
    for link in out["links"]:
        ends = link if isinstance(link, list) else [link["a"], link["b"]]
        fixed = [new + e[len(old):] if e == old or e.startswith(old + "-p") else e
                 for e in ends[:2]]
        if isinstance(link, list):
            links.append([*fixed, *link[2:]])
        else:
            links.append({**link, "a": fixed[0], "b": fixed[1]})
    out["links"] = links
    if out.get("aggregation", {}).get("destination") == old:
        out["aggregation"]["destination"] = new
    return out


def write_json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def instance(ids: list[str]) -> dict[str, Any]:
    """A SOAR instance: ids[0] the root, the others a binary tree below it, load 1 each."""
    nodes: list[dict[str, Any]] = [{"id": ids[0]}]
    for i, name in enumerate(ids[1:], start=1):
        nodes.append({"id": name, "parent": ids[(i - 1) // 2], "load": 1})
    return {"root": ids[0], "nodes": nodes}


def write_pcap(path: Path, times_s: list[float], size: int = 1000) -> str:
    """A classic pcap of Ethernet/IPv4 frames of `size` bytes at the given times."""
    frame = bytes(12) + b"\x08\x00" + bytes([0x45]) + bytes(19) + bytes(size - 34)
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t in times_s:
            sec = int(t)
            usec = min(999_999, round((t - sec) * 1e6))
            f.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
    return str(path)


def make_fs_objects(folder: Path) -> dict[str, str]:
    """A path of every kind of file-system object that is not a regular file."""
    fifo = folder / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    loop = folder / "loop"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    (folder / "dir").mkdir(exist_ok=True)
    return {"fifo": str(fifo), "directory": str(folder / "dir"), "/dev/zero": "/dev/zero",
            "/dev/null": "/dev/null", "symlink loop": str(loop),
            "missing": str(folder / "missing.json")}
