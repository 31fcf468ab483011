"""A finished run folder's view as one self-contained HTML file (`innet view RUN_FOLDER
--html FILE`): the same page `innet view` serves, with its script, style, graph library,
the folder's summary and every listed file inlined, so it opens from disk, in a mail or on
a machine with no innet and no network.

Nothing is fetched: the page finds its data in `INNET_FOLDER` and its files in
`INNET_FILES` (data: URIs) instead of asking the server. The files are the ones the served
view lists (innet.view.folder.listed), so the file holds nothing the server would not show;
a file larger than INLINE_BYTES is listed without its content, which the page says.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path
from typing import Any

from innet.view.folder import file_type, folder_summary, listed

INLINE_BYTES = 20_000_000  # a larger file of the folder is listed, not carried in the page
STYLE_TAG = '<link rel="stylesheet" href="view.css?token=__TOKEN__">'
SCRIPT_TAGS = ('<script src="vendor/cytoscape.min.js?token=__TOKEN__"></script>\n'
               '<script src="app.js?token=__TOKEN__"></script>')
LICENSE_LINK = 'href="vendor/cytoscape-LICENSE?token=__TOKEN__"'


def static_text(name: str) -> bytes:
    """A file of the page (static/), as the server sends it and this page inlines it."""
    return resources.files("innet.view").joinpath("static", name).read_bytes()


def _static(name: str) -> str:
    return static_text(name).decode("utf-8")


def _data_uri(kind: str, raw: bytes) -> str:
    return f"data:{kind};base64,{base64.b64encode(raw).decode()}"


def _script(text: str) -> str:
    """`text` inside a <script> element: a `</` in it would end the element early."""
    return "<script>\n" + text.replace("</", "<\\/") + "\n</script>"


def _json_literal(value: Any) -> str:
    """JSON as a JavaScript literal inside <script> (`<\\/` is the same string to JSON)."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def folder_files(folder: Path) -> dict[str, str | None]:
    """Each listed file as a data: URI, None for one too large to carry."""
    return {p.name: (_data_uri(file_type(p), p.read_bytes())
                     if p.stat().st_size <= INLINE_BYTES else None) for p in listed(folder)}


def page_of(summary: dict[str, Any], files: dict[str, str | None]) -> str:
    """The page with everything inlined; `summary` is /api/folder's answer, `files` the
    folder's files by name (data: URIs)."""
    html = _static("index.html")
    for needle in (STYLE_TAG, SCRIPT_TAGS, LICENSE_LINK):
        if needle not in html:  # index.html changed under this function: say so, not a
            raise RuntimeError(f"index.html no longer holds {needle!r}")  # half-inlined page
    licence = _data_uri("text/plain;charset=utf-8", _static("vendor/cytoscape-LICENSE").encode())
    data = (f"const INNET_FOLDER = {_json_literal(summary)};\n"
            f"const INNET_FILES = {_json_literal(files)};")
    return (html.replace(STYLE_TAG, "<style>\n" + _static("view.css") + "\n</style>")
            .replace(LICENSE_LINK, f'href="{licence}"')
            .replace(SCRIPT_TAGS, "\n".join([_script(data),
                                             _script(_static("vendor/cytoscape.min.js")),
                                             _script(_static("app.js"))])))


def write_page(folder: Path, out: Path) -> int:
    """Write the folder's self-contained page to `out`; its size in bytes."""
    text = page_of(folder_summary(folder), folder_files(folder))
    out.write_text(text, encoding="utf-8")
    return len(text.encode())
