"""The live view of a real `innet net up` (bt15 on BMv2, k = 4) in Chromium: the page draws
15 switches, 17 hosts and the four blue switches, follows a live `innet deploy -k 2` to the
new blue set, shows a switch when it is clicked, refuses requests without the token, and
logs no error in the browser's console. A screenshot is left in the test's folder. And
`innet view` of the folders a real `run aggregation` and a real `run cassini` left draws, for
every strategy and arm, the link loads their results hold as the switches counted them, and
so does the page `--html` saves of each.

Needs Mininet, BMv2, Chromium, chromedriver and selenium (setup.sh installs all of them);
with INNET_REQUIRE_P4=1 a missing one fails the test instead of skipping it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from view_browser import chromium, severe

from innet.emulation import live
from innet.emulation.net import own_leftovers, require_bmv2, require_mininet
from innet.topology import load_topology

WHY = require_mininet() or require_bmv2()
pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(WHY is not None, reason=f"needs Mininet and BMv2: {WHY}")]
ROOT = Path(__file__).resolve().parents[2]
BT15 = str(ROOT / "topologies" / "bt15.json")
WORKLOAD = str(ROOT / "examples" / "workload-bt15.json")
READY = "innet net: ready"
LEAFSPINE = str(ROOT / "topologies" / "leafspine24.json")
SLOW = 180.0  # bringing 15 BMv2 switches up on a busy two-core machine
PAGE = 90.0  # the page's first state (Chromium starting on that machine included)
FOLLOW = 30.0  # a deploy seen by the page (pushed about once a second)


def innet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "innet.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def wait_until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    pytest.fail(f"no {what} after {timeout:g} s")


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def carried(base: str, token: str) -> bool:
    """Whether /api/state shows h1 sending and s4 forwarding to s2 (the ping's way up)."""
    request = urllib.request.Request(base + "api/state",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as r:
        state = json.load(r)
    print(f"one sample of the network took {state['sample_ms']} ms")
    links = state["links"]
    rate = {}
    for link in links:
        rate[(link["a"], link["b"])] = link["pps_ab"] or 0
        rate[(link["b"], link["a"])] = link["pps_ba"] or 0
    return rate[("h1", "s8")] > 0 and rate[("s4", "s2")] > 0


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "chromium") as driver:
        yield driver


@contextlib.contextmanager
def net_up(tmp_path: Path, topology: str, *extra: str) -> Iterator[tuple[dict[str, str], str]]:
    """`net up` without a prompt; its env and the view's address. Everything it started is
    gone when it ends (checked)."""
    env = {**os.environ, "INNET_STATE_DIR": str(tmp_path / "state")}
    log = tmp_path / "net-up.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "net", "up", "--topology",
                                 topology, *extra, "--no-cli", "--out", str(tmp_path / "run")],
                                stdout=f, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=ROOT)
    try:
        def ready() -> str | None:
            text = log.read_text()
            if proc.poll() is not None:
                pytest.fail(f"innet net up ended ({proc.returncode}):\n{text}")
            return text if READY in text else None

        text = wait_until(repr(READY), ready, SLOW)
        found = re.search(r"^view: (http://127\.0\.0\.1:\d+/\?token=[\w-]+)$", text, re.M)
        assert found, text
        yield env, found.group(1)
        assert proc.poll() is None, log.read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(90)
        assert code == 0, log.read_text()
        assert "stopped; everything it started is gone" in log.read_text()
        assert own_leftovers(load_topology(topology)) == []


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """`net up` of bt15 with k = 4."""
    with net_up(tmp_path, BT15, "--workload", WORKLOAD, "-k", "4") as up:
        yield up


def page_value(driver: Any, key: str) -> str:
    return str(driver.execute_script(f"return document.body.dataset.{key} || ''"))


def test_the_live_view_of_a_network_that_is_up(network: tuple[dict[str, str], str],
                                               browser: Any, tmp_path: Path) -> None:
    env, url = network
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    base = url.split("?")[0]
    assert status_of(base) == 401 and status_of(base + "api/state") == 401
    assert status_of(base + "api/state?token=wrong") == 401
    token = url.split("token=")[1]
    assert status_of(base + "api/state", {"Authorization": f"Bearer {token}"}) == 200

    browser.get(url)
    wait_until("four blue switches on the page",
               lambda: page_value(browser, "blue") == "s4,s5,s6,s7", PAGE)
    assert page_value(browser, "switches") == "15" and page_value(browser, "hosts") == "17"
    assert browser.execute_script("return cy.nodes(\"[kind = 'switch']\").length") == 15
    assert sorted(browser.execute_script("return cy.nodes('.blue').map(n => n.id())")) == [
        "s4", "s5", "s6", "s7"]

    # a click on s4 shows what its controller sees and the entries it holds
    x, y = browser.execute_script(
        "const p = cy.getElementById('s4').renderedPosition(); return [p.x, p.y];")
    graph = browser.find_element(By.ID, "graph")
    size = graph.size
    ActionChains(browser).move_to_element_with_offset(
        graph, int(x - size["width"] / 2), int(y - size["height"] / 2)).click().perform()

    def details() -> str | None:
        text = str(browser.find_element(By.ID, "details").text)
        return text if "aggregate job 1" in text else None

    assert wait_until("s4's entries", details, FOLLOW).startswith("s4: primary")

    # a ping from h1 to h16 crosses s8, s4, s2, s1, s3, s7, s15: their links carry packets.
    # It runs in h1's namespace directly: `net exec` would hold the network's lock while the
    # ping lasts, and the view would see its packets only as one burst when it ends
    record = live.running(Path(env["INNET_STATE_DIR"]))
    assert record is not None
    shell = dict(record.footprint.shells)["h1"]
    ping = subprocess.Popen(["nsenter", "--target", str(shell), "--net", "ping", "-c", "150",
                             "-i", "0.2", "-W", "5", "10.0.0.18"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until("packets per second on h1's path", lambda: carried(base, token), FOLLOW)
    finally:
        ping.kill()
        ping.wait()

    moved = innet(env, "deploy", "--topology", BT15, "--workload", WORKLOAD, "-k", "2")
    assert moved.returncode == 0, moved.stderr
    t0 = time.monotonic()
    wait_until("the new blue set s2, s3", lambda: page_value(browser, "blue") == "s2,s3", FOLLOW)
    print(f"the page showed k = 2's blue set {time.monotonic() - t0:.1f} s after the deploy")
    wait_until("the deploy in the event log",
               lambda: "job 1: blue s2, s3" in browser.find_element(By.ID, "events").text,
               FOLLOW)
    browser.save_screenshot(str(tmp_path / "view.png"))
    assert severe(browser) == []


@contextlib.contextmanager
def served_folder(folder: Path) -> Iterator[str]:
    """`innet view FOLDER` running, and the address it printed; stopped with Ctrl-C (SIGINT)
    on the way out, which it must obey within 30 s. Its output goes to a file beside the
    folder, not a pipe (a pipe nobody reads blocks a process that writes much), and a view
    that does not stop is killed, its output in the failure."""
    out = folder.with_suffix(".view.txt")
    with out.open("w") as sink:
        # started with SIGINT ignored, as a shell without job control (CI, a script) starts
        # a background job: Ctrl-C must stop it all the same
        proc = subprocess.Popen([sys.executable, "-m", "innet.cli", "view", str(folder)],
                                stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        def address() -> str | None:
            found = re.match(r"view: (http://127\.0\.0\.1:\d+/\?token=[\w-]+)$",
                             out.read_text().split("\n", 1)[0].strip())
            if found is None and proc.poll() is not None:
                raise AssertionError(f"innet view exited {proc.returncode}: "
                                     f"{out.read_text()}")
            return found.group(1) if found else None

        yield wait_until("innet view's address", address, PAGE)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"innet view did not stop within 30 s of Ctrl-C; its output:"
                                 f"\n{out.read_text()}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def saved_page(folder: Path) -> str:
    """`innet view FOLDER --html` written beside the folder, as the address of its file."""
    page = folder.with_suffix(".html")
    done = subprocess.run([sys.executable, "-m", "innet.cli", "view", str(folder), "--html",
                           str(page)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return page.as_uri()


def shows(browser: Any, label: str) -> bool:
    return page_value(browser, "view") == label


def drawn_views(browser: Any, url: str) -> dict[str, dict[str, int]]:
    """Every view button of the folder page pressed in turn: view label -> the loads it drew
    (edge id -> packets)."""
    from selenium.webdriver.common.by import By

    browser.get(url)
    wait_until("the run's views", lambda: browser.find_elements(By.CSS_SELECTOR,
                                                                 "#views button"), PAGE)
    drawn = {}
    for i in range(len(browser.find_elements(By.CSS_SELECTOR, "#views button"))):
        button = browser.find_elements(By.CSS_SELECTOR, "#views button")[i]
        label = str(button.text)
        button.click()
        wait_until(f"view {label} drawn", functools.partial(shows, browser, label), FOLLOW)
        drawn[label] = json.loads(page_value(browser, "loads"))
    assert severe(browser) == []
    return drawn


def test_finished_runs_are_drawn_with_what_their_switches_counted(browser: Any,
                                                                  tmp_path: Path) -> None:
    agg, cas = tmp_path / "agg", tmp_path / "cassini"
    env = dict(os.environ)
    done = innet(env, "run", "aggregation", "--topology", BT15, "-k", "4", "--values", "4096",
                 "--strategy", "soar", "--strategy", "all-red", "--out", str(agg))
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([sys.executable, "-m", "innet.cli", "run", "cassini", "--topology",
                           LEAFSPINE, "--jobs", str(ROOT / "examples" / "jobs-4-leafspine.json"),
                           "--iterations", "3", "--out", str(cas)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    with served_folder(agg) as url:
        drawn = drawn_views(browser, url)
    assert drawn_views(browser, saved_page(agg)) == drawn  # the same page, saved to a file
    strategies = json.loads((agg / "results.json").read_text())
    assert sorted(drawn) == ["all-red", "soar"]
    for row in strategies:
        # one drawn uplink per counting switch, each with that switch's packets
        per_switch = sorted(row["link_packets"][s] + row["link_repeats"][s]
                            for s in row["link_packets"])
        assert sorted(drawn[row["strategy"]].values()) == per_switch, row["strategy"]
        assert sum(per_switch) > 0

    with served_folder(cas) as url:
        drawn = drawn_views(browser, url)
        browser.save_screenshot(str(tmp_path / "cassini-folder.png"))
    assert drawn_views(browser, saved_page(cas)) == drawn
    results = json.loads((cas / "results.json").read_text())
    assert sorted(drawn) == sorted(r["label"] for r in results["runs"])
    for run in results["runs"]:
        counted = {f"{k['a']}--{k['b']}": k["packets_ab"] + k["packets_ba"]
                   for k in run["links"] if k["packets_ab"] + k["packets_ba"]}
        assert drawn[run["label"]] == counted and counted, run["label"]
    assert own_leftovers(load_topology(LEAFSPINE)) == []


def test_running_jobs_show_their_iterations_and_circles(browser: Any, tmp_path: Path) -> None:
    """Four VGG19 jobs of five workers fill the leaf-spine's 24 hosts; the last two share
    links (the planner cannot keep them apart), so their rows draw CASSINI's circles, one
    per shared link with an arc per job, as their `job list` rows say; every row counts its
    iterations as they end."""

    with net_up(tmp_path, LEAFSPINE) as (env, url):
        for i in range(4):
            done = innet(env, "job", "submit", "--model", "VGG19", "--workers", "5",
                         "--iterations", "150", "--name", f"j{i}")
            assert done.returncode == 0, done.stdout + done.stderr
        listed = innet(env, "job", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {r["name"]: r for r in json.loads(listed.stdout)["jobs"]}
        assert all(r["state"] == "running" for r in rows.values()), rows
        sharing = {n: [c["link"] for c in r["circles"]] for n, r in rows.items() if r["circles"]}
        assert len(sharing) >= 2, rows

        browser.get(url)
        drawn = ("return Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')]"
                 ".map(tr => [tr.cells[0].textContent, [tr.cells[4].textContent, "
                 "[...tr.querySelectorAll('svg.circle')].map(s => [s.dataset.link, "
                 "s.querySelectorAll('path').length])]]))")

        def shown() -> dict[str, Any] | None:
            got = browser.execute_script(drawn)
            if set(got) != set(rows):
                return None
            started = all(not v[0].startswith("0 /") for v in got.values())
            return got if started else None

        got = wait_until("every job's iterations on the page", shown, PAGE)
        for name, links in sharing.items():
            # one circle per shared link, each with at least one arc per job sharing it
            assert [link for link, _ in got[name][1]] == links, got
            assert all(arcs >= 2 for _, arcs in got[name][1]), got
        for name in set(rows) - set(sharing):
            assert got[name][1] == [], got
        browser.save_screenshot(str(tmp_path / "jobs.png"))
        assert severe(browser) == []
        for i in range(4):
            innet(env, "job", "cancel", f"j{i}")
