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


MANAGED = Managed(program.MANAGED_TABLES, program.DEFAULT_TABLES, program.COUNTERS,
                  stale_slots, _clean, replication=True)


@functools.lru_cache(maxsize=8)
def load_pipeline(p4info_path: str | None = None, device_config_path: str | None = None
                  ) -> Pipeline:
    """innet's compiled program (defaults: the committed P4Info and BMv2 JSON), read once per
    pair of paths, with innet's `describe` and what the controller manages in it."""
    base = load_compiled(p4info_path or str(program.P4INFO_PATH),
                         device_config_path or str(program.BMV2_JSON_PATH))
    return replace(base, schema=replace(base.schema, describe=program.describe),
                   managed=MANAGED)
