"""The P4Runtime test server refuses what a real one would, and the client reports it by name.

Requests are built by hand here (not by the controller's encoder) so that the server's checks
are tested on their own: ids, bit widths, bytestring encodings, LPM masks, action parameters,
update semantics, arbitration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from innet.p4rt import entities as en
from innet.p4rt.client import (
    WRITER_ELECTION_ID,
    SwitchAddress,
    SwitchClient,
    SwitchError,
    WriteError,
    reader_election_id,
)
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.testing.fake_server import FakeP4RuntimeServer

PIPE = load_pipeline()
S = PIPE.schema
LPM = S.table(pg.T_ROUTES)
AGG = S.table(pg.T_AGG)
ECN = S.table(pg.T_ECN)
FWD = S.action(pg.A_FORWARD)
AGGA = S.action(pg.A_AGGREGATE)


pytestmark = pytest.mark.usefixtures("no_p4runtime_threads_left")


@pytest.fixture
def server() -> Iterator[FakeP4RuntimeServer]:
    with FakeP4RuntimeServer((0, 1)) as srv:
        yield srv


@pytest.fixture
def client(server: FakeP4RuntimeServer) -> Iterator[SwitchClient]:
    with SwitchClient(SwitchAddress("s1", server.address, 0), S) as c:
        c.set_pipeline(PIPE)
        yield c


def lpm_entry(value: bytes, plen: int, params: list[tuple[int, bytes]] | None = None,
              action_id: int | None = None) -> Any:
    te = p4runtime_pb2.TableEntry(table_id=LPM.id)
    fm = te.match.add(field_id=LPM.match_fields[0].id)
    fm.lpm.value = value
    fm.lpm.prefix_len = plen
    te.action.action.action_id = action_id or FWD.id
    for pid, v in (params if params is not None else [(1, b"\x01"), (2, b"\x02")]):
        te.action.action.params.add(param_id=pid, value=v)
    return te


def agg_entry(job: bytes, expected: bytes = b"\x03", base: bytes = b"\x00",
              slots: bytes = b"\x10") -> Any:
    te = p4runtime_pb2.TableEntry(table_id=AGG.id)
    te.match.add(field_id=AGG.match_fields[0].id).exact.value = job
    te.action.action.action_id = AGGA.id
    te.action.action.params.add(param_id=AGGA.params[0].id, value=expected)
    te.action.action.params.add(param_id=AGGA.params[1].id, value=base)
    te.action.action.params.add(param_id=AGGA.params[2].id, value=slots)
    return te


def write(c: SwitchClient, *tes: Any, kind: int = p4runtime_pb2.Update.INSERT) -> None:
    req = p4runtime_pb2.WriteRequest()
    for te in tes:
        req.updates.add(type=kind).entity.table_entry.CopyFrom(te)
    c.write_request(req)


def refused(c: SwitchClient, te: Any, kind: int = p4runtime_pb2.Update.INSERT) -> str:
    with pytest.raises(WriteError) as exc:
        write(c, te, kind=kind)
    return str(exc.value)


def test_well_formed_entries_are_stored_canonically(server: FakeP4RuntimeServer,
                                                    client: SwitchClient) -> None:
    # padded to full width (allowed) is read back canonical, as BMv2 does
    write(client, lpm_entry(b"\x0a\x00\x00\x02", 32, [(1, b"\x00\x00\x00\x00\x00\x07"),
                                                      (2, b"\x00\x03")]))
    (e,) = client.read_entries((pg.T_ROUTES,))
    assert e == en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 0x0A000002, 32),), pg.A_FORWARD,
                         (("dst_mac", 7), ("port", 3)))
    stored = server.device(0).table_entries(pg.T_ROUTES)[0]
    assert stored.action.action.params[0].value == b"\x07"


@pytest.mark.parametrize("te, message", [
    (lpm_entry(b"\x0a\x00\x00\x02\x00", 32), "5 bytes for a 32-bit value"),
    (lpm_entry(b"", 32), "empty bytestring"),
    (lpm_entry(b"\x0a\x00\x00\x02", 24), r"bits set beyond the /24 prefix"),
    (lpm_entry(b"\x00", 0), "omit the field"),
    (lpm_entry(b"\x0a\x00\x00\x02", 33), "not in 1..32"),
    (lpm_entry(b"\x0a\x00\x00\x02", 32, [(1, b"\x01")]), "port missing"),
    (lpm_entry(b"\x0a\x00\x00\x02", 32, [(1, b"\x01"), (2, b"\x02\x00")]),
     "does not fit in 9 bits"),
    (lpm_entry(b"\x0a\x00\x00\x02", 32, [(1, b"\x01"), (2, b"\x02"), (9, b"\x01")]),
     "unknown parameter id 9"),
    (lpm_entry(b"\x0a\x00\x00\x02", 32, [(1, b"\x01"), (1, b"\x01"), (2, b"\x02")]),
     "given twice"),
    (lpm_entry(b"\x0a\x00\x00\x02", 32, [], action_id=AGGA.id), "not an action of table"),
    (agg_entry(b"\x01\x00\x00"), "3 bytes for a 16-bit value"),
    (agg_entry(b"\x01", base=b"\x01\x00\x00"), "slot_base: 3 bytes"),
])
def test_malformed_entries_are_refused(client: SwitchClient, te: Any, message: str) -> None:
    text = refused(client, te)
    assert message in text, text


def test_ids_and_kinds_are_checked(client: SwitchClient) -> None:
    te = agg_entry(b"\x01")
    te.table_id = 0x0FFFFFFF
    assert "unknown table id" in refused(client, te)
    te = agg_entry(b"\x01")
    te.match[0].field_id = 7
    assert "unknown match field id 7" in refused(client, te)
    te = agg_entry(b"\x01")
    del te.match[:]
    assert "exact field" in refused(client, te)
    te = agg_entry(b"\x01")
    te.match[0].ClearField("exact")
    te.match[0].lpm.value = b"\x01"
    te.match[0].lpm.prefix_len = 16
    assert "is exact, got lpm" in refused(client, te)
    te = agg_entry(b"\x01")
    te.priority = 10
    assert "priority" in refused(client, te)


def test_update_semantics(server: FakeP4RuntimeServer, client: SwitchClient) -> None:
    write(client, agg_entry(b"\x01"))
    assert "ALREADY_EXISTS" in refused(client, agg_entry(b"\x01"))
    assert "NOT_FOUND" in refused(client, agg_entry(b"\x02"), p4runtime_pb2.Update.MODIFY)
    assert "NOT_FOUND" in refused(client, agg_entry(b"\x02"), p4runtime_pb2.Update.DELETE)
    write(client, agg_entry(b"\x01", expected=b"\x07"), kind=p4runtime_pb2.Update.MODIFY)
    assert client.read_entries((pg.T_AGG,))[0].param("expected") == 7
    write(client, agg_entry(b"\x01"), kind=p4runtime_pb2.Update.DELETE)
    assert client.read_entries((pg.T_AGG,)) == []
    # a keyless table holds no entries; its default is modified, never inserted
    te = p4runtime_pb2.TableEntry(table_id=ECN.id)
    te.action.action.action_id = S.action(pg.A_ECN_OFF).id
    assert "keyless" in refused(client, te)
    te.is_default_action = True
    assert "can only be modified" in refused(client, te)
    # a batch is applied update by update; the error names the index of the bad one
    with pytest.raises(WriteError) as exc:
        write(client, agg_entry(b"\x05"), agg_entry(b"\x06", base=b"\x01\x00\x00"))
    assert [(i, code) for i, code, _ in exc.value.errors] == [(1, "INVALID_ARGUMENT")]
    assert [e.match[0].value for e in client.read_entries((pg.T_AGG,))] == [5]


def test_tables_fill_up(client: SwitchClient) -> None:
    write(client, *[agg_entry(i.to_bytes(2, "big")) for i in range(AGG.size)])
    assert "RESOURCE_EXHAUSTED" in refused(client, agg_entry(b"\xff\xff"))


def test_default_actions_start_from_the_program_and_can_be_reset(client: SwitchClient) -> None:
    initial = client.read_entries((), (pg.T_ECN,))
    assert initial == [it.ecn_entry(None)]
    client.write("modify", [it.ecn_entry(25)])
    assert client.read_entries((), (pg.T_ECN,)) == [it.ecn_entry(25)]
    te = p4runtime_pb2.TableEntry(table_id=ECN.id, is_default_action=True)
    write(client, te, kind=p4runtime_pb2.Update.MODIFY)  # no action: back to the initial one
    assert client.read_entries((), (pg.T_ECN,)) == initial
    lpm_default = client.read_entries((), (pg.T_ROUTES,))
    assert [e.action for e in lpm_default] == ["drop"]


def test_counters_read_by_index_or_all(server: FakeP4RuntimeServer, client: SwitchClient) -> None:
    server.device(0).bump_counter("port_in", 3, 10, 1500)
    assert client.read_counters("port_in", 3) == {3: (10, 1500)}
    every = client.read_counters("port_in")
    assert len(every) == 512 and every[3] == (10, 1500) and every[4] == (0, 0)
    server.device(0).bump_counter("port_out", 5, 2, 200)
    both = client.read_counter_sets(["port_in", "port_out"])
    assert both["port_in"] == every and both["port_out"][5] == (2, 200)
    assert both["port_out"][3] == (0, 0) and len(both["port_out"]) == 512
    few = client.read_counter_sets(["port_in", "port_out"], [3, 5])
    assert few == {"port_in": {3: (10, 1500), 5: (0, 0)}, "port_out": {3: (0, 0), 5: (2, 200)}}


def test_register_reads_are_unimplemented_as_on_bmv2(client: SwitchClient) -> None:
    stub = p4runtime_pb2_grpc.P4RuntimeStub(client._client.channel)
    req = p4runtime_pb2.ReadRequest(device_id=0)
    req.entities.add().register_entry.register_id = 0
    with pytest.raises(grpc.RpcError) as exc:
        list(stub.Read(req))
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_only_the_primary_writes(server: FakeP4RuntimeServer, client: SwitchClient) -> None:
    addr = SwitchAddress("s1", server.address, 0)
    with SwitchClient(addr, S, writer=False) as reader:
        assert not reader._client.is_primary
        assert reader.read_entries((pg.T_AGG,)) == []  # reading is fine
        with pytest.raises(SwitchError, match=r"switch s1 .*PERMISSION_DENIED"):
            reader.write("insert", [en.Entry(pg.T_AGG, (en.Match("job", 1),), pg.A_AGGREGATE,
                                             (("expected", 1), ("slot_base", 0),
                                                              ("slots", 16)))])
        with pytest.raises(SwitchError, match="PERMISSION_DENIED"):
            reader.set_pipeline(PIPE)


def test_a_duplicate_election_id_is_an_error_not_an_exit(server: FakeP4RuntimeServer,
                                                         client: SwitchClient) -> None:
    addr = SwitchAddress("s1", server.address, 0)
    with pytest.raises(SwitchError, match=r"switch s1 .*Election id already exists"):
        SwitchClient(addr, S, election_id=WRITER_ELECTION_ID)
    # a writer that is not the highest is refused before it tries to write
    with pytest.raises(SwitchError, match="higher election id is primary"):
        SwitchClient(addr, S, election_id=(0, 5))
    assert reader_election_id() < WRITER_ELECTION_ID


def test_unknown_device_and_missing_pipeline(server: FakeP4RuntimeServer) -> None:
    with pytest.raises(SwitchError, match=r"switch s9 \(.*device 7\).*no device 7"):
        SwitchClient(SwitchAddress("s9", server.address, 7), S)
    with SwitchClient(SwitchAddress("s2", server.address, 1), S) as c:
        assert c.pipeline_cookie() is None
        with pytest.raises(SwitchError, match=r"switch s2 .*No forwarding pipeline"):
            c.read_entries((pg.T_AGG,))
        c.set_pipeline(PIPE)
        assert c.pipeline_cookie() == PIPE.cookie
        assert server.device(1).pipeline_loads == 1
