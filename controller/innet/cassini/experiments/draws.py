"""Running a sweep's draws: in this process, in worker processes, or on a Dask cluster.

Each draw is seeded by the sweep's seed and its index alone, so where it runs changes
nothing in its numbers; the draws come back in index order whatever order they finish in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from innet.errors import InputError


def run_tasks(task: Callable[[int], Any], draws: int, *,
              progress: Callable[[int], Any] | None = None, workers: int = 1,
              dask: str | None = None) -> list[Any]:
    """task(i) for every draw i (each has an `index`), in this process, in `workers`
    processes or on Dask, in index order; `progress(i)` as draw i finishes."""
    out: dict[int, Any] = {}
    if dask is not None:
        for d in _on_dask(dask, task, draws):
            out[d.index] = d
            if progress is not None:
                progress(d.index)
    elif workers == 1 or draws == 1:
        for i in range(draws):
            out[i] = task(i)
            if progress is not None:
                progress(i)
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(workers, draws)) as pool:
            futures = [pool.submit(task, i) for i in range(draws)]
            for fut in as_completed(futures):
                d = fut.result()
                out[d.index] = d
                if progress is not None:
                    progress(d.index)
    return [out[i] for i in range(draws)]


def _on_dask(address: str, task: Callable[[int], Any], draws: int) -> Iterator[Any]:
    """The draws on a Dask cluster, as they finish; an unreachable scheduler is one line."""
    try:
        import distributed
    except ImportError:
        raise InputError("--dask needs dask's distributed package: pip install dask "
                         "distributed (in innet's venv)") from None
    try:
        connect: Any = distributed.Client  # untyped
        client: Any = connect(address, timeout="5s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                         ) from None
    try:
        futures = client.map(task, list(range(draws)), pure=False)
        done: Any = distributed.as_completed
        for fut in done(futures):
            yield fut.result()
    finally:
        client.close()
