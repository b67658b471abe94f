"""Measures of MIG repartitioning runs, over seeds, a table row per regime and a plot
(docs/mig.md).

Per run:

- *GPU-hours used*: every attempt of every job, its GPU share (a ``1g`` 1/7, a whole GPU 1,
  a training job its GPUs) times its run time, evicted attempts included;
- *queueing delay* per class (``notebook``, ``inference``, ``training``): the time a job
  spent pending, over all its attempts (until the run stops for one never started), mean and
  p95 (nearest rank), in hours;
- *JCT* per class: finish less arrival of the jobs that finished, mean, in hours;
- *switches* (GPUs whose geometry changed) and their *downtime* in GPU-hours (the share of
  a GPU made anew, ``downtime_s`` each);
- *work lost*: GPU-hours run since the last checkpoint by jobs a switch evicted;
- the *cost*, in GPU-hours, the quantity the demand-driven planner minimises, counted on what
  happened: the sum over jobs of class priority x GPU share x queueing delay, plus the work
  lost weighted by its class priority, plus the downtime.

Over seeds: each figure's mean and sample standard deviation. The only I/O is ``plot``
(matplotlib, imported lazily).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.simulator.mig import MigResult, work_size
from rota.simulator.mig_workload import CLASSES, HOUR
from rota.simulator.replay_metrics import percentile


def summarise(result: MigResult) -> dict:
    exp, runs = result.exp, result.runs
    weighted = sum(exp.classes[r.work.klass].priority * work_size(r.work) * r.waited for r in runs)
    lost = sum(exp.classes[r.work.klass].priority * r.lost_gpu_s for r in runs)
    out = {"regime": result.regime, "seed": result.seed, "jobs": len(runs),
           "unfinished": sum(r.finish is None for r in runs),
           "gpu_hours": sum(r.used_gpu_s for r in runs) / HOUR,
           "switches": result.switches, "downtime_gpu_h": result.downtime_gpu_s / HOUR,
           "lost_gpu_h": sum(r.lost_gpu_s for r in runs) / HOUR,
           "evictions": sum(r.evictions for r in runs),
           "cost": (weighted + lost + result.downtime_gpu_s) / HOUR}
    for klass in CLASSES:
        mine = [r for r in runs if r.work.klass == klass]
        delays = [r.waited / HOUR for r in mine]
        jcts = [(r.finish - r.work.arrival) / HOUR for r in mine if r.finish is not None]
        out[f"{klass}_jobs"] = len(mine)
        if delays:
            out[f"{klass}_delay_h"] = statistics.fmean(delays)
            out[f"{klass}_delay_p95_h"] = percentile(delays, 95)
        if jcts:
            out[f"{klass}_jct_h"] = statistics.fmean(jcts)
    return out


ROWS = (("GPU-hours used", "gpu_hours", "{:.0f}"),
        *((f"{k} queueing delay mean (h)", f"{k}_delay_h", "{:.2f}") for k in CLASSES),
        *((f"{k} queueing delay p95 (h)", f"{k}_delay_p95_h", "{:.2f}") for k in CLASSES),
        *((f"{k} JCT mean (h)", f"{k}_jct_h", "{:.2f}") for k in CLASSES),
        ("switches", "switches", "{:.0f}"),
        ("downtime (GPU-h)", "downtime_gpu_h", "{:.2f}"),
        ("work lost to evictions (GPU-h)", "lost_gpu_h", "{:.2f}"),
        ("jobs unfinished at the end", "unfinished", "{:.0f}"),
        ("cost (weighted GPU-h)", "cost", "{:.0f}"))


def over_seeds(runs: list[dict]) -> dict:
    """Mean and sd of each figure over the runs of one regime."""
    out: dict = {"regime": runs[0]["regime"], "seeds": [r["seed"] for r in runs],
                 "jobs": statistics.fmean(r["jobs"] for r in runs)}
    for _, key, _ in ROWS:
        values = [r[key] for r in runs if key in r]
        if values:
            out[key] = {"mean": statistics.fmean(values),
                        "sd": statistics.stdev(values) if len(values) > 1 else 0.0}
    return out


def gains(reports: list[dict]) -> dict[str, float]:
    """How much lower the demand-driven cost is than each other regime's, as a fraction
    (mean costs); only the regimes present."""
    cost = {r["regime"]: r["cost"]["mean"] for r in reports}
    if "demand" not in cost:
        return {}
    return {f"vs {name}": 1 - cost["demand"] / c for name, c in cost.items()
            if name != "demand" and c > 0}


def headers() -> list[str]:
    return ["", *(name for name, _, _ in ROWS)]


def cells(report: dict) -> list[str]:
    out = [report["regime"]]
    for _, key, fmt in ROWS:
        fig = report.get(key)
        out.append("-" if fig is None else f"{fmt.format(fig['mean'])} ± {fmt.format(fig['sd'])}")
    return out


def plot(results: list[MigResult], reports: list[dict], path: Path, title: str) -> None:
    """Pending jobs and GPUs in MIG mode over time (one seed), and the cost per regime."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(9, 9))
    for res in results:
        t = [p[0] / HOUR for p in res.series]
        top.step(t, [p[1] for p in res.series], where="post", label=res.regime)
        mid.step(t, [p[2] for p in res.series], where="post", label=res.regime)
    top.set_ylabel("jobs pending")
    mid.set_ylabel("GPUs in MIG mode")
    mid.set_xlabel("hours (0 = midnight of day 1)")
    for ax in (top, mid):
        ax.legend(loc="upper right")
        ax.grid(alpha=0.3)
    names = [r["regime"] for r in reports]
    low.bar(names, [r["cost"]["mean"] for r in reports],
            yerr=[r["cost"]["sd"] for r in reports], capsize=4)
    low.set_ylabel("cost (weighted GPU-h)")
    top.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
