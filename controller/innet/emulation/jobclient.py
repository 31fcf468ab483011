"""Jobs on the network that is up, from Python: what `innet job ...` does, as functions.

Each call is one request over the running network's control socket (innet.emulation.live),
answered by its own controller; a refusal raises the error the command line would print
(InputError for a bad request, NetworkError when the network does not answer).

    from innet.emulation.jobclient import submit_job, list_jobs, cancel_job
    row = submit_job("VGG19", workers=6, iterations=20)   # planned, installed, running
    print(list_jobs()[0]["iterations_done"])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from innet.emulation import live
from innet.errors import InputError, NetworkError

POLICY = "soar+cassini"
MAX_DELAY_S = 7 * 24 * 3600.0  # a job submitted to arrive later: within a week
ENDED_KEPT = 100  # ended jobs a network lists (and holds); older ones are in their folders


def ask(request: dict[str, Any], state_dir: Path | None = None) -> dict[str, Any]:
    """One request to the network that is up; its refusal as the error it was."""
    record = live.running(state_dir)
    if record is None:
        raise InputError("no network is up: start one with `innet net up --topology FILE` "
                         "(without --workload)")
    answer = live.ask(record, request)
    if "error" in answer:
        err = InputError if answer.get("exit") == 2 else NetworkError
        raise err(answer["error"])
    return answer


def submit_request(model: str | None, workers: int, iterations: int, *,
                   profile_file: str | Path | None = None, policy: str = POLICY,
                   **extra: Any) -> dict[str, Any]:
    """The `job_submit` request: a zoo model or a jobs file's first profile (a path made
    absolute: the network's process has its own working directory); `extra`: values, name,
    k, slots."""
    job: dict[str, Any] = {"workers": workers, "iterations": iterations}
    if model is not None:
        job["model"] = model
    if profile_file is not None:
        job["profile_file"] = str(Path(profile_file).resolve())
    job.update({k: v for k, v in extra.items() if v is not None})
    return {"op": "job_submit", "job": job, "policy": policy}


def submit_job(model: str | None, workers: int, iterations: int, *,
               profile_file: str | Path | None = None, policy: str = POLICY,
               at_s: float = 0.0, state_dir: Path | None = None, **extra: Any
               ) -> dict[str, Any]:
    """Plan the job jointly on the running network and install it (it runs), or queue it
    (`at_s`: it arrives that many seconds from now); returns its row of `list_jobs`."""
    request = submit_request(model, workers, iterations, profile_file=profile_file,
                             policy=policy, **extra)
    return ask(request | ({"at_s": at_s} if at_s else {}), state_dir)


def submit_trace(path: str | Path, *, policy: str = POLICY, at_s: float = 0.0,
                 state_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every job of a trace file, each arriving `at_s` + its arrival (scaled as the network
    runs) from now; their rows."""
    rows: list[dict[str, Any]] = ask({"op": "trace_submit", "file": str(Path(path).resolve()),
                                      "policy": policy, "at_s": at_s}, state_dir)["jobs"]
    return rows


def list_jobs(state_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every job the network knows, in submission order (the `job list --json` rows)."""
    jobs: list[dict[str, Any]] = ask({"op": "job_list"}, state_dir)["jobs"]
    return jobs


def cancel_job(name: str, state_dir: Path | None = None) -> dict[str, Any]:
    """Release the job (or take it off the queue): {"cancelled": row, "admitted": [names]}."""
    return ask({"op": "job_cancel", "name": name}, state_dir)
