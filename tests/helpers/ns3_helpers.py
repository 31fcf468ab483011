"""Whether the ns-3 engine can run here, asked once for every test module that needs it."""

from __future__ import annotations

import pytest

from innet.errors import InputError


def ns3_reason() -> str | None:
    """None when the engine is available, else doctor's one-line reason."""
    from innet.cassini.sim.ns3 import check_available

    try:
        check_available()
    except InputError as exc:
        return str(exc)
    return None


REASON = ns3_reason()
needs_ns3 = pytest.mark.skipif(REASON is not None, reason=f"ns-3 engine unavailable: {REASON}")
