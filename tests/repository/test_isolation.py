"""The test run's own network namespace: what a test makes there is invisible outside, so a
run killed half-way leaves nothing that the next run (or anyone else's network) trips over."""

from __future__ import annotations

import os
import subprocess

import pytest

from innet.testing import netns

pytestmark = pytest.mark.skipif(not netns.isolated(),
                                reason="the run shares the machine's network namespace "
                                       f"({netns.isolation_problem() or 'INNET_TEST_NETNS=0'})")


def _has_link(name: str, argv_prefix: list[str]) -> bool:
    return subprocess.run([*argv_prefix, "ip", "link", "show", "dev", name],
                          capture_output=True).returncode == 0


def test_an_interface_made_in_the_run_is_not_seen_outside_it() -> None:
    name = f"iso{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"],
                   check=True)
    try:
        assert _has_link(name, [])
        assert not _has_link(name, netns.outside_network([])), \
            "the test run shares the machine's network namespace"
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)
