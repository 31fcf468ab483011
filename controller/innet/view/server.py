"""The live view's web server: the page, `/api/state`, `/api/switch/NAME`, `/api/events`;
and the same page over a finished run folder (`innet view RUN_FOLDER`: `/api/folder`,
`/files/NAME`).

It runs in a thread of its own with its own asyncio loop, so neither the prompt nor the job
monitor waits on a browser. Every request needs the network's token (`?token=` or
`Authorization: Bearer`), compared in constant time; only GET is routed (the view changes
nothing), and it listens on 127.0.0.1 unless told otherwise. The network is read only when
someone asks: one sample serves every request and event stream of the same second, so an
open page costs one read of the switches' counters a second, and no page costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from innet.emulation.control import LiveNetwork
from innet.view.folder import file_type, folder_file, folder_summary
from innet.view.standalone import static_text
from innet.view.state import Watcher, read_switch

SAMPLE_S = 1.0  # seconds between two samples of the network (and two pushed events)
STATIC = ("app.js", "view.css", "vendor/cytoscape.min.js", "vendor/cytoscape-LICENSE")
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the page's address holds the token
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
}
log = logging.getLogger("innet.view")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_of(request: web.Request) -> str | None:
    """The token a request carries: its `token` query parameter or its bearer header."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[len("Bearer "):].strip()
    return request.query.get("token")


class Sampler:
    """One sample of the network at a time, shared by every request within SAMPLE_S."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.latest: dict[str, Any] | None = None
        self.at = 0.0
        self.pending: asyncio.Future[dict[str, Any]] | None = None

    async def fresh(self) -> dict[str, Any]:
        """The latest sample, or a new one when it is older than SAMPLE_S; concurrent callers
        share one read, and one that goes away (a closed page) does not cancel it."""
        if self.latest is not None and time.monotonic() - self.at < SAMPLE_S * 0.9:
            return self.latest
        if self.pending is None:
            self.pending = asyncio.get_running_loop().run_in_executor(None, self.watcher.sample)
            self.pending.add_done_callback(self._done)
        return await asyncio.shield(self.pending)

    def _done(self, future: asyncio.Future[dict[str, Any]]) -> None:
        self.pending = None
        if future.cancelled():
            return
        if future.exception() is not None:
            log.warning("the view could not read the network: %s", future.exception())
            return
        self.latest, self.at = future.result(), time.monotonic()


def base_app(token: str, mode: str) -> web.Application:
    """The token guard, the page and its files, and `/api/info` (which page to draw)."""
    expected = token.encode()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = token_of(request)
        if given is None or not secrets.compare_digest(given.encode(), expected):
            raise web.HTTPUnauthorized(text="innet view: the token is missing or wrong\n",
                                       headers=HEADERS)
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    async def page(request: web.Request) -> web.Response:
        html = static_text("index.html").decode().replace("__TOKEN__", token)
        return web.Response(text=html, content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        kind = TYPES.get(name[name.rfind("."):], "text/plain")
        return web.Response(body=static_text(name), content_type=kind)

    async def info(request: web.Request) -> web.Response:
        return web.json_response({"mode": mode})

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", page)
    app.router.add_get("/api/info", info)
    app.router.add_get("/{name:(app.js|view.css|vendor/[a-zA-Z.-]+)}", static)
    return app


def make_app(live: LiveNetwork, token: str) -> web.Application:
    """The view's application for `live`, open to requests carrying `token`."""
    sampler = Sampler(Watcher(live))

    async def state(request: web.Request) -> web.Response:
        return web.json_response(await sampler.fresh())

    async def switch(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, read_switch, live, name)
        if found is None:
            raise web.HTTPNotFound(text=f"no switch {name!r}\n")
        return web.json_response(found)

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **HEADERS})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):  # the page went away
            while True:
                data = json.dumps(await sampler.fresh(), separators=(",", ":"))
                await response.write(f"event: state\ndata: {data}\n\n".encode())
                await asyncio.sleep(SAMPLE_S)
        return response

    app = base_app(token, "live")
    app.router.add_get("/api/state", state)
    app.router.add_get("/api/switch/{name}", switch)
    app.router.add_get("/api/events", events)
    return app


def make_folder_app(folder: Path, token: str) -> web.Application:
    """The view of a finished run folder: its results, summary and plots, read when asked."""

    async def summary(request: web.Request) -> web.Response:
        return web.json_response(folder_summary(folder))

    async def file(request: web.Request) -> web.FileResponse:
        path = folder_file(folder, request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers={"Content-Type": file_type(path)})

    app = base_app(token, "folder")
    app.router.add_get("/api/folder", summary)
    app.router.add_get("/files/{name}", file)
    return app


class ViewServer:
    """The app `app(token)` served on (host, port) from a thread with its own loop; port 0
    takes a free one. `url` is the page's address with the token; `close` stops it."""

    def __init__(self, app: Callable[[str], web.Application], host: str = "127.0.0.1",
                 port: int = 0, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(24)
        self.host = host
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app(self.token), access_log=None, shutdown_timeout=1.0)
        try:
            self.port = self.loop.run_until_complete(self._start(host, port))
        except BaseException:
            self.loop.run_until_complete(self.runner.cleanup())
            self.loop.close()
            raise
        self.thread = threading.Thread(target=self.loop.run_forever, name="innet-view",
                                       daemon=True)
        self.thread.start()

    async def _start(self, host: str, port: int) -> int:
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True)
        await site.start()
        return int(self.runner.addresses[0][1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?token={self.token}"

    def close(self) -> None:
        """Stop serving: open event streams end, the loop and its thread stop."""
        future = asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop)
        try:
            future.result(timeout=10)
        except Exception as exc:  # the network goes down whatever the view does
            log.warning("the view's server did not stop cleanly: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def live_view(live: LiveNetwork, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None) -> ViewServer:
    """The view of the network that `net up` holds, served."""
    return ViewServer(lambda t: make_app(live, t), host, port, token)


def folder_view(folder: Path, host: str = "127.0.0.1", port: int = 0,
                token: str | None = None) -> ViewServer:
    """The view of a finished run folder, served."""
    return ViewServer(lambda t: make_folder_app(folder, t), host, port, token)
