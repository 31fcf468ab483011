"""CASSINI: place ML training jobs and shift their start times so that jobs sharing a link
take turns communicating (Rajasekaran, Ghobadi, Akella, NSDI 2024; our model:
docs/cassini-planner.md).

- `model/`: what is planned for, before any placement.
  - `profiles`: job profiles (phases per iteration), jobs files, the model zoo.
  - `pcap_profile`: a profile measured from a packet capture.
  - `geometry`: one link: unified circle, compatibility score, best shifts.
  - `affinity`: many links: the Affinity graph and the breadth-first shift assignment.
- `placement/`: where jobs run.
  - `cluster`: racks of GPU slots, link capacities, the paths of a ring all-reduce.
  - `candidates`: the Themis-like base's candidate placements of equal fairness.
  - `scheduler`: CASSINI ranks the candidates and checks the best in the fluid model
    (`PlannerSettings` says how); `plan_cluster` is the entry point experiments use.
- `sim/`: measuring plans.
  - `fluid`: the fluid model's settings (`FluidConfig`) and the one step both simulations
    advance with (max-min rates, link queues, marks).
  - `steady`: a fixed set of jobs until each has enough iterations.
  - `trace`: a trace's jobs arriving, waiting for GPUs, training and leaving.
  - `engine`: the engine protocol and the fluid engine; `ns3`: the ns-3 engine.
- `experiments/`: what the commands run.
  - `settings`: the evaluation, sweep and trace settings the front end builds once.
  - `evaluation`: one job set's arms (`cassini evaluate --jobs`) and its report.
  - `traces`: the paper's three traces, generated or loaded; `replay`: a trace replayed
    through the base and CASSINI as rounds.
  - `placement_sweep`: random draws of the running jobs' servers; `trace_sweep`: a fresh
    trace per draw, and the evaluation of one trace; `draws`: where the draws run.
  - `plots`: figures.
- `cli`: the `innet cassini` commands.
"""

from innet.cassini.model.geometry import LinkSolution, best_shifts, score_at, unified_circle
from innet.cassini.model.profiles import JobProfile, Phase, load_jobs, zoo_job
from innet.cassini.placement.scheduler import ClusterPlan, PlannerSettings, plan_cluster, schedule

__all__ = ["ClusterPlan", "JobProfile", "LinkSolution", "Phase", "PlannerSettings",
           "best_shifts", "load_jobs", "plan_cluster", "schedule", "score_at",
           "unified_circle", "zoo_job"]
