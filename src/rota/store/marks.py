"""Job rows written without a change of state: notes in a job's history, holds and releases,
checkpoints, the handles and placements its backend reports, and up to when it is billed.

Every function takes an open connection; the caller (``Store``) owns the transaction. Each
write but ``note_billed`` goes through ``rota.store.moves.write``, under the rules written
there (one version and one event per write, guarded by the version read).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, or_, update

from rota.core import IllegalTransition, InvalidSpec, JobState, Placement
from rota.core.shortforms import STARTING
from rota.store import accounting, convert
from rota.store.jobs import get, job_key
from rota.store.moves import write
from rota.store.schema import attempts, jobs


def note(conn: Connection, job_id: object, kind: str, message: str, now: float) -> None:
    """An event in the job's history that changes nothing else (a warning, say)."""
    row = get(conn, job_id, lock=True)
    write(conn, row, now, kind, message, {})


def record_checkpoint(conn: Connection, job_id: object, attempt: int | None, now: float) -> None:
    """The running attempt (``attempt``, when the caller names one) has just checkpointed."""
    row = get(conn, job_id, lock=True)
    if not JobState(row.state).holds_resources:
        raise IllegalTransition(f"job {row.id} is {row.state}: only a running job checkpoints")
    if attempt is not None and attempt != row.attempts:
        raise IllegalTransition(f"attempt {attempt} of job {row.id} has ended")
    write(conn, row, now, "checkpoint", f"attempt {row.attempts} checkpointed",
          {"attempt": row.attempts}, last_checkpoint_at=now)
    conn.execute(update(attempts).where((attempts.c.job == row.id)
                                        & (attempts.c.attempt == row.attempts))
                 .values(last_checkpoint_at=now))


def hold(conn: Connection, job_id: object, reason: str, by: str, now: float) -> None:
    """Hold a pending job back from scheduling (``reason`` says why) until it is released."""
    row = get(conn, job_id, lock=True)
    if JobState(row.state) is not JobState.PENDING:
        raise IllegalTransition(f"job {row.id} is {row.state}: only a pending job can be held")
    if len(reason) > 1000:
        raise InvalidSpec("reason", "must be at most 1000 characters")
    write(conn, row, now, "held", f"held by {by}: {reason}", {"by": by, "reason": reason},
          held=f"{reason} (held by {by})" if reason else f"held by {by}")


def release(conn: Connection, job_id: object, by: str, now: float) -> None:
    """Let a held job be scheduled again; it starts a new streak of faults."""
    row = get(conn, job_id, lock=True)
    if not row.held:
        raise IllegalTransition(f"job {row.id} is not held")
    write(conn, row, now, "released", f"released by {by}", {"by": by}, held="", lost_streak=0)


def record_handle(conn: Connection, job_id: object, handle: dict[str, Any], now: float,
                  launched: str | None = None) -> None:
    """Save the backend handle of a job that holds resources without moving it: an attempt
    found after a restart (for a job being preempted or cancelled), or, with ``launched`` (the
    backend's name), a launch its backend holds but has not started yet; that job stays
    SCHEDULED until its backend says it runs."""
    row = get(conn, job_id, lock=True)
    if not JobState(row.state).holds_resources:
        raise IllegalTransition(f"job {row.id} is {row.state}: it holds no resources")
    attempt = handle.get("attempt")
    if launched is not None:
        write(conn, row, now, "launched", f"attempt {attempt} launched; starting: {launched} "
              "has not started it yet", {"attempt": attempt}, backend_handle=handle,
              reason=f"{STARTING}launched, waiting for {launched} to start it")
        return
    write(conn, row, now, "adopted", f"attempt {attempt} found running after a restart",
          {"attempt": attempt}, backend_handle=handle)


def record_waiting(conn: Connection, job_id: object, reason: str, now: float) -> None:
    """Say why a SCHEDULED job's backend has not started its launch yet (``reason``), as the
    job's reason, when that changed."""
    row = get(conn, job_id, lock=True)
    if row.state != str(JobState.SCHEDULED):
        raise IllegalTransition(f"job {row.id} is {row.state}, not starting")
    if row.reason != reason:
        write(conn, row, now, "waiting", reason, {"reason": reason}, reason=reason)


def record_placement(conn: Connection, job_id: object, placement: Placement,
                     now: float) -> None:
    """Replace the placement of a job that holds resources with where its backend put it
    (Slurm chooses the devices on each node, or the nodes too), so that what the scheduler
    counts as taken is what is taken."""
    row = get(conn, job_id, lock=True)
    if not JobState(row.state).holds_resources:
        raise IllegalTransition(f"job {row.id} is {row.state}: it holds no resources")
    if len(placement.replicas) != row.replicas:
        raise InvalidSpec("placement", f"has {len(placement.replicas)} replicas, job {row.id} "
                                       f"has {row.replicas}")
    where = "; ".join(f"{r.node}" + (f" GPU {','.join(str(d.index) for d in r.devices)}"
                                     if r.devices else "") for r in placement.replicas)
    stored = convert.placement_json(placement)
    write(conn, row, now, "placed", f"runs on {where}", {"placement": stored}, placement=stored)
    conn.execute(update(attempts).where((attempts.c.job == row.id)
                                        & (attempts.c.attempt == row.attempts))
                 .values(placement=stored, gpus=accounting.gpus_by_model(conn, stored)))


_NOTE_BILLED = (update(jobs).where(jobs.c.id == bindparam("key"),
                                   or_(jobs.c.billed_until.is_(None),
                                       jobs.c.billed_until < bindparam("until")))
                .values(billed_until=bindparam("until")))


def note_billed(conn: Connection, billed: dict[str, float]) -> None:
    """Record up to when each job's GPU use is in ``usage``; never moves a time back."""
    if billed:
        conn.execute(_NOTE_BILLED, [{"key": job_key(j), "until": t}
                                    for j, t in sorted(billed.items())])
