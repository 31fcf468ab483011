"""Helpers the P4Runtime tests share: switches on the in-process test server, and waiting for
a condition that a background thread or process makes true."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from innet.p4rt.client import SwitchAddress
from innet.testing.fake_server import FakeP4RuntimeServer


def fake_addresses(srv: FakeP4RuntimeServer, names: Sequence[str]) -> dict[str, SwitchAddress]:
    """Switch i of `names` is device i of the test server (one server serves them all)."""
    return {n: SwitchAddress(n, srv.address, i) for i, n in enumerate(names)}


def eventually(cond: Callable[[], bool], timeout: float = 10.0, poll: float = 0.02) -> bool:
    """True as soon as `cond()` is; its last answer once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(poll)
    return cond()
