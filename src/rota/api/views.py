"""JSON views of the cluster that need the live jobs: GPU allocations (queue usage, which
needs the scheduler's quota book, is ``rota.control.queueview``).

A node's ``state`` is ``ok``, ``cordoned``, ``draining`` (drained while jobs
still hold resources there) or ``drained`` (drained and empty); ``reason`` is the operator's.

A GPU's allocations name the job holding it only when the caller may see that job's project;
others appear as ``{"job": null}``, with their share, so a member sees how full a GPU is
without learning anything about other projects' jobs.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from rota.core import Job, JobState
from rota.store.admin import NodeRecord


def node_state(rec: NodeRecord, busy: bool) -> str:
    """The operator's state first (drained, draining, cordoned), then the backend's
    (``unavailable``: its ``problem`` says why), else ok."""
    if rec.drain:
        return "draining" if busy else "drained"
    if rec.cordoned:
        return "cordoned"
    return "unavailable" if rec.node.problem else "ok"


def nodes_view(records: list[NodeRecord], holding: Iterable[Job],
               may_see: Callable[[str], bool], operator: bool = False) -> list[dict[str, Any]]:
    """Nodes with what holds each GPU: rota's jobs (``holding``: those that hold resources;
    ids and projects only where ``may_see``) and work outside rota (who holds it: operators
    only); ``allocated``: the CPU and memory that rota's jobs holding resources there and work
    outside rota take of the node."""
    holding = list(holding)
    held: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for job in holding:
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
    busy = {rep.node for job in holding if job.placement is not None
            and job.state.holds_resources for rep in job.placement.replicas}
    taken: dict[str, list[int]] = {}  # node -> [milli-CPU, MiB] rota's jobs and foreign work hold
    for job in holding:
        if job.placement is not None and job.state.holds_resources:
            for rep in job.placement.replicas:
                mine = taken.setdefault(rep.node, [0, 0])
                mine[0] += job.request.cpu_milli
                mine[1] += job.request.memory_mib
    for r in records:
        for f in r.node.foreign:
            mine = taken.setdefault(r.node.name, [0, 0])
            mine[0] += f.cpu_milli
            mine[1] += f.memory_mib
    return [{"name": n.name, "resource_group": n.resource_group, "schedulable": n.schedulable,
             "state": node_state(r, n.name in busy), "drain": r.drain, "reason": r.reason,
             "problem": n.problem, "cpu_milli": n.cpu_milli, "memory_mib": n.memory_mib,
             "allocated": {"cpu_milli": taken.get(n.name, [0, 0])[0],
                           "memory_mib": taken.get(n.name, [0, 0])[1]},
             "labels": dict(n.labels), "features": sorted(n.features),
             "foreign": [{"holder": f.holder if operator else "work outside rota",
                          "cpu_milli": f.cpu_milli, "memory_mib": f.memory_mib,
                          "gpus": len(f.devices)} for f in n.foreign],
             "gpus": [{"index": d.index, "model": d.model, "memory_mib": d.memory_mib,
                       "healthy": d.healthy, "problem": d.problem,
                       "allocations": held.get((n.name, d.index), []),
                       **({"mig": {"profile": d.profile, "gpu": d.parent, "start": d.start,
                                   "compute_slices": d.compute}} if d.mig else {})}
                      for d in n.devices],
             "backend": r.backend, "last_seen": r.last_seen}
            for r in records for n in [r.node]]
