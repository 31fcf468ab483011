"""The long-running controller: every switch kept equal to the intent, whatever happens to it.

One thread per switch, each with its own P4Runtime session, so a switch that is down or slow
never holds up the others. Each thread runs the same small state machine (docs/controller.md):

    down --connect ok--> primary --stream ends--> down (reconnect with backoff)
                      \\-> standby <--higher election id arrives-- primary
                           standby --we are primary again (arbitration message)--> primary

As primary, it reconciles: on connecting, on becoming primary, when the intent changes and
every `interval` seconds. Reconciling is the one-shot deploy's `deploy_switch`: read the
pipeline cookie (missing or foreign: load the program), read the entries, write the
difference, multicast groups and clone sessions included; the target's set-up commands (BMv2
queue settings, through the side channel handed in) go out on every new session and after
every program load (they cannot be read back, and a restarted switch has lost them). As
standby it writes nothing and says so once; it watches the stream's arbitration messages and
takes over when the switch makes it primary (the primary's stream ended), or claims the switch
when the switch reports that nobody is primary.

Events (connected, program loaded, drift repaired, stream lost, role changed, unreachable)
are logged one line each on the "innet.controller" logger, tagged with the switch name.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from innet.errors import InputError
from innet.p4rt.client import (
    WRITER_ELECTION_ID,
    Arbitration,
    SwitchAddress,
    SwitchClient,
    SwitchError,
    WriteError,
    format_election,
)
from innet.p4rt.deploy import Replication, Sideband, SwitchDeploy, deploy_switch
from innet.p4rt.entities import Describe, Entry
from innet.p4rt.schema import Pipeline

log = logging.getLogger("innet.controller")

DEFAULT_INTERVAL = 2.0
BACKOFF_MIN = 0.1
BACKOFF_MAX = 1.0
TICK = 0.05  # how often a thread looks at its stream, the intent and the stop flag
# a standby's election id: below any writer's (high word 1), above any reader's (status)
BACKUP_ELECTION_ID = (0, 1 << 40)

DOWN, PRIMARY, STANDBY, STOPPED = "down", "primary", "standby", "stopped"
# refusals of a diff computed from a fresh read that only a P4Runtime server out of step with
# its own tables gives: an insert of a key it does not list, a change of one it does
DESYNC = ("ALREADY_EXISTS", "NOT_FOUND")


@dataclass(frozen=True, slots=True)
class SwitchTarget:
    """What one switch must hold: table entries (defaults included), multicast groups and
    clone sessions, and the side-channel commands that set it up (BMv2 queue settings)."""

    entries: tuple[Entry, ...]
    setup: tuple[str, ...] = ()
    replication: tuple[Replication, ...] = ()


@dataclass
class SwitchView:
    """A switch as its thread last saw it (a copy: safe to read from any thread)."""

    state: str = DOWN
    synced: int = -1                # generation of the intent last reconciled without error
    applied: SwitchDeploy | None = None  # the pass that first reached that generation
    last: SwitchDeploy | None = None     # the latest pass
    error: str | None = None
    restores: int = 0               # program loads after the first (a switch came back blank)
    primary_election_id: tuple[int, int] | None = None


@dataclass
class _Shared:
    lock: threading.Condition = field(default_factory=threading.Condition)
    generation: int = 0
    targets: dict[str, SwitchTarget] = field(default_factory=dict)
    views: dict[str, SwitchView] = field(default_factory=dict)
    sessions: dict[str, SwitchClient] = field(default_factory=dict)


class Controller:
    """Keeps `targets` on the switches at `addresses` until `stop()`. Use as a context manager.

    `election_id` (default: the writers' (1, 0)) decides mastership: a controller with a
    higher one takes a switch over, and this one stands by. `backup` gives a standby id below
    every writer's. `set_targets` moves the network to a new intent; `wait_synced` blocks until
    every switch holds it. `sideband` carries the targets' set-up commands and the register
    cleaning (innet.bmv2.thrift.run_cli for BMv2).
    """

    def __init__(self, addresses: Mapping[str, SwitchAddress], pipeline: Pipeline,
                 targets: Mapping[str, SwitchTarget], *, interval: float = DEFAULT_INTERVAL,
                 election_id: tuple[int, int] | None = None, backup: bool = False,
                 backoff_max: float = BACKOFF_MAX, sideband: Sideband | None = None) -> None:
        unknown = sorted(set(targets) - set(addresses))
        if unknown:
            raise SwitchError(f"no address for switch {unknown[0]!r}")
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.pipeline = pipeline
        self.sideband = sideband
        self.interval = interval
        self.backoff_max = max(backoff_max, BACKOFF_MIN)
        if election_id is None:
            election_id = BACKUP_ELECTION_ID if backup else WRITER_ELECTION_ID
        self.election_id = election_id
        self._shared = _Shared(targets=dict(targets),
                               views={n: SwitchView() for n in targets})
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=_Worker(self, addresses[n]).run,
                                          name=f"innet-ctl-{n}", daemon=True)
                         for n in targets]

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> Controller:
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Ask every thread to close its session and wait for them (at most `timeout`)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def __enter__(self) -> Controller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- intent ----------------------------------------------------------------------------

    def set_targets(self, targets: Mapping[str, SwitchTarget]) -> int:
        """A new intent for the same switches; returns its generation."""
        sh = self._shared
        with sh.lock:
            missing = sorted(set(sh.targets) ^ set(targets))
            if missing:
                raise SwitchError(f"the controller manages a fixed set of switches; "
                                  f"{missing[0]!r} differs")
            sh.targets = dict(targets)
            sh.generation += 1
            sh.lock.notify_all()
            return sh.generation

    def target(self, name: str) -> tuple[int, SwitchTarget]:
        sh = self._shared
        with sh.lock:
            return sh.generation, sh.targets[name]

    def wait_synced(self, timeout: float) -> dict[str, SwitchDeploy]:
        """Block until every switch holds the current intent; SwitchError names those that
        do not (with their state and last error) when `timeout` passes first."""
        sh = self._shared
        deadline = time.monotonic() + timeout
        with sh.lock:
            while True:
                late = [n for n, v in sh.views.items() if v.synced < sh.generation]
                if not late:
                    return {n: v.applied for n, v in sh.views.items()
                            if v.applied is not None}
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    why = "; ".join(f"{n}: {sh.views[n].state}"
                                    + (f" ({sh.views[n].error})" if sh.views[n].error else "")
                                    for n in late)
                    raise SwitchError(f"{len(late)} switches not in the intended state after "
                                      f"{timeout:g} s: {why}")
                sh.lock.wait(min(left, 0.5))

    def views(self) -> dict[str, SwitchView]:
        sh = self._shared
        with sh.lock:
            return {n: SwitchView(v.state, v.synced, v.applied, v.last, v.error, v.restores,
                                  v.primary_election_id) for n, v in sh.views.items()}

    def session(self, name: str) -> SwitchClient:
        """The switch's open session, for reads (counters); SwitchError when it is down."""
        sh = self._shared
        with sh.lock:
            client = sh.sessions.get(name)
            state = sh.views[name].state
        if client is None:
            raise SwitchError(f"switch {name}: no session (it is {state})")
        return client

    # -- used by the workers ---------------------------------------------------------------

    def _update(self, name: str, **changes: object) -> None:
        sh = self._shared
        with sh.lock:
            view = sh.views[name]
            for k, v in changes.items():
                setattr(view, k, v)
            sh.lock.notify_all()

    def _session(self, name: str, client: SwitchClient | None) -> None:
        sh = self._shared
        with sh.lock:
            if client is None:
                sh.sessions.pop(name, None)
            else:
                sh.sessions[name] = client


def event(name: str, message: str) -> None:
    log.info("%s: %s", name, message)


@contextlib.contextmanager
def events_to(path: Path) -> Iterator[None]:
    """Write the controller's event lines to a file while the body runs (experiments keep
    them in their run folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
    previous, propagated = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # the file is the place for them: p4runtime-shell may have given the root logger a
    # console handler (basicConfig), which would print every event over the run's output
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(previous)
        log.propagate = propagated
        handler.close()


def _summary(d: SwitchDeploy, describe: Describe, limit: int = 3) -> str:
    diff, pre = d.diff, d.replication
    parts = [f"+{len(diff.insert)} ~{len(diff.modify)} -{len(diff.delete)}"]
    shown = ([f"+ {describe(e)}" for e in diff.insert] + [f"~ {describe(n)}" for _, n in
                                                          diff.modify]
             + [f"- {describe(e)}" for e in diff.delete]
             + [f"+ {r}" for r in pre.insert] + [f"~ {r}" for r in pre.modify]
             + [f"- {r}" for r in pre.delete])
    if pre.writes:
        parts[0] += f" (replication +{len(pre.insert)} ~{len(pre.modify)} -{len(pre.delete)})"
    if shown and not d.pipeline:
        parts.append("; ".join(shown[:limit]) + (" ..." if len(shown) > limit else ""))
    out = ": ".join(parts)
    if d.cleaned_slots:
        out += f"; register slots {d.cleaned_slots[0]}..{d.cleaned_slots[-1]} zeroed"
    if d.note:
        out += f"; {d.note}"
    return out


@dataclass
class _Session:
    """What one session remembers between passes: the flags its transitions hand on."""

    client: SwitchClient
    fresh: bool = True        # new session (or primary again): push the set-up, say so once
    reload: bool = False      # the next pass loads the program even if the cookie is ours
    reloaded: bool = False    # a forced load was tried since the last good pass
    next_pass: float = 0.0    # monotonic time of the next periodic pass
    last_error: str | None = None  # the last failure reported, so a repeat is not logged


class _Worker:
    """The state machine of one switch (runs in its own thread), one method per transition:

    `run` connects, or `_back_off`s and retries; `_serve` watches one session until its
    stream ends (`_stream_lost`). On connecting (`_connected`) and on every arbitration message
    (`_arbitration`) it becomes primary or stands by (`_standby`). As primary, when a pass is
    `_due`, it reconciles (`_reconcile`), which ends in `_reconciled`, `_refused` (the switch
    refused a write: retry, or reload the program) or `_failed` (retry later, or
    `_demoted` when another controller took the switch).
    """

    def __init__(self, ctl: Controller, address: SwitchAddress) -> None:
        self.ctl = ctl
        self.address = address
        self.name = address.name
        self.loaded_once = False
        self.backoff = BACKOFF_MIN
        self.down_reason: str | None = None

    def run(self) -> None:
        ctl = self.ctl
        try:
            while not ctl.stopping:
                try:
                    client = SwitchClient(self.address, ctl.pipeline.schema,
                                          election_id=ctl.election_id, allow_backup=True)
                except SwitchError as exc:
                    self._back_off(exc)
                    continue
                self.backoff = BACKOFF_MIN
                self.down_reason = None
                ctl._session(self.name, client)
                try:
                    self._serve(client)
                except Exception as exc:  # a bug must not silently end this switch's care
                    log.exception("%s: internal error, reconnecting: %s", self.name, exc)
                    ctl._update(self.name, state=DOWN, error=f"internal error: {exc}")
                    ctl._stop.wait(ctl.backoff_max)
                finally:
                    ctl._session(self.name, None)
                    client.close()
        finally:
            ctl._update(self.name, state=STOPPED)

    def _back_off(self, exc: SwitchError) -> None:
        """No session: say so once per reason, wait, and double the wait up to the cap."""
        ctl = self.ctl
        reason = str(exc).removeprefix(f"{self.address}: ")
        if reason != self.down_reason:
            event(self.name, f"no session ({reason}); retrying every "
                             f"{BACKOFF_MIN:g}..{ctl.backoff_max:g} s")
            self.down_reason = reason
        ctl._update(self.name, state=DOWN, error=reason)
        ctl._stop.wait(self.backoff)
        self.backoff = min(self.backoff * 2, ctl.backoff_max)

    def _serve(self, client: SwitchClient) -> None:
        """One session: reconcile while primary, stand by otherwise, until the stream ends."""
        session = self._connected(client)
        while not self.ctl.stopping:
            self._arbitration(session)
            if not client.stream_alive():
                self._stream_lost(client)
                return
            if not client.primary:
                continue
            due = self._due(session)
            if due is not None:
                self._reconcile(session, *due)

    def _connected(self, client: SwitchClient) -> _Session:
        """A new session: primary or standby as the switch's first arbitration says."""
        role = "primary" if client.primary else "standby"
        event(self.name, f"connected to {client.address.grpc} as {role} (election id "
                         f"{format_election(client.election_id)})")
        if client.primary:
            self.ctl._update(self.name, state=PRIMARY, primary_election_id=client.election_id)
        else:
            self._standby(client, client.arbitration)
        return _Session(client)

    def _arbitration(self, session: _Session) -> None:
        """Wait a tick for arbitration messages and act on each; becoming primary makes the
        next pass run at once, as on a new session."""
        client = session.client
        arb = client.poll_arbitration(TICK)
        while arb is not None:
            if self._role_change(client, arb):
                session.fresh, session.next_pass = True, 0.0
            arb = client.poll_arbitration()

    def _stream_lost(self, client: SwitchClient) -> None:
        """The switch died, restarted or the network broke: the session is over, and `run`
        reconnects."""
        event(self.name, f"stream lost ({client.stream_end()}); reconnecting")
        self.ctl._update(self.name, state=DOWN, error=client.stream_end())

    def _due(self, session: _Session) -> tuple[int, SwitchTarget] | None:
        """The intent to reconcile now: the interval is up or the intent is newer than the
        one the switch holds; None otherwise."""
        gen, target = self.ctl.target(self.name)
        if time.monotonic() < session.next_pass and self.ctl.views()[self.name].synced >= gen:
            return None
        return gen, target

    def _reconcile(self, session: _Session, gen: int, target: SwitchTarget) -> None:
        """One pass of the one-shot deploy on this session, and the transition its outcome
        calls for."""
        ctl = self.ctl
        try:
            result = deploy_switch(session.client, ctl.pipeline, target.entries,
                                   replication=target.replication, setup=target.setup,
                                   sideband=ctl.sideband, always_setup=session.fresh,
                                   reload=session.reload)
        except WriteError as exc:
            self._refused(session, exc)
        except (SwitchError, InputError) as exc:  # or an intent the program cannot hold
            self._failed(session, exc)
        else:
            self._reconciled(session, gen, result)

    def _refused(self, session: _Session, exc: WriteError) -> None:
        """The switch refused a write. Refusals that only a P4Runtime server out of step with
        its own tables gives are cured by one program load; any other (or one a load did not
        cure) waits for the next interval, so the program is never reloaded in a loop."""
        desync = any(code in DESYNC for _, code, _ in exc.errors)
        if session.reload or session.reloaded or not desync:
            session.reloaded = session.reloaded or session.reload
            session.reload = False
            self._retry_later(session, str(exc))
            return
        # the diff came from a fresh read, yet the switch refuses it: its P4Runtime server
        # disagrees with its tables. Only a program load resets both.
        event(self.name, f"the switch refused the repair ({exc.errors[0][1]}: "
                         f"{exc.errors[0][2]}); its P4Runtime state disagrees "
                         "with its tables (changed outside P4Runtime?): "
                         "reloading the program and every entry")
        session.reload = True

    def _failed(self, session: _Session, exc: SwitchError | InputError) -> None:
        """The pass failed short of a refused write: another controller took the switch, the
        stream ended (the session loop reports it), or retry at the next interval."""
        if isinstance(exc, SwitchError) and exc.code == "PERMISSION_DENIED":
            self._demoted(session.client, exc)
        elif session.client.stream_alive():
            self._retry_later(session, str(exc))

    def _demoted(self, client: SwitchClient, exc: SwitchError) -> None:
        """A write refused for want of mastership: another controller is primary, whether or
        not its arbitration message has reached us yet, so stand by until one says we are."""
        client.primary = False
        event(self.name, "the switch refused a write (PERMISSION_DENIED): another "
                         "controller is primary; not writing")
        self.ctl._update(self.name, state=STANDBY, error=str(exc))

    def _retry_later(self, session: _Session, error: str) -> None:
        """Keep the error on the view, log it once, and try again after an interval."""
        if error != session.last_error:
            event(self.name, f"reconcile failed: {error}")
            session.last_error = error
        self.ctl._update(self.name, error=error)
        session.next_pass = time.monotonic() + self.ctl.interval

    def _reconciled(self, session: _Session, gen: int, result: SwitchDeploy) -> None:
        """The switch holds intent `gen`: say what it took, count a restore when it came back
        blank (a load that was neither the first nor forced), and schedule the next pass."""
        ctl = self.ctl
        session.last_error = None
        forced, session.reload, session.reloaded = session.reload, False, False
        self._announce(result, forced=forced, fresh=session.fresh)
        view = ctl.views()[self.name]
        restores = view.restores
        if result.pipeline and self.loaded_once and not forced:
            restores += 1
        self.loaded_once = self.loaded_once or result.pipeline or session.fresh
        session.fresh = False
        applied = result if view.synced < gen else view.applied
        ctl._update(self.name, state=PRIMARY, synced=gen, applied=applied, last=result,
                    error=None, restores=restores,
                    primary_election_id=session.client.election_id)
        session.next_pass = time.monotonic() + ctl.interval

    def _announce(self, result: SwitchDeploy, *, forced: bool, fresh: bool) -> None:
        """One event line for a good pass; a periodic pass that changed nothing says
        nothing."""
        ctl = self.ctl
        if result.pipeline:
            again = (" again (forced)" if forced else
                     " again: the switch came back without it" if self.loaded_once else "")
            event(self.name, f"program loaded{again}; cookie {ctl.pipeline.cookie:#x}; "
                             f"{_summary(result, ctl.pipeline.schema.describe)} entries"
                             + (", set-up sent" if result.setup_sent else ""))
        elif result.writes:
            event(self.name, f"repaired {_summary(result, ctl.pipeline.schema.describe)}")
        elif result.setup_sent:
            event(self.name, "in the intended state; set-up sent")
        elif fresh:
            event(self.name, "in the intended state")

    def _standby(self, client: SwitchClient, arb: Arbitration | None) -> None:
        who = arb.primary_election_id if arb is not None else None
        if who is None:
            event(self.name, "standby: the switch has no primary; claiming it")
            client.rearbitrate()
        else:
            event(self.name, f"standby: the controller with election id "
                             f"{format_election(who)} is primary; not writing")
        self.ctl._update(self.name, state=STANDBY, primary_election_id=who)

    def _role_change(self, client: SwitchClient, arb: Arbitration) -> bool:
        """Handle one arbitration message; True when we just became primary."""
        view = self.ctl.views()[self.name]
        if arb.primary:
            if view.state != PRIMARY:
                event(self.name, f"primary now (election id "
                                 f"{format_election(client.election_id)}): writing")
                self.ctl._update(self.name, state=PRIMARY,
                                 primary_election_id=client.election_id)
                return True
            return False
        if view.state != STANDBY or arb.primary_election_id != view.primary_election_id:
            self._standby(client, arb)
        return False
