"""Every name innet.plan.program gives is in the committed program, and describe falls back."""

from __future__ import annotations

import json

from innet.p4rt.entities import Entry, Match, describe_entry
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline


def test_every_table_action_and_counter_name_is_in_the_p4info() -> None:
    schema = load_pipeline().schema
    tables = {t.alias for t in schema.tables.values()}
    actions = {a.alias for a in schema.actions.values()}
    counters = {c.alias for c in schema.counters.values()}
    assert {pg.T_ROUTES, pg.T_AGG, pg.T_ECN, pg.T_FAULT} <= tables
    assert {pg.A_FORWARD, pg.A_DROP_PACKET, pg.A_AGGREGATE, pg.A_TRACK, pg.A_ECN_ON,
            pg.A_ECN_OFF, pg.A_DROP, pg.A_NO_FAULT} <= actions
    assert set(pg.COUNTERS) == counters


def test_every_register_and_data_plane_action_is_in_the_bmv2_json() -> None:
    bmv2 = json.loads(pg.BMV2_JSON_PATH.read_text())
    registers = {r["name"].rsplit(".", 1)[-1] for r in bmv2["register_arrays"]}
    actions = {a["name"].rsplit(".", 1)[-1] for a in bmv2["actions"]}
    assert set(pg.REGISTERS) == registers
    assert {pg.A_STORE_VECTOR, pg.A_ADD_VECTOR, pg.A_ADD_VECTOR_EMIT, pg.A_LOAD_VECTOR,
            pg.A_DROP_AS, pg.A_SEND_SUMS} <= actions


def test_the_pipeline_describes_innets_entries_and_any_other_generically() -> None:
    pipeline = load_pipeline()
    ecn = Entry(pg.T_ECN, (), pg.A_ECN_OFF, (), default=True)
    assert pipeline.schema.describe(ecn) == "ECN: off"
    other = Entry("t", (Match("f", 16, 8),), "a", (("x", 1),))
    assert pipeline.schema.describe(other) == describe_entry(other) == "t [f=0x10/8] -> a(x=1)"
    assert pipeline.managed.tables == pg.MANAGED_TABLES
    assert pipeline.managed.counters == pg.COUNTERS
