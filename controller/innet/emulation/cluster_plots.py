"""What `innet run cluster` draws and writes beside results.json: the policies' JCT CDFs, the
CE marks per link, a timeline of every job (waiting, then running) per policy, and the
summary table with the fluid model's prediction beside each measurement."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from innet.emulation.cluster_run import PolicyRun

TOP_LINKS = 12  # the most-marked links drawn


def plot_cluster(out: Path, runs: Sequence[PolicyRun]) -> None:
    """cluster.png: JCT CDF and marks per link; timeline.png: the jobs of each policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cdf, marks) = plt.subplots(1, 2, figsize=(12, 4.2))
    for r in runs:
        jcts = sorted(j["jct_s"] for j in r.jobs if j["jct_s"] is not None)
        if jcts:
            cdf.step(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], where="post",
                     label=r.policy)
    cdf.set(xlabel="job completion time (s, jobs' clock)", ylabel="share of jobs",
            title="JCT CDF per policy")
    if cdf.get_legend_handles_labels()[1]:  # no job ended: nothing to name
        cdf.legend()
    _marks_bars(marks, runs)
    fig.tight_layout()
    fig.savefig(out / "cluster.png", dpi=110)
    plt.close(fig)
    _timeline(out / "timeline.png", runs)


def _marks_bars(ax: Any, runs: Sequence[PolicyRun]) -> None:
    totals: dict[str, int] = {}
    for r in runs:
        for link, n in r.link_marks.items():
            totals[link] = totals.get(link, 0) + n
    links = sorted(totals, key=lambda k: -totals[k])[:TOP_LINKS]
    width = 0.8 / max(1, len(runs))
    for i, r in enumerate(runs):
        ax.bar([x + i * width for x in range(len(links))],
               [r.link_marks.get(k, 0) for k in links], width=width, label=r.policy)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(links))], links, rotation=45,
                  ha="right", fontsize=7)
    ax.set(ylabel="CE-marked packets (switch counters)",
           title="marks per link" + ("" if links else ": none"))
    if links:
        ax.legend()


def _timeline(path: Path, runs: Sequence[PolicyRun]) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 1.2 + 0.45 * max(
        len(r.jobs) for r in runs) * len(runs)), squeeze=False)
    for ax, r in zip(axes[:, 0], runs, strict=True):
        for y, j in enumerate(r.jobs):
            start, jct = j["start_s"], j["jct_s"]
            if start is None:
                continue
            ax.barh(y, start - j["arrival_s"], left=j["arrival_s"], color="lightgrey")
            end = j["arrival_s"] + jct if jct is not None else start
            ax.barh(y, end - start, left=start, color="tab:blue" if j["state"] == "done"
                    else "tab:red")
        ax.set_yticks(range(len(r.jobs)), [j["name"] for j in r.jobs], fontsize=7)
        ax.set_title(f"{r.policy}: waiting (grey), running (blue; red: did not finish)",
                     fontsize=9)
    axes[-1, 0].set_xlabel("time (s, jobs' clock)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_lines(runs: Sequence[PolicyRun]) -> list[str]:
    """The policies side by side, BMv2 beside the fluid model."""
    def num(v: float | None, fmt: str = ".1f") -> str:
        return "-" if v is None else format(v, fmt)

    lines = ["| policy | jobs done | sums exact | mean JCT s | fluid JCT s | mean iteration ms "
             "| fluid ms | fluid / BMv2 | CE marks | measured cost | predicted cost |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        mean, fluid = r.mean_iteration_ms, r.predicted.get("mean_iteration_ms")
        ratio = None if mean is None or fluid is None else fluid / mean
        done = sum(j["state"] == "done" for j in r.jobs)
        lines.append(
            f"| {r.policy} | {done}/{len(r.jobs)} | {'yes' if r.sums_exact else 'NO'} | "
            f"{num(r.mean_jct_s, '.2f')} | {num(r.predicted.get('mean_jct_s'), '.2f')} | "
            f"{num(mean)} | {num(fluid)} | {num(ratio, '.3f')} | {r.marks} | "
            f"{r.measured_cost:.6g} | {r.predicted_cost:.6g} |")
    return [*lines, "", "![cluster](cluster.png)", "", "![timeline](timeline.png)"]
