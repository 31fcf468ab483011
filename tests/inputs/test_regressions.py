"""Every example of the issue 'every input refused cleanly, every computation bounded', as a
test: each command ends with a result or one line of at most 300 characters and exit status
2, without a traceback, a hang or runaway memory."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from inputs_helpers import (
    BT15,
    JOBS13,
    PAIR,
    WORKLOAD,
    bt15,
    instance,
    make_fs_objects,
    ok_or_refused,
    one_clean_line,
    refused,
    renamed,
    run,
    write_json,
    write_pcap,
)

from innet.names import natural_key

LONG_DIGITS = "s" + "1" * 5000

# ---------------------------------------------------------------------------- natural sort


def test_natural_key_orders_without_converting() -> None:
    names = ["s10", "s2", "s1", "s01", "s1²", LONG_DIGITS, "s" + "9" * 4400, "h0", "s"]
    ordered = sorted(names, key=natural_key)
    assert ordered[:5] == ["h0", "s", "s01", "s1", "s1²"]
    assert ordered.index("s2") < ordered.index("s10") < ordered.index("s" + "9" * 4400)
    assert ordered[-1] == LONG_DIGITS
    assert sorted(reversed(names), key=natural_key) == ordered  # a total order


@pytest.mark.parametrize("name", ["s1²", LONG_DIGITS])
def test_odd_ids_do_not_crash_the_soar_commands(tmp_path: Path, name: str) -> None:
    path = write_json(tmp_path / "odd.json", instance(["d", "s2", name, "s10", "s1"]))
    for argv in (["soar", "solve", path, "-k", "2"], ["soar", "compare", path, "-k", "2"],
                 ["soar", "online", path, "--workloads", "3"]):
        code, _, _ = ok_or_refused(argv)
        assert code == 0, argv


def test_odd_switch_names_do_not_crash_deploy_or_cassini_plan(tmp_path: Path) -> None:
    for name in ("s1²", LONG_DIGITS):
        path = write_json(tmp_path / "t.json", renamed(bt15(), "s3", name))
        topo = ok_or_refused(["topo", "check", path])[0]
        deploy = ok_or_refused(["deploy", "--topology", path, "--workload", str(WORKLOAD),
                                "--dry-run", "--from-empty"])[0]
        assert topo == deploy  # what topo check accepts, deploy accepts
    leafspine = json.loads((BT15.parent / "leafspine24.json").read_text())
    first = sorted(leafspine["switches"])[0]
    path = write_json(tmp_path / "ls.json", renamed(leafspine, first, LONG_DIGITS))
    code, _, _ = ok_or_refused(["cassini", "plan", "--topology", path, "--jobs", str(PAIR),
                                "--candidates", "2", "--checked", "0"])
    assert code == 0
    superscript = write_json(tmp_path / "sq.json", renamed(leafspine, first, "s1²"))
    assert "ASCII" in refused(["cassini", "plan", "--topology", superscript, "--jobs",
                               str(PAIR)])


# ------------------------------------------------------------------------- field types


@pytest.mark.parametrize("bad", [["h1"], {"a": 1}, 7, None])
def test_a_destination_that_is_no_name_is_refused(tmp_path: Path, bad: object) -> None:
    data = bt15()
    data["aggregation"] = {"destination": bad}
    line = refused(["topo", "check", write_json(tmp_path / "t.json", data)])
    assert "t.json: aggregation.destination" in line
    wl = write_json(tmp_path / "w.json", {"job": 1, "destination": bad, "workers": ["h1"]})
    if bad is not None:  # null means "the topology's"
        line = refused(["deploy", "--topology", str(BT15), "--workload", wl, "--dry-run",
                        "--from-empty"])
        assert "w.json: destination" in line
    wl = write_json(tmp_path / "w2.json", {"job": 1, "workers": ["h1", bad]})
    assert "w2.json: workers" in refused(["deploy", "--topology", str(BT15), "--workload", wl,
                                          "--dry-run", "--from-empty"])


@pytest.mark.parametrize(("ip", "prefix"), [
    ("fe80::1", None), ("fe80::1", "fe80::/64"), ("10.0.0.2/garbage", None),
    ("10.0.0.2\n", None), (" 10.0.0.2", None), ("10.0.0.2/33", None), (["10.0.0.2"], None),
    ("10.0.0.2", "10.0.0.0/8\n")])
def test_addresses_are_ipv4_only(tmp_path: Path, ip: object, prefix: str | None) -> None:
    data = bt15()
    data["hosts"]["h1"]["ip"] = ip
    if prefix is not None:
        data["prefix"] = prefix
    line = refused(["topo", "check", write_json(tmp_path / "t.json", data)])
    assert "IPv4" in line


def test_an_ip_with_its_prefix_length_is_still_accepted(tmp_path: Path) -> None:
    data = bt15()
    data["hosts"]["h1"]["ip"] = data["hosts"]["h1"]["ip"] + "/24"
    assert run(["topo", "check", write_json(tmp_path / "t.json", data)])[0] == 0


@pytest.mark.parametrize("field", ["host", "switch", "mac", "port", "grpc"])
def test_a_trailing_newline_is_refused(tmp_path: Path, field: str) -> None:
    data = bt15()
    if field == "host":
        data = renamed(data, "h1", "h1\n")
    elif field == "switch":
        data = renamed(data, "s2", "s2\n")
    elif field == "mac":
        data["hosts"]["h1"]["mac"] += "\n"
    elif field == "port":
        data["links"][1][0] += "\n"
    else:
        data["switches"]["s1"] = {"grpc": "127.0.0.1:9559\n"}
    refused(["topo", "check", write_json(tmp_path / "t.json", data)])


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + BT15.read_bytes())
    assert run(["topo", "check", str(path)])[0] == 0
    jobs = tmp_path / "jobs.json"
    jobs.write_bytes(b"\xef\xbb\xbf" + PAIR.read_bytes())
    assert run(["cassini", "link", str(jobs), "--capacity", "50"])[0] == 0


def test_a_lone_surrogate_in_an_id_is_refused_not_printed(tmp_path: Path) -> None:
    text = json.dumps(instance(["d", "s1", "s2"])).replace('"s2"', '"s\\ud800"')
    path = tmp_path / "sur.json"
    path.write_text(text)
    assert "surrogate" in refused(["soar", "solve", str(path), "-k", "1"])
    topo = BT15.read_text().replace('"s3"', '"s\\udc00"')
    (tmp_path / "t.json").write_text(topo)
    assert "surrogate" in refused(["topo", "check", str(tmp_path / "t.json")])
    # a valid pair is a character, not a surrogate
    path.write_text(text.replace('"s\\ud800"', '"s\\ud83d\\ude00"'))
    assert run(["soar", "solve", str(path), "-k", "1"])[0] == 0


# ----------------------------------------------------------------- file-system objects


def test_no_path_ever_blocks_or_reads_forever(tmp_path: Path) -> None:
    kinds = make_fs_objects(tmp_path)
    for kind, path in kinds.items():
        for argv in (["topo", "check", path],
                     ["soar", "solve", path, "-k", "1"],
                     ["cassini", "link", path, "--capacity", "50"],
                     ["deploy", "--topology", path, "--workload", str(WORKLOAD), "--dry-run",
                      "--from-empty"],
                     ["deploy", "--topology", str(BT15), "--workload", path, "--dry-run",
                      "--from-empty"],
                     ["deploy", "--topology", str(BT15), "--workload", str(WORKLOAD),
                      "--dry-run", "--from-empty", "--p4info", path],
                     ["deploy", "--topology", str(BT15), "--workload", str(WORKLOAD),
                      "--dry-run", "--from-empty", "--bmv2-json", path],
                     ["pcap", "summary", path],
                     ["cassini", "profile", path, "--name", "a"]):
            line = refused(argv, within_s=5.0)
            assert path in line or kind == "missing", (kind, line)


# ------------------------------------------------------------------- bounded searches


def _jobs(tmp_path: Path, times: list[float], name: str = "jobs.json") -> str:
    jobs = [{"name": f"j{i}", "iteration_ms": t,
             "phases": [{"start_ms": 0, "duration_ms": t / 2, "gbps": 40}]}
            for i, t in enumerate(times)]
    return write_json(tmp_path / name, {"jobs": jobs})


def test_cassini_link_1_ms_and_10_million_ms_is_fast_in_either_order(tmp_path: Path) -> None:
    results = []
    for order in ([1.0, 1e7], [1e7, 1.0]):
        path = _jobs(tmp_path, order)
        code, out, err, seconds = run(["cassini", "link", path, "--capacity", "50", "--json"])
        assert code == 0 and seconds < 10, (err, seconds)
        results.append(json.loads(out)["score"])
    assert results[0] == pytest.approx(results[1])


@pytest.mark.parametrize("jobs", [PAIR, JOBS13])
def test_cassini_link_refuses_a_search_it_cannot_finish(jobs: Path) -> None:
    line = refused(["cassini", "link", str(jobs), "--capacity", "50", "--precision-deg",
                    "0.001"], within_s=5.0)
    assert "shift search" in line and "hours" in line and "--force" in line


def test_the_link_search_estimate_does_not_depend_on_the_job_order(tmp_path: Path) -> None:
    from innet.cassini.model.geometry import search_cost
    from innet.cassini.model.profiles import load_jobs

    jobs = load_jobs(JOBS13)
    assert search_cost(jobs, 50) == search_cost(jobs[::-1], 50)


def test_a_demand_curve_of_many_steps_stays_small(tmp_path: Path) -> None:
    """A demand curve of 100,000 alternating samples is 50,000 phases: linear now."""
    curve = [0.0, 30.0] * 50_000
    path = write_json(tmp_path / "steps.json", {"jobs": [
        {"name": "a", "iteration_ms": 100, "demand_gbps": curve},
        {"name": "b", "iteration_ms": 100, "demand_gbps": curve}]})
    code, _, err, seconds = run(["cassini", "link", path, "--capacity", "50"])
    assert code == 0 and seconds < 10, (err, seconds)


def test_cassini_profile_of_nine_packets_over_2_2_hours_is_refused_at_once(
        tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "nine.pcap", [i * 2.2 * 3600 / 8 for i in range(9)])
    line = refused(["cassini", "profile", path], within_s=5.0)
    assert "period search" in line and "--bin-ms" in line and "--force" in line


def _bursts(path: Path, period_ms: float = 100.0, on_ms: float = 40.0,
            iterations: int = 12) -> str:
    times = [(i * period_ms + j * 0.5) / 1e3 for i in range(iterations)
             for j in range(int(on_ms / 0.5))]
    return write_pcap(path, times)


def test_a_capture_file_name_is_no_reason_to_refuse(tmp_path: Path) -> None:
    path = _bursts(tmp_path / "my capture.pcap")
    code, out, err, _ = run(["cassini", "profile", path, "--json"])
    assert code == 0, err
    assert json.loads(out)["job"]["name"] == "my-capture"
    line = refused(["cassini", "profile", path, "--name", "my job"])
    assert "--name" in line
    odd = _bursts(tmp_path / "___.pcap")
    assert "--name" in refused(["cassini", "profile", odd])


def test_a_steady_stream_is_no_job(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "steady.pcap", [i * 1e-3 for i in range(5000)])
    line = refused(["cassini", "profile", path])
    assert "no clear iteration time" in line


def test_smoothing_is_the_moving_average_in_linear_time() -> None:
    import time

    import numpy as np

    from innet.cassini.model.pcap_profile import smooth as _smooth

    x = np.random.default_rng(0).random(500)
    for width in (2, 3, 9, 27, 81, 243, 500):
        expected = np.convolve(x, np.ones(width) / width, mode="same")
        assert np.allclose(_smooth(x, width), expected, atol=1e-12)
    big = np.zeros(1 << 22)
    start = time.monotonic()
    _smooth(big, 3**12)
    assert time.monotonic() - start < 2.0


# ------------------------------------------------------------------ messages: one line


def test_newlines_in_names_and_paths_stay_on_one_line(tmp_path: Path) -> None:
    line = refused(["topo", "check", str(tmp_path / "a\nb.json")])
    assert "a\\nb.json" in line
    data = renamed(bt15(), "h1", "h\n1")
    refused(["topo", "check", write_json(tmp_path / "t.json", data)])


def test_a_duplicated_100000_character_id_gives_one_short_line(tmp_path: Path) -> None:
    long = "s" + "x" * 100_000
    data = instance(["d", long, "s2"])
    data["nodes"].append({"id": long, "parent": "d"})
    line = refused(["soar", "solve", write_json(tmp_path / "dup.json", data), "-k", "1"])
    assert "defined twice" in line and "chars]" in line


def test_a_100000_node_cycle_gives_one_short_line(tmp_path: Path) -> None:
    n = 100_000
    nodes = [{"id": "d"}] + [{"id": f"s{i}", "parent": f"s{(i + 1) % n}"} for i in range(n)]
    line = refused(["soar", "solve", write_json(tmp_path / "cycle.json",
                                                {"root": "d", "nodes": nodes}), "-k", "1"])
    assert "cycle" in line and "more)" in line


def test_argparse_errors_are_one_line_too() -> None:
    line = refused(["topo", "check", "x.json", "--bogus\nflag"])
    assert "\\n" in line


# ------------------------------------------------------------- status, pcap, topo gen


def _unreachable(tmp_path: Path) -> str:
    data = bt15()
    for name in data["switches"]:
        data["switches"][name] = {"grpc": "127.0.0.1:1", "device_id": 0}
    return write_json(tmp_path / "down.json", data)


def test_status_has_one_exit_rule_and_reads_its_workload(tmp_path: Path) -> None:
    topo = _unreachable(tmp_path)
    base = ["status", "--topology", topo, "--switch", "s1", "--switch", "s2"]
    plain, _, err_plain, _ = run(base)
    as_json, out, err_json, _ = run([*base, "--json"])
    assert plain == as_json == 1
    assert "2 of 2 switches could not be read" in err_plain
    assert "2 of 2 switches could not be read" in err_json
    assert not json.loads(out)["switches"]["s1"]["reachable"]
    for extra in ([], ["--json"]):
        line = refused([*base, *extra, "--workload", str(tmp_path / "none.json")])
        assert "none.json: cannot read" in line
        broken = tmp_path / "broken.json"
        broken.write_text('{"job": 1, "workers": ["nobody"]}')
        assert "unknown host 'nobody'" in refused([*base, *extra, "--workload", str(broken)])


def test_pcap_summary_takes_every_bins_its_flag_allows(tmp_path: Path) -> None:
    path = _bursts(tmp_path / "c.pcap")
    code, out, err, _ = run(["pcap", "summary", path, "--bins", "1000000", "--json"])
    assert code == 0, err
    assert len(json.loads(out)["timeline"]["packets"]) == 1_000_000
    assert run(["pcap", "summary", path, "--bins", "1000001"])[0] == 2


@pytest.mark.parametrize("argv", [["fattree", "--depth", "3"], ["bt", "--ports", "4"],
                                  ["leafspine", "--depth", "2"], ["fattree", "--leaves", "2"]])
def test_topo_gen_refuses_options_its_shape_ignores(argv: list[str]) -> None:
    assert "does not apply" in refused(["topo", "gen", *argv])


def test_topo_gen_defaults_are_unchanged() -> None:
    for shape, shipped in (("bt", "bt15.json"), ("fattree", "fattree4.json")):
        code, out, _, _ = run(["topo", "gen", shape])
        assert code == 0
        assert json.loads(out) == json.loads((BT15.parent / shipped).read_text())


def test_gpus_and_commands_must_have_their_types(tmp_path: Path) -> None:
    data = bt15()
    bad = copy.deepcopy(data)
    bad["hosts"]["h1"]["commands"] = "echo hi"
    assert "commands" in refused(["topo", "check", write_json(tmp_path / "t.json", bad)])
    bad = copy.deepcopy(data)
    bad["name"] = ["x"]
    assert "name must be a string" in refused(["topo", "check",
                                               write_json(tmp_path / "t.json", bad)])


# ------------------------------------------------------------------- output paths


@pytest.mark.parametrize("kind", ["/dev/full", "/dev/null", "fifo", "directory", "no folder"])
def test_an_output_that_cannot_take_the_result_is_refused_before_the_work(
        tmp_path: Path, kind: str) -> None:
    capture = _bursts(tmp_path / "c.pcap")
    os.mkfifo(tmp_path / "fifo.png")
    (tmp_path / "dir.png").mkdir()
    out = {"fifo": str(tmp_path / "fifo.png"), "directory": str(tmp_path / "dir.png"),
           "no folder": str(tmp_path / "none" / "out.png")}.get(kind, kind)
    for argv in (["cassini", "profile", capture, "-o", out],
                 ["topo", "gen", "bt", "-o", out],
                 ["soar", "gen", "-n", "3", "-o", out],
                 ["pcap", "summary", capture, "--plot", out]):
        if kind.startswith("/dev/") and argv[0] == "pcap":
            continue  # not an image name: refused for that already
        line = refused(argv, within_s=5.0)
        assert "-o/--output" in line or "--plot" in line, line
        assert "it is" in line or "folder" in line, line


def test_a_failed_write_names_the_file_in_one_line(tmp_path: Path) -> None:
    from innet.errors import InputError

    error = InputError("cannot write: No space left on device", source=tmp_path / "a\nb")
    assert "a\\nb: cannot write" in str(error) and error.source == str(tmp_path / "a\nb")


# -------------------------------------------------- periods, long solves (the last inputs)


def test_a_steady_stream_at_an_epoch_time_is_no_23_ms_job(tmp_path: Path) -> None:
    """One packet per ms, time-stamped as a capture does (seconds since 1970): the floats'
    rounding used to bin it into a 23 ms pattern, profiled as a job with confidence 0.63."""
    path = write_pcap(tmp_path / "steady.pcap", [1_700_000_000 + i * 1e-3 for i in range(5000)])
    line = refused(["cassini", "profile", path])
    assert "no clear iteration time" in line


class _Started(Exception):
    """Raised where the work would start: what was said before it is what the test reads."""


def _path_instance(tmp_path: Path, n: int) -> str:
    nodes = [{"id": "d"}] + [{"id": f"s{i}", "parent": f"s{i - 1}" if i else "d", "load": 1}
                             for i in range(n)]
    return write_json(tmp_path / f"path{n}.json", {"root": "d", "nodes": nodes})


def test_soar_solve_of_a_20000_switch_path_says_its_estimate_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import innet.cli.soar as soar_cli
    from innet.cli import main

    def started(*args: object, **kwargs: object) -> None:
        raise _Started

    monkeypatch.setattr(soar_cli, "solve", started)
    with pytest.raises(_Started):
        main(["soar", "solve", _path_instance(tmp_path, 20_000), "-k", "16"])
    line = one_clean_line(capsys.readouterr().err)
    assert "20000 switches" in line and "about 58 s (estimated)" in line  # measured: 44-82 s
    line = refused(["soar", "solve", _path_instance(tmp_path, 100_000), "-k", "16"],
                   within_s=10.0)
    assert "would need about" in line and "--force" in line


def test_soar_online_of_10000_workloads_says_its_estimate_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import innet.cli.soar as soar_cli
    from innet.cli import main

    def started(*args: object, **kwargs: object) -> None:
        raise _Started

    monkeypatch.setattr(soar_cli, "run_online", started)
    with pytest.raises(_Started):
        main(["soar", "online", "--workloads", "10000"])
    line = one_clean_line(capsys.readouterr().err)
    assert "10000 workloads: about" in line and "minutes" in line
    line = refused(["soar", "online", _path_instance(tmp_path, 3000), "--workloads", "10000"],
                   within_s=10.0)
    assert "would take about" in line and "--force" in line


def test_soar_solve_and_online_show_progress_on_a_terminal(tmp_path: Path) -> None:
    import contextlib
    import io

    from innet.cli import main

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for argv, unit in ((["soar", "solve", _path_instance(tmp_path, 300), "-k", "4"], "node/s"),
                       (["soar", "online", "--workloads", "3"], "workload/s")):
        err = Terminal()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
        assert unit in err.getvalue(), argv  # drawn (a fast run may not reach 100%)
