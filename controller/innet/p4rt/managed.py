"""What of a P4 program the controller owns, handed in by the layer that knows the program.

The P4Runtime layer reads, diffs and writes whatever a `Managed` names and nothing else, so
it knows no table of any particular program. The defaults manage nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from innet.p4rt.entities import Entry


def _no_slots(_changed: Iterable[Entry]) -> tuple[int, ...]:
    return ()


def _no_commands(_device_config: bytes, _slots: Sequence[int]) -> list[str]:
    return []


@dataclass(frozen=True)
class Managed:
    """The tables whose every entry is the controller's, the tables whose default action it
    sets, the counters a status reads, whether it owns the replication engine, and the
    register cleaning after a plan change: `stale_slots` (which register slots the deleted or
    changed entries, as the switch held them, leave stale) and `clean_commands` (the
    commands, for the target's side channel, that zero them)."""

    tables: tuple[str, ...] = ()
    default_tables: tuple[str, ...] = ()
    counters: tuple[str, ...] = ()
    stale_slots: Callable[[Iterable[Entry]], tuple[int, ...]] = _no_slots
    clean_commands: Callable[[bytes, Sequence[int]], list[str]] = _no_commands
    # the packet replication engine (multicast groups, clone sessions) is the controller's:
    # groups and sessions the intent does not name are deleted
    replication: bool = False
    # tables whose new entries go in before the other tables' (a batch is applied in no fixed
    # order): they decide what the switch does with the packets the others let in
    insert_first: tuple[str, ...] = ()
