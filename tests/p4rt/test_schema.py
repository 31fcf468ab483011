"""P4Info names and widths, value encodings, and Entry <-> protobuf symmetry."""

from __future__ import annotations

from pathlib import Path

import pytest

from innet.errors import InputError
from innet.p4rt import encode
from innet.p4rt import entities as en
from innet.p4rt.schema import (
    decode_value,
    encode_value,
    int_to_ip,
    int_to_mac,
    ip_to_int,
    mac_to_int,
)
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
PIPE = load_pipeline()
SCHEMA = PIPE.schema


def test_the_names_the_intent_uses_exist_with_the_widths_it_assumes() -> None:
    lpm = SCHEMA.table(pg.T_ROUTES)
    assert [(f.name.rsplit(".", 1)[-1], f.bitwidth, f.match_type) for f in lpm.match_fields] \
        == [("dst_addr", 32, "lpm")]
    agg = SCHEMA.table(pg.T_AGG)
    assert [(f.bitwidth, f.match_type) for f in agg.match_fields] == [(16, "exact")]
    assert SCHEMA.table(pg.T_ECN).keyless
    widths = {a: [(p.name, p.bitwidth) for p in SCHEMA.action(a).params]
              for a in (pg.A_FORWARD, pg.A_AGGREGATE, pg.A_ECN_ON, pg.A_ECN_OFF, pg.A_DROP,
                        pg.A_NO_FAULT)}
    assert widths == {pg.A_FORWARD: [("dst_mac", 48), ("port", 9)],
                      pg.A_AGGREGATE: [("expected", 32), ("slot_base", 16), ("slots", 16)],
                      pg.A_ECN_ON: [("threshold", 19)], pg.A_ECN_OFF: [],
                      pg.A_DROP: [("share", 16)], pg.A_NO_FAULT: []}
    assert SCHEMA.table(pg.T_FAULT).keyless
    for name, size in (("port_in", 512), ("port_out", 512), ("ecn_marked", 512),
                       ("agg_events", 16)):
        assert SCHEMA.counter(name).size == size
    # full names resolve too, and aliases are what reads report
    full = SCHEMA.table(pg.T_ROUTES).name
    assert SCHEMA.table(full).alias == pg.T_ROUTES


def test_unknown_names_are_input_errors_listing_what_exists() -> None:
    with pytest.raises(InputError, match=r"no table 'nope'.*ipv4_lpm"):
        SCHEMA.table("nope")
    with pytest.raises(InputError, match="no parameter 'x'"):
        SCHEMA.action(pg.A_FORWARD).param("x")


def test_pipeline_is_loaded_once_and_named_by_a_cookie(tmp_path: Path) -> None:
    assert load_pipeline() is PIPE
    assert PIPE.cookie != 0 and PIPE.device_config.startswith(b"{")
    other = tmp_path / "innet.json"
    other.write_bytes(PIPE.device_config + b" ")
    assert load_pipeline(None, str(other)).cookie != PIPE.cookie
    with pytest.raises(InputError, match="cannot read P4Info"):
        load_pipeline(str(tmp_path / "none.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("tables { nonsense")
    with pytest.raises(InputError, match="not a P4Info"):
        load_pipeline(str(bad))


def test_values_are_canonical_bytestrings() -> None:
    assert encode_value(0, 9) == b"\x00"
    assert encode_value(1, 9) == b"\x01"
    assert encode_value(511, 9) == b"\x01\xff"
    assert encode_value(0x0A000002, 32) == b"\x0a\x00\x00\x02"
    assert encode_value(0x000102, 48) == b"\x01\x02"
    with pytest.raises(ValueError, match="does not fit in 9 bits"):
        encode_value(512, 9)
    with pytest.raises(ValueError):
        encode_value(-1, 8)
    assert decode_value(b"\x00\x01\xff") == 511
    assert int_to_ip(ip_to_int("10.1.2.3")) == "10.1.2.3"
    assert int_to_mac(mac_to_int("08:00:00:0A:0b:0c")) == "08:00:00:0a:0b:0c"


def test_every_entry_the_intent_makes_survives_a_round_trip() -> None:
    topo = load_topology(ROOT / "topologies" / "bt15.json")
    w = it.workload_from_dict({"job": 300, "workers": [f"h{i}" for i in range(1, 17)]}, topo)
    for threshold in (None, 0, 20, (1 << 19) - 1):
        intent = it.derive(topo, [w], "soar", 4, ecn_threshold=threshold)
        for entries in intent.entries().values():
            for e in entries:
                te = encode.table_entry(SCHEMA, e)
                assert encode.entry_from_proto(SCHEMA, te) == e
                assert encode.normalise(SCHEMA, e) == e


def test_lpm_values_are_masked_to_the_prefix() -> None:
    e = en.Entry(pg.T_ROUTES, (en.Match("dst_addr", ip_to_int("10.1.2.3"), 16),), pg.A_FORWARD,
                 (("dst_mac", 1), ("port", 1)))
    te = encode.table_entry(SCHEMA, e)
    assert te.match[0].lpm.value == b"\x0a\x01\x00\x00" and te.match[0].lpm.prefix_len == 16


@pytest.mark.parametrize("entry, message", [
    (en.Entry("nope", (), "ecn_off", (), default=True), "no table 'nope'"),
    (en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 32),), "aggregate",
              (("expected", 1), ("slot_base", 0))), "has no action aggregate"),
    (en.Entry(pg.T_ECN, (), pg.A_ECN_OFF, ()), "keyless"),
    (en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 33),), pg.A_FORWARD,
              (("dst_mac", 1), ("port", 1))), "prefix length 33"),
    (en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 32),), pg.A_FORWARD,
              (("dst_mac", 1), ("port", 512))), "parameter port: 512 does not fit in 9 bits"),
    (en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 32),), pg.A_FORWARD, (("port", 1),)),
     r"takes \(dst_mac, port\)"),
    (en.Entry(pg.T_AGG, (en.Match("job", 1 << 16),), pg.A_AGGREGATE,
              (("expected", 1), ("slot_base", 0))), "field job: 65536 does not fit"),
    (en.Entry(pg.T_AGG, (en.Match("nope", 1),), pg.A_AGGREGATE,
              (("expected", 1), ("slot_base", 0))), "no match field 'nope'"),
    (en.Entry(pg.T_AGG, (en.Match("job", 1, 8),), pg.A_AGGREGATE,
              (("expected", 1), ("slot_base", 0))), "exact, not a prefix"),
    (en.Entry(pg.T_ECN, (en.Match("x", 1),), pg.A_ECN_OFF, (), default=True), "no match"),
])
def test_entries_the_program_cannot_hold_are_refused_by_name(entry: en.Entry,
                                                             message: str) -> None:
    with pytest.raises(encode.EncodeError, match=message):
        encode.table_entry(SCHEMA, entry)


def test_counter_read_entities() -> None:
    ent = encode.read_counter(SCHEMA, "ecn_marked", 3)
    assert ent.counter_entry.counter_id == SCHEMA.counter("ecn_marked").id
    assert ent.counter_entry.index.index == 3
    assert not encode.read_counter(SCHEMA, "ecn_marked").counter_entry.HasField("index")
    with pytest.raises(InputError, match=r"indices 0..15"):
        encode.read_counter(SCHEMA, "agg_events", 16)
