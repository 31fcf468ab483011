"""One P4Runtime client per switch, on p4runtime-shell's `P4RuntimeClient` (not its shell).

What this adds to the library's class:
- arbitration that raises `SwitchError` instead of calling sys.exit (the library exits the
  process on a duplicate election id or an unreachable server) and that never leaves its
  non-daemon stream thread behind: use `SwitchClient` as a context manager;
- writes in batches, reads that yield `Entry` values, counter reads;
- every error names the switch (and the entry, for writes).

Election ids: a controller that writes takes `WRITER_ELECTION_ID` (high word 1), readers take a
low one, so a `status` run next to a deploy never steals the primary role.
"""

from __future__ import annotations

import logging
import os
import queue
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeException, SSLOptions

from innet.errors import InputError, NetworkError
from innet.p4rt import encode
from innet.p4rt.entities import CloneSession, Entry, MulticastGroup
from innet.p4rt.schema import Pipeline, Schema

log = logging.getLogger("innet.p4rt")


class _Demote(logging.Filter):
    """p4runtime-shell logs a closed stream as CRITICAL on the root logger, which Python prints
    when nothing is configured; our errors already say it, so pass it on at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.pathname.replace("\\", "/").endswith("p4runtime_sh/p4runtime.py"):
            log.debug("p4runtime-shell: %s", record.getMessage())
            return False
        return True


_DEMOTE = _Demote()


def _demote_library_logs() -> None:
    """Install the filter once, when the first session opens: importing this module changes
    no logging of the importer's (only p4runtime-shell's own records are ever touched)."""
    root = logging.getLogger()
    if _DEMOTE not in root.filters:
        root.addFilter(_DEMOTE)

T = TypeVar("T")

WRITER_ELECTION_ID = (1, 0)
BATCH = 500
ARBITRATION_TIMEOUT = 2.0
RPC_TIMEOUT = 10.0


def reader_election_id() -> tuple[int, int]:
    """Below any writer's, and distinct per process so two readers do not collide."""
    return (0, 1 + os.getpid() % 1_000_000)


class SwitchError(NetworkError):
    """A switch refused or could not be reached; the message names it (and the entry).

    `code` is the gRPC status name when the switch answered with one (PERMISSION_DENIED tells
    a controller it lost the primary role, UNAVAILABLE that the switch is gone)."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class WriteError(SwitchError):
    """A Write the switch refused in part: `errors` holds (update index, code, message)."""

    def __init__(self, message: str, errors: list[tuple[int, str, str]]) -> None:
        super().__init__(message, code="UNKNOWN")
        self.errors = errors


def election_int(eid: tuple[int, int]) -> int:
    """P4Runtime's election id is one 128-bit number sent as (high, low) words."""
    return (eid[0] << 64) | eid[1]


def format_election(eid: tuple[int, int]) -> str:
    return f"{eid[0]}:{eid[1]}"


@dataclass(frozen=True, slots=True)
class Arbitration:
    """What an arbitration message from the switch says: are we primary, and who is."""

    primary: bool
    primary_election_id: tuple[int, int] | None  # None: the switch has no primary


def batch_errors(exc: grpc.RpcError) -> list[tuple[int, str, str]]:
    """(index, code, message) of every failed update of a refused Write.

    Parsed here rather than by p4runtime-shell 0.0.6, whose error iterator never advances
    past an update reported OK: a batch with one good and one bad update hangs it forever.
    """
    details = None
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            details = status_pb2.Status.FromString(value)
    if details is None:
        return []
    out = []
    for i, packed in enumerate(details.details):
        err = p4runtime_pb2.Error()
        if packed.Unpack(err) and err.canonical_code != code_pb2.OK:
            out.append((i, code_pb2.Code.Name(err.canonical_code), str(err.message)))
    return out


@dataclass(frozen=True, slots=True)
class ClientTls:
    """The PEM files of a TLS session with a switch: the CA its certificate must chain to, and
    this controller's own certificate and key (a switch that requires client certificates
    refuses the handshake without them)."""

    ca: str
    cert: str
    key: str

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(CA, certificate, key), read now: a file that cannot be read is one InputError
        naming it (the library would log it and exit the process)."""
        out = []
        for what, path in (("CA certificate", self.ca), ("client certificate", self.cert),
                           ("client key", self.key)):
            try:
                with open(path, "rb") as f:
                    out.append(f.read())
            except OSError as exc:
                raise InputError(f"{path}: cannot read the {what} for TLS: "
                                 f"{exc.strerror or exc}") from None
        return out[0], out[1], out[2]


@dataclass(frozen=True, slots=True)
class SwitchAddress:
    """Where a switch's P4Runtime server (and BMv2 thrift server, if any) listens, and the
    TLS files to reach it with (None: a plain channel)."""

    name: str
    grpc: str
    device_id: int = 0
    thrift_port: int | None = None
    thrift_host: str = "127.0.0.1"
    tls: ClientTls | None = None

    def __str__(self) -> str:
        return f"switch {self.name} ({self.grpc}, device {self.device_id}" + \
            (", TLS)" if self.tls else ")")


def channel_options(address: SwitchAddress) -> Any:
    """p4runtime-shell's SSLOptions for `address`: insecure without TLS files."""
    if address.tls is None:
        return SSLOptions(True)
    address.tls.read()  # each file readable, or one line naming it
    return SSLOptions(False, address.tls.ca, address.tls.cert, address.tls.key)


class _Client(P4RuntimeClient):  # type: ignore[misc]  # untyped library class
    """P4RuntimeClient whose handshake raises instead of exiting the process."""

    def __init__(self, address: SwitchAddress, election_id: tuple[int, int]) -> None:
        self._address = address
        self.is_primary = False
        self.arbitration: Arbitration | None = None
        self.stream_out_q: Any = None
        self.stream_in_q: Any = None
        self.stream_recv_thread: Any = None
        self.stream: Any = None
        try:
            super().__init__(address.device_id, address.grpc, election_id,
                             ssl_options=channel_options(address))
        except BaseException:
            self.close(cancel=True)
            raise

    def handshake(self) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id[0]
        req.arbitration.election_id.low = self.election_id[1]
        self.stream_out_q.put(req)
        rep = self.get_stream_packet("arbitration", timeout=ARBITRATION_TIMEOUT)
        if rep is None:
            if self.stream is not None and self.stream.done():
                reason = f"{self.stream.code().name}: {self.stream.details()}"
            else:
                reason = (f"no arbitration answer within {ARBITRATION_TIMEOUT:g} s (is it a "
                          "P4Runtime server?)")
            raise SwitchError(f"{self._address}: cannot open a P4Runtime session: {reason}",
                              code=self.stream.code().name if self.stream is not None
                              and self.stream.done() else None)
        self.arbitration = parse_arbitration(rep)
        self.is_primary = self.arbitration.primary

    def close(self, *, cancel: bool = False) -> None:
        """tear_down() that also works on a half-built client and on a dead stream."""
        if self.stream_out_q is not None:
            self.stream_out_q.put(None)
        if cancel and self.stream is not None:
            self.stream.cancel()
        if self.stream_in_q is not None:
            for q in self.stream_in_q.values():
                q.put(None)
        if self.stream_recv_thread is not None:
            self.stream_recv_thread.join(timeout=5)
        channel = getattr(self, "channel", None)
        if channel is not None:
            channel.close()
            del self.channel


def parse_arbitration(rep: Any) -> Arbitration:
    """PI (BMv2's server) answers every controller with the primary's election id; status OK
    goes to the primary itself, NOT_FOUND means nobody is primary."""
    arb = rep.arbitration
    code = arb.status.code
    eid = (int(arb.election_id.high), int(arb.election_id.low))
    has = arb.HasField("election_id") and code != code_pb2.NOT_FOUND
    return Arbitration(code == code_pb2.OK, eid if has else None)


class SwitchClient:
    """A session with one switch. Use `with SwitchClient(...) as c:` so it always closes.

    A writer that is not primary raises at once, unless `allow_backup`: then the session
    stays open as a standby (the long-running controller), reads work, and arbitration
    messages from the switch (`poll_arbitration`) say when the role changes."""

    def __init__(self, address: SwitchAddress, schema: Schema, *, writer: bool = True,
                 election_id: tuple[int, int] | None = None,
                 allow_backup: bool = False) -> None:
        self.address = address
        self.schema = schema
        self.name = address.name
        eid = election_id or (WRITER_ELECTION_ID if writer else reader_election_id())
        self.election_id = eid
        _demote_library_logs()
        self._client = _Client(address, eid)
        self.writer = writer
        self.primary = self._client.is_primary
        self.arbitration = self._client.arbitration
        if writer and not self.primary and not allow_backup:
            self._client.close()
            raise SwitchError(f"{address}: another controller with a higher election id is "
                              "primary; this one could only read")
        log.debug("%s: connected (election id %s)", self.name, eid)

    # -- the stream ------------------------------------------------------------------------

    def stream_alive(self) -> bool:
        """False once the switch closed the session (it died, restarted, or refused us)."""
        stream = self._client.stream
        return stream is not None and not stream.done()

    def stream_end(self) -> str:
        """Why the stream ended, as the switch or gRPC put it."""
        stream = self._client.stream
        if stream is None or not stream.done():
            return "open"
        try:
            return f"{stream.code().name}: {stream.details()}"
        except Exception:  # a cancelled call may have no details  # pragma: no cover
            return "closed"

    def poll_arbitration(self, timeout: float = 0.0) -> Arbitration | None:
        """The next arbitration message the switch sent (role changes), if any."""
        rep = self._client.get_stream_packet("arbitration", timeout=timeout) if timeout > 0 \
            else self._nowait()
        if rep is None:
            return None
        arb = parse_arbitration(rep)
        self.primary = arb.primary
        self.arbitration = arb
        return arb

    def _nowait(self) -> Any:
        try:
            return self._client.stream_in_q["arbitration"].get_nowait()
        except queue.Empty:
            return None

    def rearbitrate(self) -> None:
        """Send our election id again: how a standby claims a switch whose primary left."""
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.address.device_id
        req.arbitration.election_id.high = self.election_id[0]
        req.arbitration.election_id.low = self.election_id[1]
        self._client.stream_out_q.put(req)

    def __enter__(self) -> SwitchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _fail(self, what: str, exc: Exception) -> SwitchError:
        if isinstance(exc, P4RuntimeException):
            exc = exc.grpc_error
        if isinstance(exc, grpc.RpcError):
            return SwitchError(f"{self.address}: {what}: {exc.code().name}: {exc.details()}",
                               code=exc.code().name)
        return SwitchError(f"{self.address}: {what}: {exc}")

    # -- pipeline --------------------------------------------------------------------------

    def pipeline_cookie(self) -> int | None:
        """The cookie of the program the switch runs; None when it runs none."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest()
        req.device_id = self.address.device_id
        req.response_type = p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        try:
            rep = self._client.stub.GetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise self._fail("reading the pipeline cookie", exc) from None
        if not rep.config.HasField("cookie"):
            return None
        return int(rep.config.cookie.cookie)

    def set_pipeline(self, pipeline: Pipeline) -> None:
        """Load the program (this wipes every entry and counter on the switch, and its
        multicast groups and clone sessions: see _clear_replication)."""
        self._clear_replication()
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.address.device_id
        req.election_id.high = self._client.election_id[0]
        req.election_id.low = self._client.election_id[1]
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(pipeline.schema.p4info)
        req.config.p4_device_config = pipeline.device_config
        req.config.cookie.cookie = pipeline.cookie
        try:
            self._client.stub.SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            raise self._fail(f"loading the pipeline {pipeline.device_config_path}",
                             exc) from None
        log.info("%s: pipeline set (cookie %#x)", self.name, pipeline.cookie)

    def _clear_replication(self) -> None:
        """Delete every multicast group and clone session. BMv2's P4Runtime server forgets
        them when a program is loaded, but its replication engine keeps them: written again
        after the load, each group would then copy every packet once per load (measured:
        three copies after two loads). A switch running no program has none."""
        if self.pipeline_cookie() is None:
            return
        held = self.read_replication()
        if held:
            self.write_replication("delete", held)
            log.info("%s: %d multicast groups and clone sessions deleted before the load",
                     self.name, len(held))

    # -- writes ----------------------------------------------------------------------------

    def write_request(self, req: Any) -> None:
        """Send one WriteRequest (device and election id filled in); WriteError says which
        updates failed and why."""
        req.device_id = self.address.device_id
        req.election_id.high = self._client.election_id[0]
        req.election_id.low = self._client.election_id[1]
        try:
            self._client.stub.Write(req, timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            errors = batch_errors(exc) if exc.code() == grpc.StatusCode.UNKNOWN else []
            if errors:
                text = "; ".join(f"update {i}: {code}: {msg}" for i, code, msg in errors)
                raise WriteError(f"{self.address}: {text}", errors) from None
            raise self._fail(f"write of {len(req.updates)} updates", exc) from None

    def write(self, kind: str, entries: Sequence[Entry]) -> None:
        """Insert, modify or delete entries, BATCH per Write request; errors name the entry."""
        def update(e: Entry) -> Any:
            try:
                return encode.update(self.schema, kind, e)
            except InputError as exc:
                raise SwitchError(f"{self.address}: cannot {kind} {exc}") from None

        self._write_batches(kind, entries, update, self.schema.describe)

    def write_replication(self, kind: str,
                          items: Sequence[MulticastGroup | CloneSession]) -> None:
        """Insert, modify or delete multicast groups and clone sessions, BATCH per request."""
        self._write_batches(kind, items, lambda item: encode.replication_update(kind, item), str)

    def _write_batches(self, kind: str, items: Sequence[T], update: Callable[[T], Any],
                       describe: Callable[[T], str]) -> None:
        """`items` as updates, BATCH per Write request; an error names the item it refused."""
        for start in range(0, len(items), BATCH):
            chunk = items[start:start + BATCH]
            req = p4runtime_pb2.WriteRequest()
            req.updates.extend(update(item) for item in chunk)
            try:
                self.write_request(req)
            except WriteError as exc:
                text = "; ".join(f"{kind} {describe(chunk[i])}: {code}: {msg}"
                                 for i, code, msg in exc.errors)
                raise WriteError(f"{self.address}: {text}", exc.errors) from None
            except SwitchError as exc:
                raise SwitchError(f"{exc} (first: {describe(chunk[0])})",
                                  code=exc.code) from None
            log.debug("%s: %s %d items", self.name, kind, len(chunk))

    # -- reads -----------------------------------------------------------------------------

    def _read(self, entities: Sequence[Any], what: str) -> Iterator[Any]:
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.address.device_id
        req.entities.extend(entities)
        try:
            for rep in self._client.stub.Read(req, timeout=RPC_TIMEOUT):
                yield from rep.entities
        except grpc.RpcError as exc:
            raise self._fail(f"reading {what}", exc) from None

    def read_entries(self, tables: tuple[str, ...], defaults: tuple[str, ...] = ()
                     ) -> list[Entry]:
        """All entries of `tables` and the default actions of `defaults`, as Entry values."""
        ents = encode.read_tables(self.schema, tables, defaults)
        return [encode.entry_from_proto(self.schema, e.table_entry)
                for e in self._read(ents, "table entries")]

    def read_replication(self) -> list[MulticastGroup | CloneSession]:
        """Every multicast group and clone session of the packet replication engine (group
        and session id 0 are P4Runtime's wildcards), groups first, each in id order."""
        groups, sessions = p4runtime_pb2.Entity(), p4runtime_pb2.Entity()
        groups.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        sessions.packet_replication_engine_entry.clone_session_entry.SetInParent()
        out = [encode.replication_from_proto(e)
               for e in self._read([groups, sessions], "multicast groups and clone sessions")]
        return sorted(out, key=lambda r: (isinstance(r, CloneSession), r.key))

    def count_entries(self) -> int:
        """Table entries of every table, whatever program runs (none loaded: 0)."""
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = 0  # wildcard: all tables
        try:
            return sum(1 for _ in self._read([ent], "table entries"))
        except SwitchError as exc:
            if exc.code == "FAILED_PRECONDITION":  # no pipeline
                return 0
            raise

    def read_counter_sets(self, names: Sequence[str], indices: Sequence[int] | None = None
                          ) -> dict[str, dict[int, tuple[int, int]]]:
        """Cells of each indexed counter named (those of `indices`, default every cell), in
        one Read: a reader that samples a switch's port counters every second (innet.view)
        asks once, and for its few ports rather than the whole arrays."""
        cells = [None] if indices is None else list(indices)
        ents = [encode.read_counter(self.schema, n, i) for n in names for i in cells]
        by_id = {encode.read_counter(self.schema, n, None).counter_entry.counter_id: n
                 for n in names}
        out: dict[str, dict[int, tuple[int, int]]] = {n: {} for n in names}
        for e in self._read(ents, f"counters {', '.join(names)}"):
            c = e.counter_entry
            out[by_id[c.counter_id]][int(c.index.index)] = (int(c.data.packet_count),
                                                             int(c.data.byte_count))
        return out

    def read_counters(self, name: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """{index: (packets, bytes)} of an indexed counter: one cell, or all (index None)."""
        ent = encode.read_counter(self.schema, name, index)
        out: dict[int, tuple[int, int]] = {}
        for e in self._read([ent], f"counter {name}"):
            c = e.counter_entry
            out[int(c.index.index)] = (int(c.data.packet_count), int(c.data.byte_count))
        return out
