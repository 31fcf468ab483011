"""innet's program as the P4Runtime layer gets it: the compiled files, `describe` for its
entries, and what the controller manages in it (tables, defaults, counters, slot cleaning)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from innet.p4rt.managed import Managed
from innet.p4rt.schema import Pipeline
from innet.p4rt.schema import load_pipeline as load_compiled
from innet.plan import program
from innet.plan.registers import clean_commands, slot_registers, stale_slots


def _clean(device_config: bytes, slots: Sequence[int]) -> list[str]:
    return clean_commands(slot_registers(device_config), slots)


# A switch that comes back blank gets every entry again: were its routes in before its
# aggregation entries, a job's contributions would pass it to the destination unaggregated
# for that moment, and a destination that holds part of a blue switch's workers never
# completes the chunk (the switch's aggregate, which names them all, overlaps them): seen as
# a job that stalled after its blue switch restarted
MANAGED = Managed(program.MANAGED_TABLES, program.DEFAULT_TABLES, program.COUNTERS,
                  stale_slots, _clean, replication=True, insert_first=(program.T_AGG,))


@functools.lru_cache(maxsize=8)
def load_pipeline(p4info_path: str | None = None, device_config_path: str | None = None
                  ) -> Pipeline:
    """innet's compiled program (defaults: the committed P4Info and BMv2 JSON), read once per
    pair of paths, with innet's `describe` and what the controller manages in it."""
    base = load_compiled(p4info_path or str(program.P4INFO_PATH),
                         device_config_path or str(program.BMV2_JSON_PATH))
    return replace(base, schema=replace(base.schema, describe=program.describe),
                   managed=MANAGED)
