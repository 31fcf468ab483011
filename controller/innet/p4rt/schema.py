"""The P4 program as the controller sees it: P4Info loaded once, names resolved to ids here.

Everything else in the controller speaks names ("ipv4_lpm", "aggregate"), which read well in
intent and errors; this module is the only place that knows the numeric ids and bit widths,
and the only place that turns integers into P4Runtime bytestrings and back.

Bytestrings are written in canonical form (no leading zero bytes, P4Runtime 1.4 section 8.4),
which is also what BMv2's server returns on reads, so written and read entries compare equal.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from innet.errors import InputError, read_bytes, text_limit
from innet.p4rt.entities import Describe, describe_entry
from innet.p4rt.managed import Managed


@dataclass(frozen=True, slots=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: str  # "exact", "lpm", "ternary", "range", "optional"


@dataclass(frozen=True, slots=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    alias: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise InputError(f"action {self.alias!r} has no parameter {name!r} "
                         f"(it has {', '.join(p.name for p in self.params) or 'none'})")


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    alias: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: tuple[int, ...]
    table_only: frozenset[int]    # actions an entry may use but the default may not
    default_only: frozenset[int]  # actions only the default may use
    size: int
    const_default_action_id: int

    @property
    def keyless(self) -> bool:
        return not self.match_fields

    @property
    def prioritised(self) -> bool:
        """Its entries carry a priority (P4Runtime: any ternary, range or optional field)."""
        return any(f.match_type in ("ternary", "range", "optional") for f in self.match_fields)

    def field(self, name: str) -> MatchFieldInfo:
        """By full name (hdr.ipv4.dstAddr) or, when no other field ends the same way, by its
        last segment (dstAddr)."""
        for f in self.match_fields:
            if f.name == name:
                return f
        ends = [f for f in self.match_fields if f.name.rsplit(".", 1)[-1] == name]
        if len(ends) == 1:
            return ends[0]
        if ends:
            raise InputError(f"table {self.alias!r}: match field {name!r} is ambiguous "
                             f"({', '.join(f.name for f in ends)}); give the full name")
        raise InputError(f"table {self.alias!r} has no match field {name!r} (it has "
                         f"{', '.join(f.name for f in self.match_fields) or 'none'})")


@dataclass(frozen=True, slots=True)
class CounterInfo:
    id: int
    name: str
    alias: str
    size: int
    unit: str  # "PACKETS", "BYTES", "BOTH"


@dataclass(frozen=True, eq=False)
class Schema:
    """Tables, actions and counters of one P4Info, findable by full name, alias or id."""

    p4info: Any
    tables: dict[int, TableInfo]
    actions: dict[int, ActionInfo]
    counters: dict[int, CounterInfo]
    registers: dict[int, str]
    _names: dict[str, dict[str, int]] = field(repr=False)
    # one line for an entry in messages: the program's own wording when its layer gives one
    describe: Describe = field(default=describe_entry, repr=False)

    def _resolve(self, kind: str, name: str) -> int:
        ids = self._names[kind]
        if name in ids:
            return ids[name]
        raise InputError(f"the P4 program has no {kind} {name!r} "
                         f"(it has {', '.join(sorted(self._aliases(kind)))})")

    def _aliases(self, kind: str) -> list[str]:
        pools: dict[str, dict[int, Any]] = {"table": self.tables, "action": self.actions,
                                            "counter": self.counters}
        pool = pools[kind]
        return [item.alias for item in pool.values()]

    def table(self, name: str) -> TableInfo:
        return self.tables[self._resolve("table", name)]

    def action(self, name: str) -> ActionInfo:
        return self.actions[self._resolve("action", name)]

    def counter(self, name: str) -> CounterInfo:
        return self.counters[self._resolve("counter", name)]


def schema_from_p4info(p4info: Any) -> Schema:
    """Index a parsed P4Info message (p4.config.v1.P4Info)."""
    names: dict[str, dict[str, int]] = {"table": {}, "action": {}, "counter": {}}

    def index(kind: str, preamble: Any) -> tuple[int, str, str]:
        full = str(preamble.name)
        alias = str(preamble.alias) or full.rsplit(".", 1)[-1]
        for key in {full, alias, full.rsplit(".", 1)[-1]}:
            names[kind].setdefault(key, int(preamble.id))
        return int(preamble.id), full, alias

    actions: dict[int, ActionInfo] = {}
    for a in p4info.actions:
        aid, full, alias = index("action", a.preamble)
        params = tuple(ParamInfo(int(p.id), str(p.name), int(p.bitwidth)) for p in a.params)
        actions[aid] = ActionInfo(aid, full, alias, params)
    tables: dict[int, TableInfo] = {}
    match_types = p4info_pb2.MatchField.MatchType
    scopes = p4info_pb2.ActionRef
    for t in p4info.tables:
        tid, full, alias = index("table", t.preamble)
        fields = tuple(
            MatchFieldInfo(int(f.id), str(f.name), int(f.bitwidth),
                           match_types.Name(f.match_type).lower())
            for f in t.match_fields)
        refs = tuple(int(r.id) for r in t.action_refs)
        table_only = frozenset(int(r.id) for r in t.action_refs if r.scope == scopes.TABLE_ONLY)
        default_only = frozenset(int(r.id) for r in t.action_refs
                                 if r.scope == scopes.DEFAULT_ONLY)
        tables[tid] = TableInfo(tid, full, alias, fields, refs, table_only, default_only,
                                int(t.size), int(t.const_default_action_id))
    counters: dict[int, CounterInfo] = {}
    units = p4info_pb2.CounterSpec.Unit
    for c in p4info.counters:
        cid, full, alias = index("counter", c.preamble)
        counters[cid] = CounterInfo(cid, full, alias, int(c.size), units.Name(c.spec.unit))
    registers = {int(r.preamble.id): str(r.preamble.name) for r in p4info.registers}
    return Schema(p4info, tables, actions, counters, registers, names)


def parse_p4info(text: str, *, source: str | None = None) -> Any:
    info = p4info_pb2.P4Info()
    try:
        text_format.Parse(text, info, allow_unknown_field=True)
    except text_format.ParseError as exc:
        raise InputError(f"not a P4Info text file: {exc}", source=source) from None
    return info


@dataclass(frozen=True, eq=False)
class Pipeline:
    """What SetForwardingPipelineConfig sends: P4Info, the BMv2 JSON and a cookie naming both.

    The cookie is a hash of the two files, so a switch already running this program is
    recognised by one small read and not reloaded (which would also wipe its entries).
    """

    schema: Schema
    device_config: bytes
    cookie: int
    p4info_path: str
    device_config_path: str
    managed: Managed = field(default_factory=Managed)  # what the controller owns in it


def _cookie(p4info_text: bytes, device_config: bytes) -> int:
    digest = hashlib.sha256(p4info_text + b"\0" + device_config).digest()
    return int.from_bytes(digest[:8], "big")


@functools.lru_cache(maxsize=8)
def load_pipeline(p4info_path: str, device_config_path: str) -> Pipeline:
    """Read (once per pair of paths) a compiled program: its P4Info text and BMv2 JSON."""
    info_p = Path(p4info_path)
    json_p = Path(device_config_path)
    # both are parsed (protobuf text, JSON): as every input, bounded by what a parse can take
    limit = text_limit()
    info_text = read_bytes(info_p, limit, what="P4Info file")
    device_config = read_bytes(json_p, limit, what="BMv2 JSON file")
    try:
        text = info_text.decode()
    except UnicodeDecodeError:
        raise InputError("not a P4Info text file (it is binary)", source=str(info_p)) from None
    schema = schema_from_p4info(parse_p4info(text, source=str(info_p)))
    return Pipeline(schema, device_config, _cookie(info_text, device_config), str(info_p),
                    str(json_p))


# ---------------------------------------------------------------------------------------------
# Value encodings


def encode_value(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytestring of an unsigned value; ValueError if it does not fit."""
    if value < 0 or value >= 1 << bitwidth:
        raise ValueError(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


def ip_to_int(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def int_to_ip(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def mac_to_int(text: str) -> int:
    return int(text.replace(":", ""), 16)


def int_to_mac(value: int) -> str:
    raw = value.to_bytes(6, "big")
    return ":".join(f"{b:02x}" for b in raw)
