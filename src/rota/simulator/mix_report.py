"""Measures of mixed-workload runs, over seeds, a table row per configuration and a plot
(docs/efficiency.md).

Per run, over the measured window ``[warmup, horizon)``:
- ``alloc``: milli-GPU held (what the asks were given), time-weighted, as a share of the
  cluster's GPUs, in all and per class;
- ``useful``: GPU work done, as a share of the cluster's GPU time: training, ``useful_ratio``
  of the GPUs a running gang holds, less the run time preemption threw away; notebooks,
  ``min(active_util, share)`` while a burst runs on a bound notebook; services, each request
  answered on time costs ``model share / replica_rps`` GPU-seconds; ``useful_of_alloc``:
  useful / alloc;
- training, of the gangs that arrived in the window: JCT (end - arrival; mean, p50, hours)
  and queueing delay (first start - arrival; mean, minutes);
- notebooks: time to start of each ask made in the window (bind - ask; an ask never bound
  counts until its session ended), p50 and p95 (nearest rank), seconds;
- services: SLO attainment, requests answered within ``target_s`` over requests (cold starts
  included);
- ``gpu_hours``: GPU-hours allocated in the window, and their ``cost`` at ``cost.gpu_hour``;
  ``cost_per_useful_h``: cost over useful GPU-hours.

Over seeds (``over_seeds``): each figure's mean and sample standard deviation. Plain data in,
JSON-ready dicts out; the only I/O is ``plot`` (matplotlib, imported lazily).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.core import MILLI
from rota.simulator.cohost_report import mean_between
from rota.simulator.mix import CLASSES, NOTEBOOKS, SERVICES, TRAINING, MixResult
from rota.simulator.mix_config import Experiment
from rota.simulator.mix_workload import HOUR
from rota.simulator.replay_metrics import percentile, sample_utilisation
from rota.simulator.report import spread

COUNTS = ("cold_starts", "reclaims", "preemptions", "rejected", "cycles")


def summarise(result: MixResult, exp: Experiment) -> dict:
    """One run's figures (see the module docstring)."""
    r, cluster = result, result.gpus * MILLI
    window = r.horizon - r.warmup
    out: dict = {"configuration": r.configuration, "seed": r.seed}
    for cls in CLASSES:
        out[f"alloc_{cls}"] = mean_between(r.alloc[cls], cluster, r.warmup, r.horizon)
        out[f"useful_{cls}"] = r.useful[cls] / (r.gpus * window)
    out["alloc"] = sum(out[f"alloc_{c}"] for c in CLASSES)
    out["useful"] = sum(out[f"useful_{c}"] for c in CLASSES)
    out["useful_of_alloc"] = out["useful"] / out["alloc"] if out["alloc"] else 0.0
    gangs = [(a, s, f) for a, s, f in r.gangs if r.warmup <= a < r.horizon]
    jcts = [f - a for a, _, f in gangs if f is not None]
    if jcts:
        out["jct_avg_h"] = statistics.fmean(jcts) / HOUR
        out["jct_p50_h"] = percentile(jcts, 50) / HOUR
        out["queue_avg_min"] = statistics.fmean(s - a for a, s, _ in gangs if s is not None) / 60
    if r.waits:
        out["start_p50_s"] = percentile(r.waits, 50)
        out["start_p95_s"] = percentile(r.waits, 95)
    out["slo"] = r.on_time / r.requests if r.requests else 1.0
    out["gpu_hours"] = out["alloc"] * r.gpus * window / HOUR
    out["cost"] = out["gpu_hours"] * exp["cost"]["gpu_hour"]
    useful_h = out["useful"] * r.gpus * window / HOUR
    out["cost_per_useful_h"] = out["cost"] / useful_h if useful_h else 0.0
    out["lost_gpu_h"] = r.lost_gpu_s / HOUR
    for key in COUNTS:
        out[key] = getattr(r, key)
    return out


def over_seeds(summaries: list[dict]) -> dict:
    """One configuration's runs (one per seed) -> mean and sd of every figure."""
    if not summaries:
        raise ValueError("no runs to summarise")
    names = {s["configuration"] for s in summaries}
    if len(names) != 1:
        raise ValueError(f"runs of several configurations: {sorted(names)}")
    out: dict = {"configuration": summaries[0]["configuration"],
                 "seeds": [s["seed"] for s in summaries]}
    keys = [k for k in summaries[0] if k not in ("configuration", "seed")]
    keys += [k for s in summaries for k in s if k not in keys and k not in out and k != "seed"]
    for key in dict.fromkeys(keys):
        values = [float(s[key]) for s in summaries if key in s]
        if values:
            out[key] = spread(values)
    return out


def gains(reports: list[dict]) -> None:
    """Adds to each report ``useful_x``: its mean useful utilisation over the ``fifo``
    configuration's (when it is among them)."""
    base = next((r for r in reports if r["configuration"] == "fifo"), None)
    for rep in reports:
        if base is not None and base["useful"]["mean"]:
            rep["useful_x"] = rep["useful"]["mean"] / base["useful"]["mean"]


# the table: (figure, title, format of the mean)
COLUMNS = (
    ("alloc", "GPU allocation", "{:.1%}"), ("useful", "useful utilisation", "{:.1%}"),
    ("useful_x", "useful vs fifo", "{:.2f}x"),
    ("useful_of_alloc", "useful / allocated", "{:.1%}"),
    ("useful_training", "useful: training", "{:.1%}"),
    ("useful_notebooks", "useful: notebooks", "{:.1%}"),
    ("useful_services", "useful: services", "{:.1%}"),
    ("jct_avg_h", "training JCT h", "{:.2f}"), ("jct_p50_h", "training JCT p50 h", "{:.2f}"),
    ("queue_avg_min", "training queue min", "{:.1f}"),
    ("start_p50_s", "notebook start p50 s", "{:.0f}"),
    ("start_p95_s", "notebook start p95 s", "{:.0f}"),
    ("slo", "serving SLO", "{:.2%}"), ("gpu_hours", "GPU-hours", "{:.0f}"),
    ("cost", "cost", "{:.0f}"), ("cost_per_useful_h", "cost / useful GPU-h", "{:.2f}"),
    ("cold_starts", "cold starts", "{:.0f}"), ("reclaims", "reclaims", "{:.0f}"),
    ("preemptions", "preemptions", "{:.0f}"), ("lost_gpu_h", "GPU-h lost", "{:.1f}"),
)


def headers() -> list[str]:
    return ["configuration"] + [title for _, title, _ in COLUMNS]


def row(report: dict, spread: bool = True) -> list[str]:
    """One table row: mean (± sd over seeds); ``-`` where a figure is missing."""
    cells = [report["configuration"]]
    for key, _, fmt in COLUMNS:
        stats = report.get(key)
        if stats is None:
            cells.append("-")
            continue
        if not isinstance(stats, dict):
            cells.append(fmt.format(stats))
            continue
        text = fmt.format(stats["mean"])
        if spread and len(report["seeds"]) > 1:
            text += " ± " + fmt.format(stats["sd"]).rstrip("%") + ("%" if "%" in fmt else "")
        cells.append(text)
    return cells


COLOURS = {TRAINING: "tab:orange", NOTEBOOKS: "tab:green", SERVICES: "tab:blue"}


def plot(results: list[MixResult], reports: list[dict], path: Path | str,
         title: str = "") -> None:
    """Top: allocation over time per class, stacked, for ``fifo`` and ``all`` (the first
    seed). Bottom: per configuration, allocation and useful utilisation (useful stacked by
    class), with the standard deviation over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    firsts: dict[str, MixResult] = {}
    for res in results:
        firsts.setdefault(res.configuration, res)
    shown = [c for c in ("fifo", "all") if c in firsts] or list(firsts)[:2]
    fig = plt.figure(figsize=(14, 8))
    grid = fig.add_gridspec(2, len(shown))
    for k, name in enumerate(shown):
        _timeline(fig.add_subplot(grid[0, k]), firsts[name], k == 0)
    _bars(fig.add_subplot(grid[1, :]), reports)
    fig.suptitle(title or "training, notebooks and services on one cluster")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _timeline(ax, res: MixResult, legend: bool) -> None:
    series = {c: sample_utilisation(res.alloc[c], res.gpus * MILLI, res.horizon, 400)
              for c in CLASSES}
    hours = [t / HOUR for t, _ in series[TRAINING]]
    ax.stackplot(hours, *[[100 * u for _, u in series[c]] for c in CLASSES], labels=CLASSES,
                 colors=[COLOURS[c] for c in CLASSES], alpha=0.8)
    ax.axvline(res.warmup / HOUR, color="grey", linestyle=":", linewidth=1)
    ax.set_title(f"GPUs allocated: {res.configuration} (seed {res.seed})")
    ax.set_ylim(0, 105)
    ax.set_xlabel("hours")
    ax.set_ylabel("% of the cluster's GPUs")
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(loc="upper left", fontsize=8)


def _bars(ax, reports: list[dict]) -> None:
    xs = list(range(len(reports)))
    alloc = [100 * r["alloc"]["mean"] for r in reports]
    ax.bar([x - 0.2 for x in xs], alloc, 0.4, yerr=[100 * r["alloc"]["sd"] for r in reports],
           capsize=3, color="lightgrey", edgecolor="grey", label="allocated")
    bottom = [0.0] * len(reports)
    for cls in CLASSES:
        values = [100 * r[f"useful_{cls}"]["mean"] for r in reports]
        ax.bar([x + 0.2 for x in xs], values, 0.4, bottom=bottom, color=COLOURS[cls],
               label=f"useful: {cls}")
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.errorbar([x + 0.2 for x in xs], bottom, yerr=[100 * r["useful"]["sd"] for r in reports],
                fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(xs, [r["configuration"] for r in reports])
    ax.set_ylabel("% of the cluster's GPU time")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, ncol=4)
