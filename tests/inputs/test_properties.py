"""Property tests of the input edge: names in any Unicode, numbers at and beyond every
documented limit, and every kind of file-system object, fed to every command that reads
them. Each property runs the "inputs" hypothesis profile of conftest.py (200 examples,
derandomised); a command either gives a result or refuses in one clean line, exit 2."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inputs_helpers import (
    BT15,
    PAIR,
    WORKLOAD,
    bt15,
    instance,
    make_fs_objects,
    ok_or_refused,
    refused,
    renamed,
    write_json,
)

from innet.errors import MAX_MESSAGE, elide_join, one_line, quote
from innet.names import natural_key

PROFILE = settings.get_profile("inputs")

# any Unicode, surrogates included (a JSON \ud800 escape decodes to one), and the nasty
# parts written out: digits of every script, superscripts, controls, long digit runs
NAMES = st.one_of(
    st.text(st.characters(codec=None), max_size=30),
    st.text(st.characters(categories=["Nd", "No", "Cc", "Zl", "Zp", "Cs"]), max_size=12),
    st.builds(lambda p, n: p + "1" * n, st.sampled_from(["s", "h", "", "s0"]),
              st.integers(0, 6000)),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,12}\n?", fullmatch=True),
)


@PROFILE
@given(st.lists(NAMES, max_size=12))
def test_natural_key_is_a_total_order_on_any_text(names: list[str]) -> None:
    ordered = sorted(names, key=natural_key)
    assert sorted(reversed(names), key=natural_key) == ordered
    keys = [natural_key(n) for n in ordered]
    assert all(a <= b for a, b in itertools.pairwise(keys))


@PROFILE
@given(st.sampled_from(["s", "h", "rack-", ""]), st.integers(0, 10**60),
       st.integers(0, 10**60))
def test_natural_key_orders_digits_as_numbers(prefix: str, a: int, b: int) -> None:
    ka, kb = natural_key(f"{prefix}{a}"), natural_key(f"{prefix}{b}")
    assert (ka < kb) == (a < b) and (ka == kb) == (a == b)


@PROFILE
@given(st.text(st.characters(codec=None), max_size=2000), st.integers(40, 400))
def test_every_message_is_one_printable_bounded_line(text: str, limit: int) -> None:
    line = one_line(text, limit)
    assert len(line) <= limit and line.isprintable()
    line.encode("utf-8")
    assert one_line(line, limit) == line  # idempotent: printing twice changes nothing
    q = quote(text)
    assert len(q) <= 60 and q.isprintable()
    assert elide_join([text] * 20, limit=30).isprintable()


@PROFILE
@given(NAMES, st.sampled_from(["host", "switch", "destination"]))
def test_topology_names_in_any_unicode(tmp_path_factory: pytest.TempPathFactory, name: str,
                                       where: str) -> None:
    folder = tmp_path_factory.mktemp("names")
    data = bt15()
    if where == "destination":
        data["aggregation"] = {"destination": name}
    else:
        data = renamed(data, "h1" if where == "host" else "s3", name)
    text = json.dumps(data)  # surrogates become \ud800 escapes, as a user's file holds them
    (folder / "t.json").write_text(text)
    path = str(folder / "t.json")
    topo = ok_or_refused(["topo", "check", path])[0]
    deploy = ok_or_refused(["deploy", "--topology", path, "--workload", str(WORKLOAD),
                            "--dry-run", "--from-empty"])[0]
    assert topo == 0 or deploy == 2  # what topo check refuses, deploy refuses too


@PROFILE
@given(st.lists(NAMES, min_size=2, max_size=8, unique=True))
def test_soar_ids_in_any_unicode(tmp_path_factory: pytest.TempPathFactory,
                                 ids: list[str]) -> None:
    folder = tmp_path_factory.mktemp("ids")
    (folder / "i.json").write_text(json.dumps(instance(ids)))
    path = str(folder / "i.json")
    for argv in (["soar", "solve", path, "-k", "2"], ["soar", "compare", path, "-k", "1"]):
        ok_or_refused(argv)


# numbers at and beyond each documented limit (docs/inputs.md): the limit, just inside, just
# outside, far outside, and the values that break arithmetic
def _around(limit: float) -> list[Any]:
    return [limit, limit * (1 + 1e-12), limit * (1 - 1e-12), limit + 1, limit - 1, -limit,
            limit * 1e6, int(limit) if math.isfinite(limit) else 0]


EDGE = st.one_of(
    st.sampled_from([0, -1, 1, 0.5, 1e-9, 1e-10, 1e15, 1e16, 2**53, 2**53 + 1, 2**64,
                     10**400, 1e308, True, None, "1", [], {}, "nan"]),
    st.sampled_from([v for lim in (509, 510, 1024, 1e4, 1e7, 1e-3, 1e5, 65535, 1e6, 2**64)
                     for v in _around(lim)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**30), 10**30),
)


@PROFILE
@given(st.sampled_from(["port", "delay", "mbps", "rate", "gpus", "thrift", "device"]), EDGE)
def test_topology_numbers_at_and_beyond_their_limits(tmp_path_factory: pytest.TempPathFactory,
                                                     field: str, value: Any) -> None:
    folder = tmp_path_factory.mktemp("topo")
    data = bt15()
    if field == "port":
        data["links"][1][0] = f"s2-p{value}"
    elif field in ("delay", "mbps", "rate"):
        data["links"][1] = {"a": data["links"][1][0], "b": data["links"][1][1],
                            field: value}
    elif field == "gpus":
        data["hosts"]["h1"]["gpus"] = value
    else:
        key = "thrift_port" if field == "thrift" else "device_id"
        data["switches"]["s1"] = {"grpc": "127.0.0.1:1", key: value}
    path = write_json(folder / "t.json", data)
    ok_or_refused(["topo", "check", path])


@PROFILE
@given(st.sampled_from(["iteration_ms", "gbps", "duration_ms", "start_ms", "gpus"]), EDGE,
       st.sampled_from(["1", "5", "0.5", "90"]))
def test_job_numbers_at_and_beyond_their_limits(tmp_path_factory: pytest.TempPathFactory,
                                                field: str, value: Any, precision: str) -> None:
    folder = tmp_path_factory.mktemp("jobs")
    job: dict[str, Any] = {"name": "a", "iteration_ms": 100,
                           "phases": [{"start_ms": 0, "duration_ms": 50, "gbps": 40}]}
    if field in ("gbps", "duration_ms", "start_ms"):
        job["phases"][0][field] = value
    else:
        job[field] = value
    other = {"name": "b", "iteration_ms": 7, "phases": [{"start_ms": 0, "duration_ms": 3,
                                                         "gbps": 40}]}
    path = write_json(folder / "j.json", {"jobs": [job, other]})
    ok_or_refused(["cassini", "link", path, "--capacity", "50", "--precision-deg", precision])


COMMANDS: list[list[str]] = [
    ["topo", "check", "{}"],
    ["soar", "solve", "{}", "-k", "1"],
    ["soar", "compare", "{}", "-k", "1"],
    ["soar", "online", "{}", "--workloads", "2"],
    ["cassini", "link", "{}", "--capacity", "50"],
    ["cassini", "plan", "--topology", "{}", "--jobs", str(PAIR)],
    ["cassini", "plan", "--topology", str(BT15.parent / "leafspine24.json"), "--jobs", "{}"],
    ["cassini", "profile", "{}", "--name", "a"],
    ["pcap", "summary", "{}"],
    ["deploy", "--topology", "{}", "--workload", str(WORKLOAD), "--dry-run", "--from-empty"],
    ["deploy", "--topology", str(BT15), "--workload", "{}", "--dry-run", "--from-empty"],
    ["deploy", "--topology", str(BT15), "--workload", str(WORKLOAD), "--dry-run",
     "--from-empty", "--p4info", "{}"],
    ["deploy", "--topology", str(BT15), "--workload", str(WORKLOAD), "--dry-run",
     "--from-empty", "--bmv2-json", "{}"],
    ["status", "--topology", "{}"],
]
_FS: dict[str, str] = {}
KINDS = ["fifo", "directory", "/dev/zero", "/dev/null", "symlink loop", "missing"]


@PROFILE
@given(st.sampled_from(COMMANDS), st.sampled_from(KINDS))
def test_every_path_of_every_kind_is_refused_at_once(tmp_path_factory: pytest.TempPathFactory,
                                                     argv: list[str], kind: str) -> None:
    if not _FS:  # one folder for every example (not the base folder: pytest's clean-up
        # of that one trips over a symlink loop)
        _FS.update(make_fs_objects(tmp_path_factory.mktemp("fs")))
    path = _FS[kind]
    line = refused([a.replace("{}", path) for a in argv], within_s=5.0)
    assert len(line) <= MAX_MESSAGE
