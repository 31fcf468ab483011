"""What a switch holds, as P4Runtime entities by name: plain frozen data, no protobuf.

Generic over P4 programs: a table entry or a table's default action (`Entry`, its match
fields `Match`), and the packet replication engine's multicast groups and clone sessions.
The program's names are handed in by the layer that knows the program (innet.plan.program
for innet.p4); `describe_entry` writes any entry in one line without knowing its meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Match:
    """One match field. The field's kind in the P4Info says how it matches: exact (or
    optional) on `value`; lpm on `value`/`prefix_len` (None: the full width); ternary on
    `value` under `mask` (None: every bit); range from `value` to `high` (None: just
    `value`). A wildcard (prefix 0, mask 0, the full range) is no Match at all: P4Runtime
    omits such fields, and so do reads."""

    field: str
    value: int
    prefix_len: int | None = None
    mask: int | None = None
    high: int | None = None


EntryKey = tuple[str, tuple[Match, ...], bool, int]


@dataclass(frozen=True, slots=True)
class Entry:
    """A table entry (or a table's default action when `default`), names and integers only."""

    table: str
    match: tuple[Match, ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()
    default: bool = False
    # tables with ternary, range or optional fields order their entries by it (higher wins);
    # 0 everywhere else
    priority: int = 0

    @property
    def key(self) -> EntryKey:
        """What identifies the entry on the switch: two entries with one key are one entry
        (P4Runtime counts the priority in the key)."""
        return (self.table, self.match, self.default, self.priority)

    def param(self, name: str) -> int:
        return dict(self.params)[name]


@dataclass(frozen=True, slots=True, order=True)
class Replica:
    """One copy the replication engine makes: out of `port`, numbered `instance`."""

    port: int
    instance: int = 0


@dataclass(frozen=True, slots=True)
class MulticastGroup:
    """A multicast group of the packet replication engine: a packet sent to `group_id` is
    copied once per replica (replicas in a canonical, sorted order)."""

    group_id: int
    replicas: tuple[Replica, ...] = ()

    def __post_init__(self) -> None:
        # canonical: the intent and what a switch reports compare equal whatever the order
        object.__setattr__(self, "replicas", tuple(sorted(self.replicas)))

    @property
    def key(self) -> int:
        return self.group_id


@dataclass(frozen=True, slots=True)
class CloneSession:
    """A clone session: a cloned packet goes to each replica, cut to `packet_length_bytes`
    when that is not 0, with class of service `class_of_service`."""

    session_id: int
    replicas: tuple[Replica, ...] = ()
    class_of_service: int = 0
    packet_length_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(sorted(self.replicas)))

    @property
    def key(self) -> int:
        return self.session_id


Describe = Callable[[Entry], str]


def describe_match(m: Match) -> str:
    """`field=0xa000101/32`, `field=0x800&&&0xffff`, `field=0x10..0x20` or `field=0x1`."""
    text = f"{m.field}={m.value:#x}"
    if m.prefix_len is not None:
        text += f"/{m.prefix_len}"
    if m.mask is not None:
        text += f"&&&{m.mask:#x}"
    if m.high is not None:
        text += f"..{m.high:#x}"
    return text


def describe_entry(entry: Entry) -> str:
    """One line for any entry: table, match (or "default"), action and its arguments."""
    match = ", ".join(describe_match(m) for m in entry.match)
    args = ", ".join(f"{k}={v}" for k, v in entry.params)
    where = "default" if entry.default else f"[{match}]"
    prio = f" priority {entry.priority}" if entry.priority else ""
    return f"{entry.table} {where}{prio} -> {entry.action}({args})"


def describe_replication(r: MulticastGroup | CloneSession) -> str:
    """`multicast group 1 -> port 1 (instance 1), port 2 (instance 1)`, or a clone session."""
    reps = ", ".join(f"port {x.port} (instance {x.instance})" for x in r.replicas) or "nowhere"
    if isinstance(r, MulticastGroup):
        return f"multicast group {r.group_id} -> {reps}"
    extra = "".join([f", class of service {r.class_of_service}" if r.class_of_service else "",
                     f", cut to {r.packet_length_bytes} bytes" if r.packet_length_bytes
                     else ""])
    return f"clone session {r.session_id} -> {reps}{extra}"
