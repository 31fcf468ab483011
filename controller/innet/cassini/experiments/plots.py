"""Figures for `innet cassini evaluate`: a CDF of iteration times and a link's circle.

Matplotlib runs headless here (Agg), set in this module only so importing the planners
never touches a display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from innet.cassini.model.geometry import Circle, shifted_curves
from innet.cassini.model.profiles import JobProfile
from innet.cassini.sim.steady import FluidResult

_STYLES = {"base": ("#c0392b", "-"), "base+shifts": ("#e67e22", "--"),
           "cassini": ("#2471a3", "-"), "mltcp": ("#1e8449", ":"),
           "cassini+mltcp": ("#7d3c98", "--")}


def plot_cdf(results: Sequence[FluidResult], path: Path, *, normalise: bool,
             title: str) -> None:
    """One CDF per run, every iteration of every job pooled."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for result in results:
        values = np.sort(result.pooled(normalise))
        y = np.arange(1, len(values) + 1) / len(values)
        color, style = _STYLES.get(result.label, (None, "-"))
        mean, p99 = result.summary(normalise)
        unit = "x" if normalise else " ms"
        ax.step(values, y, where="post", color=color, linestyle=style,
                label=f"{result.label} (mean {mean:.3g}{unit}, p99 {p99:.3g}{unit})")
    ax.set_xlabel("iteration time / the job's iteration time alone" if normalise
                  else "iteration time (ms)")
    ax.set_ylabel("CDF over iterations")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _polar(ax: Any, jobs: Sequence[JobProfile], weights: Sequence[float], circle: Circle,
           capacity: float, shifts: Mapping[str, float], title: str) -> float:
    curves = shifted_curves(jobs, shifts, circle, weights)
    n = circle.samples
    theta = 2 * np.pi * np.arange(n + 1) / n
    colors = plt.get_cmap("tab10")
    lower = np.zeros(n + 1)
    for k, (job, curve) in enumerate(zip(jobs, curves, strict=True)):
        upper = lower + np.append(curve, curve[0])
        label = f"{job.name} (+{shifts.get(job.name, 0.0):.0f} ms)"
        ax.fill_between(theta, lower, upper, step="post", color=colors(k % 10), alpha=0.75,
                        linewidth=0, label=label)
        lower = upper
    over = np.maximum(lower, capacity)
    ax.fill_between(theta, np.full(n + 1, capacity), over, step="post", color="none",
                    hatch="////", edgecolor="#c0392b", linewidth=0)
    ring = np.linspace(0, 2 * np.pi, 361)
    ax.plot(ring, np.full_like(ring, capacity), color="#c0392b", linestyle="--", linewidth=1.2)
    ax.set_theta_zero_location("N")
    ax.set_theta_direction(-1)
    ticks = np.arange(8) * np.pi / 4
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{circle.period_ms * k / 8:g} ms" for k in range(8)], fontsize=7)
    ax.set_rlabel_position(90)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title, fontsize=10, pad=14)
    return float(lower.max())


def plot_circle(jobs: Sequence[JobProfile], weights: Sequence[float], circle: Circle,
                capacity_gbps: float, before: Mapping[str, float], after: Mapping[str, float],
                scores: tuple[float, float], link: str, path: Path) -> None:
    """The link's unified circle, stacked demand in Gbps, before and after the shifts; the
    dashed ring is the capacity and the hatched area above it the excess."""
    fig, axes = plt.subplots(1, 2, subplot_kw={"projection": "polar"}, figsize=(10, 5.4))
    top = 0.0
    for ax, shifts, name, score in zip(axes, (before, after), ("no shifts", "CASSINI shifts"),
                                       scores, strict=True):
        top = max(top, _polar(ax, jobs, weights, circle, capacity_gbps, shifts,
                              f"{name}: score {score:.3f}"))
    for ax in axes:
        ax.set_ylim(0, max(top, capacity_gbps) * 1.08)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.suptitle(f"{link}: {capacity_gbps:g} Gbps, circle of {circle.period_ms:g} ms "
                 "(demand in Gbps; dashed: capacity)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_sweep(draws: Sequence[Any], path: Path, *, title: str) -> None:
    """CDFs over the draws of arm / base (below 1: faster, fewer marks), one panel for the
    slowdowns' mean and p99, one for marks."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for arm, color in (("base+shifts", "#e67e22"), ("cassini", "#2471a3")):
        for key, style in (("mean_x", "--"), ("p99_x", "-")):
            ratios = np.sort([getattr(d.arms[arm], key) / getattr(d.base, key) for d in draws])
            y = np.arange(1, len(ratios) + 1) / len(ratios)
            axes[0].step(ratios, y, where="post", color=color, linestyle=style,
                         label=f"{arm}: {key.replace('_x', '')}")
        marks = np.sort([max(1e-3, (d.arms[arm].marks + 1.0) / (d.base.marks + 1.0))
                         for d in draws])
        axes[1].step(marks, np.arange(1, len(marks) + 1) / len(marks), where="post",
                     color=color, label=arm)
    axes[0].axvline(1.0, color="gray", linewidth=0.8)
    axes[0].set_xlabel("iteration slowdown, arm / base (below 1: faster)")
    axes[1].set_xscale("log")
    axes[1].axvline(1.0, color="gray", linewidth=0.8)
    axes[1].set_xlabel("marks, arm / base (log; below 1: fewer; none left: 1e-3)")
    for ax in axes:
        ax.set_ylabel("CDF over draws")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
