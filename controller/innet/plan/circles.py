"""CASSINI's circles of the running jobs, for the live view: on each link two or more of them
share, the unified circle of their iterations with every job's communication phases as arcs.

A job's traffic repeats every iteration T, so on a link it lives on a circle of perimeter T;
jobs sharing the link share the circle of perimeter P = LCM of their T (rounded as
`geometry.unified_circle` rounds them, so the view draws the circle the shift search
scored), on which job j comes round P / T_j times. Each Up phase of a job's profile is an arc
from (phase start + shift) to that plus its duration, modulo P; CASSINI's shift is the
rotation that keeps the arcs of jobs that would together exceed the link apart. An arc whose
end passes P wraps through 0 (`end_ms` > `period_ms`). Which links a job uses, and with how
many messages per chunk, is `linkdemand.link_messages`, the demand the shift was chosen on.
Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from innet.cassini.model.geometry import unified_circle
from innet.cassini.model.profiles import JobProfile
from innet.cassini.placement.cluster import LinkKey, link_name
from innet.names import natural_key
from innet.plan.cluster import Admission
from innet.plan.linkdemand import link_messages
from innet.topology import Topology


@dataclass(frozen=True)
class OnLink:
    """One job on one link: its id (its colour on the page), name, profile, shift and
    messages per chunk there."""

    job: int
    name: str
    profile: JobProfile
    shift_ms: float
    messages: int


def link_circle(link: str, members: Sequence[OnLink]) -> dict[str, Any]:
    """The circle of the jobs on `link`: its perimeter, whether it closes up for every job
    (`exact`: false when the LCM was capped at the largest T), and one arc per Up phase
    per time round of each job, rotated by its shift."""
    circle = unified_circle([m.profile.iteration_ms for m in members])
    period = circle.period_ms
    arcs = []
    for m, rounded in zip(members, circle.periods_ms, strict=True):
        scale = rounded / m.profile.iteration_ms  # the job on its rounded period, as scored
        for turn in range(math.ceil(period / rounded - 1e-9)):
            for p in m.profile.phases:
                start = (p.start_ms * scale + m.shift_ms + turn * rounded) % period
                arcs.append({"job": m.job, "name": m.name, "start_ms": round(start, 3),
                             "end_ms": round(start + p.duration_ms * scale, 3),
                             "messages": m.messages})
    return {"link": link, "period_ms": period, "exact": circle.exact,
            "jobs": [m.name for m in members], "arcs": arcs}


def job_circles(topo: Topology, running: Sequence[Admission]) -> dict[str, list[dict[str, Any]]]:
    """Per running job, the circles of the directed links it shares with other running
    jobs (links in name order); a job that shares none has an empty list."""
    users: dict[LinkKey, list[OnLink]] = {}
    for a in running:
        for key, n in link_messages(topo, a.plan).items():
            if n > 0:
                users.setdefault(key, []).append(
                    OnLink(a.job, a.name, a.request.profile, a.shift_ms, n))
    out: dict[str, list[dict[str, Any]]] = {a.name: [] for a in running}
    for key in sorted(users, key=lambda k: (natural_key(k[0]), natural_key(k[1]))):
        members = users[key]
        if len(members) < 2:
            continue
        circle = link_circle(link_name(key), members)
        for m in members:
            out[m.name].append(circle)
    return out
