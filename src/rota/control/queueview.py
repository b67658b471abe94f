"""The JSON view of queues for the API: quotas, usage and borrowing, who may use each.

Units are the store's: GPU quota and usage in milli-GPU (1000 is one GPU), CPU in milli-cores,
memory in MiB. A queue's usage is what its jobs holding resources (scheduled, running,
preempting) are charged, per flavour, with the same book the scheduler keeps
(``rota.scheduler.quota.QuotaBook``); ``available`` is how much more it may take now, cohort
borrowing included (null: not limited), and ``borrowing`` says it is above its nominal quota.
A queue's ``projects`` lists the projects whose new jobs it admits (null: every project, an
empty list: none); ``weight`` is its share under fair sharing, ``preemption`` its rules (as the
queues file says them). It lives here, beside the control loop, because it needs the scheduler's
book, which the API does not import.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any, Mapping

from rota.core import JobState, Snapshot
from rota.scheduler.idle import IdlePolicy, effective
from rota.scheduler.quota import QuotaBook
from rota.store.admin import Binding


def queues_view(snapshot: Snapshot, bindings: Mapping[str, Binding],
                idle: Mapping[str, Any] | None = None,
                batch: Mapping[str, Any] | None = None,
                pending: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """Each queue's quotas with usage and borrowing, who may use it, its jobs, the idle
    reclamation defaults its jobs get (the global ones made stricter by the queue's), and its
    batch options (``slurm``: partition, QOS and what its jobs may choose; null: none).
    ``pending``: each queue's pending jobs counted already (``Store.queue_overview``, whose
    snapshot holds only the jobs that hold resources); else counted in ``snapshot``."""
    idle, batch = idle or {}, batch or {}
    active = [j for j in snapshot.jobs if j.state.holds_resources]
    book = QuotaBook(snapshot.queues, snapshot.flavors, active)
    if pending is None:
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
                    "active_jobs": running[q.name], "pending_jobs": pending.get(q.name, 0),
                    "idle": None if defaults.empty else asdict(defaults),
                    "slurm": batch.get(q.name), "weight": q.weight,
                    "preemption": {"within_queue": str(q.within_queue),
                                   "reclaim_within_cohort": str(q.reclaim_within_cohort),
                                   "borrow_within_cohort": str(q.borrow_within_cohort),
                                   "max_priority_threshold": q.max_priority_threshold,
                                   "min_runtime_s": q.min_runtime_s,
                                   "strict_priority": q.strict_priority}})
    return out
