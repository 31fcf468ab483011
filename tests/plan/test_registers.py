"""Which register cells a plan change zeroes, against the program's own layout."""

from __future__ import annotations

import json

from innet.aggpacket import DEFAULT_JOB_SLOTS, SLOTS, VECTOR_LEN
from innet.p4rt import entities as en
from innet.plan import intent as it
from innet.plan import program as pg
from innet.plan.pipeline import load_pipeline
from innet.plan.registers import clean_commands, slot_registers, stale_slots

PIPE = load_pipeline()


def agg(job: int, base: int, slots: int = 4) -> en.Entry:
    return en.Entry(pg.T_AGG, (en.Match("job", job),), pg.A_AGGREGATE,
                    (("expected", 3), ("slot_base", base), ("slots", slots)))


def test_slots_of_deleted_or_changed_aggregation_entries() -> None:
    route = en.Entry(pg.T_ROUTES, (en.Match("dst_addr", 1, 32),), pg.A_FORWARD,
                     (("dst_mac", 1), ("port", 1)))
    assert stale_slots([route, it.ecn_entry(5)]) == ()
    assert stale_slots([agg(1, 8), agg(2, 0)]) == (0, 1, 2, 3, 8, 9, 10, 11)
    assert stale_slots([agg(3, SLOTS - 2)]) == (SLOTS - 2, SLOTS - 1)  # never past the end


def test_every_per_slot_cell_of_the_program_and_nothing_else() -> None:
    arrays = slot_registers(PIPE.device_config)
    data = json.loads(PIPE.device_config)
    # the program's per-slot state: every register array it has (the 32 sums, one array per
    # element, and the cell's words), one cell per slot each
    assert len(arrays) == len(data["register_arrays"]) and len(arrays) >= VECTOR_LEN + 2
    widths = sorted(a.width for a in arrays)
    assert set(widths) == {1}
    cmds = clean_commands(arrays, [5])
    assert len(cmds) == sum(widths) and all(c.endswith(" 0") for c in cmds)
    sums = [a.name for a in arrays if a.name.rsplit(".", 1)[-1].startswith("agg_v")]
    assert len(sums) == VECTOR_LEN
    assert sorted(c.split()[1] for c in cmds if c.split()[1] in sums) == sorted(sums)
    assert {int(c.split()[2]) for c in cmds} == {5}
    assert len(clean_commands(arrays, stale_slots([agg(1, 4, DEFAULT_JOB_SLOTS)]))) == \
        DEFAULT_JOB_SLOTS * sum(widths)
