"""Multicast groups and clone sessions on BMv2 through the generic P4Runtime layer: written,
read back as written, changed in place, and restored by the long-running controller on a
switch killed with -9 and started again blank."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4rt_helpers import eventually

from innet.bmv2.thrift import run_cli
from innet.p4rt.client import SwitchClient, SwitchError
from innet.p4rt.controller import Controller, SwitchTarget
from innet.p4rt.deploy import Replication, deploy
from innet.p4rt.entities import CloneSession, MulticastGroup, Replica
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import BMv2Switch, missing_tools, start_switch

_missing = missing_tools("simple_switch_grpc", "simple_switch_CLI")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
    pytest.mark.usefixtures("no_p4runtime_threads_left"),
]

BASE = load_pipeline()
PIPE = dataclasses.replace(BASE, managed=dataclasses.replace(BASE.managed, replication=True))
GROUPS = (MulticastGroup(7, (Replica(3), Replica(1), Replica(2, 1))),
          CloneSession(9, (Replica(4),)))
# BMv2 refuses a class of service other than 0 ("COS for clone sessions not supported yet")
# and a truncation length ("Error when creating clone session in target")
SLOW = 30.0  # a busy machine: these tests check that it gets there, not how fast


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[list[BMv2Switch]]:
    box = [start_switch("s1", tmp_path)]
    try:
        yield box
    finally:
        box[0].stop()


def held(sw: BMv2Switch) -> list[Replication] | None:
    try:
        with SwitchClient(sw.address, PIPE.schema, writer=False) as c:
            if c.pipeline_cookie() != PIPE.cookie:
                return None
            return c.read_replication()
    except SwitchError:
        return None


def test_groups_are_written_read_back_and_changed_in_place(switch: list[BMv2Switch]) -> None:
    a = {"s1": switch[0].address}
    first = deploy(a, {"s1": ()}, PIPE, replication={"s1": GROUPS}, sideband=run_cli)
    assert first.ok, first.failed
    assert held(switch[0]) == sorted(GROUPS, key=lambda r: isinstance(r, CloneSession))
    assert deploy(a, {"s1": ()}, PIPE, replication={"s1": GROUPS}).writes == 0
    fewer = MulticastGroup(7, (Replica(1),))
    moved = deploy(a, {"s1": ()}, PIPE, replication={"s1": (fewer,)})
    assert moved.switches["s1"].replication.modify == (fewer,)
    assert moved.switches["s1"].replication.delete == (GROUPS[1],)
    assert held(switch[0]) == [fewer]
    # the switch's own view agrees (its CLI reads the engine, not P4Runtime's cache)
    dump = run_cli(switch[0].address, ["mc_dump"])
    assert "mgrp(7)" in dump and "port 2" not in dump.split("mgrp(7)", 1)[1]


def test_a_program_loaded_again_leaves_no_copy_of_the_groups_behind(
        switch: list[BMv2Switch]) -> None:
    """BMv2's P4Runtime server forgets the groups when a program is loaded, its replication
    engine does not: written again after the load, every group would copy each packet once
    per load. The client clears them before it loads a program."""
    a = {"s1": switch[0].address}
    group = MulticastGroup(7, (Replica(3), Replica(1)))
    for cookie in (PIPE.cookie ^ 1, PIPE.cookie):
        assert deploy(a, {"s1": ()}, PIPE, replication={"s1": (group,)}).ok
        with SwitchClient(switch[0].address, PIPE.schema) as c:
            c.set_pipeline(dataclasses.replace(PIPE, cookie=cookie))
    assert deploy(a, {"s1": ()}, PIPE, replication={"s1": (group,)}).ok
    dump = run_cli(switch[0].address, ["mc_dump"])
    assert dump.count("mgrp(7)") == 1 and dump.count("(L1h=") == 1, dump


def test_a_restarted_switch_gets_its_groups_back(switch: list[BMv2Switch],
                                                  tmp_path: Path) -> None:
    old = switch[0]
    a = {"s1": old.address}
    with Controller(a, PIPE, {"s1": SwitchTarget((), replication=GROUPS)}, interval=0.5,
                    sideband=run_cli) as ctl:
        ctl.wait_synced(SLOW)
        want = sorted(GROUPS, key=lambda r: isinstance(r, CloneSession))
        assert held(old) == want
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait(5)
        port = int(old.address.grpc.rsplit(":", 1)[1])
        switch[0] = start_switch("s1", tmp_path, grpc_port=port,
                                 thrift_port=old.address.thrift_port)
        assert eventually(lambda: ctl.views()["s1"].restores >= 1, SLOW)
        assert eventually(lambda: held(switch[0]) == want, SLOW)
