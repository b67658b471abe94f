"""What the dashboard's templates draw, shaped from the API's views (``rota.api.reads``):
nothing here reads the store or decides who sees what.

- ``gpu_cells``: one cell per GPU of a node, with a bar segment per holder: a job the caller
  may see (its id, name and project), a job of a project it may not see (``other``: only the
  share, as ``rota nodes`` shows it to members), or work outside rota (``foreign``: the holder
  named only to operators, as the API does);
- ``quota_rows``: a queue's quota per flavour and resource as a bar: used within the nominal
  quota, borrowed beyond it, and the limit it may grow to;
- ``usage_bars``: decayed GPU-hours per project, scaled to the largest.

Bars are drawn as SVG rectangles whose ``x`` and ``width`` are percentages, so the pages need
no inline style (the dashboard's Content-Security-Policy forbids it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rota.core.wording import amount

RESOURCES = ("gpu", "cpu", "memory")


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str                  # job, other, foreign, free
    x: float                   # percent of the bar
    width: float
    label: str                 # shown next to the bar and as the segment's title
    job: str | None = None     # a link to the job's page, where the caller may see it


@dataclass(frozen=True, slots=True)
class GpuCell:
    index: int
    model: str
    memory: str
    healthy: bool
    problem: str | None
    used: float
    segments: list[Segment] = field(default_factory=list)


def gpu_cells(node: dict[str, Any], names: dict[str, str]) -> list[GpuCell]:
    """``names``: job id -> name, for the jobs the caller may see."""
    cells = []
    for g in node["gpus"]:
        segments, x = [], 0.0
        for a in g["allocations"]:
            share = min(a["share"], max(0.0, 1 - x / 100))
            width = share * 100
            segments.append(Segment(_kind(a), x, width, _holder(a, names), a["job"]))
            x += width
        used = sum(a["share"] for a in g["allocations"])
        if used < 1:
            segments.append(Segment("free", x, 100 - x, f"free: {1 - used:.3g}"))
        cells.append(GpuCell(g["index"], g["model"], amount("memory", g["memory_mib"]),
                             g["healthy"], g.get("problem"), used, segments))
    return cells


def _kind(allocation: dict[str, Any]) -> str:
    if allocation.get("foreign"):
        return "foreign"
    return "job" if allocation["job"] is not None else "other"


def _holder(a: dict[str, Any], names: dict[str, str]) -> str:
    share = f"{a['share']:g} GPU" + (f", {amount('memory', a['memory_mib'])}"
                                     if a["share"] < 1 and a.get("memory_mib") else "")
    if a.get("foreign"):
        return f"{a['foreign']}: {share}"
    if a["job"] is None:
        return f"another project: {share}"
    name = names.get(a["job"])
    replica = f", replica {a['replica']}" if a.get("replica") else ""
    return (f"job {a['job']}" + (f" {name}" if name else "") + f" ({a['project']}{replica}): "
            + share)


@dataclass(frozen=True, slots=True)
class QuotaBar:
    flavor: str
    resource: str
    nominal: str
    used: str
    borrowed: str | None       # beyond the nominal quota; None: not borrowing
    limit: str                 # how far it may grow: nominal plus borrowing limit, or unlimited
    available: str             # how much more it may take now
    segments: list[Segment]
    nominal_x: float           # where the nominal quota ends on the bar, in percent


def quota_rows(queue: dict[str, Any]) -> list[QuotaBar]:
    rows = []
    for flavor, q in sorted(queue["quotas"].items()):
        for r in RESOURCES:
            if r not in q["nominal"]:
                continue
            nominal, used = q["nominal"][r], q["usage"].get(r, 0)
            extra = q["borrowing_limit"].get(r)
            top = nominal + extra if extra is not None else None
            scale = max(v for v in (nominal, used, top or 0, 1))
            within, beyond = min(used, nominal), max(0, used - nominal)
            segments = [Segment("job", 0, 100 * within / scale, f"used: {_amount(r, within)}")]
            if beyond:
                segments.append(Segment("borrowed", 100 * within / scale, 100 * beyond / scale,
                                        f"borrowed: {_amount(r, beyond)}"))
            available = q["available"].get(r)
            rows.append(QuotaBar(flavor, r, _amount(r, nominal), _amount(r, used),
                                 _amount(r, beyond) if beyond else None,
                                 "unlimited" if top is None else _amount(r, top),
                                 "no limit" if available is None else _amount(r, available),
                                 segments, 100 * nominal / scale))
    return rows


def _amount(resource: str, value: float) -> str:
    """Quota units (milli-GPU, milli-CPU, MiB) as people read them."""
    if resource in ("gpu", "cpu"):
        return amount(resource, value / 1000)
    return amount(resource, value)


@dataclass(frozen=True, slots=True)
class UsageBar:
    project: str
    gpu_hours: float
    width: float


def usage_bars(usage: dict[str, float]) -> list[UsageBar]:
    """Decayed GPU-seconds per project as GPU-hours, the largest first."""
    top = max(usage.values(), default=0) or 1
    return [UsageBar(p, s / 3600, 100 * s / top)
            for p, s in sorted(usage.items(), key=lambda kv: (-kv[1], kv[0]))]
