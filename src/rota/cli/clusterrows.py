"""What ``rota queues`` and ``rota nodes`` print, as plain values: their columns (header,
wrapping, drop rank) and rows from the API's answers, and the notes under the nodes' table.

Shared by the Typer commands (``rota.cli.admin``, which lay the rows out with rich) and their
fast twins (``rota.cli.fast``, which print them without rich where the table fits), so that
both print the same; it imports neither typer nor rich.
"""

from __future__ import annotations

from typing import Any

from rota.cli.jobrows import Spec
from rota.core.nodelabels import GPU_MEMORY_ENFORCEMENT, JOB_LIMITS, PRODUCT
from rota.core.shortforms import memory, node_state

# GPU figures; on a narrow terminal COHORT, BORROW and the job counts go first
QUEUE_COLUMNS = (Spec("QUEUE"), Spec("PROJECTS", wrap=True), Spec("COHORT", drop=3),
                 Spec("FLAVOUR"), Spec("QUOTA", drop=2), Spec("USED", drop=1),
                 Spec("FREE"), Spec("BORROW", drop=4), Spec("RUNNING", drop=5),
                 Spec("PENDING", drop=5))
# -o wide: these go before any of the above on a narrow terminal, the last first
WIDE_COLUMNS = (Spec("BORROW LIMIT", drop=6), Spec("LEND LIMIT", drop=7),
                Spec("CPU USED/QUOTA", drop=8), Spec("MEMORY USED/QUOTA", drop=9),
                Spec("WEIGHT", drop=10), Spec("PREEMPTION", wrap=True, drop=11),
                Spec("SLURM PARTITION/QOS", drop=12))
NO_QUEUES = "No queues yet: an operator defines them (cluster file or API)."

# CPU and MEMORY: allocated (rota's jobs and work outside rota) of the node's, as scontrol's
# CPUAlloc/CPUTot and AllocMem/RealMemory
NODE_COLUMNS = (Spec("NODE"), Spec("STATE", wrap=True), Spec("CPU", drop=3),
                Spec("MEMORY", drop=3), Spec("GROUP", drop=9), Spec("GPU"),
                Spec("MODEL"), Spec("PRODUCT", wrap=True, drop=8), Spec("GPU MEM", drop=2),
                Spec("HEALTH", wrap=True, drop=4), Spec("ALLOCATED", drop=1),
                Spec("JOBS", wrap=True))
NO_NODES = "No nodes reported yet: rota up registers this machine's GPUs."


def queue_table(data: list[dict[str, Any]], wide: bool) -> tuple[tuple[Spec, ...], list[list[str]]]:
    """The columns and rows of ``rota queues`` (``-o wide``: ``wide``): a row per flavour of
    each queue."""
    rows = []
    for q in data:
        for f, quota in q["quotas"].items() or [("-", None)]:
            head = [q["name"], who_may_use(q.get("projects")), q["cohort"] or "-"]
            jobs = [str(q["active_jobs"]), str(q["pending_jobs"])]
            more = _wide(q, quota) if wide else []
            if quota is None:
                rows.append(head + ["-", "unlimited", "-", "-", "-"] + jobs + more)
                continue
            rows.append(head + [f, _gpu(quota["nominal"].get("gpu")),
                                _gpu(quota["usage"].get("gpu", 0)),
                                _gpu(quota["available"].get("gpu")),
                                "yes" if quota["borrowing"] else "no"] + jobs + more)
    return QUEUE_COLUMNS + (WIDE_COLUMNS if wide else ()), rows


def who_may_use(projects: list[str] | None) -> str:
    """A queue's binding in words: ``all``, ``none`` (closed to new jobs), or the names."""
    if projects is None:
        return "all"
    return ", ".join(projects) or "none"


def _wide(q: dict, quota: dict | None) -> list[str]:
    """``-o wide``'s values: GPU borrowing and lending limits, CPU and memory used of quota,
    weight, preemption rules in brief, and the Slurm partition and QOS."""
    rules = q.get("preemption") or {}
    brief = ", ".join(f"{k.split('_')[0]}: {v}" for k, v in rules.items()
                      if k in ("within_queue", "reclaim_within_cohort", "borrow_within_cohort"))
    slurm = q.get("slurm") or {}
    batch = "/".join(slurm.get(k) or "-" for k in ("partition", "qos")) if slurm else "-"
    if quota is None:
        limits = ["-", "-", "-", "-"]
    else:
        limits = [_gpu(quota["borrowing_limit"].get("gpu")),
                  _gpu(quota["lending_limit"].get("gpu")),
                  _used_of(quota, "cpu", lambda m: f"{m / 1000:g}"),
                  _used_of(quota, "memory", lambda m: f"{m / 1024:g}Gi")]
    return limits + [f"{q.get('weight', 1):g}", brief or "-", batch]


def _used_of(quota: dict, r: str, show) -> str:
    nominal = quota["nominal"].get(r)
    used = show(quota["usage"].get(r, 0))
    return f"{used}/{'-' if nominal is None else show(nominal)}"


def _gpu(milli: Any) -> str:
    return "unlimited" if milli is None else f"{milli / 1000:g}"


def node_table(data: list[dict[str, Any]], wide: bool) -> tuple[list[Spec], list[list[str]]]:
    """The columns and rows of ``rota nodes``: a row per GPU, ``-o wide`` (``wide``) with
    each node's resource group and its GPUs' full names."""
    rows = [row for n in data for row in _node_rows(n)]
    keep = [k for k, c in enumerate(NODE_COLUMNS) if wide or c.header not in ("GROUP", "PRODUCT")]
    return [NODE_COLUMNS[k] for k in keep], [[r[k] for k in keep] for r in rows]


def node_notes(data: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The sentences under the table, each with the indent of its later lines: a node's
    limits on jobs, and a warning where GPU-memory shares are not enforced."""
    notes = []
    for n in data:
        limits = (n.get("labels") or {}).get(JOB_LIMITS)
        if limits:
            warn = "warning: " if limits.startswith("not enforced") else ""
            notes.append((f"{warn}{n['name']}: jobs' CPU, memory and process limits: {limits}",
                          "  "))
        off = (n.get("labels") or {}).get(GPU_MEMORY_ENFORCEMENT)
        if off:
            notes.append((f"warning: {n['name']}: GPU-memory shares are {off}; a job can use "
                          "more GPU memory than it was given until the check works again "
                          "(see the log of rota up)", "  "))
    return notes


def _gib(mib: int) -> str:
    """Memory allocated, short: ``0``, ``8``, ``1.5`` (GiB, as the total beside it says)."""
    return f"{round(mib / 1024, 1):g}"


def _node_rows(n: dict[str, Any]) -> list[list[str]]:
    """One row per GPU; the node's own columns on its first row only."""
    taken = n.get("allocated") or {"cpu_milli": 0, "memory_mib": 0}
    node = [n["name"], node_state(n), f"{taken['cpu_milli'] / 1000:g}/{n['cpu_milli'] / 1000:g}",
            f"{_gib(taken['memory_mib'])}/{memory(n['memory_mib'])}",
            n.get("resource_group") or "-"]
    if not n["gpus"]:
        return [node + ["-", "no GPU", "-", "-", "-", "-", "-"]]
    rows = []
    for g in n["gpus"]:
        allocs = g["allocations"]
        mig = g.get("mig")  # a MIG instance: held whole, its share is its GPU's part
        used = (1 if allocs else 0) if mig else sum(a["share"] for a in allocs)
        jobs = ", ".join((f"{a['job']}" if a["job"] else a.get("foreign") or "other") +
                         (f" ({a['share']:g})" if a["share"] < 1 and not mig else "")
                         for a in allocs)
        product = (n.get("labels") or {}).get(PRODUCT, "-") if not rows else ""
        model = f"{g['model']} MIG {mig['profile']}" if mig else g["model"]
        rows.append(node + [str(g["index"]), model, product,
                            memory(g["memory_mib"]),
                            "ok" if g["healthy"] else "unhealthy" + (
                                f" ({g['problem']})" if g.get("problem") else ""),
                            f"{used:g}", jobs or "-"])
        node = [""] * len(node)
    return rows
