"""An in-process P4Runtime server that checks every request against the P4Info: a test aid.

It lets the controller's protocol code (arbitration, pipeline, batched writes, reads, counter
reads, errors) run without BMv2, and it is stricter than being convenient: ids must exist,
values must fit their bit widths (canonical or padded bytestrings, as P4Runtime 1.4 allows),
LPM values must have no bits set beyond the prefix, ternary values none outside their mask,
ranges must not be empty or full, tables with ternary, range or optional fields need a priority
(and others take none), every action parameter must be given once,
only the primary controller may write, a duplicate election id closes the stream, and every
controller is told when the primary changes. Reads return
canonical bytestrings, as BMv2's server does. Register reads answer UNIMPLEMENTED, like BMv2.

Several devices (device ids) can live behind one server. Initial default actions come from the
P4Info (`initial_default_action`) or, failing that, from the BMv2 JSON's `default_entry`.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from innet.p4rt.schema import MatchFieldInfo, Schema, TableInfo, schema_from_p4info

Key = tuple[tuple[int, bytes, int | bytes], ...]  # (field id, value, prefix/mask/high)


class _Reject(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _canonical(data: bytes, bitwidth: int, what: str) -> bytes:
    if not data:
        raise _Reject(code_pb2.INVALID_ARGUMENT, f"{what}: empty bytestring")
    if len(data) > (bitwidth + 7) // 8:
        raise _Reject(code_pb2.INVALID_ARGUMENT,
                      f"{what}: {len(data)} bytes for a {bitwidth}-bit value")
    value = int.from_bytes(data, "big")
    if value >= 1 << bitwidth:
        raise _Reject(code_pb2.INVALID_ARGUMENT, f"{what}: {value} does not fit in {bitwidth} "
                                                 "bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


@dataclass
class FakeDevice:
    """One device's state; tests may inspect it."""

    device_id: int
    schema: Schema | None = None
    cookie: int | None = None
    device_config: bytes = b""
    entries: dict[int, dict[Key, Any]] = field(default_factory=dict)
    defaults: dict[int, Any] = field(default_factory=dict)
    initial_defaults: dict[int, Any] = field(default_factory=dict)
    counters: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    # packet replication engine: ("multicast_group_entry" | "clone_session_entry", id) -> its
    # PacketReplicationEngineEntry, as written (BMv2 keeps it across pipeline loads too)
    replication: dict[tuple[str, int], Any] = field(default_factory=dict)
    elections: dict[int, tuple[int, int]] = field(default_factory=dict)  # stream -> id
    write_requests: list[Any] = field(default_factory=list)
    pipeline_loads: int = 0

    @property
    def primary(self) -> tuple[int, int] | None:
        return max(self.elections.values()) if self.elections else None

    @property
    def updates_written(self) -> int:
        return sum(len(r.updates) for r in self.write_requests)

    def table_entries(self, table: str) -> list[Any]:
        assert self.schema is not None
        return list(self.entries[self.schema.table(table).id].values())

    def wipe(self) -> None:
        """Forget the pipeline and every entry, as a switch restarted blank would (its
        sessions stay open: this is the case only the cookie check can notice)."""
        self.schema = None
        self.cookie = None
        self.device_config = b""
        self.entries, self.defaults, self.initial_defaults, self.counters = {}, {}, {}, {}
        self.replication = {}

    def bump_counter(self, name: str, index: int, packets: int, octets: int) -> None:
        """Pretend traffic went through: add to one cell of an indexed counter."""
        assert self.schema is not None
        cid = self.schema.counter(name).id
        p, b = self.counters[cid].get(index, (0, 0))
        self.counters[cid][index] = (p + packets, b + octets)


class _Servicer(p4runtime_pb2_grpc.P4RuntimeServicer):  # type: ignore[misc]
    def __init__(self, devices: dict[int, FakeDevice]) -> None:
        self.devices = devices
        self.lock = threading.RLock()
        self._stream_ids = iter(range(1, 1 << 62))
        self._outboxes: dict[int, tuple[int, queue.Queue[Any]]] = {}  # stream -> device, box

    # -- helpers ---------------------------------------------------------------------------

    def _device(self, device_id: int, context: Any) -> FakeDevice:
        dev = self.devices.get(device_id)
        if dev is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {device_id}")
        assert dev is not None
        return dev

    def _configured(self, device_id: int, context: Any) -> tuple[FakeDevice, Schema]:
        dev = self._device(device_id, context)
        if dev.schema is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "No forwarding pipeline config set for this device")
        assert dev.schema is not None
        return dev, dev.schema

    def _check_primary(self, dev: FakeDevice, eid: Any, context: Any) -> None:
        given = (int(eid.high), int(eid.low))
        if dev.primary is None or given != dev.primary:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"election id {given} is not the primary's ({dev.primary})")

    # -- RPCs ------------------------------------------------------------------------------

    def Capabilities(self, request: Any, context: Any) -> Any:
        rep = p4runtime_pb2.CapabilitiesResponse()
        rep.p4runtime_api_version = "1.4.1"
        return rep

    def StreamChannel(self, request_iterator: Any, context: Any) -> Iterator[Any]:
        """Arbitration like PI's: each controller is answered with the primary's election id
        (status OK to the primary itself), and when the primary changes (a higher id joins,
        the primary's stream ends) every controller of the device is told."""
        stream = next(self._stream_ids)
        out: queue.Queue[Any] = queue.Queue()

        def read() -> None:
            dev: FakeDevice | None = None
            try:
                for req in request_iterator:
                    if not req.HasField("arbitration"):
                        continue  # packet I/O: our program has none
                    arb = req.arbitration
                    eid = (int(arb.election_id.high), int(arb.election_id.low))
                    with self.lock:
                        dev = self.devices.get(int(arb.device_id))
                        if dev is None:
                            out.put((grpc.StatusCode.NOT_FOUND, f"no device {arb.device_id}"))
                            return
                        if any(e == eid for s, e in dev.elections.items() if s != stream):
                            out.put((grpc.StatusCode.INVALID_ARGUMENT,
                                     "Election id already exists"))
                            return
                        before = dev.primary
                        dev.elections[stream] = eid
                        self._outboxes[stream] = (dev.device_id, out)
                        out.put(self._arbitration(dev, stream))
                        if dev.primary != before:
                            self._notify(dev, stream)
            except Exception:  # the client went away mid-read
                pass
            finally:
                with self.lock:
                    self._outboxes.pop(stream, None)
                    if dev is not None and stream in dev.elections:
                        before = dev.primary
                        dev.elections.pop(stream)
                        if dev.primary != before:
                            self._notify(dev, stream)
                out.put(None)

        threading.Thread(target=read, name=f"fake-stream-{stream}", daemon=True).start()
        while True:
            item = out.get()
            if item is None:
                return
            if isinstance(item, tuple):
                context.abort(item[0], item[1])
            yield item

    def _arbitration(self, dev: FakeDevice, stream: int) -> Any:
        """The arbitration message for one stream of `dev` (call with the lock held)."""
        eid = dev.elections[stream]
        high, low = dev.primary or eid
        rep = p4runtime_pb2.StreamMessageResponse()
        rep.arbitration.device_id = dev.device_id
        rep.arbitration.election_id.high = high
        rep.arbitration.election_id.low = low
        rep.arbitration.status.code = (code_pb2.OK if dev.primary == eid
                                       else code_pb2.ALREADY_EXISTS)
        return rep

    def _notify(self, dev: FakeDevice, changed_by: int) -> None:
        for s, (device_id, box) in self._outboxes.items():
            if device_id == dev.device_id and s != changed_by and s in dev.elections:
                box.put(self._arbitration(dev, s))

    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        with self.lock:
            dev = self._device(request.device_id, context)
            self._check_primary(dev, request.election_id, context)
            actions = p4runtime_pb2.SetForwardingPipelineConfigRequest
            if request.action not in (actions.VERIFY_AND_COMMIT, actions.COMMIT,
                                      actions.VERIFY, actions.RECONCILE_AND_COMMIT):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported action")
            cfg = request.config
            if not cfg.p4info.tables:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "P4Info has no tables")
            try:
                bmv2 = json.loads(cfg.p4_device_config)
                assert isinstance(bmv2, dict) and "pipelines" in bmv2
            except (ValueError, AssertionError):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              "p4_device_config is not a BMv2 JSON")
            schema = schema_from_p4info(cfg.p4info)
            if request.action == actions.VERIFY:
                return p4runtime_pb2.SetForwardingPipelineConfigResponse()
            dev.schema = schema
            dev.device_config = bytes(cfg.p4_device_config)
            dev.cookie = int(cfg.cookie.cookie) if cfg.HasField("cookie") else None
            dev.entries = {t: {} for t in schema.tables}
            dev.initial_defaults = {t: _initial_default(schema, info, bmv2)
                                    for t, info in schema.tables.items()}
            dev.defaults = dict(dev.initial_defaults)
            dev.counters = {c: {} for c in schema.counters}
            dev.pipeline_loads += 1
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        with self.lock:
            dev, schema = self._configured(request.device_id, context)
            rep = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            kinds = p4runtime_pb2.GetForwardingPipelineConfigRequest
            rt = request.response_type
            if rt in (kinds.ALL, kinds.P4INFO_AND_COOKIE):
                rep.config.p4info.CopyFrom(schema.p4info)
            if rt in (kinds.ALL, kinds.DEVICE_CONFIG_AND_COOKIE):
                rep.config.p4_device_config = dev.device_config
            if dev.cookie is not None:
                rep.config.cookie.cookie = dev.cookie
            return rep

    def Write(self, request: Any, context: Any) -> Any:
        with self.lock:
            dev, schema = self._configured(request.device_id, context)
            self._check_primary(dev, request.election_id, context)
            dev.write_requests.append(request)
            results: list[tuple[int, str]] = []
            for up in request.updates:
                try:
                    self._apply(dev, schema, up)
                    results.append((code_pb2.OK, ""))
                except _Reject as rej:
                    results.append((rej.code, rej.message))
            if all(code == code_pb2.OK for code, _ in results):
                return p4runtime_pb2.WriteResponse()
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure.")
            for code, message in results:
                err = p4runtime_pb2.Error(canonical_code=code, message=message)
                packed = any_pb2.Any()
                packed.Pack(err)
                status.details.append(packed)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "Write failure.")
            raise AssertionError("unreachable")  # pragma: no cover

    def Read(self, request: Any, context: Any) -> Iterator[Any]:
        with self.lock:
            dev, schema = self._configured(request.device_id, context)
            rep = p4runtime_pb2.ReadResponse()
            for ent in request.entities:
                kind = ent.WhichOneof("entity")
                try:
                    if kind == "table_entry":
                        self._read_tables(dev, schema, ent.table_entry, rep)
                    elif kind == "counter_entry":
                        self._read_counters(dev, schema, ent.counter_entry, rep)
                    elif kind == "packet_replication_engine_entry":
                        self._read_replication(dev, ent.packet_replication_engine_entry, rep)
                    else:
                        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                      f"reading {kind} is not supported")
                except _Reject as rej:
                    context.abort(grpc.StatusCode(_grpc_code(rej.code)), rej.message)
        yield rep

    # -- writes ----------------------------------------------------------------------------

    def _apply(self, dev: FakeDevice, schema: Schema, up: Any) -> None:
        kind = up.entity.WhichOneof("entity")
        if kind == "packet_replication_engine_entry":
            self._apply_replication(dev, up)
            return
        if kind != "table_entry":
            raise _Reject(code_pb2.UNIMPLEMENTED, f"writing {kind} is not supported")
        te = up.entity.table_entry
        table = schema.tables.get(te.table_id)
        if table is None:
            raise _Reject(code_pb2.NOT_FOUND, f"unknown table id {te.table_id}")
        types = p4runtime_pb2.Update
        if up.type not in (types.INSERT, types.MODIFY, types.DELETE):
            raise _Reject(code_pb2.INVALID_ARGUMENT, "update type is not set")
        if te.is_default_action:
            if up.type != types.MODIFY:
                raise _Reject(code_pb2.INVALID_ARGUMENT,
                              "the default entry can only be modified")
            if te.match:
                raise _Reject(code_pb2.INVALID_ARGUMENT, "a default entry has no match")
            if table.const_default_action_id:
                raise _Reject(code_pb2.PERMISSION_DENIED, "the default action is const")
            if not te.HasField("action"):
                dev.defaults[table.id] = dev.initial_defaults[table.id]
                return
            dev.defaults[table.id] = _checked_action(schema, table, te, default=True)
            return
        if table.keyless:
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"table {table.alias} is keyless: only its default can be set")
        key, canon = _checked_match(table, te)
        if te.priority and not table.prioritised:
            raise _Reject(code_pb2.INVALID_ARGUMENT, "priority set on a table that has no "
                                                     "ternary or range field")
        if table.prioritised and te.priority <= 0:
            raise _Reject(code_pb2.INVALID_ARGUMENT, "a table with ternary, range or optional "
                                                     "fields needs a priority > 0")
        key = (*key, (-1, b"", int(te.priority)))
        store = dev.entries[table.id]
        if up.type == types.DELETE:
            if key not in store:
                raise _Reject(code_pb2.NOT_FOUND, "no such entry")
            del store[key]
            return
        stored = _checked_action(schema, table, te, default=False)
        stored.match.extend(canon)
        stored.priority = te.priority
        if up.type == types.INSERT:
            if key in store:
                raise _Reject(code_pb2.ALREADY_EXISTS, "Match entry exists, use MODIFY")
            if len(store) >= table.size > 0:
                raise _Reject(code_pb2.RESOURCE_EXHAUSTED, f"table {table.alias} is full")
        elif key not in store:
            raise _Reject(code_pb2.NOT_FOUND, "no such entry to modify")
        store[key] = stored

    # -- reads -----------------------------------------------------------------------------

    def _apply_replication(self, dev: FakeDevice, up: Any) -> None:
        pre = up.entity.packet_replication_engine_entry
        kind, ident = _replication_key(pre)
        if ident == 0:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"{kind} id 0 is reserved")
        key = (kind, ident)
        if up.type == p4runtime_pb2.Update.INSERT:
            if key in dev.replication:
                raise _Reject(code_pb2.ALREADY_EXISTS, f"{kind} {ident} already exists")
        elif key not in dev.replication:
            raise _Reject(code_pb2.NOT_FOUND, f"{kind} {ident} does not exist")
        if up.type == p4runtime_pb2.Update.DELETE:
            del dev.replication[key]
            return
        stored = p4runtime_pb2.PacketReplicationEngineEntry()
        stored.CopyFrom(pre)
        dev.replication[key] = stored

    def _read_replication(self, dev: FakeDevice, pre: Any, rep: Any) -> None:
        """Group (session) id 0 reads every group (session); another id, that one."""
        kind, ident = _replication_key(pre)
        for (k, i), stored in sorted(dev.replication.items(), key=lambda kv: kv[0]):
            if k == kind and ident in (0, i):
                rep.entities.add().packet_replication_engine_entry.CopyFrom(stored)

    def _read_tables(self, dev: FakeDevice, schema: Schema, te: Any, rep: Any) -> None:
        if te.table_id == 0:
            if te.is_default_action:
                raise _Reject(code_pb2.INVALID_ARGUMENT, "default entry read needs a table id")
            tables = list(schema.tables.values())
        else:
            table = schema.tables.get(te.table_id)
            if table is None:
                raise _Reject(code_pb2.NOT_FOUND, f"unknown table id {te.table_id}")
            tables = [table]
        for table in tables:
            if te.is_default_action:
                rep.entities.add().table_entry.CopyFrom(dev.defaults[table.id])
                continue
            store = dev.entries[table.id]
            if te.match:
                key, _ = _checked_match(table, te)
                key = (*key, (-1, b"", int(te.priority)))
                chosen = [store[key]] if key in store else []
            else:
                chosen = list(store.values())
            for stored in chosen:
                rep.entities.add().table_entry.CopyFrom(stored)

    def _read_counters(self, dev: FakeDevice, schema: Schema, ce: Any, rep: Any) -> None:
        if ce.counter_id == 0:
            ids = list(schema.counters)
        elif ce.counter_id in schema.counters:
            ids = [ce.counter_id]
        else:
            raise _Reject(code_pb2.NOT_FOUND, f"unknown counter id {ce.counter_id}")
        for cid in ids:
            info = schema.counters[cid]
            if ce.HasField("index"):
                if not 0 <= ce.index.index < info.size:
                    raise _Reject(code_pb2.OUT_OF_RANGE, f"index {ce.index.index} >= "
                                                         f"{info.size}")
                indices = [int(ce.index.index)]
            else:
                indices = list(range(info.size))
            for i in indices:
                out = rep.entities.add().counter_entry
                out.counter_id = cid
                out.index.index = i
                p, b = dev.counters[cid].get(i, (0, 0))
                out.data.packet_count = p
                out.data.byte_count = b


def _replication_key(pre: Any) -> tuple[str, int]:
    """(kind, group or session id) of a PacketReplicationEngineEntry."""
    kind = pre.WhichOneof("type")
    if kind not in ("multicast_group_entry", "clone_session_entry"):
        raise _Reject(code_pb2.INVALID_ARGUMENT, f"unknown replication entry {kind}")
    item = getattr(pre, kind)
    return kind, int(item.multicast_group_id if kind == "multicast_group_entry"
                     else item.session_id)


def _grpc_code(code: int) -> Any:
    return next(c.value for c in grpc.StatusCode if c.value[0] == code)


def _checked_match(table: TableInfo, te: Any) -> tuple[Key, list[Any]]:
    """The entry's key and canonical match, fields sorted by id, so that two spellings of the
    same entry (field order, leading zeros) find the same row, as on a real switch."""
    fields = {f.id: f for f in table.match_fields}
    seen: set[int] = set()
    key: list[tuple[int, bytes, int | bytes]] = []
    canon = []
    for fm in te.match:
        info = fields.get(fm.field_id)
        if info is None:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"table {table.alias}: unknown match "
                                                     f"field id {fm.field_id}")
        if fm.field_id in seen:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"field {info.name} given twice")
        seen.add(fm.field_id)
        part, out = _checked_field(info, fm)
        key.append(part)
        canon.append(out)
    for f in table.match_fields:
        if f.match_type == "exact" and f.id not in seen:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"exact field {f.name} is missing")
    order = sorted(range(len(key)), key=lambda i: key[i][0])
    return tuple(key[i] for i in order), [canon[i] for i in order]


def _checked_field(info: MatchFieldInfo,
                   fm: Any) -> tuple[tuple[int, bytes, int | bytes], Any]:
    """One field's key part and canonical FieldMatch; a wildcard spelled out (prefix 0, mask
    0, the full range) is refused, because P4Runtime says to leave the field out."""
    kind = fm.WhichOneof("field_match_type")
    if kind != info.match_type:
        raise _Reject(code_pb2.INVALID_ARGUMENT,
                      f"field {info.name} is {info.match_type}, got {kind}")
    out = p4runtime_pb2.FieldMatch(field_id=fm.field_id)
    if kind in ("exact", "optional"):
        value = _canonical(getattr(fm, kind).value, info.bitwidth, info.name)
        getattr(out, kind).value = value
        return (fm.field_id, value, -1), out
    if kind == "lpm":
        plen = int(fm.lpm.prefix_len)
        if not 0 < plen <= info.bitwidth:
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"field {info.name}: prefix length {plen} not in "
                          f"1..{info.bitwidth} (omit the field for a wildcard)")
        value = _canonical(fm.lpm.value, info.bitwidth, info.name)
        host_bits = (1 << (info.bitwidth - plen)) - 1
        if int.from_bytes(value, "big") & host_bits:
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"field {info.name}: bits set beyond the /{plen} prefix")
        out.lpm.value = value
        out.lpm.prefix_len = plen
        return (fm.field_id, value, plen), out
    if kind == "ternary":
        value = _canonical(fm.ternary.value, info.bitwidth, info.name)
        mask = _canonical(fm.ternary.mask, info.bitwidth, info.name)
        if mask == b"\0":
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"field {info.name}: mask 0 (omit the field for a wildcard)")
        if int.from_bytes(value, "big") & ~int.from_bytes(mask, "big"):
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"field {info.name}: value bits set outside the mask")
        out.ternary.value, out.ternary.mask = value, mask
        return (fm.field_id, value, mask), out
    if kind == "range":
        low = _canonical(fm.range.low, info.bitwidth, info.name)
        high = _canonical(fm.range.high, info.bitwidth, info.name)
        lo, hi = int.from_bytes(low, "big"), int.from_bytes(high, "big")
        if lo > hi:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"field {info.name}: low > high")
        if lo == 0 and hi == (1 << info.bitwidth) - 1:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"field {info.name}: the full range "
                                                     "(omit the field for a wildcard)")
        out.range.low, out.range.high = low, high
        return (fm.field_id, low, high), out
    raise _Reject(code_pb2.UNIMPLEMENTED, f"match kind {kind}")


def _checked_action(schema: Schema, table: TableInfo, te: Any, *, default: bool) -> Any:
    """A canonical copy (table id, action, params) of a valid entry's action."""
    if te.action.WhichOneof("type") != "action":
        raise _Reject(code_pb2.INVALID_ARGUMENT, "entry needs a direct action")
    act = te.action.action
    info = schema.actions.get(act.action_id)
    if info is None or act.action_id not in table.action_ids:
        raise _Reject(code_pb2.INVALID_ARGUMENT,
                      f"action id {act.action_id} is not an action of table {table.alias}")
    if default and act.action_id in table.table_only:
        raise _Reject(code_pb2.PERMISSION_DENIED, f"{info.alias} cannot be a default action")
    if not default and act.action_id in table.default_only:
        raise _Reject(code_pb2.PERMISSION_DENIED, f"{info.alias} is for the default only")
    params = {p.id: p for p in info.params}
    given: dict[int, bytes] = {}
    for p in act.params:
        pinfo = params.get(p.param_id)
        if pinfo is None:
            raise _Reject(code_pb2.INVALID_ARGUMENT,
                          f"action {info.alias}: unknown parameter id {p.param_id}")
        if p.param_id in given:
            raise _Reject(code_pb2.INVALID_ARGUMENT, f"parameter {pinfo.name} given twice")
        given[p.param_id] = _canonical(p.value, pinfo.bitwidth, f"{info.alias}.{pinfo.name}")
    missing = [p.name for p in info.params if p.id not in given]
    if missing:
        raise _Reject(code_pb2.INVALID_ARGUMENT,
                      f"action {info.alias}: parameter(s) {', '.join(missing)} missing")
    out = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=default)
    out.action.action.action_id = act.action_id
    for p in info.params:
        out.action.action.params.add(param_id=p.id, value=given[p.id])
    return out


def _initial_default(schema: Schema, table: TableInfo, bmv2: dict[str, Any]) -> Any:
    """The default entry a freshly loaded table reports: from P4Info, else the BMv2 JSON."""
    out = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
    p4t = next(t for t in schema.p4info.tables if t.preamble.id == table.id)
    if p4t.HasField("initial_default_action"):
        out.action.action.action_id = p4t.initial_default_action.action_id
        for arg in p4t.initial_default_action.arguments:
            out.action.action.params.add(param_id=arg.param_id, value=arg.value)
        return out
    json_actions = {a["id"]: a["name"] for a in bmv2.get("actions", [])}
    for pipe in bmv2.get("pipelines", []):
        for t in pipe.get("tables", []):
            if t.get("name") != table.name or "default_entry" not in t:
                continue
            name = json_actions.get(t["default_entry"].get("action_id"))
            info = next((a for a in schema.actions.values() if a.name == name), None)
            if info is None:
                continue
            out.action.action.action_id = info.id
            data = t["default_entry"].get("action_data", [])
            for p, raw in zip(info.params, data, strict=False):
                value = int(raw, 16) if isinstance(raw, str) else int(raw)
                out.action.action.params.add(
                    param_id=p.id, value=value.to_bytes(max(1, (value.bit_length() + 7) // 8),
                                                        "big"))
            return out
    return out


class FakeP4RuntimeServer:
    """A gRPC P4Runtime server on 127.0.0.1 (a free port) hosting fake devices.

    Use as a context manager; `address` is what a SwitchAddress needs.
    """

    def __init__(self, device_ids: tuple[int, ...] = (0,), *, max_workers: int = 64) -> None:
        self.devices = {d: FakeDevice(d) for d in device_ids}
        self._servicer = _Servicer(self.devices)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self._servicer, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeP4RuntimeServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._server.stop(grace=None).wait()

    def device(self, device_id: int = 0) -> FakeDevice:
        return self.devices[device_id]

    def wipe(self, device_id: int = 0) -> None:
        """The device restarts blank (FakeDevice.wipe), between two requests."""
        with self._servicer.lock:
            self.devices[device_id].wipe()

    def drop_entry(self, device_id: int, table: str) -> Any:
        """Remove one entry of `table` behind the controller's back; returns it."""
        with self._servicer.lock:
            dev = self.devices[device_id]
            assert dev.schema is not None
            store = dev.entries[dev.schema.table(table).id]
            key = next(iter(store))
            return store.pop(key)
