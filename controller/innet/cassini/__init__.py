"""CASSINI: place ML training jobs and shift their start times so that jobs sharing a link
take turns communicating (Rajasekaran, Ghobadi, Akella, NSDI 2024; our model:
docs/cassini-planner.md).

Four rooms, one concern each: `model` (what is planned for: profiles, one link's geometry,
the affinity graph), `placement` (where jobs run: the base's candidates, CASSINI's ranking),
`sim` (measuring plans: the fluid model and the ns-3 engine), `experiments` (what the
commands run: evaluations, traces, sweeps, plots). Each module's place and what it owns:
docs/architecture.md; the commands: innet.cli.cassini.
"""

from innet.cassini.model.geometry import LinkSolution, best_shifts, score_at, unified_circle
from innet.cassini.model.profiles import JobProfile, Phase, load_jobs, zoo_job
from innet.cassini.placement.scheduler import ClusterPlan, PlannerSettings, plan_cluster, schedule

__all__ = ["ClusterPlan", "JobProfile", "LinkSolution", "Phase", "PlannerSettings",
           "best_shifts", "load_jobs", "plan_cluster", "schedule", "score_at",
           "unified_circle", "zoo_job"]
