"""JSON views of the cluster that need the live jobs: queue usage and GPU allocations.

Units are the store's: GPU quota and usage in milli-GPU (1000 is one GPU), CPU in milli-cores,
memory in MiB. A queue's usage is what its jobs holding resources (scheduled, running,
preempting) are charged, per flavour, with the same book the scheduler keeps
(``rota.scheduler.quota.QuotaBook``); ``available`` is how much more it may take now, cohort
borrowing included (null: not limited), and ``borrowing`` says it is above its nominal quota.

A queue's ``projects`` lists the projects whose new jobs it admits (null: every project, an
empty list: none). A node's ``state`` is ``ok``, ``cordoned``, ``draining`` (drained while jobs
still hold resources there) or ``drained`` (drained and empty); ``reason`` is the operator's.

A GPU's allocations name the job holding it only when the caller may see that job's project;
others appear as ``{"job": null}``, with their share, so a member sees how full a GPU is
without learning anything about other projects' jobs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any, Callable, Mapping

from rota.core import JobState
from rota.core import Snapshot
from rota.scheduler.idle import IdlePolicy, effective
from rota.scheduler.quota import QuotaBook
from rota.store.admin import Binding, NodeRecord


def queues_view(snapshot: Snapshot, bindings: Mapping[str, Binding],
                idle: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each queue's quotas with usage and borrowing, who may use it, its jobs, and the idle
    reclamation defaults its jobs get (the global ones made stricter by the queue's)."""
    idle = idle or {}
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
        bound = bindings.get(q.name)
        defaults = effective(IdlePolicy.of(idle.get("*")), IdlePolicy.of(idle.get(q.name)))
        out.append({"name": q.name, "cohort": q.cohort, "quotas": flavors,
                    "projects": None if bound is None else list(bound),
                    "active_jobs": running[q.name], "pending_jobs": pending[q.name],
                    "idle": None if defaults.empty else asdict(defaults)})
    return out


def node_state(rec: NodeRecord, busy: bool) -> str:
    """The operator's state first (drained, draining, cordoned), then the backend's
    (``unavailable``: its ``problem`` says why), else ok."""
    if rec.drain:
        return "draining" if busy else "drained"
    if rec.cordoned:
        return "cordoned"
    return "unavailable" if rec.node.problem else "ok"


def nodes_view(records: list[NodeRecord], snapshot: Snapshot, may_see: Callable[[str], bool],
               operator: bool = False) -> list[dict[str, Any]]:
    """Nodes with what holds each GPU: rota's jobs (ids and projects only where ``may_see``)
    and work outside rota (who holds it: operators only)."""
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
    for r in records:
        for f in r.node.foreign:
            for d in f.devices:
                held.setdefault((r.node.name, d.index), []).append({
                    "job": None, "project": None, "replica": None, "share": d.milli / 1000,
                    "memory_mib": d.memory_mib,
                    "foreign": f.holder if operator else "work outside rota"})
    busy = {rep.node for job in snapshot.jobs if job.placement is not None
            and job.state.holds_resources for rep in job.placement.replicas}
    return [{"name": n.name, "resource_group": n.resource_group, "schedulable": n.schedulable,
             "state": node_state(r, n.name in busy), "drain": r.drain, "reason": r.reason,
             "problem": n.problem, "cpu_milli": n.cpu_milli, "memory_mib": n.memory_mib,
             "foreign": [{"holder": f.holder if operator else "work outside rota",
                          "cpu_milli": f.cpu_milli, "memory_mib": f.memory_mib,
                          "gpus": len(f.devices)} for f in n.foreign],
             "gpus": [{"index": d.index, "model": d.model, "memory_mib": d.memory_mib,
                       "healthy": d.healthy, "problem": d.problem,
                       "allocations": held.get((n.name, d.index), [])}
                      for d in n.devices],
             "backend": r.backend, "last_seen": r.last_seen}
            for r in records for n in [r.node]]
