"""CASSINI: place ML training jobs and shift their start times so that jobs sharing a link
take turns communicating (Rajasekaran, Ghobadi, Akella, NSDI 2024; our model:
docs/cassini-planner.md).

- `profiles`: job profiles (phases per iteration), jobs files, the model zoo.
- `geometry`: one link: unified circle, compatibility score, best shifts.
- `affinity`: many links: the Affinity graph and the breadth-first shift assignment.
- `scheduler`: a Themis-like base proposes placements on a topology, CASSINI ranks them
  and checks the best in the fluid model; `plan_cluster` is the entry point experiments use.
- `fluid`: a fluid evaluation of iteration times and ECN-like marks.
- `sweep`: random draws of the running jobs' servers, three arms each.
- `pcap_profile`: a profile measured from a packet capture.
- `plots`, `cli`: figures and the `innet cassini` commands.
"""

from innet.cassini.model.geometry import LinkSolution, best_shifts, score_at, unified_circle
from innet.cassini.model.profiles import JobProfile, Phase, load_jobs, zoo_job
from innet.cassini.placement.scheduler import ClusterPlan, plan_cluster, schedule

__all__ = ["ClusterPlan", "JobProfile", "LinkSolution", "Phase", "best_shifts", "load_jobs",
           "plan_cluster", "schedule", "score_at", "unified_circle", "zoo_job"]
