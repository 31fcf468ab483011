"""Every command, fed random and mutated input, either succeeds with a valid result or refuses
in one line with exit status 2: never a traceback, never a hang, never Infinity in JSON.

Property-based (hypothesis): command-line numbers (0, negative, NaN, inf, huge, junk),
output paths (a file where a folder is wanted and the reverse, missing or impossible places,
plot names without an image extension), mutated instance, topology, jobs and workload files
(loads beyond 64 bits, rates that would make a cost infinite, BMv2's reserved ports, ...) and
captures with corrupt record lengths. Commands run in-process through `innet.cli.main`.
A plan that is accepted is checked against the exhaustive oracle, so big loads cannot give a
wrong "optimal" plan.

Set INNET_EDGE_COUNTS=FILE to write how many inputs each command was fed (for the notes).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from soar_oracle import RawInstance, exhaustive

from innet.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
BT15 = str(ROOT / "topologies" / "bt15.json")
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")
PAIR = str(ROOT / "examples" / "jobs-vgg19-pair.json")
WORKLOAD = str(ROOT / "examples" / "workload-bt15.json")

# derandomize: the same examples on every run (a suite that is green stays green); the
# deadline is the "never more than a few seconds" of the issue, per command call
FAST = settings(max_examples=25, deadline=10_000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])

COUNTS: Counter[str] = Counter()  # inputs fed to each command
REFUSED: Counter[str] = Counter()  # of which refused with exit 2


@pytest.fixture(scope="module", autouse=True)
def _write_counts() -> Iterator[None]:
    yield
    target = os.environ.get("INNET_EDGE_COUNTS")
    if target:
        table = {c: {"tried": n, "refused": REFUSED[c]} for c, n in sorted(COUNTS.items())}
        Path(target).write_text(json.dumps(table, indent=1) + "\n")


def _command(argv: list[str]) -> str:
    if argv[0] in ("soar", "cassini", "topo", "pcap", "run"):
        return " ".join(argv[:2])
    return argv[0]


def run(argv: list[str], label: str | None = None) -> tuple[int, str, str]:
    """main(argv) in-process: (exit status, stdout, stderr)."""
    name = label or _command(argv)
    COUNTS[name] += 1
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    REFUSED[name] += code == 2
    return code, out.getvalue(), err.getvalue()


def _no_constants(name: str) -> Any:
    raise AssertionError(f"{name} in JSON output")


def check(argv: list[str], *, json_out: bool = False, ok_codes: tuple[int, ...] = (0, 2),
          label: str | None = None) -> tuple[int, str, str]:
    """The property: exit 0 with a valid result, or exit 2 with one line; no traceback."""
    code, out, err = run(argv, label)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert code in ok_codes, (argv, code, err)
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("innet"), (argv, err)
    elif json_out:
        json.loads(out, parse_constant=_no_constants)  # exactly one strict JSON document
    return code, out, err


# ------------------------------------------------------------------------------ numbers

NASTY = ["0", "-1", "-0", "nan", "NaN", "inf", "-inf", "1e400", "1e-400", "5e-324",
         "9" * 30, "9" * 5000, "", " ", "abc", "1.5", "0x10", "1e3", "2147483648",
         "18446744073709551616", "-9223372036854775809", "1_000"]

number_text = st.one_of(
    st.sampled_from(NASTY),
    st.integers(min_value=-(2**70), max_value=0).map(str),
    st.integers(min_value=2**31, max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("edge")
    inst = tmp / "bt31.json"
    assert run(["soar", "gen", "-n", "31", "--loads", "power-law", "-o", str(inst)])[0] == 0
    cap = tmp / "cap.pcap"
    cap.write_bytes(_pcap([(i * 0.004, 200 if i % 5 == 0 else 60) for i in range(400)]))
    afile = tmp / "a-file"
    afile.write_text("x")
    return {"inst": str(inst), "cap": str(cap), "file": str(afile), "tmp": str(tmp)}


# (argv with {} where the value goes): each option whose value is a number. Commands that
# would start Mininet or a long run get `--out` an existing file, so that even a valid number
# stops at the argument parser (exit 2) before any work.
NUMBER_OPTIONS = [
    ["soar", "solve", "{inst}", "-k", "{}", "--json"],
    ["soar", "solve", "{inst}", "-k", "2", "--seed", "{}", "--strategy", "random", "--json"],
    ["soar", "compare", "{inst}", "-k", "{}", "--json"],
    ["soar", "gen", "-n", "{}", "--json", "-o", "{tmp}/g.json"],
    ["soar", "gen", "--shape", "random", "-n", "20", "--max-children", "{}", "--json", "-o",
     "{tmp}/g.json"],
    ["soar", "online", "{inst}", "-k", "2", "--workloads", "{}", "--json"],
    ["soar", "online", "{inst}", "-k", "2", "--workloads", "2", "--capacity", "{}", "--json"],
    ["soar", "experiment", "fig6", "--out", "{file}", "--seeds", "{}"],
    ["soar", "experiment", "fig6", "--out", "{file}", "--processes", "{}"],
    ["cassini", "link", PAIR, "--capacity", "{}", "--json"],
    ["cassini", "link", PAIR, "--capacity", "50", "--precision-deg", "{}", "--json"],
    ["cassini", "plan", "--topology", LEAFSPINE, "--jobs", PAIR, "--candidates", "{}",
     "--json"],
    ["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{file}",
     "--iterations", "{}"],
    ["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{file}",
     "--threshold-kb", "{}"],
    ["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{file}",
     "--realign-pct", "{}"],
    ["cassini", "profile", "{cap}", "--bin-ms", "{}", "--json"],
    ["cassini", "profile", "{cap}", "--gpus", "{}", "--json"],
    ["cassini", "profile", "{cap}", "--min-period-ms", "{}", "--json"],
    ["pcap", "summary", "{cap}", "--bins", "{}", "--json"],
    ["pcap", "summary", "{cap}", "--bin-ms", "{}", "--json"],
    ["topo", "gen", "bt", "--depth", "{}", "--json", "-o", "{tmp}/t.json"],
    ["topo", "gen", "bt", "--hosts-per-leaf", "{}", "--json", "-o", "{tmp}/t.json"],
    ["topo", "gen", "fattree", "--ports", "{}", "--json", "-o", "{tmp}/t.json"],
    ["topo", "gen", "leafspine", "--leaves", "{}", "--json", "-o", "{tmp}/t.json"],
    ["topo", "gen", "leafspine", "--spines", "{}", "--json", "-o", "{tmp}/t.json"],
    ["deploy", "--topology", BT15, "--workload", WORKLOAD, "-k", "{}", "--dry-run",
     "--from-empty", "--json"],
    ["deploy", "--topology", BT15, "--workload", WORKLOAD, "--ecn-threshold", "{}",
     "--dry-run", "--from-empty", "--json"],
    ["deploy", "--topology", BT15, "--workload", WORKLOAD, "--queue-rate", "{}", "--dry-run",
     "--from-empty", "--json"],
    ["deploy", "--topology", BT15, "--workload", WORKLOAD, "--queue-depth", "{}",
     "--dry-run", "--from-empty", "--json"],
    ["run", "aggregation", "--topology", BT15, "-k", "{}", "--out", "{file}"],
    ["run", "aggregation", "--topology", BT15, "--rounds", "{}", "--out", "{file}"],
    ["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--iterations", "{}",
     "--out", "{file}"],
    ["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--capacity-pps", "{}",
     "--out", "{file}"],
    ["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--queue-depth", "{}",
     "--out", "{file}"],
    ["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--ecn-threshold", "{}",
     "--out", "{file}"],
]


def _fill(template: list[str], files: dict[str, str], value: str) -> list[str]:
    out = []
    for part in template:
        if part == "{}":
            out.append(value)
        else:
            for key, path in files.items():
                part = part.replace("{" + key + "}", path)
            out.append(part)
    return out


@pytest.mark.parametrize("template", NUMBER_OPTIONS, ids=lambda t: " ".join(
    p for p in t if not p.startswith("{") and "/" not in p)[:60])
@FAST
@given(value=number_text)
def test_number_options(files: dict[str, str], template: list[str], value: str) -> None:
    argv = _fill(template, files, value)
    code, _, err = check(argv, json_out="--json" in argv)
    if value.strip() in ("nan", "NaN", "inf", "-inf", "1e400", "9" * 5000):
        assert code == 2, (argv, err)


def test_zero_never_means_the_default(files: dict[str, str]) -> None:
    """Flags where 0 used to be read as "use the default" now refuse it."""
    for argv in (["topo", "gen", "bt", "--hosts-per-leaf", "0"],
                 ["soar", "experiment", "fig6", "--out", files["tmp"], "--processes", "0"],
                 ["deploy", "--topology", BT15, "--workload", WORKLOAD, "--queue-rate", "0",
                  "--dry-run", "--from-empty"],
                 ["pcap", "summary", files["cap"], "--bin-ms", "0"]):
        code, _, err = check(argv)
        assert code == 2 and ("got 0" in err or "got '0'" in err), (argv, err)


# -------------------------------------------------------------------------- output paths

def _bad_paths(files: dict[str, str]) -> dict[str, list[str]]:
    tmp, afile = files["tmp"], files["file"]
    return {
        "folder": [afile, f"{afile}/sub", "", "/proc/innet-no/such"],
        "file": [tmp, f"{tmp}/", f"{afile}/x.json", f"{tmp}/missing-dir/x.json", ""],
        "image": [f"{tmp}/plot", f"{tmp}/plot.txt", tmp, f"{afile}/p.png",
                  f"{tmp}/no-dir/p.png"],
    }


PATH_OPTIONS = [
    ("folder", ["soar", "experiment", "fig6", "--quick", "--out", "{}"]),
    ("folder", ["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{}"]),
    ("folder", ["run", "aggregation", "--topology", BT15, "--out", "{}"]),
    ("folder", ["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--out", "{}"]),
    ("folder", ["demo", "--out", "{}"]),
    ("file", ["soar", "gen", "-n", "3", "-o", "{}"]),
    ("file", ["cassini", "profile", "{cap}", "-o", "{}"]),
    ("file", ["topo", "gen", "bt", "--depth", "2", "-o", "{}"]),
    ("image", ["pcap", "summary", "{cap}", "--plot", "{}"]),
]


@pytest.mark.parametrize("kind,template", PATH_OPTIONS,
                         ids=lambda x: x if isinstance(x, str) else " ".join(x[:2]))
def test_bad_output_paths_are_refused_before_any_work(files: dict[str, str], kind: str,
                                                      template: list[str]) -> None:
    for bad in _bad_paths(files)[kind]:
        argv = _fill(template, files, bad)
        code, _, err = check(argv)
        assert code == 2, (argv, err)


def test_unwritable_place_is_one_line() -> None:
    # root may write wherever the permission bits say; /proc refuses new files anyway
    code, _, err = check(["soar", "gen", "-n", "3", "-o", "/proc/innet-test.json"])
    assert code == 2 and "/proc" in err


def test_cassini_prefix_cannot_leave_the_folder(files: dict[str, str]) -> None:
    for prefix in ("../x", "a/b", ".."):
        code, _, err = check(["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50",
                              "--out", files["tmp"], "--prefix", prefix])
        assert code == 2 and "--prefix" in err


# ---------------------------------------------------------------------- SOAR instances

JSON_JUNK = st.one_of(
    st.sampled_from([2**63, 2**64, 2**70, -(2**63) - 1, 10**400, 1e-320, 5e-324, 1e308,
                     -1, -0.5, 0, 0.0, 1.5, True, None, "", "x", [], {}, float("nan"),
                     float("inf"), -float("inf")]),
    st.integers(), st.floats(), st.text(max_size=5),
)


@st.composite
def instance(draw: st.DrawFn) -> dict[str, Any]:
    """A valid small instance: any shape, extreme but allowed rates, loads up to 2^50."""
    n = draw(st.integers(1, 7))
    nodes: list[dict[str, Any]] = [{"id": "d"}]
    for i in range(1, n + 1):
        parent = "d" if i == 1 else f"s{draw(st.integers(1, i - 1))}"
        nodes.append({"id": f"s{i}", "parent": parent,
                      "rate": draw(st.sampled_from([1, 2, 0.5, 3.7, 1e-9, 1e15])),
                      "load": draw(st.integers(0, 2**50))})
    return {"root": "d", "nodes": nodes}


def _mutate(data: Any, draw: Any) -> Any:
    """Replace, drop or duplicate one element somewhere in a JSON value."""
    data = copy.deepcopy(data)
    paths: list[list[Any]] = []

    def walk(value: Any, path: list[Any]) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, [*path, k])
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, [*path, i])

    walk(data, [])
    path = draw(st.sampled_from(paths))
    action = draw(st.sampled_from(["replace", "replace", "replace", "drop", "duplicate"]))
    if not path:
        return draw(JSON_JUNK)
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    key = path[-1]
    if action == "drop":
        del holder[key]
    elif action == "duplicate" and isinstance(holder, list):
        holder.append(copy.deepcopy(holder[key]))
    else:
        holder[key] = draw(JSON_JUNK)
    return data


def _write(tmp: Path, name: str, data: Any) -> str:
    path = tmp / name
    # allow_nan: the files may hold NaN/Infinity (Python writes them; the loaders refuse them)
    path.write_text(json.dumps(data, allow_nan=True))
    return str(path)


def _raw(data: dict[str, Any]) -> RawInstance:
    ids = [n["id"] for n in data["nodes"]]
    pos = {name: i for i, name in enumerate(ids)}
    return RawInstance([pos[n["parent"]] if "parent" in n else -1 for n in data["nodes"]],
                       [float(n.get("rate", 1)) for n in data["nodes"]],
                       [int(n.get("load", 0)) for n in data["nodes"]],
                       list(range(1, len(ids))))


@FAST
@given(data=st.data(), k=st.integers(0, 8))
def test_soar_instances_mutated(files: dict[str, str], data: st.DataObject, k: int) -> None:
    inst = data.draw(instance())
    mutated = _mutate(inst, data.draw) if data.draw(st.booleans()) else inst
    path = _write(Path(files["tmp"]), "inst.json", mutated)
    code, out, err = check(["soar", "solve", path, "-k", str(k), "--json"], json_out=True)
    if code == 0:
        result = json.loads(out)
        assert len(result["blue"]) <= k
        if mutated is inst:  # untouched: the plan's cost must be the oracle's optimum
            best = exhaustive(_raw(inst), k)
            assert result["cost"] == pytest.approx(best, rel=1e-9, abs=1e-9)
    elif mutated is inst:
        pytest.fail(f"a valid instance was refused: {err}")


def test_loads_beyond_64_bits_and_extreme_rates_are_refused(files: dict[str, str]) -> None:
    base = {"root": "d", "nodes": [{"id": "d"}, {"id": "s1", "parent": "d", "load": 1}]}
    for field, value in (("load", 2**64), ("load", 2**63 - 1), ("load", 1e300),
                         ("rate", 1e-320), ("rate", 1e300)):
        data = copy.deepcopy(base)
        data["nodes"][1][field] = value
        path = _write(Path(files["tmp"]), "big.json", data)
        code, _, err = check(["soar", "solve", path, "-k", "1", "--json"])
        assert code == 2 and f"{field} must be" in err, (field, value, err)
    # two loads of 2^52 are fine (2^53 in all), a third one is not: the sum would not be exact
    nodes = [{"id": "d"}] + [{"id": f"s{i}", "parent": "d", "load": 2**52} for i in (1, 2)]
    path = _write(Path(files["tmp"]), "sum.json", {"root": "d", "nodes": nodes})
    code, out, _ = check(["soar", "solve", path, "-k", "1", "--json"], json_out=True)
    assert code == 0 and json.loads(out)["messages"] == 2**53
    nodes.append({"id": "s3", "parent": "d", "load": 2**52})
    path = _write(Path(files["tmp"]), "sum.json", {"root": "d", "nodes": nodes})
    code, _, err = check(["soar", "solve", path, "-k", "1"])
    assert code == 2 and "2^53" in err


def test_solve_refuses_what_would_not_fit_in_memory(files: dict[str, str]) -> None:
    # a path of 300,000 switches needs n^2 / 2 distances: hundreds of GB
    nodes = [{"id": "d"}] + [{"id": f"s{i}", "parent": "d" if i == 1 else f"s{i - 1}",
                              "load": 1} for i in range(1, 300_001)]
    path = _write(Path(files["tmp"]), "path.json", {"root": "d", "nodes": nodes})
    code, _, err = check(["soar", "solve", path, "-k", "4"])
    assert code == 2 and "GiB" in err and "--force" in err


# ------------------------------------------------------------------- topology, jobs, workload

@FAST
@given(data=st.data())
def test_topologies_mutated(files: dict[str, str], data: st.DataObject) -> None:
    topo = json.loads(Path(BT15).read_text())
    path = _write(Path(files["tmp"]), "topo.json", _mutate(topo, data.draw))
    check(["topo", "check", path, "--json"], json_out=True)


@FAST
@given(port=st.one_of(st.integers(-5, 1100), st.integers(2**31, 2**80),
                      st.sampled_from([0, 509, 510, 511, 512])))
def test_topology_ports_bmv2_reserves(files: dict[str, str], port: int) -> None:
    topo = json.loads(Path(BT15).read_text())
    topo["links"][0] = ["h0", f"s1-p{port}"]
    path = _write(Path(files["tmp"]), "ports.json", topo)
    code, _, err = check(["topo", "check", path, "--json"], json_out=True)
    if 1 <= port <= 509 and port not in (2, 3):  # s1 uses ports 2 and 3 for its children
        assert code == 0, err
    else:
        assert code == 2


@FAST
@given(data=st.data())
def test_jobs_files_mutated(files: dict[str, str], data: st.DataObject) -> None:
    jobs = json.loads(Path(PAIR).read_text())
    path = _write(Path(files["tmp"]), "jobs.json", _mutate(jobs, data.draw))
    code, out, _ = check(["cassini", "link", path, "--capacity", "50", "--json"], json_out=True)
    if code == 0:  # the score is finite (no null standing for an infinity), at most 1
        score = json.loads(out)["score"]
        assert isinstance(score, int | float) and score <= 1 + 1e-9


@FAST
@given(data=st.data())
def test_workload_files_mutated(files: dict[str, str], data: st.DataObject) -> None:
    workload = json.loads(Path(WORKLOAD).read_text())
    path = _write(Path(files["tmp"]), "workload.json", _mutate(workload, data.draw))
    check(["deploy", "--topology", BT15, "--workload", path, "-k", "2", "--dry-run",
           "--from-empty", "--json"], json_out=True)


# ----------------------------------------------------------------------------- captures

def _pcap(packets: list[tuple[float, int]]) -> bytes:
    """A classic pcap: (time, payload bytes) UDP frames 10.0.0.1 -> 10.0.0.2, ECT(0)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for t, size in packets:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 2, 28 + size, 0, 0, 64, 17, 0,
                         bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
        frame = (b"\x00" * 12 + b"\x08\x00" + ip + struct.pack("!HHHH", 1, 2, 8 + size, 0)
                 + b"y" * size)
        out.append(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(frame), len(frame)))
        out.append(frame)
    return b"".join(out)


@FAST
@given(data=st.data())
def test_captures_with_corrupt_lengths(files: dict[str, str], data: st.DataObject) -> None:
    times = sorted(data.draw(st.lists(st.floats(0, 5), min_size=1, max_size=40)))
    good = _pcap([(t, 100) for t in times])
    frame_len = 14 + 20 + 8 + 100
    record = data.draw(st.integers(0, len(times) - 1))
    offset = 24 + record * (16 + frame_len)
    how = data.draw(st.sampled_from(["caplen", "truncate", "bytes"]))
    raw = bytearray(good)
    damaged: bool | None
    if how == "caplen":
        value = data.draw(st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(
            [0xFFFFFFFF, 2**18 + 1, frame_len + 1, frame_len, len(good)])))
        struct.pack_into("<I", raw, offset + 8, value)
        damaged = value != frame_len
    elif how == "truncate":
        cut = data.draw(st.integers(1, len(good) - 1))
        raw = raw[:cut]
        damaged = cut < 24 or (cut - 24) % (16 + frame_len) != 0
    else:
        pos = data.draw(st.integers(0, len(good) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
        damaged = None  # it may or may not matter; the property must hold either way
    path = Path(files["tmp"]) / "corrupt.pcap"
    path.write_bytes(bytes(raw))
    code, out, err = check(["pcap", "summary", str(path), "--json"], json_out=True)
    if damaged:
        assert code == 2 and ("damaged" in err or "not a pcap" in err), err
    elif damaged is False:
        assert code == 0, err
        whole = len(times) if how == "caplen" else (len(raw) - 24) // (16 + frame_len)
        assert json.loads(out)["packets"] == whole
    check(["cassini", "profile", str(path), "--json"], json_out=True)


# --------------------------------------------------------------------- --json and --help

JSON_COMMANDS = [
    ["soar", "solve", "{inst}", "-k", "3", "--json"],
    ["soar", "compare", "{inst}", "-k", "3", "--json"],
    ["soar", "gen", "-n", "5", "-o", "{tmp}/j.json", "--json"],
    ["soar", "online", "{inst}", "-k", "2", "--workloads", "3", "--json"],
    ["cassini", "link", PAIR, "--capacity", "50", "--json"],
    ["cassini", "plan", "--topology", LEAFSPINE, "--jobs", PAIR, "--candidates", "3", "--json"],
    ["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out", "{tmp}/ev",
     "--iterations", "5", "--json"],
    ["cassini", "profile", "{cap}", "--json"],
    ["cassini", "zoo", "--json"],
    ["pcap", "summary", "{cap}", "--json"],
    ["topo", "check", BT15, "--json"],
    ["topo", "gen", "fattree", "-o", "{tmp}/ft.json", "--json"],
    ["deploy", "--topology", BT15, "--workload", WORKLOAD, "-k", "2", "--dry-run",
     "--from-empty", "--json"],
]


@pytest.mark.parametrize("template", JSON_COMMANDS, ids=lambda t: " ".join(t[:2]))
def test_json_is_one_strict_document(files: dict[str, str], template: list[str]) -> None:
    argv = _fill(template, files, "")
    _, out, err = check(argv, json_out=True, ok_codes=(0,))
    assert isinstance(json.loads(out), dict), err


def test_evaluate_json_has_no_infinity_when_cassini_removes_every_mark(
        files: dict[str, str]) -> None:
    code, out, _ = check(["cassini", "evaluate", "--jobs", PAIR, "--capacity", "50", "--out",
                          f"{files['tmp']}/inf", "--iterations", "20", "--json"], json_out=True)
    assert code == 0
    # the base has marks, CASSINI none: the ratio is unbounded, written as null
    assert json.loads(out)["gain"]["marks_ratio"] is None
    summary = Path(files["tmp"]) / "inf" / "cassini-jobs-vgg19-pair-summary.json"
    json.loads(summary.read_text(), parse_constant=_no_constants)


def _parsers() -> Iterator[tuple[str, Any]]:
    import argparse

    def walk(p: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, Any]]:
        yield path, p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, f"{path} {name}")

    yield from walk(build_parser(), "innet")


def test_every_command_and_option_is_described() -> None:
    import argparse

    skip = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
    for path, parser in _parsers():
        assert parser.description, f"{path}: no description"
        text = " ".join(parser.format_help().split())  # undo the wrapping
        for action in parser._actions:
            if isinstance(action, skip) or action.help == argparse.SUPPRESS:
                continue  # hidden: an old spelling kept only to refuse it (innet.cli.oldflags)
            assert action.help, f"{path} {action.option_strings or action.dest}: no help"
            if (action.option_strings and not action.required and action.default is None
                    and not isinstance(action, argparse._StoreTrueAction)):
                assert "default" in action.help.lower(), \
                    f"{path} {action.option_strings}: the help does not say the default"
            if action.option_strings and action.default not in (None, False):
                assert ("default" in action.help.lower()
                        or f"(default: {action.default})" in text), \
                    f"{path} {action.option_strings}: default not shown"


def test_random_argv_never_tracebacks() -> None:
    """Words of the real commands shuffled with junk: argparse or the command refuses them."""
    rng = random.Random(13)
    words = ["soar", "solve", "compare", "gen", "cassini", "link", "zoo", "topo", "check",
             "pcap", "summary", "-k", "-n", "--json", "--seed", "--bins", "-1", "nan", "x",
             BT15, PAIR, "--capacity", "50", "--depth", "99"]
    for _ in range(60):
        argv = [rng.choice(words) for _ in range(rng.randint(0, 6))]
        check(argv, ok_codes=(0, 2), label="(random argv)")


@pytest.mark.usefixtures("no_p4runtime_threads_left")
def test_deploy_and_status_json_against_a_p4runtime_server(tmp_path: Path) -> None:
    """The two commands that talk to switches: one JSON document each, same names as the
    human output (against the in-process P4Runtime server that checks every request)."""
    from innet.testing.fake_server import FakeP4RuntimeServer

    topo = json.loads(Path(BT15).read_text())
    names = list(topo["switches"])
    with FakeP4RuntimeServer(tuple(range(len(names)))) as srv:
        for i, name in enumerate(names):
            topo["switches"][name] = {"grpc": srv.address, "device_id": i}
        path = _write(tmp_path, "remote.json", topo)
        _, out, _ = check(["deploy", "--topology", path, "--workload", WORKLOAD, "-k", "4",
                           "--json"], json_out=True, ok_codes=(0,))
        deployed = json.loads(out)
        assert deployed["jobs"][0]["blue"] == ["s4", "s5", "s6", "s7"]
        assert deployed["program_loads"] == 15 and deployed["writes"] == 315
        assert not deployed["dry_run"] and deployed["switches"]["s4"]["load_program"]
        _, out, _ = check(["status", "--topology", path, "--switch", "s4", "--json"],
                          json_out=True, ok_codes=(0,))
        switches = json.loads(out)["switches"]
        assert list(switches) == ["s4"]
        s4 = switches["s4"]
        assert s4["reachable"] and s4["pipeline"] is not None
        # the deploy inserted these; the program's default actions it modified are no entries
        assert s4["entries"] == len(deployed["switches"]["s4"]["insert"])


def test_demo_json_keeps_progress_off_stdout(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """demo prints sections as it goes; with --json they go to stderr and stdout holds one
    document. (The demo itself is exercised by test_demo.py; here only its --json mode.)"""
    from innet.cli import demo

    def fake(args: Any) -> tuple[Path, list[str], list[str]]:
        print("== SOAR ==")
        print("some table")
        return Path(args.out), ["SOAR comparison"], ["the BMv2 experiments: no root"]

    monkeypatch.setattr(demo, "_run_demo", fake)
    code, out, err = run(["demo", "--out", str(tmp_path), "--json"])
    assert code == 0 and "== SOAR ==" in err
    assert json.loads(out) == {"out": str(tmp_path), "ran": ["SOAR comparison"],
                               "skipped": ["the BMv2 experiments: no root"]}


def test_run_json_is_one_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`innet run ... --json` shapes the experiments' results (which need BMv2 and root and
    are run by tests/emulation/test_experiments_on_bmv2.py) into one strict document."""
    from innet.cli import run as emulation_cli
    from innet.emulation import aggregation, cassini_run

    monkeypatch.setattr(emulation_cli, "check_environment", lambda: None)
    run_ = aggregation.StrategyRun("soar", 4, ("s4",), 5, 28.0, 28.0, True, 12, {"s4": 5},
                                   {"s4": 1})
    monkeypatch.setattr(aggregation, "run_aggregation", lambda *a, **k: [run_])
    _, out, _ = check(["run", "aggregation", "--topology", BT15, "--out", str(tmp_path),
                       "--json"], json_out=True, ok_codes=(0,))
    doc = json.loads(out)
    assert doc["ok"] and doc["strategies"][0]["measured_cost"] == 28.0
    result = cassini_run.CassiniExperiment(
        {}, (cassini_run.RunResult("no shifts", {"a": ["h1", "h2"]}, {"a": 0.0}, {"h2": 3},
                                   {"h2": 9}, {"h1": 9}, 5, {"a": [300.0]}, {"a": 0}, 0),),
        800, 80.0, 4.0, 100, 20, 30)
    monkeypatch.setattr(cassini_run, "run_cassini", lambda *a, **k: result)
    _, out, _ = check(["run", "cassini", "--topology", LEAFSPINE, "--jobs", PAIR, "--out",
                       str(tmp_path), "--json"], json_out=True, ok_codes=(0,))
    assert json.loads(out)["runs"][0]["switch_marks"] == 5


@FAST
@given(data=st.data())
def test_pcapng_damaged_anywhere(files: dict[str, str], data: st.DataObject) -> None:
    """pcapng (what tcpdump and Wireshark write): cut short or with a byte changed anywhere,
    a capture is summarised whole or refused in one line."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapNgWriter

    path = Path(files["tmp"]) / "ng.pcapng"
    if not path.exists():
        writer = PcapNgWriter(str(path))
        for i in range(20):
            pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", tos=2) / UDP() / (b"z" * 50)
            pkt.time = i * 0.01
            writer.write(pkt)
        writer.close()
    good = path.read_bytes()
    raw = bytearray(good)
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(good) - 1))]
    else:
        raw[data.draw(st.integers(0, len(good) - 1))] = data.draw(st.integers(0, 255))
    bad = Path(files["tmp"]) / "ng-bad.pcapng"
    bad.write_bytes(bytes(raw))
    code, out, _ = check(["pcap", "summary", str(bad), "--json"], json_out=True)
    if code == 0:
        # a changed byte in a packet's data or a timestamp keeps all 20 packets; one in a
        # block's type makes it a block pcapng says to skip (19): never fewer
        assert json.loads(out)["packets"] in (19, 20), out
