"""innet from Python, as in a notebook: plan an instance with SOAR, plan a job on a shipped
topology, look at what every switch would hold, and dry-run the deploy.

Runs anywhere innet is installed (no switch, no root): `python examples/api_plan_and_deploy.py`.
With BMv2 switches up (`innet run ...`, or your own), replace `from_empty` by
`deploy(addresses, entries, pipeline, dry_run=True)` to read them and see the difference, and
drop `dry_run` to write it. docs/api.md explains each step.
"""

from __future__ import annotations

from innet.bmv2.local import switch_addresses
from innet.p4rt.deploy import from_empty
from innet.plan.intent import load_workload, network_intent, plan_job
from innet.plan.pipeline import load_pipeline
from innet.shipped import examples_dir, topologies_dir
from innet.soar import STRATEGIES, binary_tree, phi, run_strategy, solve, tree_from_dict
from innet.topology import load_topology


def main() -> None:
    # 1. SOAR on an instance: BT(64), power-law loads, linear rates, at most 4 blue switches
    tree = binary_tree(64, rates="linear", loads="power-law", seed=1)
    best = solve(tree, 4)
    print(f"BT(64), k = 4: SOAR picks {', '.join(best.blue)}, cost {best.cost:.2f} "
          f"(all-red {phi(tree, []):.2f})")
    for name in STRATEGIES:
        plan = run_strategy(tree, name, 4)
        print(f"  {name:9} cost {plan.cost:9.2f}  blue {len(plan.blue)}")

    # an instance written by hand: d <- s1 <- (s2, s3), loads on the leaves
    small = tree_from_dict({"root": "d", "nodes": [
        {"id": "d"}, {"id": "s1", "parent": "d", "rate": 2},
        {"id": "s2", "parent": "s1", "load": 3}, {"id": "s3", "parent": "s1", "load": 5}]})
    print(f"hand-made tree, k = 1: blue {solve(small, 1).blue}")

    # 2. A job on a shipped topology: the SOAR tree of its routes, the plan, the entries
    topo = load_topology(topologies_dir() / "bt15.json")
    job = plan_job(topo, load_workload(examples_dir() / "workload-bt15.json", topo), "soar", 4)
    print(f"bt15, job {job.workload.job}, k = 4: blue {', '.join(job.blue)}, "
          f"cost {job.plan.cost:.2f}")
    intent = network_intent(topo, [job])
    entries = intent.entries()
    print(f"intent: {sum(len(es) for es in entries.values())} entries on {len(entries)} "
          f"switches; s1 holds {len(entries['s1'])}")

    # 3. The deploy, dry run against empty switches: nothing is contacted
    pipeline = load_pipeline()
    result = from_empty(switch_addresses(topo), entries, pipeline)
    print(f"dry run: {result.pipelines} program loads, {result.writes} writes")
    for entry in result.switches["s1"].diff.insert[:3]:
        print(f"  s1 + {pipeline.schema.describe(entry)}")


if __name__ == "__main__":
    main()
