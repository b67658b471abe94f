"""Changing a job, as ``scontrol update`` and ``scontrol requeue`` do.

``update_pending``: a pending job's walltime, priority or queue. ``requeue``: a job that holds
resources goes back to pending (below).

Only a PENDING job changes (held or not): one that holds resources runs as it was bound.
A member may only make its job ask for less, as Slurm lets a user lower a time limit or a
priority but not raise them; an operator may set either. A new queue must exist and admit the
job's project, as at submit; a job whose batch options (``run.slurm``) its queue filled in
cannot move (they would no longer be its new queue's): cancel it and submit again. Each change
is one event of the job's history that names what changed, from what, to what.

A requeue takes the preemption path: a SCHEDULED or RUNNING job moves to PREEMPTING with its
checkpoint grace (``preempt_deadline`` = now + ``grace_s``), so the control loop sends its
checkpoint signal, stops it once it checkpointed or the grace is over, and moves it to PENDING
with the end ``preempted`` (which spends no restart budget); it is then scheduled again like
any pending job. It is refused for a pending job (nothing to requeue), a job already leaving
(PREEMPTING, or its cancel requested) and a finished one: unlike Slurm, which requeues a
finished batch job, rota's ended states are final (the attempt's accounting is closed), so a
finished job is submitted again instead. Who may ask (owner or operator) is the API's check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Connection

from rota.core import InvalidSpec, IllegalTransition, JobState
from rota.core.shortforms import duration
from rota.store.jobs import check_name, get
from rota.store.moves import move, write
from rota.store.submit import check_queue_admits

PRIORITY_BOUND = 1_000_000  # as a job file's priority


@dataclass(frozen=True, slots=True)
class Change:
    """What to change; None: leave it. ``walltime_s`` 0 is refused (no walltime cannot be
    asked for again once given)."""

    walltime_s: float | None = None
    priority: int | None = None
    queue: str | None = None

    @property
    def empty(self) -> bool:
        return self.walltime_s is None and self.priority is None and self.queue is None


def requeue(conn: Connection, job_id: object, by: str, now: float) -> None:
    """Send a job holding resources back to pending through its grace (module docstring)."""
    row = get(conn, job_id, lock=True)
    state = JobState(row.state)
    if state is JobState.PENDING:
        raise IllegalTransition(f"job {row.id} is already pending: nothing to requeue")
    if state.terminal:
        raise IllegalTransition(f"job {row.id} has {state}: a finished job is not requeued; "
                                "submit it again")
    if state is JobState.PREEMPTING or row.cancel_requested:
        raise IllegalTransition(f"job {row.id} is already stopping "
                                f"({'cancel requested' if row.cancel_requested else state})")
    grace = row.spec["grace_s"]
    why = f"requeued by {by}"
    move(conn, row, JobState.PREEMPTING, now, why, {"by": by, "reason": "requeue",
                                                   "grace_s": grace},
         preempt_deadline=now + grace, reason=why)


def update_pending(conn: Connection, job_id: object, change: Change, by: str, operator: bool,
                   now: float) -> list[str]:
    """Apply ``change`` to a pending job (see the module docstring); what changed, in words."""
    if change.empty:
        raise InvalidSpec("", "nothing to change: give a walltime, a priority or a queue")
    row = get(conn, job_id, lock=True)
    if JobState(row.state) is not JobState.PENDING:
        raise IllegalTransition(f"job {row.id} is {row.state}: only a pending job can be "
                                "changed; cancel it and submit it again")
    spec, values, said = dict(row.spec), {}, []
    if change.walltime_s is not None:
        new = change.walltime_s
        if not (math.isfinite(new) and new > 0):
            raise InvalidSpec("walltime", f"must be a duration above 0, got {new!r}")
        old = spec.get("walltime_s")
        if not operator and old is not None and new > old:
            raise InvalidSpec("walltime", f"{duration(new)} is more than the job's "
                              f"{duration(old)}: only an operator may raise a walltime")
        spec["walltime_s"] = new
        said.append(f"walltime {'none' if old is None else duration(old)} -> {duration(new)}")
    if change.priority is not None:
        new, old = change.priority, row.priority
        if not -PRIORITY_BOUND <= new <= PRIORITY_BOUND:
            raise InvalidSpec("priority", f"must be between {-PRIORITY_BOUND} and "
                              f"{PRIORITY_BOUND}, got {new}")
        if not operator and new > old:
            raise InvalidSpec("priority", f"{new} is above the job's {old}: only an operator "
                              "may raise a priority")
        values["priority"] = new
        said.append(f"priority {old} -> {new}")
    if change.queue is not None and change.queue != row.queue:
        check_name(change.queue, "queue")
        if (spec.get("run") or {}).get("slurm"):
            raise InvalidSpec("queue", f"job {row.id}'s batch options came from queue "
                              f"{row.queue}; cancel it and submit it again to another queue")
        check_queue_admits(conn, change.queue, row.project)
        values["queue"] = change.queue
        said.append(f"queue {row.queue} -> {change.queue}")
    if not said:
        return []
    write(conn, row, now, "updated", f"updated by {by}: {', '.join(said)}",
          {"by": by, "changes": said}, spec=spec, **values)
    return said

