"""`innet run aggregation`: SOAR's plans deployed on BMv2 in Mininet, measured against phi.

One network is started; each strategy's plan is deployed in turn (the controller writes only
the difference from the previous plan), the workers send their vectors for R rounds, the
destination checks every round's sum exactly, and the switches' per-port counters give the
messages on every uplink. Measured cost = sum over the tree's uplinks of packets per round
times 1/rate: it must equal the phi SOAR predicted, for every strategy.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.aggpacket import VECTOR_LEN, wrap_sum
from controller.emulation.net import running_network
from controller.errors import InputError
from controller.p4rt.intent import (
    JobPlan,
    Workload,
    load_workload,
    network_intent,
    plan_job,
)
from controller.routing import next_hops
from controller.topology import Topology, load_topology

SYNC_TIMEOUT = 60.0  # seconds for every switch to hold a new plan
DEFAULT_STRATEGIES = ("soar", "top", "max", "level", "random", "all-red", "all-blue")


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    k: int
    blue: tuple[str, ...]
    rounds: int
    predicted_cost: float
    measured_cost: float
    sums_exact: bool
    writes: int
    link_packets: dict[str, int]  # switch -> packets on its uplink over all rounds
    predicted_msgs: dict[str, int]  # switch -> messages per round predicted

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def default_workload(topo: Topology) -> Workload:
    """Every host but the destination is a worker (job 1)."""
    if topo.destination is None:
        raise InputError("the topology names no aggregation destination "
                         '(add "aggregation": {"destination": HOST}) and no --workload was '
                         "given", source=topo.source)
    workers = tuple(h for h in topo.hosts if h != topo.destination)
    return Workload(1, topo.destination, workers)


def worker_values(seed: int, worker: int) -> list[int]:
    """A worker's vector: signed 32-bit values, large enough that wraparound happens."""
    rng = random.Random(seed * 1_000_003 + worker)
    return [rng.randint(-(2**31), 2**31 - 1) for _ in range(VECTOR_LEN)]


def uplink_ports(topo: Topology, jp: JobPlan) -> dict[str, int]:
    """Each tree switch's port toward the destination (its uplink in SOAR's tree)."""
    hops = next_hops(topo, jp.workload.destination)
    return {s: hops[s].port for s in jp.tree.ids[1:]}


def measured_cost(jp: JobPlan, packets: dict[str, int], rounds: int) -> float:
    tree = jp.tree
    w = tree.weight
    return float(sum(packets[tree.ids[v]] / rounds * w[v] for v in range(1, tree.n)))


def _counter_out(session: Callable[[str], Any], switches: Iterable[str]
                 ) -> dict[str, dict[int, int]]:
    """Egress packets per port of every switch, read through `session(switch)` (the
    controller's current session: it changes when a switch reconnects)."""
    return {s: {port: pkts for port, (pkts, _) in session(s).read_counters("port_out").items()}
            for s in switches}


def run_aggregation(topology_path: str, out: Path, *, strategies: tuple[str, ...] =
                    DEFAULT_STRATEGIES, k: int = 4, rounds: int = 5,
                    workload_path: str | None = None, seed: int = 0, pcap: bool = False,
                    progress: bool = True,
                    before_plan: Callable[[Any, str], None] | None = None
                    ) -> list[StrategyRun]:
    """Run every strategy's plan in one network. `before_plan(network, strategy)` runs before
    each plan goes out (the tests restart a switch there)."""
    from tqdm import tqdm

    from controller.p4rt.client import switch_addresses
    from controller.p4rt.controller import Controller, SwitchTarget, events_to
    from controller.p4rt.schema import load_pipeline

    topo = load_topology(topology_path)
    workload = load_workload(workload_path, topo) if workload_path else default_workload(topo)
    if rounds < 1:
        raise InputError(f"--rounds must be >= 1, got {rounds}")
    plans = {s: plan_job(topo, workload, s, k, seed=seed) for s in strategies}
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(topology_path, out / "topology.json")
    (out / "plan.json").write_text(json.dumps({
        "workload": {"job": workload.job, "destination": workload.destination,
                     "workers": list(workload.workers)},
        "k": k,
        "plans": {s: {"blue": list(jp.blue), "predicted_cost": jp.plan.cost,
                      "messages": jp.msgs} for s, jp in plans.items()},
    }, indent=1))
    pipeline = load_pipeline()
    dest_ip = topo.hosts[workload.destination].ip
    values = {i: worker_values(seed, i) for i in range(len(workload.workers))}
    expected_sum = list(wrap_sum(values.values()))
    results: list[StrategyRun] = []
    # switches start empty (--no-p4): the first deploy installs the pipeline, as it would on
    # switches the controller did not start
    # the long-running controller keeps every switch on the current plan (a switch that
    # restarts mid-run is restored); each plan change waits until every switch holds it
    def targets(jp: JobPlan) -> dict[str, SwitchTarget]:
        return {s: SwitchTarget(es) for s, es in network_intent(topo, [jp]).entries().items()
                if s in addresses}

    with running_network(topo, out, switch_kind="bmv2", pcap=pcap) as run, \
            events_to(out / "logs" / "controller.log"):
        addresses = {s: a for s, a in switch_addresses(topo).items() if not
                     topo.switches[s].remote}
        first = next(iter(plans.values()))
        with Controller(addresses, pipeline, targets(first)) as ctl:
            bar = tqdm(list(plans.items()), desc="strategies", unit="plan",
                       disable=not progress)
            for first_round, (name, jp) in zip(range(0, 10_000, rounds), bar, strict=False):
                bar.set_postfix_str(name)
                if before_plan is not None:
                    before_plan(run, name)
                if jp is not first:
                    ctl.set_targets(targets(jp))
                applied = ctl.wait_synced(SYNC_TIMEOUT)
                writes = sum(d.diff.writes for d in applied.values())
                before = _counter_out(ctl.session, addresses)
                sums = _run_rounds(run, workload, dest_ip, values, first_round, rounds, out,
                                   name)
                time.sleep(0.2)
                after = _counter_out(ctl.session, addresses)
                ports = uplink_ports(topo, jp)
                link_packets = {s: after[s].get(p, 0) - before[s].get(p, 0)
                                for s, p in ports.items()}
                exact = (len(sums) == rounds
                         and all(r["complete"] and r["values"] == expected_sum
                                 and r["count"] == len(workload.workers) for r in sums))
                results.append(StrategyRun(
                    name, k, jp.blue, rounds, jp.plan.cost,
                    measured_cost(jp, link_packets, rounds), exact, writes,
                    link_packets, dict(jp.msgs)))
    _write_results(out, results, topo, workload)
    return results


def _run_rounds(run: Any, workload: Workload, dest_ip: str, values: dict[int, list[int]],
                first_round: int, rounds: int, out: Path, label: str) -> list[dict[str, Any]]:
    """Start the destination's receiver, let every worker send its rounds, collect sums."""
    dest = run.host(workload.destination)
    recv_log = out / "logs" / f"receiver-{label}.jsonl"
    receiver = dest.popen(
        [sys.executable, "-m", "controller.aggpacket", "recv", "--job", str(workload.job),
         "--expect", hex(workload.bitmap), "--rounds", str(rounds), "--first-round",
         str(first_round), "--timeout", "5"],
        stdout=recv_log.open("w"), stderr=subprocess.STDOUT)
    time.sleep(0.5)  # the receiver's socket is bound before the first packet
    senders = []
    for i, w in enumerate(workload.workers):
        senders.append(run.host(w).popen(
            [sys.executable, "-m", "controller.aggpacket", "send", "--dest", dest_ip, "--job",
             str(workload.job), "--worker", str(i), "--rounds", str(rounds), "--first-round",
             str(first_round), "--values=" + ",".join(map(str, values[i])), "--gap", "0.3"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for s in senders:
        _, err = s.communicate(timeout=60)
        if s.returncode != 0:
            receiver.kill()
            raise RuntimeError(f"a worker's sender failed: {err.decode(errors='replace')}")
    try:
        receiver.wait(timeout=5 * rounds + 10)
    except subprocess.TimeoutExpired:
        receiver.kill()
        receiver.wait()
    lines = recv_log.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _write_results(out: Path, results: list[StrategyRun], topo: Topology,
                   workload: Workload) -> None:
    (out / "results.json").write_text(json.dumps([r.to_dict() for r in results], indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.strategy for r in results]
    x = range(len(results))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([i - 0.2 for i in x], [r.predicted_cost for r in results], width=0.4,
           label="predicted phi (SOAR model)", color="tab:blue")
    ax.bar([i + 0.2 for i in x], [r.measured_cost for r in results], width=0.4,
           label="measured (BMv2 counters)", color="tab:orange")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("cost per round (messages / rate)")
    ax.set_title(f"{topo.name}: {len(workload.workers)} workers to {workload.destination}, "
                 f"k = {results[0].k if results else 0}", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "aggregation.png", dpi=110)
    plt.close(fig)
    lines = [f"# Aggregation on {topo.name}", "",
             f"{len(workload.workers)} workers send a {VECTOR_LEN}-value vector per round to "
             f"{workload.destination}; {results[0].rounds if results else 0} rounds per "
             "strategy. Measured cost = sum over the tree's uplinks of packets per round / "
             "rate, from the switches' egress counters.", "",
             "| strategy | blue | predicted phi | measured | equal | sums exact | writes |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        equal = abs(r.predicted_cost - r.measured_cost) < 1e-9 * max(1.0, r.predicted_cost)
        lines.append(f"| {r.strategy} | {', '.join(r.blue) or '-'} | {r.predicted_cost:.4g} | "
                     f"{r.measured_cost:.4g} | {'yes' if equal else 'NO'} | "
                     f"{'yes' if r.sums_exact else 'NO'} | {r.writes} |")
    ok = all(abs(r.predicted_cost - r.measured_cost) < 1e-9 * max(1.0, r.predicted_cost)
             and r.sums_exact for r in results)
    lines += ["", "Every strategy's measured cost equals its predicted phi and every sum is "
              "exact." if ok else "Some measurement departs from the prediction: see the "
              "table and logs/.", "", "![aggregation](aggregation.png)"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
