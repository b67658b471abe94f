"""Measures of a replay: per job and per policy.

Per job: JCT (``finish - submit``), queueing delay (``first start - submit``) and slowdown
(``JCT / duration``). Per policy: average, p50 and p99 of JCT and queueing delay, average
slowdown, makespan (last finish - first submission), GPU utilisation (allocated GPUs / cluster
GPUs) sampled on a regular grid and averaged over the makespan, and Jain's fairness index of
the per-project average slowdowns: ``J = (sum x)^2 / (n * sum x^2)``, 1 when every project
is slowed down alike, ``1/n`` when one project takes all the slowdown.

Percentiles are nearest-rank: ``p`` of ``n`` sorted values is the ``ceil(p/100 * n)``-th.
Jobs rejected or left pending are counted, never averaged in.
"""

from __future__ import annotations

import bisect
import math
import statistics

from rota.simulator.replay import ReplayResult, Run

HOUR = 3600.0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (``p`` in (0, 100])."""
    if not values:
        raise ValueError("no values")
    if not 0 < p <= 100:
        raise ValueError(f"p must be in (0, 100], got {p}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def jain(values: list[float]) -> float:
    """Jain's fairness index of non-negative ``values``; 1.0 for all zeros or one value."""
    if not values:
        raise ValueError("no values")
    if any(v < 0 for v in values):
        raise ValueError("values must not be negative")
    square_sum = sum(v * v for v in values)
    if square_sum == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square_sum)


def jct(r: Run) -> float:
    assert r.finish is not None
    return r.finish - r.submit


def delay(r: Run) -> float:
    assert r.first_start is not None
    return r.first_start - r.submit


def slowdown(r: Run) -> float:
    return jct(r) / r.src.duration


def sample_utilisation(util: list[tuple[float, int]], gpus: int, end: float, points: int = 200
                       ) -> list[tuple[float, float]]:
    """(time, allocated / gpus) of the step function ``util`` at ``points`` evenly spaced
    times from 0 to ``end``."""
    if end <= 0 or points < 2:
        return [(0.0, util[-1][1] / gpus if util else 0.0)]
    times = [t for t, _ in util]
    out = []
    for k in range(points):
        t = end * k / (points - 1)
        i = bisect.bisect_right(times, t) - 1
        out.append((t, (util[i][1] if i >= 0 else 0) / gpus))
    return out


def mean_utilisation(util: list[tuple[float, int]], gpus: int, end: float) -> float:
    """Time-weighted average of allocated / gpus over [0, end] (exact, not sampled)."""
    if end <= 0:
        return 0.0
    area = 0.0
    for (t, a), (t2, _) in zip(util, util[1:] + [(end, 0)]):
        lo, hi = min(t, end), min(t2, end)
        area += a * max(0.0, hi - lo)
    return area / (gpus * end)


def summarise(result: ReplayResult) -> dict:
    """The figures of one replay, as a JSON-ready dict (times in hours)."""
    done = [r for r in result.runs if r.finish is not None]
    out: dict = {"policy": result.policy, "gpus": result.gpus, "jobs": len(result.runs),
                 "finished": len(done), "rejected": len(result.rejected),
                 "stuck": len(result.stuck),
                 "preemptions": sum(r.preemptions for r in result.runs),
                 "lost_gpu_h": sum(r.lost_gpu_s for r in result.runs) / HOUR,
                 "cycles": result.cycles, "cycles_skipped": result.skipped}
    if not done:
        return out
    jcts, delays = [jct(r) for r in done], [delay(r) for r in done]
    makespan = max(r.finish for r in done if r.finish is not None)
    by_project: dict[str, list[float]] = {}
    for r in done:
        by_project.setdefault(r.src.vc, []).append(slowdown(r))
    per_project = {vc: statistics.fmean(v) for vc, v in sorted(by_project.items())}
    out.update({
        "jct_avg_h": statistics.fmean(jcts) / HOUR,
        "jct_p50_h": percentile(jcts, 50) / HOUR,
        "jct_p99_h": percentile(jcts, 99) / HOUR,
        "queue_avg_h": statistics.fmean(delays) / HOUR,
        "queue_p50_h": percentile(delays, 50) / HOUR,
        "queue_p99_h": percentile(delays, 99) / HOUR,
        "slowdown_avg": statistics.fmean(slowdown(r) for r in done),
        "makespan_h": makespan / HOUR,
        "utilisation_avg": mean_utilisation(result.util, result.gpus, makespan),
        "jain_slowdown": jain(list(per_project.values())),
        "slowdown_by_project": per_project,
    })
    return out
