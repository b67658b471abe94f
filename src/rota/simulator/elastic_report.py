"""Measures of elastic capacity runs, over seeds, a table row per regime and a plot
(docs/elastic.md).

Per run:
- pending-to-running (first start - arrival) of every job: p50, p95, mean, in seconds; and its
  p50 over the jobs that arrived while at least one pool GPU was free (``pool`` only);
- *GPU-node-hours*: the base nodes over the ``hours`` of arrivals, plus every added node from
  the moment it was asked for to its removal (a cloud bills a node from its start);
- *pool GPU-hours*: every attached pool GPU from the attach asked for to its return;
- *GPU-hours provisioned*: GPU-node-hours x GPUs per node + pool GPU-hours;
- *cost*: GPU-node-hours x the node's cost per hour + pool GPU-hours x a pool GPU's;
- nodes added, attaches, and *double attaches* (a pool GPU attached while it was attached).

Percentiles are nearest-rank (``replay_metrics.percentile``). Over seeds: each figure's mean
and sample standard deviation. The only I/O is ``plot`` (matplotlib, imported lazily).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.simulator.elastic import ElasticResult
from rota.simulator.elastic_workload import HOUR
from rota.simulator.replay_metrics import percentile

FIGURES = ("wait_p50_s", "wait_p95_s", "wait_avg_s", "wait_p50_pool_free_s", "gpu_node_hours",
           "pool_gpu_hours", "gpu_hours", "cost", "nodes_added", "attaches", "double_attaches",
           "stuck")


def summarise(result: ElasticResult) -> dict:
    exp, end = result.exp, result.end
    waits = [r.start - r.work.arrival for r in result.runs if r.start is not None]
    free = [r.start - r.work.arrival for r in result.runs
            if r.start is not None and r.pool_free > 0]
    node_h = sum(((n.removed if n.removed is not None else end) - n.asked)
                 for n in result.added) / HOUR
    pool_h = sum(((a.returned if a.returned is not None else end) - a.asked)
                 for a in result.atts) / HOUR
    gpu_node_h = exp.base_nodes * exp.hours + node_h
    out = {
        "regime": result.regime, "seed": result.seed, "jobs": len(result.runs),
        "stuck": sum(r.start is None for r in result.runs),
        "gpu_node_hours": gpu_node_h, "added_node_hours": node_h, "pool_gpu_hours": pool_h,
        "gpu_hours": gpu_node_h * exp.node_gpus + pool_h,
        "cost": gpu_node_h * exp.node_cost_h + pool_h * exp.pool_cost_gpu_h,
        "nodes_added": len(result.added), "attaches": len(result.atts),
        "double_attaches": result.double_attaches, "cycles": result.cycles,
        "plans": result.plans,
    }
    if waits:
        out.update({"wait_p50_s": percentile(waits, 50), "wait_p95_s": percentile(waits, 95),
                    "wait_avg_s": statistics.fmean(waits)})
    if free and result.regime == "pool":
        out["wait_p50_pool_free_s"] = percentile(free, 50)
        out["jobs_pool_free"] = len(free)
    return out


def over_seeds(runs: list[dict]) -> dict:
    """Mean and sd of each figure over the runs of one regime."""
    out: dict = {"regime": runs[0]["regime"], "seeds": [r["seed"] for r in runs],
                 "jobs": runs[0]["jobs"]}
    for key in FIGURES:
        values = [r[key] for r in runs if key in r]
        if values:
            out[key] = {"mean": statistics.fmean(values),
                        "sd": statistics.stdev(values) if len(values) > 1 else 0.0}
    return out


ROWS = (("pending->running p50 (s)", "wait_p50_s", "{:.0f}"),
        ("pending->running p95 (s)", "wait_p95_s", "{:.0f}"),
        ("pending->running mean (s)", "wait_avg_s", "{:.0f}"),
        ("p50 when a pool GPU was free (s)", "wait_p50_pool_free_s", "{:.0f}"),
        ("GPU-node-hours", "gpu_node_hours", "{:.1f}"),
        ("pool GPU-hours", "pool_gpu_hours", "{:.1f}"),
        ("GPU-hours provisioned", "gpu_hours", "{:.0f}"),
        ("cost", "cost", "{:.0f}"),
        ("nodes added", "nodes_added", "{:.1f}"),
        ("pool attaches", "attaches", "{:.1f}"),
        ("double attaches", "double_attaches", "{:.0f}"),
        ("jobs never started", "stuck", "{:.0f}"))


def headers() -> list[str]:
    return ["", *(name for name, _, _ in ROWS)]


def cells(report: dict) -> list[str]:
    """A regime's figures, as ``mean ± sd`` (``-`` where it has none)."""
    out = [report["regime"]]
    for _, key, fmt in ROWS:
        value = report.get(key)
        if value is None:
            out.append("-")
        elif value["sd"]:
            out.append(f"{fmt.format(value['mean'])} ± {fmt.format(value['sd'])}")
        else:
            out.append(fmt.format(value["mean"]))
    return out


def plot(results: list[ElasticResult], path: Path | str, title: str = "") -> None:
    """Top: GPUs provisioned over time (nodes' GPUs, attached pool GPUs) per regime, first
    seed; middle: jobs pending over time; bottom: the distribution of pending-to-running."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(11, 10))
    colours = {"node-only": "tab:orange", "pool": "tab:blue"}
    for res in results:
        exp, c = res.exp, colours.get(res.regime, "black")
        hours = [t / HOUR for t, *_ in res.series]
        top.step(hours, [n * exp.node_gpus for _, n, _, _ in res.series], where="post",
                 color=c, label=f"{res.regime}: GPUs of nodes")
        if res.regime == "pool":
            top.step(hours, [n * exp.node_gpus + a for _, n, a, _ in res.series],
                     where="post", color=c, linestyle="--", label="pool: nodes + attached")
        mid.step(hours, [p for *_, p in res.series], where="post", color=c, label=res.regime)
        waits = sorted(r.start - r.work.arrival for r in res.runs if r.start is not None)
        low.plot(waits, [(k + 1) / len(waits) for k in range(len(waits))], color=c,
                 label=res.regime)
    top.set_ylabel("GPUs provisioned")
    mid.set_ylabel("jobs pending")
    for ax in (top, mid):
        ax.set_xlabel("hours")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    low.set_xscale("symlog", linthresh=10)
    low.set_xlabel("pending to running (s)")
    low.set_ylabel("share of jobs")
    low.legend(fontsize=8)
    low.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
