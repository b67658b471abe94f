"""Job rows written: moving a job between states, alone or many launches at once, with its
event history and the history of its attempts; and cancelling.

Every function takes an open connection; the caller (``Store``) owns the transaction. Rules,
which the writes of ``rota.store.marks`` follow too (through ``write``):

- Every write to a job row bumps ``version`` by one and appends exactly one event, in the same
  transaction, so a job's ``version`` equals the number of its events. The exceptions are
  notes beside the job that change neither: the latest wait explanation, and
  ``billed_until`` (``rota.store.marks.note_billed``, written with the usage it accounts for).
- A write reads the row locked (``FOR UPDATE`` on PostgreSQL; the ``BEGIN IMMEDIATE`` write lock
  on SQLite) and updates it guarded by ``version = <read>``; a guard that matches nothing raises
  ``Conflict`` instead of losing another writer's change.
- Every state change goes through ``rota.core.check_transition``.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import Connection, bindparam, insert, select, update

from rota.core import End, IllegalTransition, JobState, RotaError, check_transition
from rota.store import accounting
from rota.store.errors import Conflict, NotFound
from rota.store.jobs import get, job_key, record, records
from rota.store.records import JobRecord, Move
from rota.store.schema import api_tokens, attempts, job_events, jobs
from rota.store.tokens import JOB_TOKEN


def write(conn: Connection, row: Any, now: float, kind: str, message: str,
          data: dict[str, Any], **values: Any) -> None:
    """Update a job row read earlier in this transaction, guarded by its version, and append
    the one event that explains the write."""
    result = conn.execute(update(jobs).where(jobs.c.id == row.id, jobs.c.version == row.version)
                          .values(version=row.version + 1, updated_at=now, **values))
    if result.rowcount != 1:
        raise Conflict(f"job {row.id} changed since it was read (version {row.version}); retry")
    if values.get("backend_handle"):  # the attempt keeps its handle: its logs, once it ended
        conn.execute(update(attempts).where(attempts.c.job == row.id,
                                            attempts.c.attempt == row.attempts)
                     .values(handle=values["backend_handle"]))
    _event(conn, row.id, now, kind, message, data)


_INSERT_EVENT = insert(job_events)


def _event(conn: Connection, key: int, now: float, kind: str, message: str,
           data: dict[str, Any]) -> None:
    conn.execute(_INSERT_EVENT, {"job": key, "time": now, "kind": kind, "message": message,
                                 "data": data})


def move(conn: Connection, row: Any, new: JobState, now: float, message: str = "",
         data: dict[str, Any] | None = None, end: End | None = None,
         models: Mapping[tuple[str, int], str] | None = None, max_rss_kib: int | None = None,
         **values: Any) -> None:
    """Move the job of ``row`` to ``new`` (checked against the state table), record it, and
    keep the history of its attempts. ``end`` says how an attempt that leaves its resources
    ended: a fault of the infrastructure, a preemption or a missing account
    (``End.spares_budget``) does not spend the restart budget (``failures``), and faults in a
    row are counted (``lost_streak``). ``models``: the GPU model of each (node, device) a bind
    may name (``accounting.device_models``; None: read). ``max_rss_kib``: an ending attempt's
    peak resident memory, where its backend told it."""
    old = JobState(row.state)
    check_transition(old, new)
    if new.terminal:
        values.setdefault("finished_at", now)
    if new is JobState.PENDING:
        fault = end is not None and end.fault
        spared = (end.spares_budget if end is not None else old is JobState.PREEMPTING)
        values.update(placement=None, flavor=None, started_at=None, preempt_deadline=None,
                      last_checkpoint_at=None, attempts=row.attempts + 1,
                      failures=row.failures + (not spared),
                      lost_streak=row.lost_streak + 1 if fault else (  # nothing ran:
                          row.lost_streak if end in (End.NO_ACCOUNT, End.DISPLACED) else 0))
    elif old is JobState.SCHEDULED and new is JobState.RUNNING:
        values.setdefault("started_at", now)  # it runs from now, not from its bind
    elif old.holds_resources and new.terminal:
        values.setdefault("lost_streak", 0)  # an attempt that ended on its own ends a streak
    if new is JobState.SCHEDULED or new.terminal:
        values.setdefault("wait_reasons", None)
        values.setdefault("estimated_start", None)
    extra = {"end": str(end)} if end is not None else {}
    write(conn, row, now, "state", message or f"{old} -> {new}",
          {"from": str(old), "to": str(new), "attempt": row.attempts, **extra, **(data or {})},
          state=str(new), **values)
    _history(conn, row, old, new, now, end, values, models, max_rss_kib)


def _history(conn: Connection, row: Any, old: JobState, new: JobState, now: float,
             end: End | None, values: dict[str, Any],
             models: Mapping[tuple[str, int], str] | None = None,
             max_rss_kib: int | None = None) -> None:
    """The ``attempts`` row of the attempt that was bound, launched or ended by this move."""
    this = (attempts.c.job == row.id) & (attempts.c.attempt == row.attempts)
    if old is JobState.PENDING and new is JobState.SCHEDULED:
        placement = values.get("placement")
        conn.execute(insert(attempts).values(job=row.id, attempt=row.attempts, bound_at=now,
                                             placement=placement, reason="",
                                             gpus=accounting.gpus_by_model(conn, placement,
                                                                           models)))
    elif new is JobState.RUNNING and old is not JobState.RUNNING:
        conn.execute(update(attempts).where(this).values(launched_at=now))
    elif old.holds_resources and not new.holds_resources:
        conn.execute(update(attempts).where(this).values(
            ended_at=now, end=str(end or _end_of(old, new)), exit_code=values.get("exit_code"),
            reason=values.get("reason") or "", max_rss_kib=max_rss_kib))
        accounting.add_ended(conn, row.id, row.attempts, row.project, now)
        conn.execute(update(api_tokens).where(  # the attempt's own token dies with it
            api_tokens.c.user == row.user,
            api_tokens.c.name == JOB_TOKEN.format(job=row.id, attempt=row.attempts),
            api_tokens.c.revoked_at.is_(None)).values(revoked_at=now))


def _end_of(old: JobState, new: JobState) -> End:
    """How an attempt ended when the mover did not say."""
    if new is JobState.PENDING:
        return End.PREEMPTED if old is JobState.PREEMPTING else End.FAILED
    return {JobState.SUCCEEDED: End.SUCCEEDED, JobState.CANCELLED: End.CANCELLED}.get(
        new, End.FAILED)


def transition(conn: Connection, job_id: object, new: JobState, now: float,
               expected_version: int | None, exit_code: int | None, reason: str | None,
               backend_handle: dict[str, Any] | None, end: End | None = None,
               hold: str | None = None, eligible_at: float | None = None,
               max_rss_kib: int | None = None) -> None:
    """A move reported by a backend. A requeue (-> PENDING) of a job whose cancel was requested
    ends it CANCELLED instead: the user asked for it to stop. A requeue may hold the job back
    (``hold``: why) or make it wait until ``eligible_at`` (a retry's backoff)."""
    row = get(conn, job_id, lock=True)
    if expected_version is not None and row.version != expected_version:
        raise Conflict(f"job {row.id} is at version {row.version}, not {expected_version}")
    if new is JobState.PENDING and row.cancel_requested:
        new, reason = JobState.CANCELLED, reason or "cancelled while being requeued"
        end = end or End.CANCELLED
    values: dict[str, Any] = {}
    if exit_code is not None:
        values["exit_code"] = exit_code
    if reason is not None:
        values["reason"] = reason
    if backend_handle is not None:
        values["backend_handle"] = backend_handle
    if new is JobState.PENDING:
        if hold:
            values["held"] = hold
        if eligible_at is not None:
            values["eligible_at"] = eligible_at
    move(conn, row, new, now, data={k: v for k, v in values.items() if k != "backend_handle"},
         end=end, max_rss_kib=max_rss_kib, **values)


def transition_many(conn: Connection, moves: list[Move],
                    now: float) -> list[JobRecord | RotaError]:
    """Several moves in one transaction, each in a savepoint of its own: one that cannot be
    made (``IllegalTransition``, a job gone) is its error and leaves the others be. Launches
    (every move SCHEDULED -> RUNNING) are written in bulk (``_launched``) when they all can be."""
    launched = _launched(conn, moves, now)
    if launched is not None:
        return launched
    out: list[JobRecord | RotaError] = []
    for m in moves:
        try:
            with conn.begin_nested():
                transition(conn, m.job, m.state, now, None, m.exit_code, m.reason,
                           dict(m.backend_handle) if m.backend_handle is not None else None,
                           m.end, m.hold, m.eligible_at, m.max_rss_kib)
                out.append(record(conn, m.job))
        except RotaError as exc:
            out.append(exc)
    return out


BULK_MIN = 8  # fewer moves than this go one by one: the bulk statements would not pay


def _launched(conn: Connection, moves: list[Move], now: float) -> list[JobRecord] | None:
    """Launches written in five statements whatever their number, with the same rows, events
    and attempt history as ``transition`` writes one by one (a pass that launches hundreds of
    jobs spent most of its time in per-job statements); None, having written nothing, unless
    every move is a launch (RUNNING, a handle, no exit code, end, hold or wait) of a distinct
    job that is SCHEDULED now."""
    if len(moves) < BULK_MIN or any(
            m.state is not JobState.RUNNING or m.backend_handle is None or m.exit_code is not None
            or m.end is not None or m.hold is not None or m.eligible_at is not None
            for m in moves):
        return None
    try:
        keys = [job_key(m.job) for m in moves]
    except NotFound:
        return None
    if len(set(keys)) != len(keys):
        return None
    rows = {r.id: r for r in conn.execute(
        select(jobs).where(jobs.c.id.in_(keys)).with_for_update())}
    if len(rows) != len(keys) or any(r.state != str(JobState.SCHEDULED)
                                     for r in rows.values()):
        return None
    written = write_many(
        conn, update(jobs).values(updated_at=now, state=str(JobState.RUNNING), started_at=now,
                                  backend_handle=bindparam("b_handle"),
                                  reason=bindparam("b_reason")),
        [{"b_id": k, "b_version": rows[k].version, "b_handle": dict(m.backend_handle or {}),
          "b_reason": rows[k].reason if m.reason is None else m.reason}
         for k, m in zip(keys, moves)],
        [{"job": k, "time": now, "kind": "state", "message": "scheduled -> running",
          "data": {"from": str(JobState.SCHEDULED), "to": str(JobState.RUNNING),
                   "attempt": rows[k].attempts,
                   **({} if m.reason is None else {"reason": m.reason})}}
         for k, m in zip(keys, moves)],
        update(attempts).where(attempts.c.job == bindparam("b_id"),
                               attempts.c.attempt == bindparam("b_attempt"))
        .values(launched_at=now, handle=bindparam("b_attempt_handle")),
        [{"b_id": k, "b_attempt": rows[k].attempts,
          "b_attempt_handle": dict(m.backend_handle or {})} for k, m in zip(keys, moves)])
    if not written:
        return None
    found = {int(r.id): r for r in records(conn, [str(k) for k in keys])}
    return [found[k] for k in keys]


def write_many(conn: Connection, change: Any, rows: list[dict[str, Any]],
               events: list[dict[str, Any]], history: Any,
               history_rows: list[dict[str, Any]]) -> bool:
    """Moves of many jobs in three statements, in a savepoint: ``change`` (an update of
    ``jobs``) for ``rows`` (each with its job's ``b_id`` and the ``b_version`` it was read at:
    the version moves on by one), their ``events``, and ``history`` (the attempts' rows) for
    ``history_rows``. False, having written nothing, when some job's version moved meanwhile
    (where the database reports how many rows an update of many changed)."""
    nested = conn.begin_nested()
    try:
        updated = conn.execute(
            change.where(jobs.c.id == bindparam("b_id"), jobs.c.version == bindparam("b_version"))
            .values(version=jobs.c.version + 1), rows)
        if conn.dialect.supports_sane_multi_rowcount and updated.rowcount != len(rows):
            nested.rollback()
            return False
        conn.execute(_INSERT_EVENT, events)
        conn.execute(history, history_rows)
    except BaseException:
        nested.rollback()
        raise
    nested.commit()
    return True


def request_cancel(conn: Connection, job_id: object, by: str, now: float) -> bool:
    """Cancel a pending job at once (True); flag a job holding resources for the control loop
    to stop (False). A terminal job cannot be cancelled."""
    row = get(conn, job_id, lock=True)
    state = JobState(row.state)
    if state.terminal:
        done = "is already cancelled" if state is JobState.CANCELLED else f"has already {state}"
        raise IllegalTransition(f"job {row.id} {done}")
    if state is JobState.PENDING:
        move(conn, row, JobState.CANCELLED, now, f"cancelled by {by}", {"by": by},
             reason=f"cancelled by {by}")
        return True
    if not row.cancel_requested:
        write(conn, row, now, "cancel-requested", f"cancel requested by {by}", {"by": by},
              cancel_requested=True)
    return False
