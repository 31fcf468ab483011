"""The replication engine through the generic P4Runtime layer, on the test server: multicast
groups and clone sessions written, diffed by id, read back, kept by the controller; set-up
commands and register cleaning through the side channel handed in."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from p4rt_helpers import eventually, fake_addresses

from innet.errors import InputError
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.controller import Controller, SwitchTarget
from innet.p4rt.deploy import Replication, deploy, diff_replication
from innet.p4rt.entities import CloneSession, MulticastGroup, Replica
from innet.plan.pipeline import load_pipeline
from innet.testing.fake_server import FakeP4RuntimeServer

NAMES = ["s1", "s2"]
PIPE = load_pipeline()  # innet's program owns the replication engine (result multicast)
BASE = dataclasses.replace(PIPE, managed=dataclasses.replace(PIPE.managed, replication=False))

pytestmark = pytest.mark.usefixtures("no_p4runtime_threads_left")

G1 = MulticastGroup(1, (Replica(1), Replica(2)))
G2 = MulticastGroup(2, (Replica(3), Replica(1, 1)))
C5 = CloneSession(5, (Replica(4),), class_of_service=1, packet_length_bytes=128)


def held(srv: FakeP4RuntimeServer, name: str) -> list[Replication]:
    with SwitchClient(fake_addresses(srv, NAMES)[name], PIPE.schema, writer=False) as c:
        return c.read_replication()


def test_diff_by_id_modifies_in_place() -> None:
    d = diff_replication([G1, C5], [MulticastGroup(1, (Replica(2),)), G2])
    assert d.insert == (G2,)
    assert d.modify == (MulticastGroup(1, (Replica(2),)),)
    assert d.delete == (C5,)
    assert d.writes == 3
    # a group and a session with one id are different things
    assert diff_replication([MulticastGroup(5)], [CloneSession(5)]).writes == 2
    with pytest.raises(InputError, match="two different values for group 1"):
        diff_replication([], [G1, MulticastGroup(1)])


def test_groups_and_sessions_are_written_read_back_and_diffed(
        server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    first = deploy(a, {n: () for n in NAMES}, PIPE, replication={"s1": [G1, G2, C5]})
    assert first.ok and first.switches["s1"].replication.insert == (G1, G2, C5)
    assert held(server, "s1") == [G1, G2, C5]
    assert held(server, "s2") == []
    again = deploy(a, {n: () for n in NAMES}, PIPE, replication={"s1": [C5, G2, G1]})
    assert again.writes == 0  # order does not matter: same ids, same replicas
    smaller = MulticastGroup(1, (Replica(2),))
    moved = deploy(a, {n: () for n in NAMES}, PIPE, replication={"s1": [smaller]})
    d = moved.switches["s1"].replication
    assert (d.insert, d.modify, set(d.delete)) == ((), (smaller,), {G2, C5})
    assert held(server, "s1") == [smaller]


def test_a_group_nobody_asked_for_is_removed(server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    deploy(a, {"s1": ()}, PIPE, replication={"s1": [G1]})
    with SwitchClient(a["s1"], PIPE.schema) as c:
        c.write_replication("insert", [G2])  # behind the intent's back
    fixed = deploy(a, {"s1": ()}, PIPE, replication={"s1": [G1]})
    assert fixed.switches["s1"].replication.delete == (G2,)
    assert held(server, "s1") == [G1]


def test_a_program_that_does_not_own_the_engine_refuses_groups(
        server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    with pytest.raises(InputError, match="does not own the replication engine"):
        deploy(a, {"s1": ()}, BASE, replication={"s1": [G1]})
    # and leaves what someone else put there alone
    deploy(a, {"s1": ()}, PIPE, replication={"s1": [G1]})
    assert deploy(a, {"s1": ()}, BASE).writes == 0
    assert held(server, "s1") == [G1]


def test_a_duplicate_insert_is_named(server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    deploy(a, {"s1": ()}, PIPE, replication={"s1": [G1]})
    with SwitchClient(a["s1"], PIPE.schema) as c, pytest.raises(SwitchError,
                                                                match="insert Multicast"):
        c.write_replication("insert", [G1])


def test_the_controller_restores_groups_on_a_switch_that_came_back_blank(
        server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    targets = {n: SwitchTarget((), replication=(G1, C5) if n == "s1" else (G2,))
               for n in NAMES}
    with Controller(a, PIPE, targets, interval=0.1) as ctl:
        ctl.wait_synced(10.0)
        assert held(server, "s1") == [G1, C5] and held(server, "s2") == [G2]
        server.wipe(0)  # s1 restarts without program, entries or groups
        assert eventually(lambda: ctl.views()["s1"].restores == 1)
        assert eventually(lambda: held(server, "s1") == [G1, C5])
        gen = ctl.set_targets({"s1": SwitchTarget(()), "s2": SwitchTarget((), replication=(G1,))})
        ctl.wait_synced(10.0)
        assert ctl.views()["s1"].synced >= gen
        assert held(server, "s1") == [] and held(server, "s2") == [G1]


class Recorder:
    """A side channel that remembers what it was told."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, address: SwitchAddress, commands: Sequence[str]) -> None:
        self.sent.append((address.name, tuple(commands)))


def test_setup_goes_through_the_side_channel_on_every_new_session(
        server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    side = Recorder()
    setup = ("set_queue_depth 64",)
    one_shot = deploy(a, {"s1": ()}, PIPE, setup=setup, sideband=side)
    assert one_shot.switches["s1"].setup_sent and side.sent == [("s1", setup)]
    side.sent.clear()
    targets = {n: SwitchTarget((), setup=setup) for n in NAMES}
    with Controller(a, PIPE, targets, interval=0.1, sideband=side) as ctl:
        ctl.wait_synced(10.0)
        assert sorted(side.sent) == [("s1", setup), ("s2", setup)]
        server.wipe(1)  # s2 comes back blank: it has lost its queue settings too
        assert eventually(lambda: side.sent.count(("s2", setup)) == 2)
    assert side.sent.count(("s1", setup)) == 1  # the pass-by-pass reconcile does not resend


def test_setup_without_a_side_channel_is_a_switch_error(server: FakeP4RuntimeServer) -> None:
    a = fake_addresses(server, NAMES)
    result = deploy(a, {"s1": ()}, PIPE, setup=("set_queue_depth 64",))
    assert "no side channel" in result.failed["s1"]
