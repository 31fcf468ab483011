"""`python -m innet.cli.jobagent SETTINGS.json`: one worker of a job on the running network,
started inside its emulated host by the network's controller (innet.emulation.jobrun). The
worker's loop is innet.emulation.jobagent; the settings file is what the controller wrote."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from innet.emulation.jobagent import JobWorkerSettings, run_job_worker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m innet.cli.jobagent",
        description="one worker of a job admitted to the running network: its iterations, "
                    "each a gradient aggregated through the switches")
    parser.add_argument("settings", type=Path,
                        help="the JSON settings the controller wrote (required)")
    args = parser.parse_args(argv)
    end = run_job_worker(JobWorkerSettings.from_json(args.settings.read_text()))
    return 0 if end["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
