"""`innet view RUN_FOLDER`: a finished run's results, summary and plots in the live view's
page (innet.view), served on the loopback with a token until Ctrl-C, or written as one
self-contained file (`--html FILE`)."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any

from innet.cli.argtypes import host_port
from innet.cli.net import WEB_HOST
from innet.errors import InputError


def register(sub: Any) -> None:
    view = sub.add_parser(
        "view", help="a finished run folder's results and plots in the browser",
        description="Serve RUN_FOLDER's results.json, summary.md and plots (its own files "
                    "only) in the page `net up` serves for a live network; read-only, on "
                    "the loopback, with a random token in the printed address. Until "
                    "Ctrl-C. With --html, write the same page as one file instead, with "
                    "everything it shows inside it, to open from disk or send on.")
    view.add_argument("folder", metavar="RUN_FOLDER", type=Path,
                      help="a run folder (innet run ... --out, net up's, ...) (required)")
    view.add_argument("--web", type=host_port, default=(WEB_HOST, 0), metavar="HOST:PORT",
                      help=f"where to serve it (default {WEB_HOST}:0, a free port of the "
                           "loopback only)")
    view.add_argument("--html", type=Path, metavar="FILE",
                      help="write the page, self-contained (graph library, results, plots "
                           "inlined), to FILE and exit instead of serving it (default: serve)")
    view.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (give a run folder)")
    if args.html is not None:
        return _write_html(folder, args.html)
    from innet.view.server import folder_view  # aiohttp loaded only for this command

    try:
        server = folder_view(folder.resolve(), *args.web)
    except OSError as exc:
        raise InputError(f"--web {args.web[0]}:{args.web[1]}: cannot serve there: "
                         f"{exc.strerror or exc}") from None
    # Ctrl-C and SIGTERM stop it whatever this process inherited: started as a background
    # job of a shell without job control (CI, scripts), it inherits SIGINT ignored and
    # Python then installs no KeyboardInterrupt, so a Ctrl-C sent to it did nothing
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"view: {server.url}", flush=True)
        while not stop.wait(1.0):
            pass
        return 0
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        server.close()


def _write_html(folder: Path, out: Path) -> int:
    from innet.view.standalone import write_page

    if out.is_dir():
        raise InputError(f"--html {out}: is a folder (give the file to write)")
    try:
        size = write_page(folder.resolve(), out)
    except OSError as exc:
        raise InputError(f"--html {out}: cannot write it: {exc.strerror or exc}") from None
    print(f"view: wrote {out} ({size / 1e6:.1f} MB, self-contained; open it in a browser)")
    return 0
