"""Runtime files in the p4lang tutorials' format, for a program that is not innet's
(examples/tutorial-basic): every field parsed into the generic entities, every mistake one
line naming the file, the entry and the field, and the entities written to the test server and
read back equal, by `deploy`, the controller and the `innet` commands."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from p4.v1 import p4runtime_pb2
from p4rt_helpers import eventually, fake_addresses

from innet.bmv2.own_program import load_own_program, runtime_paths
from innet.cli import main
from innet.errors import InputError
from innet.p4rt.client import SwitchClient, WriteError
from innet.p4rt.controller import Controller
from innet.p4rt.deploy import deploy
from innet.p4rt.encode import EncodeError, entry_from_proto, normalise, table_entry
from innet.p4rt.entities import (
    CloneSession,
    Entry,
    Match,
    MulticastGroup,
    Replica,
    describe_replication,
)
from innet.p4rt.runtime import (
    RuntimeFile,
    load_runtime,
    managed_for,
    own_pipeline,
    parse_value,
    runtime_from_dict,
)
from innet.p4rt.schema import load_pipeline, parse_p4info, schema_from_p4info
from innet.testing.fake_server import FakeP4RuntimeServer
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "tutorial-basic"
TOPO = EX / "line-topo" / "topology.json"
S1 = EX / "line-topo" / "s1-runtime.json"
S2 = EX / "line-topo" / "s2-runtime.json"
BASE = load_pipeline(str(EX / "basic.p4info.txtpb"), str(EX / "basic.json"))
SCHEMA = BASE.schema
NAMES = ["s1", "s2"]
MAC = 0x08_00_00_00_00_00

pytestmark = pytest.mark.usefixtures("no_p4runtime_threads_left")


def s1_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(S1.read_text())
    return data


def test_the_example_runtime_file_becomes_entities_as_the_switch_reports_them() -> None:
    rt = load_runtime(S1, SCHEMA)
    assert rt.source == str(S1) and rt.target == "bmv2"
    assert rt.p4info == "build/basic.p4.p4info.txt" and rt.bmv2_json == "build/basic.json"
    fwd = "ipv4_forward"
    assert rt.entries == (
        Entry("ipv4_lpm", (), "drop", (), default=True),
        Entry("ipv4_lpm", (Match("dstAddr", 0x0A000101, 32),), fwd,
              (("dstAddr", MAC | 0x01_11), ("port", 1))),
        Entry("ipv4_lpm", (Match("dstAddr", 0x0A000103, 32),), fwd,
              (("dstAddr", MAC | 0x01_33), ("port", 3))),
        Entry("ipv4_lpm", (Match("dstAddr", 0x0A000200, 24),), fwd,
              (("dstAddr", MAC | 0x02_00), ("port", 2))),
        Entry("acl", (Match("protocol", 17, mask=0xFF), Match("srcAddr", 0x0A000103,
                                                              mask=0xFFFFFFFF)),
              "drop", (), priority=10),
        Entry("acl", (Match("ttl", 0, high=1),), "drop", (), priority=20),
        Entry("l2_flood", (Match("dstAddr", 0xFFFFFFFFFFFF),), "flood", (("group", 1),)),
    )
    assert rt.groups == (MulticastGroup(1, (Replica(1, 1), Replica(2, 1), Replica(3, 1))),)
    assert rt.sessions == ()
    assert rt.tables == ("ipv4_lpm", "acl", "l2_flood")
    s2 = load_runtime(S2, SCHEMA)
    assert s2.sessions == (CloneSession(100, (Replica(1, 0),)),)
    # BMv2 refuses the other two fields, other targets may not
    cut = runtime_from_dict({"clone_session_entries": [
        {"clone_session_id": 7, "replicas": [], "class_of_service": 2,
         "packet_length_bytes": 64}]}, SCHEMA)
    assert cut.sessions == (CloneSession(7, (), 2, 64),) and cut.entries == ()
    assert describe_replication(cut.sessions[0]) == \
        "clone session 7 -> nowhere, class of service 2, cut to 64 bytes"
    assert s2.replication == (*s2.groups, *s2.sessions)


def test_entries_survive_encode_and_decode() -> None:
    for rt in (load_runtime(S1, SCHEMA), load_runtime(S2, SCHEMA)):
        for e in rt.entries:
            assert entry_from_proto(SCHEMA, table_entry(SCHEMA, e)) == e


@pytest.mark.parametrize(("raw", "width", "value"), [
    (7, 9, 7), ("10.0.1.1", 32, 0x0A000101), ("08:00:00:00:01:11", 48, MAC | 0x0111),
    ("08-00-00-00-01-11", 48, MAC | 0x0111), ("0x1F", 8, 31), ("17", 8, 17),
    ("::1", 128, 1), (0, 1, 0), (255, 8, 255),
])
def test_values_are_numbers_and_addresses(raw: Any, width: int, value: int) -> None:
    assert parse_value(raw, width) == value


@pytest.mark.parametrize(("raw", "width", "message"), [
    (True, 8, "expected a number"), (256, 8, "does not fit in 8 bits"), (-1, 8, "does not fit"),
    ("10.0.1.999", 32, "not an IPv4 address"), ("ten", 8, "expected a number"),
    ("10.0.1.1", 16, "does not fit in 16 bits"), ([1], 8, "expected a number"),
    (1.5, 8, "expected a number"), ("zz:zz", 16, "not an IPv6 or MAC address"),
])
def test_values_that_are_not_are_refused(raw: Any, width: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_value(raw, width)


def one_entry(match: dict[str, Any], table: str = "MyIngress.acl", priority: int | None = 5,
              action: str = "MyIngress.drop", params: dict[str, Any] | None = None) -> Entry:
    item: dict[str, Any] = {"table": table, "match": match, "action_name": action,
                            "action_params": params or {}}
    if priority is not None:
        item["priority"] = priority
    return runtime_from_dict({"table_entries": [item]}, SCHEMA, source="t.json").entries[0]


def test_each_match_kind_and_its_wildcard() -> None:
    lpm = {"table": "MyIngress.ipv4_lpm", "priority": None, "action": "MyIngress.drop"}
    # lpm: host bits beyond the prefix cleared (P4Runtime wants them zero), /0 left out
    assert one_entry({"hdr.ipv4.dstAddr": ["10.0.1.77", 24]}, **lpm).match == (
        Match("dstAddr", 0x0A000100, 24),)
    assert one_entry({"hdr.ipv4.dstAddr": ["0.0.0.0", 0]}, **lpm).match == ()
    assert one_entry({"dstAddr": "10.0.1.1"}, **lpm).match == (Match("dstAddr", 0x0A000101, 32),)
    # ternary: value masked; mask 0 is a wildcard, left out
    assert one_entry({"hdr.ipv4.protocol": ["0xff", "0x0f"]}).match == (
        Match("protocol", 0x0F, mask=0x0F),)
    assert one_entry({"hdr.ipv4.protocol": [6, 0], "hdr.ipv4.ttl": [3, 9]}).match == (
        Match("ttl", 3, high=9),)
    # range: the full range is a wildcard
    assert one_entry({"hdr.ipv4.ttl": [0, 255], "hdr.ipv4.protocol": [6, 255]}).match == (
        Match("protocol", 6, mask=0xFF),)
    # exact: a value, or a list of one
    flood = {"table": "MyIngress.l2_flood", "priority": None, "action": "MyIngress.flood",
             "params": {"group": "0x2"}}
    assert one_entry({"hdr.ethernet.dstAddr": ["ff:ff:ff:ff:ff:ff"]}, **flood) == Entry(
        "l2_flood", (Match("dstAddr", 2**48 - 1),), "flood", (("group", 2),))


def mutate(path: str, value: Any, *, delete: bool = False) -> dict[str, Any]:
    """s1's runtime file with the element at `path` (dot-separated keys and indices) set."""
    data = copy.deepcopy(s1_data())
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key_: Any = int(last) if isinstance(node, list) else last
    if delete:
        del node[key_]
    elif isinstance(node, list) and key_ == len(node):
        node.append(value)
    else:
        node[key_] = value
    return data


E = "table_entries"
BAD = [
    ("not an object", [], "is a JSON object with table_entries"),
    ("unknown top field", mutate("tables", []), "unknown field\\(s\\) tables"),
    ("entries not a list", mutate(E, {}), "table_entries: expected a list"),
    ("entry not an object", mutate(f"{E}.1", "x"), r"table_entries\[1\]: expected an object"),
    ("unknown entry field", mutate(f"{E}.1.prio", 1), r"\[1\]: unknown field\(s\) prio"),
    ("no table name", mutate(f"{E}.1.table", 3), r"\[1\]: table: expected a name"),
    ("unknown table", mutate(f"{E}.1.table", "MyIngress.nope"),
     r"\[1\]\.table: the P4 program has no table 'MyIngress.nope' \(it has"),
    ("unknown action", mutate(f"{E}.1.action_name", "MyIngress.fly"),
     r"\[1\]\.action_name: the P4 program has no action 'MyIngress.fly'"),
    ("action of another table", mutate(f"{E}.1.action_name", "MyIngress.flood"),
     r"\[1\]\.action_name: table ipv4_lpm has no action flood \(it has"),
    ("default not a bool", mutate(f"{E}.0.default_action", "yes"),
     r"\[0\]\.default_action: expected true or false"),
    ("default with a match", mutate(f"{E}.0.match", {"hdr.ipv4.dstAddr": ["10.0.0.0", 8]}),
     r"\[0\]\.match: a default action has no match"),
    ("match not an object", mutate(f"{E}.1.match", ["x"]), r"\[1\]\.match: expected an object"),
    ("unknown field", mutate(f"{E}.1.match", {"hdr.ipv4.srcAddr": ["10.0.0.0", 8]}),
     r"\[1\]\.match: table 'ipv4_lpm' has no match field 'hdr.ipv4.srcAddr' \(it has "
     r"hdr.ipv4.dstAddr\)"),
    ("a field twice", mutate(f"{E}.1.match", {"hdr.ipv4.dstAddr": ["10.0.0.0", 8],
                                              "dstAddr": ["10.0.0.0", 8]}),
     r"\[1\]\.match\['dstAddr'\]: hdr.ipv4.dstAddr given twice"),
    ("lpm of three", mutate(f"{E}.1.match", {"hdr.ipv4.dstAddr": ["10.0.0.0", 8, 1]}),
     r"\[1\]\.match\['hdr.ipv4.dstAddr'\]: lpm field hdr.ipv4.dstAddr: a lpm field takes "
     r"\[value, prefix_len\]"),
    ("prefix too long", mutate(f"{E}.1.match", {"hdr.ipv4.dstAddr": ["10.0.0.0", 33]}),
     r"prefix length must be an integer in 0..32, got 33"),
    ("prefix a string", mutate(f"{E}.1.match", {"hdr.ipv4.dstAddr": ["10.0.0.0", "8"]}),
     r"prefix length must be an integer in 0..32, got '8'"),
    ("value too wide", mutate(f"{E}.1.action_params.port", 512),
     r"\[1\]\.action_params\['port'\]: 512 does not fit in 9 bits"),
    ("ternary shape", mutate(f"{E}.4.match", {"hdr.ipv4.protocol": 17}),
     r"\[4\]\.match\['hdr.ipv4.protocol'\]: ternary field hdr.ipv4.protocol: a ternary "
     r"field takes \[value, mask\]"),
    ("empty range", mutate(f"{E}.5.match", {"hdr.ipv4.ttl": [9, 3]}),
     r"\[5\]\.match\['hdr.ipv4.ttl'\]: range field hdr.ipv4.ttl: range low 9 is above high 3"),
    ("exact missing", mutate(f"{E}.6.match", {}),
     r"\[6\]\.match: exact field hdr.ethernet.dstAddr of l2_flood is missing"),
    ("no priority", mutate(f"{E}.4.priority", None, delete=True),
     r"\[4\]\.priority: table acl has ternary, range or optional fields: its entries need a "
     r"priority > 0"),
    ("priority where none goes", mutate(f"{E}.1.priority", 3),
     r"\[1\]\.priority: table ipv4_lpm has no ternary, range or optional field"),
    ("priority on a default", mutate(f"{E}.0.priority", 3),
     r"\[0\]\.priority: a default action has no priority"),
    ("priority a bool", mutate(f"{E}.4.priority", True), r"\[4\]\.priority: expected an integer"),
    ("params not an object", mutate(f"{E}.1.action_params", [1]),
     r"\[1\]\.action_params: expected an object"),
    ("a param missing", mutate(f"{E}.1.action_params", {"port": 1}),
     r"\[1\]\.action_params: action ipv4_forward needs parameter 'dstAddr'"),
    ("a param unknown", mutate(f"{E}.1.action_params.vlan", 3),
     r"\[1\]\.action_params: action ipv4_forward has no parameter 'vlan' \(it has dstAddr, "
     r"port\)"),
    ("a bad address", mutate(f"{E}.1.action_params.dstAddr", "08:00:00:00:01"),
     r"\[1\]\.action_params\['dstAddr'\]: not an IPv6 or MAC address"),
    ("same key twice", mutate(f"{E}.2.match", {"hdr.ipv4.dstAddr": ["10.0.1.1", 32]}),
     r"table_entries\[2\]: same table and match as table_entries\[1\]"),
    ("two defaults", mutate(f"{E}.3", {"table": "MyIngress.ipv4_lpm", "default_action": True,
                                       "action_name": "NoAction"}),
     r"\[3\]: same table and match as table_entries\[0\] \(one default action per table\)"),
    ("groups not a list", mutate("multicast_group_entries", {}),
     "multicast_group_entries: expected a list"),
    ("group id 0", mutate("multicast_group_entries.0.multicast_group_id", 0),
     r"multicast_group_entries\[0\]\.multicast_group_id: expected an integer in 1..4294967295"),
    ("group field", mutate("multicast_group_entries.0.ports", [1]),
     r"multicast_group_entries\[0\]: expected \{\"multicast_group_id\""),
    ("group twice", mutate("multicast_group_entries.1", {"multicast_group_id": 1}),
     r"multicast_group_entries\[1\]\.multicast_group_id: group 1 is listed twice"),
    ("replicas not a list", mutate("multicast_group_entries.0.replicas", 1),
     r"multicast_group_entries\[0\]\.replicas: expected a list"),
    ("replica without a port", mutate("multicast_group_entries.0.replicas.1", {"instance": 1}),
     r"multicast_group_entries\[0\]\.replicas\[1\]: expected \{\"egress_port\""),
    ("replica port", mutate("multicast_group_entries.0.replicas.1.egress_port", "2"),
     r"replicas\[1\]\.egress_port: expected an integer in 0..4294967295, got '2'"),
    ("replica twice", mutate("multicast_group_entries.0.replicas.2",
                             {"egress_port": 1, "instance": 1}),
     r"replicas\[2\]: port 1 instance 1 is listed twice"),
    ("session id", mutate("clone_session_entries", [{"clone_session_id": -1}]),
     r"clone_session_entries\[0\]\.clone_session_id: expected an integer"),
    ("session field", mutate("clone_session_entries", [{"clone_session_id": 5, "cos": 1}]),
     r"clone_session_entries\[0\]: expected \{\"clone_session_id\""),
    ("session twice", mutate("clone_session_entries", [{"clone_session_id": 5},
                                                       {"clone_session_id": 5}]),
     r"clone_session_entries\[1\]\.clone_session_id: session 5 is listed twice"),
    ("session length", mutate("clone_session_entries", [{"clone_session_id": 5,
                                                         "packet_length_bytes": 1.5}]),
     r"clone_session_entries\[0\]\.packet_length_bytes: expected an integer"),
    ("target not a string", mutate("target", 1), "target: expected a string, got 1"),
]


@pytest.mark.parametrize(("case", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_every_mistake_is_one_line_naming_file_entry_and_field(
        case: str, data: Any, message: str) -> None:
    with pytest.raises(InputError) as info:
        runtime_from_dict(data, SCHEMA, source="s1-runtime.json")
    text = str(info.value)
    assert text.startswith("s1-runtime.json: ") and "\n" not in text
    assert re.search(message, text), text


# A P4Info with what the example program has not: a keyless table, a const default action,
# two fields whose names end alike, an @defaultonly and a @tableonly action.
P4INFO = """
tables { preamble { id: 1 name: "c.keyless" alias: "keyless" } action_refs { id: 10 }
         size: 1 }
tables { preamble { id: 2 name: "c.fixed" alias: "fixed" }
         match_fields { id: 1 name: "hdr.ethernet.dstAddr" bitwidth: 48 match_type: EXACT }
         match_fields { id: 2 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: OPTIONAL }
         action_refs { id: 10 scope: TABLE_ONLY } action_refs { id: 11 scope: DEFAULT_ONLY }
         const_default_action_id: 11 size: 8 }
actions { preamble { id: 10 name: "c.a" alias: "a" } }
actions { preamble { id: 11 name: "c.b" alias: "b" } }
"""
ODD = schema_from_p4info(parse_p4info(P4INFO))


@pytest.mark.parametrize(("item", "message"), [
    ({"table": "keyless", "match": {}, "action_name": "a"},
     r"\[0\]: table keyless has no key: only its default action can be set"),
    ({"table": "fixed", "default_action": True, "action_name": "b"},
     r"\[0\]\.default_action: table fixed's default action is const"),
    ({"table": "fixed", "default_action": True, "action_name": "a"},
     r"\[0\]\.action_name: a may not be the default action of fixed \(@tableonly\)"),
    ({"table": "fixed", "match": {"hdr.ethernet.dstAddr": 1}, "priority": 1,
      "action_name": "b"}, r"\[0\]\.action_name: b may only be the default action"),
    ({"table": "fixed", "match": {"dstAddr": 1}, "priority": 1, "action_name": "a"},
     r"\[0\]\.match: table 'fixed': match field 'dstAddr' is ambiguous \(hdr.ethernet.dstAddr, "
     r"hdr.ipv4.dstAddr\); give the full name"),
])
def test_what_only_other_programs_have_is_checked_too(item: dict[str, Any], message: str
                                                       ) -> None:
    with pytest.raises(InputError, match=message):
        runtime_from_dict({"table_entries": [item]}, ODD, source="odd.json")


def test_fields_that_end_alike_keep_their_full_names_and_optional_matches() -> None:
    e = runtime_from_dict({"table_entries": [
        {"table": "fixed", "match": {"hdr.ethernet.dstAddr": 5, "hdr.ipv4.dstAddr": "10.0.0.1"},
         "priority": 3, "action_name": "a"}]}, ODD).entries[0]
    assert e == Entry("fixed", (Match("hdr.ethernet.dstAddr", 5),
                                Match("hdr.ipv4.dstAddr", 0x0A000001)), "a", (), priority=3)
    assert entry_from_proto(ODD, table_entry(ODD, e)) == e
    assert table_entry(ODD, e).match[1].WhichOneof("field_match_type") == "optional"


@pytest.mark.parametrize(("entry", "message"), [
    (Entry("acl", (Match("protocol", 6, mask=0xFF),), "drop"), "needs a priority > 0"),
    (Entry("ipv4_lpm", (Match("dstAddr", 1, 32),), "drop", priority=1), "takes no priority"),
    (Entry("ipv4_lpm", (), "drop", default=True, priority=1), "a default action has no prio"),
    (Entry("acl", (Match("protocol", 6, mask=0),), "drop", priority=1), "mask 0 matches"),
    (Entry("acl", (Match("ttl", 0, high=255),), "drop", priority=1), "the full range"),
    (Entry("acl", (Match("ttl", 9, high=3),), "drop", priority=1), "range 9..3 is empty"),
    (Entry("acl", (Match("ttl", 9, prefix_len=3),), "drop", priority=1),
     "range, not a prefix match"),
    (Entry("l2_flood", (Match("dstAddr", 9, mask=3),), "flood", (("group", 1),)),
     "exact, not a ternary match"),
    (Entry("acl", (Match("ttl", 1),), "drop", priority=2**31), "priority must be in"),
])
def test_the_encoder_refuses_what_p4runtime_would(entry: Entry, message: str) -> None:
    with pytest.raises(EncodeError, match=message):
        table_entry(SCHEMA, entry)


def test_the_controller_owns_the_tables_the_files_name() -> None:
    s1, s2 = load_runtime(S1, SCHEMA), load_runtime(S2, SCHEMA)
    m = managed_for(SCHEMA, [s1, s2])
    assert m.tables == ("ipv4_lpm", "acl", "l2_flood")
    assert m.default_tables == ("ipv4_lpm",)
    assert m.counters == ("port_in",) and m.replication
    only = managed_for(SCHEMA, [RuntimeFile("x", (s2.entries[1],))])
    assert only.tables == ("ipv4_lpm",) and only.default_tables == () and not only.replication
    pipe = own_pipeline(BASE, [s1])
    assert pipe.cookie == BASE.cookie and pipe.managed.tables == m.tables


def held(srv: FakeP4RuntimeServer, name: str, pipe: Any) -> tuple[set[Entry], list[Any]]:
    with SwitchClient(fake_addresses(srv, NAMES)[name], pipe.schema, writer=False) as c:
        return (set(c.read_entries(pipe.managed.tables, pipe.managed.default_tables)),
                c.read_replication())


def test_deploy_writes_the_files_and_reads_them_back_equal(server: FakeP4RuntimeServer
                                                           ) -> None:
    files = {"s1": load_runtime(S1, SCHEMA), "s2": load_runtime(S2, SCHEMA)}
    pipe = own_pipeline(BASE, files.values())
    entries = {n: f.entries for n, f in files.items()}
    pre = {n: f.replication for n, f in files.items()}
    addresses = fake_addresses(server, NAMES)
    first = deploy(addresses, entries, pipe, replication=pre)
    assert first.ok and first.pipelines == 2 and first.writes == 12  # defaults already drop
    for n, f in files.items():
        have, groups = held(server, n, pipe)
        assert have == set(f.entries)
        assert sorted(groups, key=repr) == sorted(f.replication, key=repr)
    assert deploy(addresses, entries, pipe, replication=pre).writes == 0
    # s1's file loses an ACL entry and its group: exactly those go
    fewer = {**entries, "s1": tuple(e for e in entries["s1"] if e.priority != 20)}
    again = deploy(addresses, fewer, pipe, replication={**pre, "s1": ()})
    d = again.switches["s1"]
    assert [e.priority for e in d.diff.delete] == [20] and d.replication.delete == pre["s1"]
    assert again.writes == 2


def test_the_controller_restores_a_blank_switch(server: FakeP4RuntimeServer,
                                                tmp_path: Path) -> None:
    topo = load_topology(TOPO)
    own = load_own_program(topo, str(EX / "basic.json"), str(EX / "basic.p4info.txtpb"))
    targets = own.targets()
    with Controller(fake_addresses(server, NAMES), own.pipeline, targets, interval=0.2) as ctl:
        ctl.wait_synced(20)
        server.wipe(NAMES.index("s2"))
        assert eventually(lambda: ctl.views()["s2"].restores == 1, 20)
        ctl.wait_synced(20)
    have, groups = held(server, "s2", own.pipeline)
    assert have == set(targets["s2"].entries) and set(groups) == set(targets["s2"].replication)


def test_runtime_files_come_from_the_topology_or_the_command_line(tmp_path: Path) -> None:
    topo = load_topology(TOPO)
    # the tutorials name them from the exercise folder, the topology's parent
    assert runtime_paths(topo, []) == {"s1": S1, "s2": S2}
    assert runtime_paths(topo, ["s2=/x/y.json"]) == {"s1": S1, "s2": Path("/x/y.json")}
    for bad, message in (["s1"], "expected SWITCH=FILE"), (["s9=a"], "no switch 's9'"), \
            (["s1=a", "s1=b"], "switch 's1' given twice"):
        with pytest.raises(InputError, match=message):
            runtime_paths(topo, bad)
    with pytest.raises(InputError, match="needs its --p4info"):
        load_own_program(topo, str(EX / "basic.json"))
    with pytest.raises(InputError, match="--p4info goes with a compiled --program"):
        load_own_program(topo, str(EX / "basic.p4"), str(EX / "basic.p4info.txtpb"))


def _remote_tutorial_topology(tmp_path: Path, srv: FakeP4RuntimeServer) -> Path:
    data = json.loads(TOPO.read_text())
    for i, n in enumerate(NAMES):
        data["switches"][n] = {"grpc": srv.address, "device_id": i,
                               "runtime_json": str(EX / "line-topo" / f"{n}-runtime.json")}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_deploy_and_status_of_an_own_program(server: FakeP4RuntimeServer, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    topo = _remote_tutorial_topology(tmp_path, server)
    args = ["deploy", "--topology", str(topo), "--program", str(EX / "basic.json"),
            "--p4info", str(EX / "basic.p4info.txtpb")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "the controller owns: ipv4_lpm, acl, l2_flood and the replication engine" in out
    assert "s1 (" in out and "load program; +6 ~0 -0" in out  # the default is drop already
    assert "  + acl [ttl=0x0..0x1] priority 20 -> drop()" in out
    assert "  + multicast group 1 -> port 1 (instance 1), port 2 (instance 1), port 3 " \
           "(instance 1)" in out
    assert "  + clone session 100 -> port 1 (instance 0)" in out
    assert main(args) == 0
    assert capsys.readouterr().out.count(": unchanged") == 2
    # one switch from another file: only the difference goes
    other = tmp_path / "s2.json"
    data = json.loads(S2.read_text())
    data["table_entries"] = data["table_entries"][:2]
    other.write_text(json.dumps(data))
    assert main([*args, "--runtime", f"s2={other}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["switches"]["s2"]["delete"] == [
        "ipv4_lpm [dstAddr=0xa000100/24] -> ipv4_forward(dstAddr=8796093022464, port=2)",
        "l2_flood [dstAddr=0xffffffffffff] -> flood(group=1)"]
    assert doc["switches"]["s1"]["insert"] == [] and doc["writes"] == 2
    assert doc["runtime"]["s2"] == str(other)
    server.device(0).bump_counter("port_in", 3, 2, 200)
    status = ["status", "--topology", str(topo), "--program", str(EX / "basic.json"),
              "--p4info", str(EX / "basic.p4info.txtpb")]
    assert main(status) == 0
    out = capsys.readouterr().out
    assert "s1 (" in out and "7 entries, as its runtime file says" in out
    assert "counter port_in: [3] 2 pkts 200 bytes" in out
    assert "s2 (" in out and "differs from its runtime file: 2 missing, 0 wrong, 0 extra" in out
    assert main([*status, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["switches"]["s2"]["in_runtime_file"] is False
    assert doc["switches"]["s1"]["counters"] == {"port_in": {"3": [2, 200]}}


@pytest.mark.parametrize(("extra", "message"), [
    (["-k", "2"], "-k is an option of innet's own program"),
    (["--workload", "w.json"], "--workload is an option of innet's own program"),
    (["--no-ecn"], "--no-ecn is an option"),
    (["--bmv2-json", "x.json"], "--bmv2-json is an option"),
])
def test_innet_options_with_an_own_program_are_refused(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "--topology", str(TOPO), "--program", str(EX / "basic.json"),
                 "--p4info", str(EX / "basic.p4info.txtpb"), "--dry-run", "--from-empty",
                 *extra]) == 2
    assert message in capsys.readouterr().err


def test_runtime_without_program_and_deploy_without_workload_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "--topology", str(TOPO), "--runtime", f"s1={S1}", "--dry-run",
                 "--from-empty"]) == 2
    assert "--runtime goes with --program" in capsys.readouterr().err
    assert main(["deploy", "--topology", str(TOPO), "--dry-run", "--from-empty"]) == 2
    assert "--workload is required (the job to plan), unless --program" in \
        capsys.readouterr().err


def test_dry_run_from_empty_shows_entries_and_groups(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["deploy", "--topology", str(TOPO), "--program", str(EX / "basic.json"),
                 "--p4info", str(EX / "basic.p4info.txtpb"), "--dry-run", "--from-empty",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["program"]["tables"] == ["ipv4_lpm", "acl", "l2_flood"]
    assert doc["switches"]["s2"]["replication"]["insert"] == [
        "multicast group 1 -> port 1 (instance 1), port 2 (instance 1)",
        "clone session 100 -> port 1 (instance 0)"]
    assert doc["writes"] == 14 and doc["dry_run"] is True


def test_normalise_is_what_the_parser_gives() -> None:
    for e in load_runtime(S1, SCHEMA).entries:
        assert normalise(SCHEMA, e) == e


def _acl(match: tuple[Match, ...], priority: int = 5) -> Any:
    return table_entry(SCHEMA, Entry("acl", match, "drop", priority=priority))


def _lpm() -> Any:
    return table_entry(SCHEMA, Entry("ipv4_lpm", (Match("dstAddr", 0x0A000001, 32),), "drop"))


def _set(te: Any, **fields: Any) -> Any:
    """`te` with its first match field's ternary/range parts (or its priority) replaced."""
    for name, value in fields.items():
        if name == "priority":
            te.priority = value
        else:
            kind, part = name.split("_")
            setattr(getattr(te.match[0], kind), part, value)
    return te


@pytest.mark.parametrize(("te", "message"), [
    (_set(_acl((Match("protocol", 6, mask=0xFF),)), priority=0), "needs a priority > 0"),
    (_set(_lpm(), priority=3), "priority set on a table that has no ternary or range field"),
    (_set(_acl((Match("protocol", 6, mask=0x0F),)), ternary_value=b"\xf6"),
     "value bits set outside the mask"),
    (_set(_acl((Match("protocol", 6, mask=0x0F),)), ternary_value=b"\x00",
          ternary_mask=b"\x00"), "mask 0 (omit the field"),
    (_set(_acl((Match("ttl", 3, high=9),)), range_low=b"\x0a"), "low > high"),
    (_set(_acl((Match("ttl", 3, high=9),)), range_low=b"\x00", range_high=b"\xff"),
     "the full range"),
])
def test_the_test_server_refuses_what_bmv2_would(server: FakeP4RuntimeServer, te: Any,
                                                 message: str) -> None:
    address = fake_addresses(server, NAMES)["s1"]
    deploy({"s1": address}, {"s1": ()}, BASE)  # the program, nothing else
    with SwitchClient(address, SCHEMA) as c:
        req = p4runtime_pb2.WriteRequest()
        req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(te)
        with pytest.raises(WriteError) as exc:
            c.write_request(req)
        assert message in str(exc.value), str(exc.value)
        # the priority is part of the key: one match at two priorities is two entries
        one = (Match("protocol", 6, mask=0xFF),)
        c.write("insert", [Entry("acl", one, "drop", priority=1),
                           Entry("acl", one, "NoAction", priority=2)])
        assert len(c.read_entries(("acl",))) == 2
