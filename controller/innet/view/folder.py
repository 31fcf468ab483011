"""A finished run folder as the view shows it (`innet view RUN_FOLDER`): its results.json,
summary.md and plots, and the one rule for which of its files may be served.

Only the folder's own regular files with a known kind are listed and served, by name: no
sub-folder, no symbolic link (one could point anywhere), nothing hidden, so a request can
reach nothing outside what the listing shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from innet.errors import InputError
from innet.topology import Topology, load_topology
from innet.view.runviews import run_views
from innet.view.state import drawing

KINDS = {".png": "image/png", ".svg": "image/svg+xml", ".json": "application/json",
         ".md": "text/plain; charset=utf-8", ".txt": "text/plain; charset=utf-8",
         ".csv": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8"}
SHOWN_BYTES = 2_000_000  # results.json and summary.md larger than this are listed, not inlined


def listed(folder: Path) -> list[Path]:
    """The files of `folder` the view may serve, by name."""
    return sorted((p for p in folder.iterdir()
                   if p.suffix in KINDS and not p.name.startswith(".") and not p.is_symlink()
                   and p.is_file()), key=lambda p: p.name)


def folder_file(folder: Path, name: str) -> Path | None:
    """The file `name` of the listing, or None (anything else asked for)."""
    return next((p for p in listed(folder) if p.name == name), None)


def file_type(path: Path) -> str:
    return KINDS.get(path.suffix, "application/octet-stream")


def _small_text(path: Path) -> str | None:
    if not path.is_file() or path.is_symlink() or path.stat().st_size > SHOWN_BYTES:
        return None
    return path.read_text(errors="replace")


def _json(folder: Path, name: str) -> Any:
    """A small JSON file of the folder, parsed; None when absent, too large or not JSON."""
    text = _small_text(folder / name)
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None


def folder_topology(folder: Path) -> tuple[Topology | None, str | None]:
    """The topology the run copied into its folder, or None and why not."""
    path = folder / "topology.json"
    if not path.is_file() or path.is_symlink():
        return None, "topology not recorded: the folder has no topology.json"
    try:
        return load_topology(path), None
    except InputError as exc:
        return None, f"topology.json could not be read: {exc}"


def folder_summary(folder: Path) -> dict[str, Any]:
    """`/api/folder`: the folder's name, its files (name, kind, bytes), its results.json
    (parsed; None when absent, too large or not JSON) and summary.md; the topology drawn as
    the live page draws it (`graph`, None and `graph_note` when there is none) and one view
    per strategy, policy or arm of the results (`views`, `views_note` when there are none)."""
    files = [{"name": p.name, "kind": file_type(p), "bytes": p.stat().st_size}
             for p in listed(folder)]
    results = _json(folder, "results.json")
    topo, graph_note = folder_topology(folder)
    views: list[dict[str, Any]] = []
    views_note = graph_note
    if topo is not None:
        views, views_note = run_views(topo, results, _json(folder, "plan.json"))
    return {"folder": folder.name, "files": files, "results": results,
            "summary": _small_text(folder / "summary.md"),
            "graph": None if topo is None else drawing(topo), "graph_note": graph_note,
            "views": views, "views_note": views_note}
