"""What a finished run shows on its graph (`innet view RUN_FOLDER`): one view per strategy,
policy or arm of its results.json, each with its blue switches, its jobs and what the
results recorded per link, to draw on the topology the run copied into its folder.

Three commands write run folders, told apart by the shape of their results.json:

- `innet run aggregation`: a list of `StrategyRun.to_dict()`. Its `link_packets[s]` (first
  transmissions) and `link_repeats[s]` (sent again) count the egress port of switch s toward
  the jobs' destination (`aggregation.uplink_ports`: the routes' next hop, `next_hops`),
  i.e. its link to its parent in the tree, in the direction switch -> parent. Every job of a
  run streams to one destination (plan.json's `workloads`; the topology's own without
  `--workload`), so the parents follow from the folder alone.
- `innet run cluster`: `{"policies": {policy: PolicyRun.to_dict()}, "scale"}`: per job its
  hosts, blue switches and shift, and CE marks per directed link; no packets per link.
- `innet run cassini`: `CassiniExperiment.to_dict()`: per arm its placement and shifts, the
  links its jobs share and, per link, the packets and CE marks the switches counted each way
  (`runs[].links`, innet.emulation.linkload; folders written before it have none: said so).

What a run did not record is said in words ("not recorded: ..."), never made up. Nothing
here reads a file: `innet.view.folder` reads, these functions take the parsed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from innet.errors import InputError
from innet.routing import next_hops
from innet.topology import Topology

Row = dict[str, Any]


def results_kind(results: Any) -> str | None:
    """Which command wrote `results`: "aggregation", "cluster", "cassini", or None."""
    if isinstance(results, list) and results and all(
            isinstance(r, dict) and "strategy" in r for r in results):
        return "aggregation"
    if isinstance(results, dict) and isinstance(results.get("policies"), dict):
        return "cluster"
    if isinstance(results, dict) and isinstance(results.get("runs"), list) and isinstance(
            results.get("plans"), dict):
        return "cassini"
    return None


def link_ends(topo: Topology) -> dict[tuple[str, str], tuple[str, str]]:
    """(x, y) either way -> the topology link's (a, b), as the page names its edges."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for link in topo.links:
        a, b = link.a.node, link.b.node
        out[(a, b)] = out[(b, a)] = (a, b)
    return out


def uplinks(topo: Topology, destination: str) -> dict[str, str]:
    """Each switch's parent toward `destination`: the far end of the port that
    `aggregation.uplink_ports` reads the counters of (a switch, or the destination host
    above the top switch)."""
    return {s: hop.neighbour for s, hop in next_hops(topo, destination).items()}


def _counts(row: Mapping[str, Any], name: str, where: str) -> dict[str, int]:
    value = row.get(name)
    if not isinstance(value, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in value.values()):
        raise InputError(f"{where}: {name} is not a switch -> packets object")
    return value


def _destination(topo: Topology, plan: Any) -> tuple[str | None, str | None]:
    """The aggregation run's destination, and a note when plan.json did not give it."""
    try:
        dest = plan["workloads"][0]["destination"]
    except (KeyError, IndexError, TypeError):
        dest = None
    if isinstance(dest, str) and dest in topo.hosts:
        return dest, None
    if topo.destination is not None:
        return topo.destination, ("plan.json does not name the jobs' destination: the "
                                  f"topology's ({topo.destination}) is taken")
    return None, None


def aggregation_loads(topo: Topology, row: Mapping[str, Any], destination: str,
                      where: str) -> tuple[list[Row], list[str]]:
    """Per uplink of the strategy's trees, the packets its switch sent toward its parent
    during the stream (first + sent again); notes for what could not be placed."""
    first = _counts(row, "link_packets", where)
    notes = []
    if "link_repeats" in row:
        repeats = _counts(row, "link_repeats", where)
    else:
        repeats = {}
        notes.append("link_repeats not recorded: loads are first transmissions only")
    parent = uplinks(topo, destination)
    ends = link_ends(topo)
    loads = []
    for s in sorted(first):
        if s not in parent or (s, parent[s]) not in ends:
            notes.append(f"switch {s} of link_packets has no uplink toward {destination} "
                         "in topology.json: not drawn")
            continue
        a, b = ends[(s, parent[s])]
        again = repeats.get(s, 0)
        loads.append({"a": a, "b": b, "from": s, "to": parent[s], "first": first[s],
                      "repeats": again, "packets": first[s] + again})
    return loads, notes


def aggregation_views(topo: Topology, results: list[Any], plan: Any) -> list[Row]:
    """One view per strategy of `innet run aggregation`."""
    destination, note = _destination(topo, plan)
    plans = plan.get("plans", {}) if isinstance(plan, dict) else {}
    hosts = {w.get("job"): [w.get("destination"), *w.get("workers", [])]
             for w in (plan.get("workloads", []) if isinstance(plan, dict) else [])
             if isinstance(w, dict)}
    views = []
    for i, row in enumerate(results):
        label = str(row.get("strategy", f"strategy {i + 1}"))
        where = f"results.json: strategy {label}"
        jobs = [{"name": f"job {p.get('job')}", "hosts": hosts.get(p.get("job"), []),
                 "blue": list(p.get("blue", [])), "shift_ms": None}
                for p in plans.get(label, []) if isinstance(p, dict)]
        view: Row = {"label": label, "kind": "aggregation",
                     "blue": sorted(row.get("blue", [])), "jobs": jobs, "marks": None,
                     "shared": [], "notes": [note] if note else [],
                     "facts": _aggregation_facts(row)}
        if destination is None:
            view["loads"] = None
            view["notes"].append("loads not recorded: neither plan.json nor topology.json "
                                 "names the destination the uplinks lead to")
        else:
            try:
                view["loads"], notes = aggregation_loads(topo, row, destination, where)
                view["notes"] += notes
            except InputError as exc:
                view["loads"] = None
                view["notes"].append(f"loads not recorded: {exc}")
        views.append(view)
    return views


def _aggregation_facts(row: Mapping[str, Any]) -> list[str]:
    facts = []
    for key, text in (("predicted_cost", "predicted phi"), ("measured_cost", "measured cost"),
                      ("total_cost", "with what was sent again"),
                      ("retransmissions", "retransmissions"), ("duration_s", "duration s"),
                      ("sums_exact", "sums exact")):
        if key in row:
            value = row[key]
            facts.append(f"{text}: {round(value, 4) if isinstance(value, float) else value}")
    return facts


def directed_rows(topo: Topology, counts: Mapping[str, Any], field: str) -> list[Row]:
    """{"x->y": n} as rows on the topology's links (names it does not have are left out)."""
    ends = link_ends(topo)
    rows = []
    for name, n in sorted(counts.items()):
        x, _, y = name.partition("->")
        if (x, y) in ends:
            a, b = ends[(x, y)]
            rows.append({"a": a, "b": b, "from": x, "to": y, field: n})
    return rows


def cluster_views(topo: Topology, results: Mapping[str, Any]) -> list[Row]:
    """One view per policy of `innet run cluster`: its jobs (hosts, blue, shift) and the
    CE marks per link; packets per link are not in its results."""
    views = []
    for policy, run in results["policies"].items():
        rows = [j for j in run.get("jobs", []) if isinstance(j, dict)]
        jobs: list[Row] = [{"name": j.get("name"), "hosts": list(j.get("hosts", [])),
                            "blue": list(j.get("blue", [])), "shift_ms": j.get("shift_ms")}
                           for j in rows]
        marks = run.get("link_marks")
        views.append({
            "label": policy, "kind": "cluster",
            "blue": sorted({s for j in jobs for s in j["blue"]}), "jobs": jobs,
            "loads": None,
            "marks": directed_rows(topo, marks, "marks") if isinstance(marks, dict) else None,
            "shared": [],
            "notes": ["packets per link not recorded: run cluster keeps CE marks per link "
                      "(drawn) and each job's measured cost"],
            "facts": [f"{k}: {run[k]}" for k in ("mean_jct_s", "mean_iteration_ms", "marks",
                                                  "measured_cost", "predicted_cost",
                                                  "sums_exact") if k in run]})
    return views


def cassini_link_rows(links: Any) -> tuple[list[Row], list[Row]]:
    """An arm's `links` (`linkload.link_totals` rows) as the page's loads and marks: one row
    per link, both directions added, each way kept beside (`packets_ab`, ...); links that
    carried nothing left out. A direction not read (None) counts as nothing."""
    loads, marks = [], []
    for row in links:
        a, b = row["a"], row["b"]
        ab, ba = row.get("packets_ab") or 0, row.get("packets_ba") or 0
        mab, mba = row.get("marks_ab") or 0, row.get("marks_ba") or 0
        if ab + ba:
            loads.append({"a": a, "b": b, "packets": ab + ba, "packets_ab": ab,
                          "packets_ba": ba})
        if mab + mba:
            marks.append({"a": a, "b": b, "marks": mab + mba, "marks_ab": mab,
                          "marks_ba": mba})
    return loads, marks


def cassini_views(topo: Topology, results: Mapping[str, Any]) -> list[Row]:
    """One view per arm of `innet run cassini`: placement, shifts, shared links and each
    link's packets and CE marks as its switches counted them."""
    runs = {r.get("label"): r for r in results["runs"] if isinstance(r, dict)}
    views = []
    for arm, plan in results["plans"].items():
        run = runs.get(arm, {})
        shifts = plan.get("shifts_ms", {})
        jobs = [{"name": j, "hosts": list(hosts), "blue": [], "shift_ms": shifts.get(j)}
                for j, hosts in plan.get("placement", {}).items()]
        notes = ["no blue switch: run cassini aggregates nothing in the network"]
        loads: list[Row] | None = None
        marks: list[Row] | None = None
        if isinstance(run.get("links"), list):
            loads, marks = cassini_link_rows(run["links"])
        else:
            total = run.get("switch_marks")
            notes.append("per-link loads not recorded (a folder of an earlier innet): only the "
                         f"switches' total of CE marks ({'none' if total is None else total})")
        views.append({
            "label": arm, "kind": "cassini", "blue": [], "jobs": jobs, "loads": loads,
            "marks": marks,
            "shared": directed_rows(topo, dict.fromkeys(plan.get("shared_links", []), True),
                                    "shared"),
            "notes": notes,
            "facts": [f"{k}: {run[k]}" for k in ("ce_total", "switch_marks", "mean_ms",
                                                  "p99_ms", "unacked") if k in run]})
    return views


def run_views(topo: Topology, results: Any, plan: Any) -> tuple[list[Row], str | None]:
    """Every view of a run's results, or none and why."""
    kind = results_kind(results)
    try:
        if kind == "aggregation":
            return aggregation_views(topo, results, plan), None
        if kind == "cluster":
            return cluster_views(topo, results), None
        if kind == "cassini":
            return cassini_views(topo, results), None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return [], f"results.json could not be read as run {kind}'s: {exc!r}"
    return [], ("not recorded: results.json is absent or not one that run aggregation, "
                "run cluster or run cassini writes")
