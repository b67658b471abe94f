"""Apply a cycle's decisions to a snapshot, as a dry run or a simulation would.

Bound jobs start at ``now``; rejected jobs leave; victims of preemption either start their
grace period (PREEMPTING, still holding their GPUs) or, with ``evict_now``, are requeued at once
as if their grace period were over; the jobs left waiting for their victims are the next
snapshot's ``nominated``. Every move goes through the job state table.
"""

from __future__ import annotations

from dataclasses import replace

from rota.core import JobState
from rota.core.decisions import Decisions
from rota.core.snapshot import Snapshot


def apply_decisions(snapshot: Snapshot, decisions: Decisions, now: float,
                    evict_now: bool = True) -> Snapshot:
    binds = {b.job: b for b in decisions.binds}
    victims = {p.job for p in decisions.preemptions}
    rejected = {r.job for r in decisions.rejects}
    jobs = []
    for job in snapshot.jobs:
        if job.id in rejected:
            continue
        if job.id in binds:
            b = binds[job.id]
            job = job.move_to(JobState.SCHEDULED, placement=b.placement, flavor=b.flavor,
                              started_at=now).move_to(JobState.RUNNING)
        elif job.id in victims:
            if job.state is not JobState.PREEMPTING:
                job = job.move_to(JobState.PREEMPTING)
            if evict_now:
                job = job.move_to(JobState.PENDING, placement=None, flavor=None, started_at=None)
        jobs.append(job)
    return replace(snapshot, jobs=tuple(jobs), nominated=decisions.nominated)
