"""Aggregation registers put back to their power-on state where a plan change needs it.

A job's aggregation entry names its register cells (slot_base .. slot_base + slots - 1).
When that entry is deleted or changed (other expected bitmap, other slots), whatever those
slots hold belongs to the old plan: a half-merged round would keep waiting for contributors
the new plan no longer sends through this switch, or make a new job's first packets look like
duplicates. Writing zero into every cell of those slots returns them to the state a freshly
started switch has, which the protocol handles by construction.

P4Runtime cannot do it on BMv2 (its server answers register reads UNIMPLEMENTED and we do not
rely on writes), so the cleaning goes through the thrift CLI, like the queue settings. Layout,
read from the program's BMv2 JSON rather than written down twice: every register array whose
size is a multiple of the slot count is per slot, slot-major (cell slot * width + i).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass

from innet.aggpacket import DEFAULT_JOB_SLOTS, SLOTS
from innet.p4rt.entities import Entry
from innet.plan.program import T_AGG


@dataclass(frozen=True, slots=True)
class RegisterArray:
    name: str
    size: int

    @property
    def width(self) -> int:
        """Cells per slot."""
        return self.size // SLOTS


@functools.lru_cache(maxsize=4)
def slot_registers(device_config: bytes) -> tuple[RegisterArray, ...]:
    """The per-slot register arrays of a BMv2 program."""
    arrays = json.loads(device_config).get("register_arrays", [])
    return tuple(RegisterArray(str(r["name"]), int(r["size"])) for r in arrays
                 if int(r["size"]) >= SLOTS and int(r["size"]) % SLOTS == 0)


def stale_slots(changed: Iterable[Entry]) -> tuple[int, ...]:
    """Slots of the aggregation entries in `changed` (as the switch held them before a delete
    or modify): their contents belong to a plan that is gone."""
    out: set[int] = set()
    for e in changed:
        params = dict(e.params) if e.table == T_AGG and not e.default else {}
        base = params.get("slot_base")
        if base is not None:
            out.update(range(base, min(base + params.get("slots", DEFAULT_JOB_SLOTS), SLOTS)))
    return tuple(sorted(out))


def clean_commands(arrays: Iterable[RegisterArray], slots: Iterable[int]) -> list[str]:
    """simple_switch_CLI commands writing 0 into every cell of `slots`."""
    chosen = sorted(set(slots))
    return [f"register_write {a.name} {s * a.width + i} 0"
            for a in arrays for s in chosen for i in range(a.width)]
