"""What the live view shows of the network that `net up` holds, as JSON.

Reading the network (`read_network`, `read_switch`, `read_ports`) is kept apart from building
the view (`build_state`, `link_rates`, `changes`): the reads take `LiveNetwork.lock` (the job
monitor and the control socket move the same controller) and hold it as briefly as they can,
one switch at a time for the counters; the building is pure, so tests give it plain values.

Link rates are the switches' own port counters (innet.plan.program's C_PORT_OUT and
C_ECN_MARKED per egress port, C_PORT_IN per ingress port for what a host sends) sampled
about once a second and differenced into packets per second.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from innet.emulation.control import LiveNetwork
from innet.emulation.linkload import link_totals
from innet.errors import InputError, NetworkError
from innet.plan.intent import JobPlan
from innet.plan.program import C_ECN_MARKED, C_PORT_IN, C_PORT_OUT
from innet.topology import Topology

PORT_COUNTERS = (C_PORT_OUT, C_ECN_MARKED, C_PORT_IN)
EVENTS_KEPT = 200

# switch -> counter name -> port -> packets
Ports = dict[str, dict[str, dict[int, int]]]


@dataclass(frozen=True)
class PortSample:
    """Every switch's port counters at one moment (switches that could not be read left out)."""

    at: float
    packets: Ports


@dataclass(frozen=True)
class NetworkRead:
    """What the view needs of LiveNetwork, copied out under its lock."""

    switches: dict[str, dict[str, Any]]  # name -> the controller's view of it
    jobs: list[dict[str, Any]]           # the rows of `job list --json`
    plan: list[dict[str, Any]]


def levels(topo: Topology) -> dict[str, int]:
    """Each node's height for drawing: a switch's hops from the nearest host, hosts 0. The
    topology's destination (bt15's h0 on the root) counts as no source of hops and is drawn
    one level above its switch, so a tree reads bottom-up toward it. A switch no host
    reaches is put one above the highest level."""
    sources = [h for h in topo.hosts if h != topo.destination] or list(topo.hosts)
    level = dict.fromkeys(sources, 0)
    frontier = list(sources)
    while frontier:
        nxt = []
        for node in frontier:
            for _, far in topo.neighbours(node):
                if far.node not in level and far.node in topo.switches:
                    level[far.node] = level[node] + 1
                    nxt.append(far.node)
        frontier = nxt
    top = max(level.values(), default=0) + 1
    out = {n: level.get(n, top) for n in topo.switches}
    for h in topo.hosts:
        out[h] = level[h] if h in level else out[topo.host_switch(h)[0]] + 1
    return out


def plan_rows(jobs: tuple[JobPlan, ...]) -> list[dict[str, Any]]:
    """Per job of the intent: destination, workers, tree edges (child, parent) and blue set."""
    rows = []
    for jp in jobs:
        t = jp.tree
        rows.append({"job": jp.workload.job, "destination": jp.workload.destination,
                     "workers": list(jp.workload.workers),
                     "tree": [[t.ids[v], t.ids[int(t.parent[v])]] for v in range(1, t.n)],
                     "blue": list(jp.blue), "strategy": jp.plan.strategy, "k": jp.plan.k})
    return rows


def view_row(view: Any) -> dict[str, Any]:
    """A controller SwitchView in JSON."""
    return {"state": view.state, "synced": view.synced, "restores": view.restores,
            "error": view.error}


def read_network(live: LiveNetwork) -> NetworkRead:
    """The controller's view of the switches, the jobs and the plan: one short hold of the
    lock (no switch is asked anything here; job rows ask the jobs' processes for figures)."""
    with live.lock:
        views = live.cn.controller.views()
        jobs = live.jobs.listing()["jobs"]
        plan = plan_rows(live.intent.jobs)
    return NetworkRead({n: view_row(v) for n, v in views.items()}, jobs, plan)


def switch_ports(topo: Topology) -> dict[str, list[int]]:
    """The ports of each switch that a link uses: the only counter cells the view reads."""
    ports: dict[str, list[int]] = {s: [] for s in topo.switches}
    for link in topo.links:
        for end in (link.a, link.b):
            if end.node in ports and end.port is not None:
                ports[end.node].append(end.port)
    return {s: sorted(ps) for s, ps in ports.items()}


def read_ports(live: LiveNetwork, switches: list[str]) -> PortSample:
    """The port counters of every switch, its linked ports only, in one read per switch
    with the lock held; a switch that is down or restarting is left out (its rates read as
    unknown)."""
    packets: Ports = {}
    ports = switch_ports(live.topo)
    for s in switches:
        try:
            with live.lock:
                session = live.cn.controller.session(s)
                cells = session.read_counter_sets(PORT_COUNTERS, ports.get(s, []))
            packets[s] = {name: {i: p for i, (p, _) in cells[name].items()}
                          for name in PORT_COUNTERS}
        except NetworkError:
            continue
    return PortSample(time.time(), packets)


def read_switch(live: LiveNetwork, name: str) -> dict[str, Any] | None:
    """One switch's controller state, its entries in words and its non-zero counters; None
    when the network has no such switch."""
    with live.lock:
        views = live.cn.controller.views()
        if name not in views:
            return None
        out: dict[str, Any] = {"name": name, **view_row(views[name])}
        try:
            out["entries"] = live.table_lines(name)
            out["counters"] = live.counter_lines(name, [])
        except (NetworkError, InputError) as exc:
            out["entries"], out["counters"], out["read_error"] = [], [], str(exc)
    return out


def link_rates(topo: Topology, before: PortSample | None, after: PortSample | None
               ) -> list[dict[str, Any]]:
    """Every link with packets/s and CE marks/s each way between two samples (None where
    unknown: one sample only, a switch unread or restarted): what `linkload.link_totals`
    counts between them, per second."""
    if before is None or after is None or after.at <= before.at:
        return [{"a": link.a.node, "b": link.b.node, "pps_ab": None, "pps_ba": None,
                 "marks_ab": None, "marks_ba": None} for link in topo.links]
    dt = after.at - before.at
    rows = []
    for total in link_totals(topo, before.packets, after.packets):
        row: dict[str, Any] = {"a": total["a"], "b": total["b"]}
        for suffix in ("ab", "ba"):
            for out, key in (("pps", "packets"), ("marks", "marks")):
                n = total[f"{key}_{suffix}"]
                row[f"{out}_{suffix}"] = None if n is None else round(n / dt, 1)
        rows.append(row)
    return rows


def drawing(topo: Topology) -> dict[str, Any]:
    """What the page lays a topology out from: switches and hosts with their levels, the
    links as (a, b). The live state and a finished run's folder share it, so both pages
    draw one network the same way."""
    level = levels(topo)
    return {"topology": topo.name,
            "switches": [{"name": s, "level": level[s]} for s in topo.switches],
            "hosts": [{"name": h, "ip": topo.hosts[h].ip, "switch": topo.host_switch(h)[0],
                       "level": level[h]} for h in topo.hosts],
            "links": [{"a": link.a.node, "b": link.b.node} for link in topo.links]}


def build_state(topo: Topology, read: NetworkRead, links: list[dict[str, Any]],
                at: float) -> dict[str, Any]:
    """The `/api/state` document."""
    drawn = drawing(topo)
    blue: dict[str, list[int]] = {s: [] for s in topo.switches}
    for row in read.plan:
        for s in row["blue"]:
            blue.setdefault(s, []).append(row["job"])
    switches = [{**s, "aggregates_for": blue.get(s["name"], []),
                 **read.switches.get(s["name"], {"state": "unknown", "synced": -1,
                                                 "restores": 0, "error": None})}
                for s in drawn["switches"]]
    return {"topology": topo.name, "time": at, "switches": switches, "hosts": drawn["hosts"],
            "links": links, "jobs": read.jobs, "plan": read.plan}


def changes(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[str]:
    """What changed between two states, in words: switch states, blue sets, job states."""
    if old is None:
        return [f"watching {new['topology']}: {len(new['switches'])} switches, "
                f"{len(new['hosts'])} hosts"]
    out = []
    before = {s["name"]: s for s in old["switches"]}
    for s in new["switches"]:
        was = before.get(s["name"])
        if was is None:
            continue
        if was["state"] != s["state"]:
            out.append(f"switch {s['name']}: {was['state']} -> {s['state']}")
        if was["restores"] != s["restores"]:
            out.append(f"switch {s['name']}: program loaded again (restore {s['restores']})")
    blue_old = {p["job"]: p["blue"] for p in old["plan"]}
    for p in new["plan"]:
        if blue_old.get(p["job"]) != p["blue"]:
            out.append(f"job {p['job']}: blue {', '.join(p['blue']) or '(none)'}")
    gone = set(blue_old) - {p["job"] for p in new["plan"]}
    out += [f"job {j}: no longer planned" for j in sorted(gone)]
    jobs_old = {j["name"]: j["state"] for j in old["jobs"]}
    for j in new["jobs"]:
        if jobs_old.get(j["name"]) != j["state"]:
            out.append(f"job {j['name']}: {j['state']}" + (f" ({j['why']})" if j.get("why")
                                                         else ""))
    return out


@dataclass
class Watcher:
    """The latest state of one network and the log of what changed; `sample` is called from
    one thread at a time (the server serialises it)."""

    live: LiveNetwork
    previous: PortSample | None = None
    state: dict[str, Any] | None = None
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=EVENTS_KEPT))

    def sample(self) -> dict[str, Any]:
        """Read the network now, difference the counters against the last sample, log what
        changed; the state with the latest events."""
        started = time.monotonic()
        topo = self.live.topo
        read = read_network(self.live)
        ports = read_ports(self.live, list(read.switches))
        links = link_rates(topo, self.previous, ports)
        self.previous = ports
        state = build_state(topo, read, links, ports.at)
        self.events.extend({"time": ports.at, "text": t} for t in changes(self.state, state))
        self.state = state
        return {**state, "events": list(self.events),
                "sample_ms": round(1000 * (time.monotonic() - started), 1)}
