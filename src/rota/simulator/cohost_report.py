"""Measures of co-hosting runs, per side and over seeds, and a plot (docs/cohosting.md).

Per run and side: jobs (pods or gangs), *placed* (started at some time) and *placed at once*
(started at their arrival), as shares of the side's jobs; rejected (the scheduler's answer for
work that can never fit the side's nodes) and stuck (pending when nothing else could happen);
queueing delay (first start - arrival: mean, p50, p95, minutes) and JCT (end - arrival: mean,
p50, hours) of the jobs that started; GPU allocation: the side's milli-GPU held, time-weighted
over the measured window ``[warmup, horizon)``, as a share of the cluster's GPUs; *kept*:
likewise, the GPUs the other side cannot use because of the side's work (static: the side's
nodes; otherwise the GPUs of its holdings, ``cohost``), at least its allocation. Every
figure but allocation counts only the jobs that arrived in the measured window. Percentiles are
nearest-rank (``replay_metrics.percentile``).

Over seeds (``over_seeds``): each figure's mean and sample standard deviation. Plain data in,
JSON-ready dicts out; the only I/O is ``plot``, which writes a PNG with matplotlib (imported
lazily: it is slow to import).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.core import MILLI
from rota.simulator.cohost import CohostResult
from rota.simulator.cohost_workload import HOUR, KUBE, SIDES, SLURM
from rota.simulator.replay_metrics import percentile, sample_utilisation
from rota.simulator.report import spread

MINUTE = 60.0
FIGURES = ("alloc", "kept", "placed", "placed_at_once", "queue_avg_min", "queue_p50_min",
           "queue_p95_min", "jct_avg_h", "jct_p50_h")


def mean_between(series: list[tuple[float, int]], total: int, lo: float, hi: float) -> float:
    """Time-weighted mean of the step function ``series`` ((time, value) from time 0) over
    ``[lo, hi)``, as a share of ``total``."""
    if hi <= lo:
        return 0.0
    area = 0.0
    for (t, v), (t2, _) in zip(series, series[1:] + [(max(hi, series[-1][0]), 0)]):
        area += v * max(0.0, min(t2, hi) - max(t, lo))
    return area / (total * (hi - lo))


def summarise(result: CohostResult) -> dict:
    """One run's figures per side: ``{"regime", "seed", "kubernetes": {...}, "slurm": {...},
    "alloc": both sides' allocation}``."""
    out: dict = {"regime": result.regime, "seed": result.seed, "cycles": result.cycles}
    cluster = result.gpus * MILLI
    for side in SIDES:
        runs = [r for r in result.runs if r.work.side == side
                and result.warmup <= r.work.arrival]
        started = [r for r in runs if r.start is not None]
        delays = [r.start - r.work.arrival for r in started]
        jcts = [r.finish - r.work.arrival for r in started if r.finish is not None]
        figures = {
            "jobs": len(runs),
            "rejected": sum(r.rejected for r in runs),
            "stuck": sum(r.start is None and not r.rejected for r in runs),
            "alloc": mean_between(result.alloc[side], cluster, result.warmup, result.horizon),
            "kept": mean_between(result.kept[side], cluster, result.warmup, result.horizon),
            "placed": len(started) / len(runs) if runs else 0.0,
            "placed_at_once": sum(d == 0 for d in delays) / len(runs) if runs else 0.0,
        }
        if delays:
            figures.update({
                "queue_avg_min": statistics.fmean(delays) / MINUTE,
                "queue_p50_min": percentile(delays, 50) / MINUTE,
                "queue_p95_min": percentile(delays, 95) / MINUTE,
            })
        if jcts:
            figures.update({"jct_avg_h": statistics.fmean(jcts) / HOUR,
                            "jct_p50_h": percentile(jcts, 50) / HOUR})
        out[side] = figures
    out["alloc"] = out[KUBE]["alloc"] + out[SLURM]["alloc"]
    return out


def over_seeds(summaries: list[dict]) -> dict:
    """One regime's runs (one per seed) -> mean and sd of every figure, per side."""
    if not summaries:
        raise ValueError("no runs to summarise")
    regimes = {s["regime"] for s in summaries}
    if len(regimes) != 1:
        raise ValueError(f"runs of several regimes: {sorted(regimes)}")
    out: dict = {"regime": summaries[0]["regime"], "seeds": [s["seed"] for s in summaries],
                 "alloc": spread([s["alloc"] for s in summaries])}
    for side in SIDES:
        figures: dict = {}
        for key in ("jobs", "rejected", "stuck") + FIGURES:
            values = [s[side][key] for s in summaries if key in s[side]]
            if values:
                figures[key] = spread([float(v) for v in values])
        out[side] = figures
    return out


# the table: (figure, title, format of the mean, side)
COLUMNS = (
    ("alloc", "GPU alloc", "{:.1%}", None),
    ("alloc", "k8s alloc", "{:.1%}", KUBE), ("kept", "k8s keeps", "{:.1%}", KUBE),
    ("placed_at_once", "k8s at once", "{:.1%}", KUBE),
    ("placed", "k8s placed", "{:.1%}", KUBE),
    ("queue_avg_min", "k8s queue min", "{:.1f}", KUBE),
    ("queue_p50_min", "k8s q p50", "{:.1f}", KUBE), ("queue_p95_min", "k8s q p95", "{:.0f}", KUBE),
    ("jct_avg_h", "k8s JCT h", "{:.2f}", KUBE), ("jct_p50_h", "k8s JCT p50", "{:.2f}", KUBE),
    ("alloc", "slurm alloc", "{:.1%}", SLURM), ("kept", "slurm keeps", "{:.1%}", SLURM),
    ("queue_avg_min", "slurm queue min", "{:.1f}", SLURM),
    ("queue_p50_min", "slurm q p50", "{:.1f}", SLURM),
    ("queue_p95_min", "slurm q p95", "{:.0f}", SLURM),
    ("jct_avg_h", "slurm JCT h", "{:.2f}", SLURM), ("jct_p50_h", "slurm JCT p50", "{:.2f}", SLURM),
)


def headers() -> list[str]:
    return ["regime"] + [title for _, title, _, _ in COLUMNS]


def row(report: dict, spread: bool = True) -> list[str]:
    """One table row of ``over_seeds``' report: mean (± sd over seeds); ``-`` where a figure
    is missing (nothing started)."""
    cells = [report["regime"]]
    for key, _, fmt, side in COLUMNS:
        stats = report.get(key) if side is None else report[side].get(key)
        if stats is None:
            cells.append("-")
            continue
        text = fmt.format(stats["mean"])
        if spread and len(report["seeds"]) > 1:
            text += " ± " + fmt.format(stats["sd"]).rstrip("%") + ("%" if "%" in fmt else "")
        cells.append(text)
    return cells


def plot(results: list[CohostResult], reports: list[dict], path: Path | str,
         title: str = "") -> None:
    """Top: GPUs allocated over the arrival window per regime (the first seed's run), the two
    sides stacked, what the pods keep from Slurm dashed, the end of the warm-up dotted.
    Bottom: per regime, mean GPU allocation per side, and mean queueing delay
    and JCT per side, with the standard deviation over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {KUBE: "tab:blue", SLURM: "tab:orange"}
    firsts = {}
    for res in results:
        firsts.setdefault(res.regime, res)
    regimes = [rep["regime"] for rep in reports]
    fig = plt.figure(figsize=(14, 7.5))
    grid = fig.add_gridspec(2, 12)
    width = 12 // len(regimes)
    for k, regime in enumerate(regimes):
        ax = fig.add_subplot(grid[0, k * width:(k + 1) * width])
        res = firsts[regime]
        series = {s: sample_utilisation(res.alloc[s], res.gpus * MILLI, res.horizon, 400)
                  for s in SIDES}
        hours = [t / HOUR for t, _ in series[KUBE]]
        ax.stackplot(hours, [100 * u for _, u in series[KUBE]],
                     [100 * u for _, u in series[SLURM]],
                     labels=["Kubernetes pods", "Slurm gangs"],
                     colors=[colours[KUBE], colours[SLURM]], alpha=0.8)
        kept = sample_utilisation(res.kept[KUBE], res.gpus * MILLI, res.horizon, 400)
        ax.plot(hours, [100 * u for _, u in kept], color="black", linestyle="--", linewidth=0.8,
                label="kept from Slurm by pods")
        if res.warmup:
            ax.axvline(res.warmup / HOUR, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{regime} (seed {res.seed})")
        ax.set_ylim(0, 105)
        ax.set_xlabel("hours")
        if k == 0:
            ax.set_ylabel("GPUs allocated (%)")
            ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    panels = (("alloc", "GPU allocation (% of cluster)", 100.0),
              ("queue_avg_min", "queueing delay, mean (minutes)", 1.0),
              ("jct_avg_h", "JCT, mean (hours)", 1.0))
    xs = range(len(regimes))
    for k, (key, label, scale) in enumerate(panels):
        ax = fig.add_subplot(grid[1, 4 * k:4 * (k + 1)])
        for j, side in enumerate(SIDES):
            means = [scale * rep[side].get(key, {"mean": 0.0})["mean"] for rep in reports]
            sds = [scale * rep[side].get(key, {"sd": 0.0})["sd"] for rep in reports]
            ax.bar([x + (j - 0.5) * 0.4 for x in xs], means, 0.4, yerr=sds, capsize=3,
                   color=colours[side], label=side)
        ax.set_xticks(list(xs), regimes)
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)  # an sd bar below a small mean says spread, not a negative value
        ax.grid(alpha=0.3, axis="y")
        if k == 0:
            ax.legend(fontsize=8)
    fig.suptitle(title or "Kubernetes pods and Slurm gangs on the same nodes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
