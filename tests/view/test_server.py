"""The live view's server on a loopback port, over a network that is up with a stand-in
controller: every request needs the token (query or bearer header), only reads are routed,
and the page, its files, the JSON API and the event stream answer."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_browser import chromium, severe
from view_fakes import ROOT, WORKLOAD, fake_up

from innet.cassini.model.profiles import zoo_job
from innet.plan.cluster import JobRequest
from innet.plan.intent import IntentOptions
from innet.view.server import ViewServer, live_view


@pytest.fixture
def server() -> Iterator[ViewServer]:
    live = fake_up(options=IntentOptions(workloads=(WORKLOAD,), k=4))
    view = live_view(live, token="the-token")
    yield view
    view.close()
    assert not view.thread.is_alive()


def get(view: ViewServer, path: str, headers: dict[str, str] | None = None,
        method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{view.port}{path}",
                                     headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_every_request_needs_the_token(server: ViewServer) -> None:
    for path in ("/", "/api/state", "/api/switch/s4", "/api/events", "/app.js",
                 "/vendor/cytoscape.min.js", "/nowhere"):
        assert get(server, path)[0] == 401, path
        assert get(server, path + "?token=the-tokem")[0] == 401, path
        assert get(server, path, {"Authorization": "Bearer wrong"})[0] == 401, path
    assert get(server, "/api/state?token=")[0] == 401
    status, _, body = get(server, "/api/state", {"Authorization": "Bearer the-token"})
    assert status == 200 and json.loads(body)["topology"]


def test_only_reads_are_served(server: ViewServer) -> None:
    for method in ("POST", "PUT", "DELETE"):
        assert get(server, "/api/state?token=the-token", method=method)[0] == 405
    assert get(server, "/nowhere?token=the-token")[0] == 404
    assert get(server, "/vendor/..%2Fstate.py?token=the-token")[0] == 404


def test_the_page_and_its_files(server: ViewServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/?token=the-token"
    status, headers, body = get(server, "/?token=the-token")
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert 'src="app.js?token=the-token"' in page and "__TOKEN__" not in page
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer"
    status, headers, body = get(server, "/app.js?token=the-token")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"EventSource" in body
    status, _, body = get(server, "/vendor/cytoscape.min.js?token=the-token")
    assert status == 200 and len(body) > 100_000
    status, _, body = get(server, "/vendor/cytoscape-LICENSE?token=the-token")
    assert status == 200 and b"Permission is hereby granted" in body


def test_the_json_api(server: ViewServer) -> None:
    status, _, body = get(server, "/api/state?token=the-token")
    state = json.loads(body)
    assert status == 200 and len(state["switches"]) == 15 and len(state["hosts"]) == 17
    assert {s["name"] for s in state["switches"] if s["aggregates_for"]} == {
        "s4", "s5", "s6", "s7"}
    assert {"a", "b", "pps_ab", "pps_ba", "marks_ab", "marks_ba"} <= set(state["links"][0])
    status, _, body = get(server, "/api/switch/s4?token=the-token")
    s4 = json.loads(body)
    assert status == 200 and s4["name"] == "s4" and s4["entries"] and s4["counters"]
    assert get(server, "/api/switch/s99?token=the-token")[0] == 404


def test_the_event_stream_pushes_the_state(server: ViewServer) -> None:
    got: list[dict[str, Any]] = []

    def read() -> None:
        url = f"http://127.0.0.1:{server.port}/api/events?token=the-token"
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            for line in r:
                if line.startswith(b"data: "):
                    got.append(json.loads(line[len(b"data: "):]))
                    if len(got) == 2:
                        return

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive() and len(got) == 2
    assert got[1]["time"] > got[0]["time"]
    assert all(r["pps_ab"] is not None for r in got[1]["links"])  # two samples: rates


def test_a_taken_port_is_an_os_error() -> None:
    live = fake_up()
    first = live_view(live)
    try:
        with pytest.raises(OSError):
            live_view(live, port=first.port)
    finally:
        first.close()


def page_value(driver: Any, key: str) -> str:
    return str(driver.execute_script(f"return document.body.dataset.{key} || ''"))


def wait_for(what: str, check: Any) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"no {what} on the page"
        time.sleep(0.3)


def test_the_page_follows_a_deploy_in_a_browser(tmp_path: Path) -> None:
    """Chromium draws the stand-in network's 15 switches and blue set and follows a deploy
    made through the control socket's handler, with nothing in its console."""
    live = fake_up(options=IntentOptions(workloads=(WORKLOAD,), k=4))
    view = live_view(live)
    try:
        with chromium(tmp_path / "chromium") as driver:
            driver.get(view.url)
            wait_for("blue set s4..s7", lambda: page_value(driver, "blue") == "s4,s5,s6,s7")
            assert page_value(driver, "switches") == "15"
            live.handle({"op": "deploy", "options": {"k": 2}})
            wait_for("blue set s2, s3", lambda: page_value(driver, "blue") == "s2,s3")
            assert "plan (soar, k = 2)" in driver.find_element("id", "jobs").text
            assert severe(driver) == []
    finally:
        view.close()


def test_closing_ends_open_event_streams() -> None:
    """net up going down with a page still open: the stream ends, the server's thread too."""
    view = live_view(fake_up())
    try:
        url = f"http://127.0.0.1:{view.port}/api/events?token={view.token}"
        with urllib.request.urlopen(url, timeout=30) as r:
            assert any(line.startswith(b"data: ") for line in (r.readline(), r.readline()))
            view.close()
            assert not view.thread.is_alive()
            # the stream ends (closed, maybe cut mid-chunk) instead of waiting for more
            # events: a hang would raise the read's timeout
            with contextlib.suppress(http.client.IncompleteRead):
                r.read()
    finally:
        if view.thread.is_alive():
            view.close()


def test_the_jobs_circles_in_a_browser(tmp_path: Path) -> None:
    """Two jobs admitted on leafspine24 whose trees share l1's link to sp1 (both ways):
    each job's row draws one CASSINI circle per shared link, with one arc per job in the
    job's colour, as the row's circles say."""
    live = fake_up(ROOT / "topologies" / "leafspine24.json")
    with live.lock:
        for name, hosts in (("a", ("h1", "h5", "h6", "h7", "h8")),
                            ("b", ("h2", "h9", "h10", "h11", "h12"))):
            live.jobs.submit(JobRequest(name, zoo_job("VGG19"), 4, 10, 2016, hosts=hosts),
                             "soar+cassini", "VGG19")
        rows = {r["name"]: r for r in live.jobs.listing()["jobs"]}
    shared = [c["link"] for c in rows["a"]["circles"]]
    assert shared and shared == [c["link"] for c in rows["b"]["circles"]]
    view = live_view(live)
    try:
        with chromium(tmp_path / "chromium") as driver:
            driver.get(view.url)
            drawn = ("return [...document.querySelectorAll('#jobs tbody tr')].map(tr => "
                     "[...tr.querySelectorAll('svg.circle')].map(s => [s.dataset.link, "
                     "[...s.querySelectorAll('path')].map(p => [p.dataset.job, "
                     "p.getAttribute('stroke')])]))")
            wait_for("circles", lambda: driver.execute_script(drawn) not in ([], [[], []]))
            colour = driver.execute_script("return [jobColour(arguments[0]), "
                                           "jobColour(arguments[1])]",
                                           rows["a"]["job"], rows["b"]["job"])
            expected = [[link, [["a", colour[0]], ["b", colour[1]]]] for link in shared]
            assert driver.execute_script(drawn) == [expected, expected]
            driver.save_screenshot(str(tmp_path / "circles.png"))
            assert severe(driver) == []
    finally:
        view.close()
