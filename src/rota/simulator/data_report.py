"""Measures of datasets runs, over seeds, a table row per regime, the marks, and a plot
(docs/datasets.md).

Per run, over every job of the workload:
- ``jct_avg_s``: mean job completion time (end - arrival, seconds): queueing, the copy before
  the first batch, compute;
- ``queue_p99_s``: the 99th percentile (nearest rank) of queueing delay (bind - arrival);
- ``ttfb_avg_s``: mean time from bind to first batch (the copy, or waiting for one under way);
- ``hit_ratio``: the share of jobs whose every node had their dataset cached whole at bind;
- ``copied_tb``: terabytes copied from the source into nodes' caches (or read past a full one);
- ``cycles``, ``evicted``: scheduling cycles run, cache entries evicted.

Over seeds (``over_seeds``): each figure's mean and sample standard deviation. ``marks``
compares ``rota`` with the others on the means: average JCT at least 2.5x better than
``oblivious`` and 1.5x better than the better Fluid-style regime, p99 queueing delay no more
than ``oblivious``'s + 5 %. Plain data in, JSON-ready dicts out; the only I/O is ``plot``
(matplotlib, imported lazily).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.simulator.data import Result
from rota.simulator.replay_metrics import percentile

FIGURES = ("jct_avg_s", "queue_p99_s", "ttfb_avg_s", "hit_ratio", "copied_tb", "cycles",
           "evicted")
COLOURS = {"oblivious": "#999999", "fluid-soft": "#6baed6", "fluid-required": "#3182bd",
           "rota": "#e6550d"}
HEADERS = ("avg JCT (s)", "p99 queueing (s)", "avg time to first batch (s)", "cache hit ratio",
           "copied (TB)", "cycles", "evictions")


def summarise(result: Result) -> dict:
    """One run's figures (module docstring)."""
    jobs = list(result.outcomes.values())
    return {"regime": result.regime, "seed": result.seed,
            "jct_avg_s": statistics.fmean(o.end - o.submit for o in jobs),
            "queue_p99_s": percentile([o.start - o.submit for o in jobs], 99),
            "ttfb_avg_s": statistics.fmean(o.first - o.start for o in jobs),
            "hit_ratio": sum(o.hit for o in jobs) / len(jobs),
            "copied_tb": sum(o.copied for o in jobs) / 1e12,
            "cycles": result.cycles, "evicted": result.evicted}


def over_seeds(summaries: list[dict]) -> dict:
    """Mean and sample standard deviation of each figure over one regime's runs."""
    out: dict = {"regime": summaries[0]["regime"], "seeds": [s["seed"] for s in summaries]}
    for key in FIGURES:
        values = [float(s[key]) for s in summaries]
        out[key] = statistics.fmean(values)
        out[f"{key}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
    return out


def marks(reports: list[dict]) -> dict | None:
    """Whether rota's means reach the marks (module docstring); None without rota and
    oblivious among the regimes."""
    by = {r["regime"]: r for r in reports}
    if "rota" not in by or "oblivious" not in by:
        return None
    rota, base = by["rota"], by["oblivious"]
    fluid = [by[k]["jct_avg_s"] for k in ("fluid-soft", "fluid-required") if k in by]
    out = {"jct_vs_oblivious": base["jct_avg_s"] / rota["jct_avg_s"],
           "queue_p99_bound_s": base["queue_p99_s"] * 1.05}
    out["jct_holds"] = out["jct_vs_oblivious"] >= 2.5
    if fluid:
        out["jct_vs_fluid"] = min(fluid) / rota["jct_avg_s"]
        out["jct_holds"] = out["jct_holds"] and out["jct_vs_fluid"] >= 1.5
    out["queue_holds"] = rota["queue_p99_s"] <= out["queue_p99_bound_s"]
    return out


def row(report: dict) -> list[str]:
    def cell(key: str, fmt: str) -> str:
        return f"{report[key]:{fmt}} ± {report[key + '_sd']:{fmt}}"
    return [report["regime"], cell("jct_avg_s", ".0f"), cell("queue_p99_s", ".0f"),
            cell("ttfb_avg_s", ".0f"), cell("hit_ratio", ".2f"), cell("copied_tb", ".1f"),
            cell("cycles", ".0f"), cell("evicted", ".0f")]


def plot(reports: list[dict], path: Path | str, title: str) -> None:
    """Bars per regime: average JCT, p99 queueing delay (both on a log scale: the regimes
    differ by orders of magnitude), cache hit ratio, TB copied."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["regime"] for r in reports]
    panels = (("jct_avg_s", "average JCT (s)"), ("queue_p99_s", "p99 queueing delay (s)"),
              ("hit_ratio", "cache hit ratio"), ("copied_tb", "copied from source (TB)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    for ax, (key, label) in zip(axes, panels):
        ax.bar(names, [r[key] for r in reports], yerr=[r[f"{key}_sd"] for r in reports],
               color=[COLOURS.get(n, "#999999") for n in names], capsize=3)
        if key.endswith("_s"):
            ax.set_yscale("symlog", linthresh=10)
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
