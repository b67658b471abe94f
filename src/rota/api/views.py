"""JSON views of the cluster that need the live jobs: queue usage and GPU allocations.

Units are the store's: GPU quota and usage in milli-GPU (1000 is one GPU), CPU in milli-cores,
memory in MiB. A queue's usage is what its jobs holding resources (scheduled, running,
preempting) are charged, per flavour, with the same book the scheduler keeps
(``rota.scheduler.quota.QuotaBook``); ``available`` is how much more it may take now, cohort
borrowing included (null: not limited), and ``borrowing`` says it is above its nominal quota.

A GPU's allocations name the job holding it only when the caller may see that job's project;
others appear as ``{"job": null}``, with their share, so a member sees how full a GPU is
without learning anything about other projects' jobs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from rota.core import JobState, Node
from rota.scheduler import Snapshot
from rota.scheduler.quota import QuotaBook


def queues_view(snapshot: Snapshot) -> list[dict[str, Any]]:
    active = [j for j in snapshot.jobs if j.state.holds_resources]
    book = QuotaBook(snapshot.queues, snapshot.flavors, active)
    pending = Counter(j.queue for j in snapshot.jobs if j.state is JobState.PENDING)
    running = Counter(j.queue for j in active)
    out = []
    for q in snapshot.queues.values():
        flavors = {}
        for f, quota in q.quotas.items():
            used = {r: book.usage.get((q.name, f, r), 0) for r in ("gpu", "cpu", "memory")}
            flavors[f] = {
                "nominal": dict(quota.nominal), "borrowing_limit": dict(quota.borrowing_limit),
                "lending_limit": dict(quota.lending_limit), "usage": used,
                "available": {r: book.available(q.name, f, r) for r in quota.nominal},
                "borrowing": any(used[r] > n for r, n in quota.nominal.items() if r in used),
            }
        out.append({"name": q.name, "cohort": q.cohort, "quotas": flavors,
                    "active_jobs": running[q.name], "pending_jobs": pending[q.name]})
    return out


def nodes_view(nodes: list[tuple[Node, str, float]], snapshot: Snapshot,
               may_see: Callable[[str], bool]) -> list[dict[str, Any]]:
    held: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for job in snapshot.jobs:
        if job.placement is None or not job.state.holds_resources:
            continue
        visible = may_see(job.project)
        for rank, rep in enumerate(job.placement.replicas):
            for d in rep.devices:
                held.setdefault((rep.node, d.index), []).append({
                    "job": job.id if visible else None,
                    "project": job.project if visible else None,
                    "replica": rank, "share": d.milli / 1000, "memory_mib": d.memory_mib})
    return [{"name": n.name, "resource_group": n.resource_group, "schedulable": n.schedulable,
             "cpu_milli": n.cpu_milli, "memory_mib": n.memory_mib,
             "gpus": [{"index": d.index, "model": d.model, "memory_mib": d.memory_mib,
                       "healthy": d.healthy, "allocations": held.get((n.name, d.index), [])}
                      for d in n.devices],
             "backend": backend, "last_seen": seen}
            for n, backend, seen in nodes]
