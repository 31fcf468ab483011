"""Fixtures the P4Runtime tests share."""

from collections.abc import Iterator

import pytest

from innet.testing.fake_server import FakeP4RuntimeServer


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeP4RuntimeServer]:
    """One in-process P4Runtime server with a device per switch of the test module's NAMES
    (device i is NAMES[i], as p4rt_helpers.fake_addresses maps them)."""
    with FakeP4RuntimeServer(tuple(range(len(request.module.NAMES)))) as srv:
        yield srv
