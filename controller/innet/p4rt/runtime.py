"""Runtime files in the p4lang tutorials' format (`s1-runtime.json`), as generic entities.

A runtime file says what one switch holds for a user's program:

```json
{"target": "bmv2", "p4info": "build/basic.p4.p4info.txt", "bmv2_json": "build/basic.json",
 "table_entries": [
   {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.1.1", 32]},
    "action_name": "MyIngress.ipv4_forward",
    "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}},
   {"table": "MyIngress.acl", "match": {"hdr.ipv4.protocol": [17, "0xff"]}, "priority": 10,
    "action_name": "MyIngress.drop", "action_params": {}},
   {"table": "MyIngress.ipv4_lpm", "default_action": true, "action_name": "MyIngress.drop",
    "action_params": {}}],
 "multicast_group_entries": [{"multicast_group_id": 1,
                              "replicas": [{"egress_port": 1, "instance": 1}]}],
 "clone_session_entries": [{"clone_session_id": 100, "replicas": [{"egress_port": 3}],
                            "packet_length_bytes": 0, "class_of_service": 0}]}
```

Match values by the field's kind in the P4Info: exact and optional a value; lpm
`[value, prefix_len]`; ternary `[value, mask]`; range `[low, high]`. Values and action
parameters are integers, IPv4 or MAC strings, or "0x..." hex. A wildcard (prefix 0, mask 0,
the full range) is the field left out, as P4Runtime wants it. Entries of tables with ternary,
range or optional fields carry a `priority` (higher wins). Every name is checked against the
program's P4Info here, and a mistake is one line naming the file, the entry and the field.

`target`, `p4info` and `bmv2_json` are read and kept but decide nothing: the program is the
one the caller loads (the tutorials' paths point into their own build folder).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from innet.errors import InputError, read_json
from innet.p4rt.encode import EncodeError, normalise
from innet.p4rt.entities import CloneSession, Entry, Match, MulticastGroup, Replica
from innet.p4rt.managed import Managed
from innet.p4rt.schema import ActionInfo, MatchFieldInfo, Pipeline, Schema, TableInfo

_MAC = re.compile(r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$")
_TOP = {"target", "p4info", "bmv2_json", "table_entries", "multicast_group_entries",
        "clone_session_entries"}
_ENTRY = {"table", "match", "action_name", "action_params", "default_action", "priority"}
U32 = 2**32 - 1


@dataclass(frozen=True)
class RuntimeFile:
    """One switch's runtime file: its entries (defaults included, in file order, as the
    switch reports them), multicast groups and clone sessions."""

    source: str
    entries: tuple[Entry, ...] = ()
    groups: tuple[MulticastGroup, ...] = ()
    sessions: tuple[CloneSession, ...] = ()
    target: str | None = None
    p4info: str | None = None
    bmv2_json: str | None = None

    @property
    def replication(self) -> tuple[MulticastGroup | CloneSession, ...]:
        return (*self.groups, *self.sessions)

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables it names (entries or a default), in file order, once each."""
        return tuple(dict.fromkeys(e.table for e in self.entries))


def _fail(source: str | None, where: str, message: str) -> InputError:
    return InputError(f"{where}: {message}", source=source)


def parse_value(raw: Any, bitwidth: int) -> int:
    """An integer, IPv4 address, MAC address, "0x..." hex or decimal string, fitting the
    width; ValueError says why not."""
    if isinstance(raw, bool):
        raise ValueError(f"expected a number or an address, got {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if _MAC.match(text):
            value = int(re.sub("[:-]", "", text), 16)
        elif text.count(".") == 3:
            try:
                value = int(ipaddress.IPv4Address(text))
            except ValueError:
                raise ValueError(f"not an IPv4 address: {raw!r}") from None
        elif ":" in text:
            try:
                value = int(ipaddress.IPv6Address(text))
            except ValueError:
                raise ValueError(f"not an IPv6 or MAC address: {raw!r}") from None
        elif re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
            value = int(text, 16)
        elif re.fullmatch(r"\d{1,40}", text):
            value = int(text)
        else:
            raise ValueError(f"expected a number, IPv4 or MAC address, got {raw!r}")
    else:
        raise ValueError(f"expected a number or an address, got {raw!r}")
    if not 0 <= value < 1 << bitwidth:
        raise ValueError(f"{raw!r} does not fit in {bitwidth} bits")
    return value


def _match(info: MatchFieldInfo, raw: Any, name: str) -> Match | None:
    """One field's Match from its runtime-file value; None for a wildcard."""
    kind, width = info.match_type, info.bitwidth
    if kind in ("exact", "optional"):
        if isinstance(raw, list):
            if len(raw) != 1:
                raise ValueError(f"a {kind} field takes one value, got {raw!r}")
            raw = raw[0]
        return Match(name, parse_value(raw, width))
    shapes = {"lpm": "[value, prefix_len]", "ternary": "[value, mask]", "range": "[low, high]"}
    if kind not in shapes:
        raise ValueError(f"match kind {kind} is not supported")
    if not isinstance(raw, list) or len(raw) != 2:
        if kind == "lpm" and not isinstance(raw, list):
            raw = [raw, width]  # a bare address: the host route
        else:
            raise ValueError(f"a {kind} field takes {shapes[kind]}, got {raw!r}")
    first = parse_value(raw[0], width)
    if kind == "lpm":
        plen = raw[1]
        if isinstance(plen, bool) or not isinstance(plen, int) or not 0 <= plen <= width:
            raise ValueError(f"prefix length must be an integer in 0..{width}, got {plen!r}")
        if plen == 0:
            return None
        host_bits = (1 << (width - plen)) - 1
        return Match(name, first & ~host_bits, plen)
    second = parse_value(raw[1], width)
    if kind == "ternary":
        if second == 0:
            return None
        return Match(name, first & second, mask=second)
    if second < first:
        raise ValueError(f"range low {raw[0]!r} is above high {raw[1]!r}")
    if first == 0 and second == (1 << width) - 1:
        return None
    return Match(name, first, high=second)


def _entry(schema: Schema, item: Any, where: str, source: str | None) -> Entry:
    """One checked entry, as the switch will report it (`normalise`), so that it compares
    equal to what is read back. A mistake is one line naming the entry and the field."""
    table, action, default = _table_and_action(schema, item, where, source)
    match = _entry_match(table, item, default, where, source)
    priority = _entry_priority(table, item, default, where, source)
    params = _entry_params(action, item, where, source)
    entry = Entry(table.name, match, action.name, params, default, priority)
    try:
        return normalise(schema, entry)
    except EncodeError as exc:  # a check above should have said it: keep the one line
        raise _fail(source, where, str(exc)) from None


def _table_and_action(schema: Schema, item: Any, where: str,
                      source: str | None) -> tuple[TableInfo, ActionInfo, bool]:
    """The entry's table and action, and whether it sets the default: P4Info's rules on
    which action may go where (@tableonly, @defaultonly, a const default) checked here."""
    if not isinstance(item, dict):
        raise _fail(source, where, "expected an object {table, match, action_name, "
                                   "action_params}")
    extra = set(item) - _ENTRY
    if extra:
        raise _fail(source, where, f"unknown field(s) {', '.join(sorted(extra))} (known: "
                                   f"{', '.join(sorted(_ENTRY))})")
    for key in ("table", "action_name"):
        if not isinstance(item.get(key), str):
            raise _fail(source, where, f"{key}: expected a name, got {item.get(key)!r}")
    try:
        table: TableInfo = schema.table(item["table"])
    except InputError as exc:
        raise _fail(source, f"{where}.table", str(exc)) from None
    try:
        action: ActionInfo = schema.action(item["action_name"])
    except InputError as exc:
        raise _fail(source, f"{where}.action_name", str(exc)) from None
    default = item.get("default_action", False)
    if not isinstance(default, bool):
        raise _fail(source, f"{where}.default_action", f"expected true or false, got "
                                                       f"{default!r}")
    if action.id not in table.action_ids:
        names = [schema.actions[a].alias for a in table.action_ids]
        raise _fail(source, f"{where}.action_name", f"table {table.alias} has no action "
                                                    f"{action.alias} (it has "
                                                    f"{', '.join(names)})")
    if default and action.id in table.table_only:
        raise _fail(source, f"{where}.action_name", f"{action.alias} may not be the default "
                                                    f"action of {table.alias} (@tableonly)")
    if not default and action.id in table.default_only:
        raise _fail(source, f"{where}.action_name", f"{action.alias} may only be the default "
                                                    f"action of {table.alias} (@defaultonly)")
    if default and table.const_default_action_id:
        raise _fail(source, f"{where}.default_action", f"table {table.alias}'s default action "
                                                       "is const in the program")
    return table, action, default


def _entry_match(table: TableInfo, item: Any, default: bool, where: str,
                 source: str | None) -> tuple[Match, ...]:
    """The entry's match, wildcards left out as P4Runtime wants them."""
    raw_match = item.get("match", {})
    if not isinstance(raw_match, dict):
        raise _fail(source, f"{where}.match", f"expected an object {{field: value}}, got "
                                              f"{raw_match!r}")
    if default and raw_match:
        raise _fail(source, f"{where}.match", "a default action has no match")
    if not default and table.keyless:
        raise _fail(source, where, f"table {table.alias} has no key: only its default action "
                                   'can be set ("default_action": true)')
    match: list[Match] = []
    seen: set[int] = set()
    for fname, raw in raw_match.items():
        try:
            info = table.field(fname)
        except InputError as exc:
            raise _fail(source, f"{where}.match", str(exc)) from None
        if info.id in seen:
            raise _fail(source, f"{where}.match[{fname!r}]", f"{info.name} given twice")
        seen.add(info.id)
        try:
            m = _match(info, raw, info.name)
        except ValueError as exc:
            raise _fail(source, f"{where}.match[{fname!r}]", f"{info.match_type} field "
                                                             f"{info.name}: {exc}") from None
        if m is not None:
            match.append(m)
    missing = [f.name for f in table.match_fields
               if f.match_type == "exact" and f.id not in seen]
    if missing and not default:
        raise _fail(source, f"{where}.match", f"exact field {missing[0]} of {table.alias} "
                                              "is missing")
    return tuple(match)


def _entry_priority(table: TableInfo, item: Any, default: bool, where: str,
                    source: str | None) -> int:
    """The entry's priority: required exactly when the table has ternary, range or optional
    fields, because P4Runtime refuses it otherwise."""
    priority = item.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority < 2**31:
        raise _fail(source, f"{where}.priority", f"expected an integer in 1..2^31-1, got "
                                                 f"{priority!r}")
    if default and priority:
        raise _fail(source, f"{where}.priority", "a default action has no priority")
    if not default and table.prioritised and not priority:
        raise _fail(source, f"{where}.priority", f"table {table.alias} has ternary, range or "
                                                 "optional fields: its entries need a "
                                                 "priority > 0 (higher wins)")
    if not default and not table.prioritised and priority:
        raise _fail(source, f"{where}.priority", f"table {table.alias} has no ternary, range "
                                                 "or optional field: it takes no priority")
    return priority


def _entry_params(action: ActionInfo, item: Any, where: str,
                  source: str | None) -> tuple[tuple[str, int], ...]:
    """The action's parameters in the program's order, each one given and fitting its
    width."""
    raw_params = item.get("action_params", {})
    if not isinstance(raw_params, dict):
        raise _fail(source, f"{where}.action_params", f"expected an object {{name: value}}, "
                                                      f"got {raw_params!r}")
    known = {p.name for p in action.params}
    unknown = [k for k in raw_params if k not in known]
    if unknown:
        raise _fail(source, f"{where}.action_params", f"action {action.alias} has no "
                                                      f"parameter {unknown[0]!r} (it has "
                                                      f"{', '.join(sorted(known)) or 'none'})")
    params = []
    for p in action.params:
        if p.name not in raw_params:
            raise _fail(source, f"{where}.action_params", f"action {action.alias} needs "
                                                          f"parameter {p.name!r}")
        try:
            params.append((p.name, parse_value(raw_params[p.name], p.bitwidth)))
        except ValueError as exc:
            raise _fail(source, f"{where}.action_params[{p.name!r}]", str(exc)) from None
    return tuple(params)


def _int(raw: Any, where: str, source: str | None, low: int, high: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise _fail(source, where, f"expected an integer in {low}..{high}, got {raw!r}")
    return raw


def _replicas(raw: Any, where: str, source: str | None) -> tuple[Replica, ...]:
    if not isinstance(raw, list):
        raise _fail(source, where, 'expected a list [{"egress_port": P, "instance": I}]')
    out: list[Replica] = []
    for j, rep in enumerate(raw):
        at = f"{where}[{j}]"
        if not isinstance(rep, dict) or "egress_port" not in rep or set(rep) - {
                "egress_port", "instance"}:
            raise _fail(source, at, 'expected {"egress_port": P, "instance": I}')
        r = Replica(_int(rep["egress_port"], f"{at}.egress_port", source, 0, U32),
                    _int(rep.get("instance", 0), f"{at}.instance", source, 0, U32))
        if r in out:
            raise _fail(source, at, f"port {r.port} instance {r.instance} is listed twice")
        out.append(r)
    return tuple(out)


def _list(data: Mapping[str, Any], key: str, source: str | None) -> list[Any]:
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise _fail(source, key, "expected a list")
    return raw


def runtime_from_dict(data: Any, schema: Schema, *, source: str | None = None) -> RuntimeFile:
    """Check a parsed runtime file against the program's schema; entries come out as the
    switch will report them (`normalise`), so they compare equal to what it is read back."""
    if not isinstance(data, dict):
        raise InputError("a runtime file is a JSON object with table_entries (and "
                         "multicast_group_entries, clone_session_entries)", source=source)
    extra = set(data) - _TOP
    if extra:
        raise InputError(f"unknown field(s) {', '.join(sorted(extra))} (known: "
                         f"{', '.join(sorted(_TOP))})", source=source)
    for key in ("target", "p4info", "bmv2_json"):
        if key in data and not isinstance(data[key], str):
            raise _fail(source, key, f"expected a string, got {data[key]!r}")
    entries: list[Entry] = []
    first: dict[Any, int] = {}
    for i, item in enumerate(_list(data, "table_entries", source)):
        where = f"table_entries[{i}]"
        e = _entry(schema, item, where, source)
        if e.key in first:
            raise _fail(source, where, f"same table and match as "
                                       f"table_entries[{first[e.key]}]"
                        + (" (one default action per table)" if e.default else ""))
        first[e.key] = i
        entries.append(e)
    groups: list[MulticastGroup] = []
    for i, item in enumerate(_list(data, "multicast_group_entries", source)):
        where = f"multicast_group_entries[{i}]"
        if not isinstance(item, dict) or set(item) - {"multicast_group_id", "replicas"}:
            raise _fail(source, where, 'expected {"multicast_group_id": N, "replicas": [...]}')
        gid = _int(item.get("multicast_group_id"), f"{where}.multicast_group_id", source, 1,
                   U32)
        if any(g.group_id == gid for g in groups):
            raise _fail(source, f"{where}.multicast_group_id", f"group {gid} is listed twice")
        groups.append(MulticastGroup(gid, _replicas(item.get("replicas", []),
                                                    f"{where}.replicas", source)))
    sessions: list[CloneSession] = []
    keys = {"clone_session_id", "replicas", "packet_length_bytes", "class_of_service"}
    for i, item in enumerate(_list(data, "clone_session_entries", source)):
        where = f"clone_session_entries[{i}]"
        if not isinstance(item, dict) or set(item) - keys:
            raise _fail(source, where, 'expected {"clone_session_id": N, "replicas": [...], '
                                       '"packet_length_bytes": B, "class_of_service": C}')
        sid = _int(item.get("clone_session_id"), f"{where}.clone_session_id", source, 1, U32)
        if any(s.session_id == sid for s in sessions):
            raise _fail(source, f"{where}.clone_session_id", f"session {sid} is listed twice")
        sessions.append(CloneSession(
            sid, _replicas(item.get("replicas", []), f"{where}.replicas", source),
            _int(item.get("class_of_service", 0), f"{where}.class_of_service", source, 0, U32),
            _int(item.get("packet_length_bytes", 0), f"{where}.packet_length_bytes", source, 0,
                 U32)))
    return RuntimeFile(source or "runtime", tuple(entries), tuple(groups), tuple(sessions),
                       data.get("target"), data.get("p4info"), data.get("bmv2_json"))


def load_runtime(path: str | Path, schema: Schema) -> RuntimeFile:
    return runtime_from_dict(read_json(path), schema, source=str(path))


def managed_for(schema: Schema, runtimes: Iterable[RuntimeFile]) -> Managed:
    """What the controller owns when switches follow these runtime files: every entry of each
    table a file names (a switch whose file has none there gets that table emptied), the
    default action of each table a file sets one for, the replication engine when any file
    has a multicast group or clone session (then groups and sessions a switch's file does not
    list are deleted), and every counter of the program for `status` to read."""
    files = list(runtimes)
    named = dict.fromkeys(e.table for f in files for e in f.entries)
    tables = tuple(t for t in named if not schema.table(t).keyless)
    defaults = tuple(dict.fromkeys(e.table for f in files for e in f.entries if e.default))
    counters = tuple(c.alias for c in schema.counters.values())
    return Managed(tables, defaults, counters,
                   replication=any(f.replication for f in files))


def own_pipeline(pipeline: Pipeline, runtimes: Iterable[RuntimeFile]) -> Pipeline:
    """`pipeline` (a user's compiled program) owning what `runtimes` name."""
    return replace(pipeline, managed=managed_for(pipeline.schema, runtimes))
