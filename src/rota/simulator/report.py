"""Summaries of packing runs over seeds: the figure of merit (unallocated GPU % at 100 %
arrived, mean and sample sd over seeds), the curve (per arrived % bin: mean, median and the
50 % interval over seeds), and a plot.

Everything here is plain data in, plain data out (a JSON-ready dict); the only I/O is
``plot``, which writes a PNG with matplotlib (imported lazily: it is slow to import).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rota.simulator.pack import MAX_BIN, PackRun

MERIT_AT = 100


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def spread(values: list[float]) -> dict[str, float]:
    """Mean and standard deviation of figures over seeds (sd 0 for one seed)."""
    return {"mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def _stats(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 4),
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0}


def summarise(runs: list[PackRun]) -> dict:
    """One policy's runs (one per seed) -> the report dict printed by ``rota sim pack --json``."""
    if not runs:
        raise ValueError("no runs to summarise")
    policies = {r.policy for r in runs}
    if len(policies) != 1:
        raise ValueError(f"runs of several policies: {sorted(policies)}")
    runs = sorted(runs, key=lambda r: r.seed)
    merit = [p.unallocated for r in runs if (p := r.at(MERIT_AT)) is not None]
    curve = []
    for b in range(MAX_BIN + 1):
        points = [p for r in runs if (p := r.at(b)) is not None]
        if not points:
            continue
        un = [p.unallocated for p in points]
        curve.append({
            "arrived_pct": b,
            "unallocated_pct": round(statistics.fmean(un), 4),
            "unallocated_median": round(statistics.median(un), 4),
            "unallocated_p25": round(_quantile(un, 0.25), 4),
            "unallocated_p75": round(_quantile(un, 0.75), 4),
            "frag_amount_pct": round(statistics.fmean(p.frag_amount for p in points), 4),
            "frag_rate_pct": round(statistics.fmean(p.frag_rate for p in points), 4),
        })
    return {
        "policy": runs[0].policy,
        "seeds": [r.seed for r in runs],
        "pods": [r.pods for r in runs],
        "failed": [r.failed for r in runs],
        "unallocated_pct_at_100": _stats(merit) if merit else None,
        "unallocated_pct_at_100_per_seed": [round(v, 4) for v in merit],
        "curve": curve,
    }


def plot(reports: list[dict], path: Path | str, title: str = "") -> None:
    """Unallocated GPU % against arrived workload: the median over seeds and its 50 % band,
    one line per policy, with the ideal ``max(0, 100 - arrived)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = list(range(MAX_BIN + 1))
    ax.plot(xs, [max(0, 100 - x) for x in xs], color="grey", linestyle=":", label="ideal")
    for rep in reports:
        c = rep["curve"]
        x = [p["arrived_pct"] for p in c]
        line, = ax.plot(x, [p["unallocated_median"] for p in c], label=rep["policy"])
        ax.fill_between(x, [p["unallocated_p25"] for p in c], [p["unallocated_p75"] for p in c],
                        color=line.get_color(), alpha=0.2)
    ax.set_xlim(80, MAX_BIN)
    ax.set_ylim(0, 25)
    ax.set_xlabel("arrived workload (% of cluster GPU)")
    ax.set_ylabel("unallocated GPU (%)")
    ax.set_title(title or "packing: unallocated GPU vs arrived workload")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
