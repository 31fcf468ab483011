"""Deploy = read what each switch holds, write only the difference.

Per switch: if it does not run the program (its pipeline cookie differs) the program is
loaded first; then its entries in the managed tables are read, compared with the intent, and
the difference goes out as at most three Write requests: deletes, then modifies, then inserts.
When the program's `managed` owns the packet replication engine, its multicast groups and
clone sessions are read and diffed by id the same way (new groups go out before the entries
that may name them, unwanted ones after the entries that named them are gone).
Deletes first free table space, and P4Runtime applies the updates of one batch in no fixed
order, so kinds never share a batch. An entry whose key is unchanged but whose action data
differs is one MODIFY, never a delete plus an insert: a new plan costs the fewest writes, and
the same plan twice costs none. The register slots of an aggregation entry that was deleted or
changed are zeroed afterwards by the commands the pipeline's `managed` hooks give (innet's:
innet.plan.registers), sent through the target's side channel.

What P4Runtime cannot say (BMv2's queue rates and depths, register cleaning) goes through a
`Sideband`: a function that takes a switch address and text commands, handed in by the layer
that knows the target (innet.bmv2.thrift.run_cli for BMv2). This layer only passes the
commands on.

Switches are deployed in parallel and independently: one that cannot be reached or refuses
is reported with its reason next to the results of the others, never instead of them. Deploy
between aggregation rounds: a slot
that holds half a round when its expected bitmap changes keeps waiting for the old one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from innet.errors import InputError
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.encode import normalise
from innet.p4rt.entities import CloneSession, Entry, EntryKey, MulticastGroup
from innet.p4rt.schema import Pipeline

Replication = MulticastGroup | CloneSession
# A target's channel for what P4Runtime cannot say: (switch address, text commands). It raises
# SwitchError when the switch refuses; what it returns is ignored.
Sideband = Callable[[SwitchAddress, Sequence[str]], object]


@dataclass(frozen=True, slots=True)
class Diff:
    insert: tuple[Entry, ...] = ()
    # (what the switch holds, what it gets); None: a default the switch did not report
    modify: tuple[tuple[Entry | None, Entry], ...] = ()
    delete: tuple[Entry, ...] = ()

    @property
    def writes(self) -> int:
        return len(self.insert) + len(self.modify) + len(self.delete)


def diff(current: Iterable[Entry], desired: Iterable[Entry]) -> Diff:
    """What turns `current` into `desired`: keys decide insert/delete, action data modify.

    Default actions are never inserted or deleted, only modified; one the intent does not
    mention is left alone.
    """
    have = {e.key: e for e in current}
    want: dict[EntryKey, Entry] = {}
    for e in desired:
        if e.key in want and want[e.key] != e:
            raise InputError(f"two different entries for one key: {want[e.key]} and {e}")
        want[e.key] = e
    insert = tuple(e for k, e in want.items() if k not in have and not e.default)
    modify = tuple((have.get(k), e) for k, e in want.items()
                   if (k in have and have[k] != e) or (e.default and k not in have))
    delete = tuple(e for k, e in have.items() if k not in want and not e.default)
    return Diff(insert, modify, delete)


def replication_key(item: Replication) -> tuple[str, int]:
    return ("group" if isinstance(item, MulticastGroup) else "session", item.key)


@dataclass(frozen=True, slots=True)
class ReplicationDiff:
    """Multicast groups and clone sessions to insert, to change (the new value) and delete."""

    insert: tuple[Replication, ...] = ()
    modify: tuple[Replication, ...] = ()
    delete: tuple[Replication, ...] = ()

    @property
    def writes(self) -> int:
        return len(self.insert) + len(self.modify) + len(self.delete)


def diff_replication(current: Iterable[Replication], desired: Iterable[Replication]
                     ) -> ReplicationDiff:
    """What turns the replication engine's `current` groups and sessions into `desired`."""
    have = {replication_key(r): r for r in current}
    want: dict[tuple[str, int], Replication] = {}
    for r in desired:
        k = replication_key(r)
        if k in want and want[k] != r:
            raise InputError(f"two different values for {k[0]} {k[1]}: {want[k]} and {r}")
        want[k] = r
    return ReplicationDiff(tuple(r for k, r in want.items() if k not in have),
                           tuple(r for k, r in want.items() if k in have and have[k] != r),
                           tuple(r for k, r in have.items() if k not in want))


@dataclass(frozen=True, slots=True)
class SwitchDeploy:
    """What deploying did (or, in a dry run, would do) on one switch."""

    switch: str
    address: str
    pipeline: bool  # the program was (or would be) loaded
    diff: Diff
    seconds: float
    cleaned_slots: tuple[int, ...] = ()  # aggregation slots returned to their power-on state
    note: str | None = None  # what could not be done (slots to clean but no side channel)
    replication: ReplicationDiff = ReplicationDiff()
    setup_sent: bool = False  # the set-up commands went out through the side channel

    @property
    def writes(self) -> int:
        return self.diff.writes + self.replication.writes

    @property
    def changed(self) -> bool:
        return self.pipeline or self.writes > 0


@dataclass(frozen=True)
class DeployResult:
    switches: dict[str, SwitchDeploy]
    seconds: float
    dry_run: bool = False
    failed: dict[str, str] = field(default_factory=dict)  # switch -> why, for those that failed

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def writes(self) -> int:
        return sum(s.writes for s in self.switches.values())

    @property
    def pipelines(self) -> int:
        return sum(s.pipeline for s in self.switches.values())


def deploy_switch(client: SwitchClient, pipeline: Pipeline, entries: Sequence[Entry], *,
                  replication: Sequence[Replication] = (), dry_run: bool = False,
                  setup: Sequence[str] = (), sideband: Sideband | None = None,
                  always_setup: bool = True, reload: bool = False) -> SwitchDeploy:
    """Bring one switch to `entries` and `replication` (program first when needed) with the
    fewest writes.

    `setup` are side-channel commands that cannot be read back (BMv2's queue settings), so
    they go out when `always_setup` (one-shot deploy) or when the program was just loaded (the
    long-running controller, which also sends them on every new session: a restarted switch
    has lost them). `reload` loads the program even when the cookie matches: the way back when
    the switch's P4Runtime server no longer agrees with its own tables (someone changed them
    behind its back, e.g. through BMv2's thrift CLI)."""
    t0 = time.perf_counter()
    desired = [normalise(pipeline.schema, e) for e in entries]
    owns_pre = pipeline.managed.replication
    if replication and not owns_pre:
        raise InputError("the intent has multicast groups or clone sessions, but the program's "
                         "managed set does not own the replication engine")
    load = reload or client.pipeline_cookie() != pipeline.cookie
    current: list[Entry] = []
    current_pre: list[Replication] = []
    if not (load and dry_run):  # a load would wipe the switch's state
        if load:
            client.set_pipeline(pipeline)
        current = client.read_entries(pipeline.managed.tables,
                                       pipeline.managed.default_tables)
        if owns_pre:
            current_pre = client.read_replication()
    d = diff(current, desired)
    pre = diff_replication(current_pre, replication) if owns_pre else ReplicationDiff()
    sent = False
    if not dry_run:
        _write_difference(client, d, pre, pipeline.managed.insert_first)
        if setup and (always_setup or load):
            if sideband is None:
                raise SwitchError(f"{client.address}: {len(setup)} set-up commands to send but "
                                  "no side channel to the switch")
            sideband(client.address, setup)
            sent = True
    slots = () if load else pipeline.managed.stale_slots(
        [*d.delete, *(old for old, _ in d.modify if old)])
    note = None
    if slots and not dry_run:
        note = _clean_slots(client, pipeline, slots, sideband)
    return SwitchDeploy(client.name, client.address.grpc, load, d, time.perf_counter() - t0,
                        slots if note is None else (), note, pre, sent)


def _write_difference(client: SwitchClient, d: Diff, pre: ReplicationDiff,
                      insert_first: Sequence[str] = ()) -> None:
    """Write a switch's difference one kind per batch (P4Runtime applies a batch's updates
    in no fixed order): new groups and sessions before the entries that may name them,
    deletes before modifies and inserts (they free table space), new entries of the
    `insert_first` tables before the other inserts (they decide what the switch does with
    the packets the others let in), unwanted groups and sessions last, once no entry names
    them."""
    if pre.insert:
        client.write_replication("insert", pre.insert)
    if pre.modify:
        client.write_replication("modify", pre.modify)
    if d.delete:
        client.write("delete", d.delete)
    if d.modify:
        client.write("modify", [new for _, new in d.modify])
    first = [e for e in d.insert if e.table in insert_first]
    rest = [e for e in d.insert if e.table not in insert_first]
    if first:
        client.write("insert", first)
    if rest:
        client.write("insert", rest)
    if pre.delete:
        client.write_replication("delete", pre.delete)


def _clean_slots(client: SwitchClient, pipeline: Pipeline, slots: Sequence[int],
                 sideband: Sideband | None) -> str | None:
    """Zero the register slots that deleted or changed entries leave stale. Registers are
    written through the side channel, not P4Runtime: without one, the note that says so."""
    if sideband is None or client.address.thrift_port is None:
        return f"slots {slots[0]}..{slots[-1]} not cleaned: no side channel to the switch"
    sideband(client.address, pipeline.managed.clean_commands(pipeline.device_config, slots))
    return None


T = TypeVar("T")


def _each(names: Sequence[str], fn: Callable[[str], T]) -> dict[str, T | SwitchError]:
    """fn on every switch in parallel; every call finishes. A switch's SwitchError is its
    result (the others' results stand); any other exception is a bug and is raised."""
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(names))) as pool:
        futures = {n: pool.submit(fn, n) for n in names}
    out: dict[str, T | SwitchError] = {}
    for n, f in futures.items():
        exc = f.exception()
        if isinstance(exc, SwitchError):
            out[n] = exc
        elif exc is not None:
            raise exc
        else:
            out[n] = f.result()
    return out


def deploy(addresses: Mapping[str, SwitchAddress], entries: Mapping[str, Sequence[Entry]],
           pipeline: Pipeline, *, dry_run: bool = False,
           clients: Mapping[str, SwitchClient] | None = None,
           replication: Mapping[str, Sequence[Replication]] | None = None,
           setup: Sequence[str] = (), sideband: Sideband | None = None) -> DeployResult:
    """Deploy `entries` and `replication` (per switch) to the switches at `addresses`, all in
    parallel.

    Every switch gets a result: its SwitchDeploy, or in `failed` the reason it could not be
    brought to the intent. With `clients` (open sessions) no connection is opened or closed
    here; otherwise each session is closed on every path. `setup` goes to every switch through
    `sideband`.
    """
    unknown = sorted(set(entries) - set(addresses))
    if unknown:
        raise InputError(f"no address for switch {unknown[0]!r}")
    t0 = time.perf_counter()

    pre = replication or {}

    def one(name: str) -> SwitchDeploy:
        def on(client: SwitchClient) -> SwitchDeploy:
            return deploy_switch(client, pipeline, entries[name],
                                 replication=pre.get(name, ()), dry_run=dry_run,
                                 setup=setup, sideband=sideband)

        if clients is not None and name in clients:
            return on(clients[name])
        with SwitchClient(addresses[name], pipeline.schema, writer=not dry_run) as c:
            return on(c)

    done = _each(list(entries), one)
    ok = {n: r for n, r in done.items() if not isinstance(r, SwitchError)}
    failed = {n: str(r) for n, r in done.items() if isinstance(r, SwitchError)}
    return DeployResult(ok, time.perf_counter() - t0, dry_run, failed)


def from_empty(addresses: Mapping[str, SwitchAddress], entries: Mapping[str, Sequence[Entry]],
               pipeline: Pipeline,
               replication: Mapping[str, Sequence[Replication]] | None = None) -> DeployResult:
    """What `deploy` would do to switches that hold nothing yet, without contacting any: the
    program loaded on each, every entry inserted. A dry run for a network that is not up
    (a notebook, a plan reviewed before the switches start)."""
    unknown = sorted(set(entries) - set(addresses))
    if unknown:
        raise InputError(f"no address for switch {unknown[0]!r}")
    pre = replication or {}
    return DeployResult({s: SwitchDeploy(s, addresses[s].grpc, True,
                                         diff([], [normalise(pipeline.schema, e) for e in es]),
                                         0.0, replication=diff_replication([], pre.get(s, ())))
                         for s, es in entries.items()}, 0.0, True)


# ---------------------------------------------------------------------------------------------
# Reading state back


@dataclass(frozen=True)
class SwitchStatus:
    switch: str
    address: str
    runs_ours: bool  # its pipeline cookie is ours
    entries: tuple[Entry, ...]
    counters: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    error: str | None = None  # why it could not be read
    replication: tuple[Replication, ...] = ()


def read_status(client: SwitchClient, pipeline: Pipeline) -> SwitchStatus:
    """Entries of the managed tables and every cell of our counters (when it runs our program)."""
    ours = client.pipeline_cookie() == pipeline.cookie
    if not ours:
        return SwitchStatus(client.name, client.address.grpc, False, ())
    entries = tuple(client.read_entries(pipeline.managed.tables,
                                       pipeline.managed.default_tables))
    counters = {name: client.read_counters(name) for name in pipeline.managed.counters}
    pre = tuple(client.read_replication()) if pipeline.managed.replication else ()
    return SwitchStatus(client.name, client.address.grpc, True, entries, counters,
                        replication=pre)


def status(addresses: Mapping[str, SwitchAddress], pipeline: Pipeline) -> dict[str, SwitchStatus]:
    """Every switch's status; one that cannot be read carries the reason instead."""
    def one(name: str) -> SwitchStatus:
        try:
            with SwitchClient(addresses[name], pipeline.schema, writer=False) as c:
                return read_status(c, pipeline)
        except SwitchError as exc:
            return SwitchStatus(name, addresses[name].grpc, False, (), error=str(exc))

    return {n: r for n, r in _each(list(addresses), one).items()
            if isinstance(r, SwitchStatus)}


__all__ = ["DeployResult", "Diff", "Replication", "ReplicationDiff", "Sideband", "SwitchDeploy",
           "SwitchError", "SwitchStatus", "deploy", "deploy_switch", "diff", "diff_replication",
           "read_status", "status"]
