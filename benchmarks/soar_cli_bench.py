"""Time what a user waits for: `innet soar solve FILE -k K` as a whole process, and its parts.

    python benchmarks/soar_cli_bench.py                 # BT(65536), k = 1024 (issue 13)
    python benchmarks/soar_cli_bench.py --n 2048 --k 16

For each n it writes the instance with `innet soar gen` (power-law loads, linear rates),
then prints the best of R runs of: loading the file alone (`load_tree`, in this process),
the solve alone (`solve`, in this process), and the whole command in a fresh process
(`innet soar solve FILE -k K --json`: interpreter start, imports, load, solve, output). The
whole command is what the budget of issue 13 is about (< 10 s at n = 65,536, k = 1,024);
the load alone must be well under a second. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from soar_bench import best_time  # this folder is on sys.path when run as a script

from innet.soar.model import load_tree
from innet.soar.solver import solve
from innet.table import format_table

_SCRIPT = Path(sys.executable).parent / "innet"  # the console script a user runs
INNET = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "innet.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="*", default=[65536], help="sizes (switches)")
    parser.add_argument("--k", type=int, default=1024, help="budget (default 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure, best kept")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            path = Path(tmp) / f"bt{n}.json"
            subprocess.run([*INNET, "soar", "gen", "-n", str(n), "--loads", "power-law",
                            "--rates", "linear", "-o", str(path)], check=True,
                           stderr=subprocess.DEVNULL)
            size_mb = path.stat().st_size / 1e6
            load_s = best_time(lambda path=path: load_tree(path), args.repeat)
            tree = load_tree(path)
            solve_s = best_time(lambda tree=tree: solve(tree, args.k), args.repeat)
            cmd = [*INNET, "soar", "solve", str(path), "-k", str(args.k), "--json"]

            def whole(cmd: list[str] = cmd) -> None:
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                json.loads(out)  # one JSON document, or this fails

            whole_s = best_time(whole, args.repeat)
            row = [n, args.k, size_mb, load_s, solve_s, whole_s]
            rows.append(row)
            print(format_table(["n", "k", "file MB", "load s", "solve s", "whole command s"],
                               [row], digits=3).splitlines()[-1], flush=True)
    print()
    print(format_table(["n", "k", "file MB", "load s", "solve s", "whole command s"], rows,
                       digits=3))


if __name__ == "__main__":
    main()
