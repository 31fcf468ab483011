"""The skeleton every BMv2 experiment in Mininet shares: a run folder, the network, the
controller.

`innet run aggregation` and `innet run cassini` differ in what they plan, what traffic they
start and what they measure; what they share is here, once:
- `prepare_run_folder`: the run folder with logs/, the inputs copied in (a run can be read
  and repeated from its folder alone) and the plan as JSON, before anything starts;
- `controlled_network`: the topology's network started in Mininet with BMv2 switches that
  start empty, and the long-running controller on every local switch, which loads the program,
  keeps every switch in the intended state (a switch that restarts mid-run is restored, its
  queue settings too) and logs its events to logs/controller.log; the caller moves it to a new
  intent with `set_intent`. Everything is stopped on the way out, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innet.bmv2.local import switch_addresses
from innet.bmv2.thrift import run_cli
from innet.bmv2.tls import NetworkTls, make_network_tls
from innet.emulation.net import RunningNetwork, running_network
from innet.p4rt.client import ClientTls, SwitchAddress
from innet.p4rt.controller import DEFAULT_INTERVAL, Controller, SwitchTarget, events_to
from innet.p4rt.deploy import Replication, SwitchDeploy
from innet.p4rt.entities import Entry
from innet.p4rt.schema import Pipeline
from innet.plan.pipeline import load_pipeline
from innet.topology import Topology

SYNC_TIMEOUT = 60.0  # seconds for every switch to hold a new intent


def prepare_run_folder(out: Path, inputs: Mapping[str, str | Path], plan: Any) -> None:
    """`out`/logs, each input copied as `out`/NAME (e.g. {"topology.json": path}) and the
    plan written to `out`/plan.json (anything json can write; other values as strings)."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for name, path in inputs.items():
        shutil.copy(path, out / name)
    (out / "plan.json").write_text(json.dumps(plan, indent=1, default=str))


def local_addresses(topo: Topology, tls: ClientTls | None = None
                    ) -> dict[str, SwitchAddress]:
    """The switches this machine runs (remote ones are somebody else's)."""
    return {s: a for s, a in switch_addresses(topo, tls).items()
            if not topo.switches[s].remote}


@dataclass
class ControlledNetwork:
    """Inside `controlled_network`: the running network and its controller."""

    network: RunningNetwork
    controller: Controller
    addresses: dict[str, SwitchAddress]
    setup: dict[str, tuple[str, ...]]  # switch -> its set-up commands (queues)
    tls: NetworkTls | None = None  # the certificates, when the switches speak TLS

    def host(self, name: str) -> Any:
        return self.network.host(name)

    def targets(self, entries: Mapping[str, Sequence[Entry]],
                replication: Mapping[str, Sequence[Replication]] | None = None
                ) -> dict[str, SwitchTarget]:
        return _targets(self.addresses, entries, replication, self.setup)

    def set_intent(self, entries: Mapping[str, Sequence[Entry]],
                   replication: Mapping[str, Sequence[Replication]] | None = None,
                   timeout: float = SYNC_TIMEOUT) -> dict[str, SwitchDeploy]:
        """Move every switch to `entries` and `replication` (multicast groups); returns once
        each holds them (what each pass did)."""
        self.controller.set_targets(self.targets(entries, replication))
        return self.controller.wait_synced(timeout)


def _targets(addresses: Mapping[str, SwitchAddress], entries: Mapping[str, Sequence[Entry]],
             replication: Mapping[str, Sequence[Replication]] | None,
             setup: Mapping[str, tuple[str, ...]]) -> dict[str, SwitchTarget]:
    pre = replication or {}
    return {s: SwitchTarget(tuple(es), setup.get(s, ()), tuple(pre.get(s, ())))
            for s, es in entries.items() if s in addresses}


@contextlib.contextmanager
def controlled_network(topo: Topology, out: Path, entries: Mapping[str, Sequence[Entry]], *,
                       replication: Mapping[str, Sequence[Replication]] | None = None,
                       setup: Sequence[str] | Mapping[str, Sequence[str]] = (),
                       pcap: bool = False,
                       pipeline: Pipeline | None = None,
                       timeout: float = SYNC_TIMEOUT,
                       interval: float = DEFAULT_INTERVAL,
                       tls: bool = False) -> Iterator[ControlledNetwork]:
    """The network up, every switch holding `entries` and `replication` (and `setup` sent:
    the same commands to every switch, or per switch), until the body ends. `interval`: the
    controller's periodic check of every switch (a restart is seen at once, on the stream).
    `tls`: certificates made in `out`/tls, every switch requiring the controller's.

    The switches start without a program (as switches the controller did not start would):
    the controller's first pass loads it."""
    pipeline = pipeline or load_pipeline()
    local = [s for s, sw in topo.switches.items() if not sw.remote]
    certs = make_network_tls(out / "tls", local) if tls else None
    servers = {s: certs.server(s) for s in local} if certs else None
    with running_network(topo, out, switch_kind="bmv2", pcap=pcap, tls=servers) as net, \
            events_to(out / "logs" / "controller.log"):
        addresses = local_addresses(topo, certs.client() if certs else None)
        setup_t = ({sw: tuple(cmds) for sw, cmds in setup.items()}
                   if isinstance(setup, Mapping) else dict.fromkeys(addresses, tuple(setup)))
        initial = _targets(addresses, entries, replication, setup_t)
        with Controller(addresses, pipeline, initial, sideband=run_cli,
                        interval=interval) as ctl:
            ctl.wait_synced(timeout)
            yield ControlledNetwork(net, ctl, addresses, setup_t, certs)
