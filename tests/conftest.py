import os
import threading
from collections.abc import Iterator

import pytest

# CI sets INNET_REQUIRE_P4=1: there a test that skips (BMv2, p4c, Mininet or a test tool
# missing) fails instead, so a data-plane change cannot land green without running on BMv2.
REQUIRE_ALL = os.environ.get("INNET_REQUIRE_P4", "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    """As root, the run takes a network namespace of its own before any thread starts, so
    interfaces and ports of any other network on the machine (a run killed half-way, another
    run at the same time) neither fail it nor are touched by it. INNET_TEST_NETNS=0 keeps the
    machine's namespace, for looking at a test's veths from another shell."""
    from innet.testing import netns

    if os.environ.get("INNET_TEST_NETNS", "1") == "0" or netns.isolation_problem():
        return
    try:
        netns.isolate()
    except OSError as exc:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(f"tests share the machine's network namespace: {exc}"),
            stacklevel=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"INNET_REQUIRE_P4=1, so this test may not skip; it would have "
                           f"skipped because: {reason}")


@pytest.fixture
def no_p4runtime_threads_left() -> Iterator[None]:
    """p4runtime-shell's stream thread is not a daemon: a client left open hangs the exit."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]
    for t in left:
        t.join(timeout=2)
    assert not [t for t in left if t.is_alive()], "a P4Runtime client was not closed"


# The property tests of refused inputs (tests/inputs/test_properties.py) run at least 200
# examples each, here and in CI; derandomised, so a green suite stays green.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "inputs", max_examples=200, deadline=20_000, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large])
