"""`innet view RUN_FOLDER`: a finished run's files as the view lists and serves them (its own
regular files of known kinds only, by name), behind the same token as the live view."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_folders import BT15, aggregation_folder, cassini_folder, cluster_folder
from view_browser import chromium, severe

from innet.cli import main
from innet.view.folder import file_type, folder_file, folder_summary, listed
from innet.view.server import ViewServer, folder_view

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"runs": [{"policy": "soar", "jct": 1.5}]}))
    (folder / "summary.md").write_text("# cluster\n\nsoar: 1.5 s\n")
    (folder / "cluster.png").write_bytes(PNG)
    (folder / ".hidden.txt").write_text("no")
    (folder / "logs").mkdir()
    (folder / "logs" / "controller.log").write_text("no")
    (folder / "secret.key").write_text("no")
    (tmp_path / "outside.txt").write_text("outside")
    (folder / "link.txt").symlink_to(tmp_path / "outside.txt")
    return folder


def test_only_the_folders_own_files_of_known_kinds(run: Path) -> None:
    summary = folder_summary(run)
    assert [f["name"] for f in summary["files"]] == ["cluster.png", "results.json",
                                                     "summary.md"]
    assert summary["results"] == {"runs": [{"policy": "soar", "jct": 1.5}]}
    assert summary["summary"].startswith("# cluster") and summary["folder"] == "run"
    for name in ("link.txt", ".hidden.txt", "secret.key", "logs", "../outside.txt",
                 "logs/controller.log"):
        assert folder_file(run, name) is None, name
    (run / "results.json").write_text("{not json")
    assert folder_summary(run)["results"] is None


@pytest.fixture
def server(run: Path) -> Iterator[ViewServer]:
    view = folder_view(run, token="tok")
    yield view
    view.close()


def get(view: ViewServer, path: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{view.port}{path}", timeout=30) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read()


def test_the_folder_is_served_behind_the_token(server: ViewServer) -> None:
    for path in ("/", "/api/info", "/api/folder", "/files/cluster.png"):
        assert get(server, path)[0] == 401, path
    assert json.loads(get(server, "/api/info?token=tok")[2]) == {"mode": "folder"}
    status, _, body = get(server, "/api/folder?token=tok")
    assert status == 200 and len(json.loads(body)["files"]) == 3
    status, kind, body = get(server, "/files/cluster.png?token=tok")
    assert status == 200 and kind == "image/png" and body == PNG
    for name in ("link.txt", "secret.key", "..%2Foutside.txt", "logs%2Fcontroller.log"):
        assert get(server, f"/files/{name}?token=tok")[0] == 404, name
    assert get(server, "/api/state?token=tok")[0] == 404  # no live network here


def test_a_missing_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err


def shows_the_aggregation_run(driver: Any, url: str, folder: Path, soar: Any, red: Any
                              ) -> None:
    """The page at `url` draws the aggregation run of `folder` as its results hold it: each
    strategy's blue switches, the packets its uplinks carried, its plot and summary, its
    files; and nothing in the browser's console."""
    driver.get(url)
    deadline = time.monotonic() + 60
    while driver.execute_script("return document.body.dataset.files || ''") != "5":
        assert time.monotonic() < deadline, "the page did not list the folder's files"
        time.sleep(0.3)
    data = driver.execute_script("return {...document.body.dataset}")
    assert data["nodes"] == "32" and data["view"] == "soar"
    assert data["blue"] == "s4,s5,s6,s7"
    parent = uplink_of(BT15, "h0")
    assert json.loads(data["loads"]) == {
        edge_id(folder, s, parent[s]): n + soar.link_repeats[s]
        for s, n in soar.link_packets.items()}
    label = driver.execute_script(
        f"return cy.getElementById('{edge_id(folder, 's4', 's2')}').data('label')")
    assert label == f"{soar.link_packets['s4'] + soar.link_repeats['s4']} pkts"
    images = driver.execute_script(
        "return [...document.querySelectorAll('img')].map(i => [i.alt, i.naturalWidth > 0])")
    assert images == [["aggregation.png", True]]
    assert "# Aggregation on bt15" in driver.find_element("id", "folder-files").text
    driver.find_element("xpath", "//div[@id='views']/button[text()='all-red']").click()
    assert driver.execute_script("return document.body.dataset.view") == "all-red"
    data = driver.execute_script("return {...document.body.dataset}")
    assert data["blue"] == "" and json.loads(data["loads"])[
        edge_id(folder, "s1", "h0")] == red.link_packets["s1"] + red.link_repeats["s1"]
    assert severe(driver) == []


def test_the_page_shows_a_run_folder_in_a_browser(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    soar, red = aggregation_folder(folder)
    view = folder_view(folder, token="tok")
    try:
        with chromium(tmp_path / "chromium") as driver:
            shows_the_aggregation_run(driver, view.url, folder, soar, red)
            driver.save_screenshot(str(tmp_path / "folder.png"))
    finally:
        view.close()


def test_the_saved_page_shows_the_run_with_no_server(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """`--html` writes one file that draws the same run from disk: nothing fetched, every
    file of the folder inside it (the links download what the folder holds)."""
    folder = tmp_path / "run"
    soar, red = aggregation_folder(folder)
    page = tmp_path / "saved" / "run.html"
    page.parent.mkdir()
    assert main(["view", str(folder), "--html", str(page)]) == 0
    assert f"view: wrote {page}" in capsys.readouterr().out
    text = page.read_text()
    assert "__TOKEN__" not in text and "<script src" not in text
    assert '<link rel="stylesheet"' not in text
    with chromium(tmp_path / "chromium") as driver:
        shows_the_aggregation_run(driver, page.as_uri(), folder, soar, red)
        links = driver.execute_script(
            "return [...document.querySelectorAll('#events a')].map(a => [a.download, a.href])")
    assert [name for name, _ in links] == [p.name for p in listed(folder)]
    for name, href in links:
        kind, _, data = href.partition(";base64,")
        assert kind == f"data:{file_type(folder / name)}"
        assert base64.b64decode(data) == (folder / name).read_bytes(), name


def test_a_saved_page_needs_a_file_to_write(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "run"
    aggregation_folder(folder)
    assert main(["view", str(folder), "--html", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["view", str(folder), "--html", str(tmp_path / "no" / "such" / "p.html")]) == 2
    assert "cannot write it" in capsys.readouterr().err


def edge_id(folder: Path, x: str, y: str) -> str:
    """The page's id of the link between x and y: its ends in topology.json's order."""
    from innet.topology import load_topology

    link = next(link for link in load_topology(folder / "topology.json").links
                if {link.a.node, link.b.node} == {x, y})
    return f"{link.a.node}--{link.b.node}"


def uplink_of(topo_file: str, destination: str) -> dict[str, str]:
    """Each switch's parent toward the destination, read off the topology by hand: bt15 is
    a tree, so it is the one neighbour a hop closer to the destination's switch."""
    from innet.topology import load_topology

    topo = load_topology(topo_file)
    edge = topo.host_switch(destination)[0]
    dist = {edge: 0}
    frontier = [edge]
    while frontier:
        nxt = []
        for s in frontier:
            for _, far in topo.neighbours(s):
                if far.node in topo.switches and far.node not in dist:
                    dist[far.node] = dist[s] + 1
                    nxt.append(far.node)
        frontier = nxt
    parent = {edge: destination}
    for s in dist:
        if s != edge:
            (parent[s],) = [far.node for _, far in topo.neighbours(s)
                            if dist.get(far.node) == dist[s] - 1]
    return parent


def test_an_aggregation_run_draws_each_strategys_loads_on_its_uplinks(tmp_path: Path) -> None:
    """Every uplink's drawn load is its switch's link_packets + link_repeats, on the link
    from the switch to its parent toward h0; blue sets are the strategies'."""
    runs = aggregation_folder(tmp_path)
    summary = folder_summary(tmp_path)
    graph = summary["graph"]
    assert graph["topology"] == "bt15" and len(graph["switches"]) == 15
    assert len(graph["hosts"]) == 17 and len(graph["links"]) == 31
    assert summary["views_note"] is None and summary["graph_note"] is None
    assert [v["label"] for v in summary["views"]] == ["soar", "all-red"]
    parent = uplink_of(BT15, "h0")
    links = {frozenset((row["a"], row["b"])) for row in graph["links"]}
    for run, view in zip(runs, summary["views"], strict=True):
        assert view["blue"] == sorted(run.blue) and view["kind"] == "aggregation"
        assert view["notes"] == []
        loads = {row["from"]: row for row in view["loads"]}
        assert set(loads) == set(run.link_packets)
        for s, row in loads.items():
            assert row["to"] == parent[s] and frozenset((row["a"], row["b"])) in links
            assert row["packets"] == run.link_packets[s] + run.link_repeats[s]
    soar, red = summary["views"]
    assert soar["blue"] == ["s4", "s5", "s6", "s7"] and red["blue"] == []
    assert {j["name"]: j["blue"] for j in soar["jobs"]} == {"job 1": ["s4", "s5", "s6", "s7"]}
    (job,) = soar["jobs"]
    assert job["hosts"] == ["h0", *(f"h{i}" for i in range(1, 17))]  # destination first
    # all-red: the root's uplink carries one message per worker per chunk
    assert {r["from"]: r for r in red["loads"]}["s1"]["first"] == 16 * runs[1].chunks


def test_missing_or_unknown_files_say_not_recorded(tmp_path: Path, run: Path) -> None:
    aggregation_folder(tmp_path / "agg")
    plain = folder_summary(run)  # results.json but no topology.json
    assert plain["graph"] is None and plain["views"] == []
    assert plain["graph_note"].startswith("topology not recorded")
    (tmp_path / "agg" / "results.json").unlink()
    gone = folder_summary(tmp_path / "agg")
    assert gone["graph"]["topology"] == "bt15" and gone["views"] == []
    assert gone["views_note"].startswith("not recorded")
    (tmp_path / "agg" / "results.json").write_text(json.dumps({"something": "else"}))
    assert folder_summary(tmp_path / "agg")["views_note"].startswith("not recorded")
    (tmp_path / "agg" / "topology.json").write_text("{")
    broken = folder_summary(tmp_path / "agg")
    assert broken["graph"] is None and "topology.json" in broken["graph_note"]


def test_an_aggregation_view_without_plan_or_counters_says_so(tmp_path: Path) -> None:
    runs = aggregation_folder(tmp_path, strategies=("soar",))
    rows = json.loads((tmp_path / "results.json").read_text())
    del rows[0]["link_repeats"]
    (tmp_path / "results.json").write_text(json.dumps(rows))
    (tmp_path / "plan.json").unlink()
    (view,) = folder_summary(tmp_path)["views"]
    assert any("topology's (h0)" in n for n in view["notes"])
    assert any("link_repeats not recorded" in n for n in view["notes"])
    assert {r["from"]: r["packets"] for r in view["loads"]} == runs[0].link_packets
    rows[0]["link_packets"] = "lost"
    (tmp_path / "results.json").write_text(json.dumps(rows))
    (view,) = folder_summary(tmp_path)["views"]
    assert view["loads"] is None
    assert any("loads not recorded" in n and "link_packets" in n for n in view["notes"])


def test_a_cluster_run_shows_its_jobs_blue_sets_shifts_and_marks(tmp_path: Path) -> None:
    (run_,) = cluster_folder(tmp_path)
    summary = folder_summary(tmp_path)
    assert summary["graph"]["topology"] == "leafspine24"
    (view,) = summary["views"]
    assert view["label"] == "soar+cassini" and view["kind"] == "cluster"
    assert view["loads"] is None and "not recorded" in view["notes"][0]
    assert [(j["name"], j["hosts"], j["blue"], j["shift_ms"]) for j in view["jobs"]] == [
        (r["name"], r["hosts"], r["blue"], r["shift_ms"]) for r in run_.jobs]
    assert view["blue"] == sorted({s for r in run_.jobs for s in r["blue"]})
    ((name, marks),) = run_.link_marks.items()
    (row,) = view["marks"]
    assert f"{row['from']}->{row['to']}" == name and row["marks"] == marks == 7


def test_a_cassini_run_shows_placements_and_the_links_counted_loads(tmp_path: Path) -> None:
    result = cassini_folder(tmp_path)
    views = folder_summary(tmp_path)["views"]
    assert [v["label"] for v in views] == list(result.plans)
    for view, run_ in zip(views, result.runs, strict=True):
        plan = result.plans[view["label"]]
        assert view["blue"] == []
        assert {j["name"]: j["hosts"] for j in view["jobs"]} == {
            j: list(h) for j, h in plan.placement.items()}
        assert {j["name"]: j["shift_ms"] for j in view["jobs"]} == dict(plan.shifts_ms)
        assert {f"{r['from']}->{r['to']}" for r in view["shared"]} == set(plan.shared_links())
        # every link's drawn load is both directions the switches counted, its marks too
        counted = {(r["a"], r["b"]): r for r in run_.links}
        assert len(view["loads"]) == len(counted)
        for row in view["loads"]:
            c = counted[(row["a"], row["b"])]
            assert row["packets"] == c["packets_ab"] + c["packets_ba"] > 0
        assert sum(r["marks"] for r in view["marks"] or []) == run_.switch_marks
    assert views[0]["marks"] == []  # the first arm marked nothing (i = 0)


def test_an_earlier_cassini_folder_without_links_says_so(tmp_path: Path) -> None:
    result = cassini_folder(tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    for run_ in data["runs"]:
        del run_["links"]
    (tmp_path / "results.json").write_text(json.dumps(data))
    for view, run_ in zip(folder_summary(tmp_path)["views"], result.runs, strict=True):
        assert view["loads"] is None and view["marks"] is None
        assert any(f"total of CE marks ({run_.switch_marks})" in n for n in view["notes"])
