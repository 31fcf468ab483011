"""`innet view RUN_FOLDER`: a finished run's files as the view lists and serves them (its own
regular files of known kinds only, by name), behind the same token as the live view."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_browser import chromium, severe

from innet.cli import main
from innet.view.folder import folder_file, folder_summary
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


def test_the_page_shows_a_run_folder_in_a_browser(server: ViewServer, tmp_path: Path) -> None:
    """Chromium draws the folder's plot and lists its files, with nothing in its console."""
    with chromium(tmp_path / "chromium") as driver:
        driver.get(server.url)
        deadline = time.monotonic() + 60
        while driver.execute_script("return document.body.dataset.files || ''") != "3":
            assert time.monotonic() < deadline, "the page did not list the folder's files"
            time.sleep(0.3)
        images = driver.execute_script(
            "return [...document.querySelectorAll('#graph img')].map(i => i.alt)")
        assert images == ["cluster.png"]
        assert "soar: 1.5 s" in driver.find_element("id", "details").text
        driver.save_screenshot(str(tmp_path / "folder.png"))
        assert severe(driver) == []
