"""Reports of replays: a table row per policy and a plot (JCT CDF per policy, GPU utilisation
over time). Plain data in; the only I/O is ``plot``, which writes a PNG with matplotlib
(imported lazily: it is slow to import)."""

from __future__ import annotations

from pathlib import Path

from rota.simulator.replay import ReplayResult
from rota.simulator.replay_metrics import HOUR, jct, sample_utilisation

COLUMNS = (
    ("policy", "policy", "{}"), ("finished", "finished", "{:,}"), ("rejected", "rejected", "{:,}"),
    ("jct_avg_h", "JCT avg h", "{:.2f}"), ("jct_p50_h", "JCT p50 h", "{:.2f}"),
    ("jct_p99_h", "JCT p99 h", "{:.1f}"), ("queue_avg_h", "queue avg h", "{:.2f}"),
    ("queue_p50_h", "queue p50 h", "{:.2f}"), ("queue_p99_h", "queue p99 h", "{:.1f}"),
    ("slowdown_avg", "slowdown", "{:.1f}"), ("makespan_h", "makespan h", "{:.0f}"),
    ("utilisation_avg", "util", "{:.1%}"), ("jain_slowdown", "Jain", "{:.3f}"),
    ("preemptions", "preempt", "{:,}"), ("lost_gpu_h", "lost GPU-h", "{:.1f}"),
)


def row(summary: dict) -> list[str]:
    """One table row; a figure the summary lacks (nothing finished) shows as ``-``."""
    return [fmt.format(summary[key]) if key in summary else "-" for key, _, fmt in COLUMNS]


def headers() -> list[str]:
    return [title for _, title, _ in COLUMNS]


def plot(results: list[ReplayResult], path: Path | str, title: str = "") -> None:
    """Left: the CDF of JCT (hours, log scale) per policy. Right: allocated GPUs / cluster
    GPUs over time per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for res in results:
        done = sorted(jct(r) / HOUR for r in res.runs if r.finish is not None)
        if not done:
            continue
        n = len(done)
        left.plot(done, [(k + 1) / n for k in range(n)], label=res.policy)
        end = max(r.finish for r in res.runs if r.finish is not None)
        grid = sample_utilisation(res.util, res.gpus, end, 400)
        right.plot([t / HOUR for t, _ in grid], [100 * u for _, u in grid], label=res.policy,
                   linewidth=0.8)
    left.set_xscale("log")
    left.set_xlabel("job completion time (hours)")
    left.set_ylabel("fraction of jobs")
    left.grid(alpha=0.3)
    left.legend()
    right.set_xlabel("time since the first submission (hours)")
    right.set_ylabel("GPUs allocated (%)")
    right.set_ylim(0, 105)
    right.grid(alpha=0.3)
    fig.suptitle(title or "trace replay")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
