"""Where local switches listen: ports the kernel must never hand to a connection."""

from __future__ import annotations

import socket
from pathlib import Path

from innet.bmv2.local import (
    FREE_PORTS,
    _port_set,
    free_port,
    port_holders,
    reserve_ports,
    wait_for_port,
)


def test_reserving_ports_merges_with_what_the_list_holds(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_reserved_ports"
    path.write_text("9090,50051-50053\n")
    assert reserve_ports([50054, 50052], path)
    assert _port_set(path.read_text()) == {9090, 50051, 50052, 50053, 50054}
    before = path.read_text()
    assert reserve_ports([50051], path) and path.read_text() == before  # nothing to add
    path.write_text("\n")
    assert reserve_ports([1, 3], path) and _port_set(path.read_text()) == {1, 3}
    assert not reserve_ports([5], tmp_path / "missing" / "list")  # said, not raised


def test_free_ports_lie_below_the_ephemeral_range_and_are_not_handed_out_twice() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(p in FREE_PORTS for p in ports)
    lo, _hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert max(ports) < lo


def test_a_port_counts_as_open_only_when_something_listens_on_it() -> None:
    port = free_port()
    assert not wait_for_port(port, 0.3)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", port))
        srv.listen()
        assert wait_for_port(port, 5.0)


def test_what_holds_a_port_is_named_with_its_state_and_process() -> None:
    """A switch that cannot bind its port says who has it: a listener with its process, a
    connection with its peer; a port nobody uses has no holder."""
    import os
    import socket

    port = free_port()
    assert port_holders(port) == []
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                held = port_holders(port)
                me = f"pid {os.getpid()} ("
                assert any(h.startswith("LISTEN (peer port 0), " + me) for h in held), held
                peer = client.getsockname()[1]
                assert any(h.startswith(f"ESTABLISHED (peer port {peer}), {me}")
                           for h in held), held
