import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests import their oracles and helpers from this folder (soar_oracle.py, ...)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def no_p4runtime_threads_left() -> Iterator[None]:
    """p4runtime-shell's stream thread is not a daemon: a client left open hangs the exit."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]
    for t in left:
        t.join(timeout=2)
    assert not [t for t in left if t.is_alive()], "a P4Runtime client was not closed"
