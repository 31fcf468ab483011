"""Entities <-> P4Runtime protobuf, both ways, with the schema of one P4Info.

Symmetric on purpose: `entry_from_proto(schema, table_entry(schema, e)) == e` for every entry
the controller writes, so what a switch returns on a read can be compared with the intent
directly (the diff in deploy.py works on `Entry` values, never on protobuf).
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from innet.errors import InputError
from innet.p4rt.entities import CloneSession, Entry, Match, MulticastGroup, Replica
from innet.p4rt.schema import (
    MatchFieldInfo,
    Schema,
    TableInfo,
    decode_value,
    encode_value,
)


class EncodeError(InputError):
    """An entry that the P4 program cannot hold (unknown name, value too wide...)."""


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def table_entry(schema: Schema, entry: Entry) -> Any:
    """p4.v1.TableEntry for an entry; EncodeError names the entry and the problem."""
    try:
        table = schema.table(entry.table)
        action = schema.action(entry.action)
    except InputError as exc:
        raise EncodeError(f"{schema.describe(entry)}: {exc}") from None
    if action.id not in table.action_ids:
        raise EncodeError(f"{schema.describe(entry)}: table {table.alias} has no action "
                          f"{action.alias}")
    te = p4runtime_pb2.TableEntry()
    te.table_id = table.id
    if entry.default:
        if entry.match:
            raise EncodeError(f"{schema.describe(entry)}: a default action has no match")
        te.is_default_action = True
    elif table.keyless:
        raise EncodeError(f"{schema.describe(entry)}: table {table.alias} is keyless; only its "
                          "default action can be set")
    for m in entry.match:
        try:
            info = table.field(m.field)
        except InputError as exc:
            raise EncodeError(f"{schema.describe(entry)}: {exc}") from None
        fm = te.match.add()
        fm.field_id = info.id
        try:
            _field_match(fm, info, m)
        except ValueError as exc:
            raise EncodeError(f"{schema.describe(entry)}: field {m.field}: {exc}") from None
    if entry.default:
        if entry.priority:
            raise EncodeError(f"{schema.describe(entry)}: a default action has no priority")
    elif table.prioritised != (entry.priority > 0):
        need = ("needs a priority > 0 (it has ternary, range or optional fields)"
                if table.prioritised else "takes no priority (no ternary, range or optional "
                                          "field)")
        raise EncodeError(f"{schema.describe(entry)}: table {table.alias} {need}")
    if not 0 <= entry.priority < 1 << 31:
        raise EncodeError(f"{schema.describe(entry)}: priority must be in 1..2^31-1")
    te.priority = entry.priority
    te.action.action.action_id = action.id
    given = dict(entry.params)
    if set(given) != {p.name for p in action.params}:
        raise EncodeError(f"{schema.describe(entry)}: action {action.alias} takes "
                          f"({', '.join(p.name for p in action.params)}), got "
                          f"({', '.join(given)})")
    for p in action.params:
        pm = te.action.action.params.add()
        pm.param_id = p.id
        try:
            pm.value = encode_value(given[p.name], p.bitwidth)
        except ValueError as exc:
            raise EncodeError(f"{schema.describe(entry)}: parameter {p.name}: {exc}") from None
    return te


def _field_match(fm: Any, info: MatchFieldInfo, m: Match) -> None:
    """Fill one FieldMatch in the field's kind; ValueError says what does not fit."""
    kind, width = info.match_type, info.bitwidth
    given = [what for what, v in (("prefix", m.prefix_len), ("ternary", m.mask),
                                  ("range", m.high)) if v is not None]
    allowed = {"lpm": "prefix", "ternary": "ternary", "range": "range"}.get(kind)
    wrong = [what for what in given if what != allowed]
    if wrong:
        raise ValueError(f"{kind}, not a {wrong[0]} match")
    if kind in ("exact", "optional"):
        getattr(fm, kind).value = encode_value(m.value, width)
    elif kind == "lpm":
        plen = width if m.prefix_len is None else m.prefix_len
        if not 0 < plen <= width:
            raise ValueError(f"prefix length {plen} not in 1..{width} (a /0 is no match: "
                             "leave the field out)")
        mask = ((1 << plen) - 1) << (width - plen)
        fm.lpm.value = encode_value(m.value & mask, width)
        fm.lpm.prefix_len = plen
    elif kind == "ternary":
        mask = (1 << width) - 1 if m.mask is None else m.mask
        if mask == 0:
            raise ValueError("mask 0 matches everything: leave the field out")
        fm.ternary.mask = encode_value(mask, width)
        fm.ternary.value = encode_value(m.value & mask, width)
    elif kind == "range":
        high = m.value if m.high is None else m.high
        if high < m.value:
            raise ValueError(f"range {m.value}..{high} is empty")
        if m.value == 0 and high == (1 << width) - 1:
            raise ValueError("the full range matches everything: leave the field out")
        fm.range.low = encode_value(m.value, width)
        fm.range.high = encode_value(high, width)
    else:
        raise ValueError(f"match type {kind} is not supported here")


def _field_name(table: TableInfo, info: MatchFieldInfo) -> str:
    """The field's last name segment ("dstAddr"), unless another field of the table ends the
    same way (hdr.ethernet.dstAddr and hdr.ipv4.dstAddr): then its full name."""
    short = _short(info.name)
    if sum(_short(f.name) == short for f in table.match_fields) > 1:
        return info.name
    return short


def entry_from_proto(schema: Schema, te: Any) -> Entry:
    """The Entry a read table entry stands for (names are the P4Info aliases)."""
    table = schema.tables[te.table_id]
    by_id = {f.id: f for f in table.match_fields}
    match = []
    for fm in te.match:
        info = by_id[fm.field_id]
        name = _field_name(table, info)
        kind = fm.WhichOneof("field_match_type")
        if kind in ("exact", "optional"):
            match.append(Match(name, decode_value(getattr(fm, kind).value)))
        elif kind == "lpm":
            match.append(Match(name, decode_value(fm.lpm.value), int(fm.lpm.prefix_len)))
        elif kind == "ternary":
            match.append(Match(name, decode_value(fm.ternary.value),
                               mask=decode_value(fm.ternary.mask)))
        elif kind == "range":
            match.append(Match(name, decode_value(fm.range.low),
                               high=decode_value(fm.range.high)))
        else:
            raise ValueError(f"table {table.alias}: unsupported match kind {kind}")
    act = te.action.action
    action = schema.actions[act.action_id]
    pnames = {p.id: p.name for p in action.params}
    params = tuple(sorted(((pnames[p.param_id], decode_value(p.value)) for p in act.params),
                          key=lambda kv: [q.name for q in action.params].index(kv[0])))
    return Entry(table.alias, tuple(sorted(match)), action.alias, params,
                 bool(te.is_default_action), int(te.priority))


def normalise(schema: Schema, entry: Entry) -> Entry:
    """The entry as the switch will report it (aliases, sorted match, params in P4 order)."""
    return entry_from_proto(schema, table_entry(schema, entry))


def replication_entity(item: MulticastGroup | CloneSession) -> Any:
    """p4.v1.Entity of a packet replication engine entry (replicas in sorted order)."""
    ent = p4runtime_pb2.Entity()
    pre = ent.packet_replication_engine_entry
    if isinstance(item, MulticastGroup):
        pre.multicast_group_entry.multicast_group_id = item.group_id
        replicas = pre.multicast_group_entry.replicas
    else:
        pre.clone_session_entry.session_id = item.session_id
        pre.clone_session_entry.class_of_service = item.class_of_service
        pre.clone_session_entry.packet_length_bytes = item.packet_length_bytes
        replicas = pre.clone_session_entry.replicas
    for r in sorted(item.replicas):
        rep = replicas.add()
        rep.egress_port = r.port
        rep.instance = r.instance
    return ent


def replication_from_proto(ent: Any) -> MulticastGroup | CloneSession:
    """The multicast group or clone session a read packet replication entity stands for."""
    pre = ent.packet_replication_engine_entry
    kind = pre.WhichOneof("type")
    if kind == "multicast_group_entry":
        g = pre.multicast_group_entry
        return MulticastGroup(int(g.multicast_group_id), _replicas(g.replicas))
    if kind == "clone_session_entry":
        c = pre.clone_session_entry
        return CloneSession(int(c.session_id), _replicas(c.replicas), int(c.class_of_service),
                            int(c.packet_length_bytes))
    raise ValueError(f"unsupported packet replication entry {kind}")


def _replicas(replicas: Any) -> tuple[Replica, ...]:
    return tuple(sorted(Replica(int(r.egress_port), int(r.instance)) for r in replicas))


UPDATE_TYPES = {"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
                "delete": p4runtime_pb2.Update.DELETE}


def update(schema: Schema, kind: str, entry: Entry) -> Any:
    up = p4runtime_pb2.Update()
    up.type = UPDATE_TYPES[kind]
    up.entity.table_entry.CopyFrom(table_entry(schema, entry))
    return up


def replication_update(kind: str, item: MulticastGroup | CloneSession) -> Any:
    """An Update inserting, modifying or deleting a multicast group or clone session."""
    up = p4runtime_pb2.Update()
    up.type = UPDATE_TYPES[kind]
    up.entity.CopyFrom(replication_entity(item))
    return up


def read_tables(schema: Schema, tables: tuple[str, ...], defaults: tuple[str, ...]) -> list[Any]:
    """Entities of one ReadRequest: all entries of `tables`, the default of `defaults`."""
    out = []
    for name in tables:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = schema.table(name).id
        out.append(ent)
    for name in defaults:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = schema.table(name).id
        ent.table_entry.is_default_action = True
        out.append(ent)
    return out


def read_counter(schema: Schema, name: str, index: int | None = None) -> Any:
    """Entity reading one cell of an indexed counter, or all of them (index None)."""
    info = schema.counter(name)
    ent = p4runtime_pb2.Entity()
    ent.counter_entry.counter_id = info.id
    if index is not None:
        if not 0 <= index < info.size:
            raise InputError(f"counter {info.alias} has indices 0..{info.size - 1}, "
                             f"got {index}")
        ent.counter_entry.index.index = index
    return ent
