"""A network that is up, as the live view reads it, without switches: LiveNetwork over a
stand-in controller that holds each switch's entries and answers counter reads with the
packets the test sets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from innet.emulation.control import LiveNetwork
from innet.p4rt.client import SwitchError
from innet.p4rt.controller import PRIMARY, SwitchView
from innet.p4rt.deploy import SwitchDeploy, diff, diff_replication
from innet.p4rt.entities import Entry
from innet.plan.cluster import Admission
from innet.plan.intent import IntentOptions, build_intent
from innet.plan.program import COUNTERS
from innet.topology import Topology, load_topology

ROOT = Path(__file__).resolve().parents[2]
BT15 = ROOT / "topologies" / "bt15.json"
WORKLOAD = str(ROOT / "examples" / "workload-bt15.json")


@dataclass
class FakeSession:
    switch: str
    net: FakeControlled

    def read_counters(self, name: str) -> dict[int, tuple[int, int]]:
        return {port: (p, 100 * p) for port, p in
                self.net.packets.get(self.switch, {}).get(name, {}).items()}

    def read_counter_sets(self, names: Any, indices: Any = None
                          ) -> dict[str, dict[int, tuple[int, int]]]:
        return {n: {i: c for i, c in self.read_counters(n).items()
                    if indices is None or i in indices} for n in names}

    def read_entries(self, tables: Any, defaults: Any) -> tuple[Entry, ...]:
        return self.net.entries.get(self.switch, ())


@dataclass
class FakeController:
    net: FakeControlled
    pipeline: Any = field(default_factory=lambda: SimpleNamespace(
        schema=SimpleNamespace(describe=lambda e: f"entry {e.table}"),
        managed=SimpleNamespace(tables=(), default_tables=(), replication=False,
                                counters=COUNTERS)))

    def views(self) -> dict[str, SwitchView]:
        return {s: SwitchView(state=self.net.states.get(s, PRIMARY), synced=1)
                for s in self.net.addresses}

    def session(self, name: str) -> FakeSession:
        if self.net.states.get(name, PRIMARY) != PRIMARY:
            raise SwitchError(f"switch {name}: no session")
        return FakeSession(name, self.net)


class FakeControlled:
    """The ControlledNetwork's parts the view and LiveNetwork use: the switches, their
    entries (set_intent writes only the difference) and their counters."""

    def __init__(self, topo: Topology, entries: Mapping[str, Sequence[Entry]]) -> None:
        self.addresses = dict.fromkeys(topo.switches)
        self.entries = {s: tuple(es) for s, es in entries.items()}
        self.packets: dict[str, dict[str, dict[int, int]]] = {}
        self.states: dict[str, str] = {}
        self.controller = FakeController(self)

    def set_intent(self, entries: Mapping[str, Sequence[Entry]],
                   replication: Mapping[str, Sequence[Any]]) -> dict[str, SwitchDeploy]:
        out = {s: SwitchDeploy(s, "fake", False, diff(self.entries.get(s, ()), entries[s]), 0.0,
                               replication=diff_replication((), ())) for s in entries}
        self.entries = {s: tuple(es) for s, es in entries.items()}
        return out


class Running:
    """A job's processes that run until the test ends."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission

    def outcome(self) -> tuple[str, str | None] | None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"iterations_done": 3, "mean_iteration_ms": 120.0, "marks": 5,
                "retransmissions": 0, "sums_exact": True}

    def stop(self) -> None:
        pass


def fake_up(topo_file: Path = BT15, options: IntentOptions | None = None) -> LiveNetwork:
    """A LiveNetwork over FakeControlled, as `net up` makes it (jobs launched as Running)."""
    topo = load_topology(topo_file)
    options = options or IntentOptions()
    intent = build_intent(options, topo)
    cn = FakeControlled(topo, intent.entries())
    return LiveNetwork(topo, cn, intent, options, launch=Running)  # type: ignore[arg-type]
