"""Job rows: read, list, cancel, move between states, and their event history (submits are
``rota.store.submit``'s).

Every function takes an open connection; the caller (``Store``) owns the transaction. Rules:

- Every write to a job row bumps ``version`` by one and appends exactly one event, in the same
  transaction, so a job's ``version`` equals the number of its events. The exceptions are
  notes beside the job that change neither: the latest wait explanation, and
  ``billed_until`` (``note_billed``, written with the usage it accounts for).
- A write reads the row locked (``FOR UPDATE`` on PostgreSQL; the ``BEGIN IMMEDIATE`` write lock
  on SQLite) and updates it guarded by ``version = <read>``; a guard that matches nothing raises
  ``Conflict`` instead of losing another writer's change.
- Every state change goes through ``rota.core.check_transition``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sqlalchemy import Connection, Text, bindparam, cast, func, insert, or_, select, update

from rota.core import (
    End, IllegalTransition, InvalidSpec, JobState, Placement, RotaError, check_transition,
)
from rota.core.shortforms import STARTING
from rota.store import accounting, convert
from rota.store.errors import Conflict, NotFound
from rota.store.records import (
    AttemptRecord, EligibilityFacts, JobEvent, JobFilter, JobRecord, Move, Page, PendingFacts,
    StateMove,
)
from rota.store.schema import api_tokens, attempts, job_events, jobs
from rota.store.tokens import JOB_TOKEN

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MAX_PAGE = 1000


def check_name(value: object, field: str, required: bool = True) -> str:
    if value == "" and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidSpec(field, f"must be a string, got {value!r}")
    if not NAME.match(value):
        raise InvalidSpec(field, f"{value!r} is not a name: use 1-63 letters, digits, '.', '_' "
                                 "or '-', starting with a letter or digit")
    return value


def ascii_digits(text: str) -> bool:
    """True for ``0``-``9`` only: ``str.isdigit`` also takes ``¹`` (which ``int`` refuses) and
    ``٢`` (which ``int`` reads as 2)."""
    return text.isascii() and text.isdigit()


def job_key(job_id: object) -> int:
    """The integer key of a job id (``"42"`` or 42); NotFound for anything else."""
    text = str(job_id)
    if not ascii_digits(text) or len(text) > 18:
        raise NotFound("job", job_id)
    return int(text)


def get(conn: Connection, job_id: object, lock: bool = False) -> Any:
    query = select(jobs).where(jobs.c.id == job_key(job_id))
    row = conn.execute(query.with_for_update() if lock else query).first()
    if row is None:
        raise NotFound("job", str(job_id))
    return row


def job_ids(conn: Connection, project: str) -> list[str]:
    return [str(i) for i in conn.execute(select(jobs.c.id).where(jobs.c.project == project))
            .scalars()]


def storage_rows(conn: Connection, project: str) -> list[tuple[str, JobState, str | None]]:
    """Each job of ``project``: its id, state and the upload its working directory comes from
    (what a project's storage quota counts, ``rota.api.storage``)."""
    upload = jobs.c.spec["run"]["upload"].as_string()
    rows = conn.execute(select(jobs.c.id, jobs.c.state, upload).where(jobs.c.project == project))
    return [(str(i), JobState(state), up or None) for i, state, up in rows]


def list_jobs(conn: Connection, where: JobFilter, limit: int, after: str | None,
              newest_first: bool) -> Page:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidSpec("limit", f"must be between 1 and {MAX_PAGE}, got {limit}")
    rows = conn.execute(_listed(select(jobs), where, limit, after, newest_first)).all()
    items = tuple(convert.record_from_row(r) for r in rows[:limit])
    return Page(items, str(rows[limit - 1].id) if len(rows) > limit else None)


def _listed(query: Any, where: JobFilter, limit: int, after: str | None,
            newest_first: bool) -> Any:
    """``query`` narrowed to ``where`` (``filtered``), one row past ``limit`` (which says
    whether another page follows)."""
    return filtered(query, where, after, newest_first).limit(limit + 1)


def filtered(query: Any, where: JobFilter, after: str | None, newest_first: bool) -> Any:
    """``query`` narrowed to ``where``, after job ``after``, in id order."""
    if where.projects is not None:
        query = query.where(jobs.c.project.in_(sorted(where.projects)))
    if where.states is not None:
        query = query.where(jobs.c.state.in_(sorted(str(s) for s in where.states)))
    if where.user is not None:
        query = query.where(jobs.c.user == where.user)
    if where.queue is not None:
        query = query.where(jobs.c.queue == where.queue)
    if after is not None:
        if not ascii_digits(after) or len(after) > 18:
            raise InvalidSpec("after", f"not a cursor from a previous page: {after!r}")
        query = query.where(jobs.c.id < int(after) if newest_first else jobs.c.id > int(after))
    return query.order_by(jobs.c.id.desc() if newest_first else jobs.c.id)


def events(conn: Connection, job_id: object, after: int, limit: int) -> list[JobEvent]:
    key = get(conn, job_id).id
    rows = conn.execute(select(job_events).where(job_events.c.job == key, job_events.c.id > after)
                        .order_by(job_events.c.id).limit(limit)).all()
    return [JobEvent(r.id, str(r.job), r.time, r.kind, r.message, r.data) for r in rows]


def state_moves(conn: Connection, after: int, limit: int) -> list[StateMove]:
    """The state changes of every job recorded after event ``after``, oldest first."""
    rows = conn.execute(
        select(job_events.c.id, job_events.c.time, job_events.c.data, jobs.c.queue,
               jobs.c.submit_time)
        .join(jobs, jobs.c.id == job_events.c.job)
        .where(job_events.c.id > after, job_events.c.kind == "state")
        .order_by(job_events.c.id).limit(limit)).all()
    return [StateMove(r.id, r.time, r.queue, r.submit_time, str(r.data.get("from", "")),
                      str(r.data.get("to", "")), r.data.get("end"), r.data.get("attempt"))
            for r in rows]


def last_event(conn: Connection) -> int:
    """The id of the newest event of any job (0: none yet)."""
    return conn.execute(select(func.max(job_events.c.id))).scalar() or 0


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


def record(conn: Connection, job_id: object) -> JobRecord:
    return convert.record_from_row(get(conn, job_id))


def records(conn: Connection, job_ids: list[str]) -> list[JobRecord]:
    """The jobs of ``job_ids`` that exist, in id order, in one query."""
    keys = sorted({job_key(j) for j in job_ids})
    return [convert.record_from_row(r) for r in
            conn.execute(select(jobs).where(jobs.c.id.in_(keys)).order_by(jobs.c.id))]


def eligibility_facts(conn: Connection, now: float) -> EligibilityFacts:
    """What may keep pending jobs from starting now: holds, times ahead, dependencies (with
    the states of the jobs depended on), arrays (with their tasks holding resources)."""
    # a job without dependencies has them stored as JSON null, not as SQL NULL: "is not
    # null" alone read every pending job, each with nothing to keep it back
    rows = conn.execute(select(jobs.c.id, jobs.c.held, jobs.c.eligible_at, jobs.c.depends,
                               jobs.c.array_id, jobs.c.array_index, jobs.c.array_limit).where(
        jobs.c.state == str(JobState.PENDING),
        or_(jobs.c.held != "", jobs.c.eligible_at > now, cast(jobs.c.depends, Text) != "null",
            jobs.c.array_limit.is_not(None)))).all()
    pending = {str(r.id): PendingFacts(
        r.held, r.eligible_at, tuple((k, str(j)) for k, j in r.depends or ()),
        None if r.array_id is None else (str(r.array_id), r.array_index, r.array_limit))
        for r in rows}
    wanted = sorted({int(j) for f in pending.values() for _, j in f.depends})
    states = {str(r.id): JobState(r.state) for r in conn.execute(
        select(jobs.c.id, jobs.c.state).where(jobs.c.id.in_(wanted)))} if wanted else {}
    arrays = sorted({int(f.array[0]) for f in pending.values() if f.array is not None})
    active = {str(r.array_id): r.n for r in conn.execute(
        select(jobs.c.array_id, func.count().label("n"))
        .where(jobs.c.array_id.in_(arrays), jobs.c.state.in_(HOLDING))
        .group_by(jobs.c.array_id))} if arrays else {}
    return EligibilityFacts(pending, states, active)


HOLDING = tuple(str(s) for s in JobState if s.holds_resources)


def attempt_history(conn: Connection, job_id: object) -> list[AttemptRecord]:
    key = get(conn, job_id).id
    return [AttemptRecord(str(r.job), r.attempt, r.bound_at, r.launched_at, r.ended_at,
                          r.placement, r.end, r.exit_code, r.reason, r.last_checkpoint_at,
                          r.max_rss_kib)
            for r in conn.execute(select(attempts).where(attempts.c.job == key)
                                  .order_by(attempts.c.attempt))]


def attempt_handle(conn: Connection, job_id: object, attempt: int) -> Mapping[str, Any] | None:
    """The backend handle attempt ``attempt`` of the job was launched with (None: it never
    launched, or it was launched before handles were kept per attempt); ``NotFound`` for an
    attempt the job never had."""
    key = get(conn, job_id).id
    row = conn.execute(select(attempts.c.handle).where(attempts.c.job == key,
                                                       attempts.c.attempt == attempt)).first()
    if row is None:
        raise NotFound("attempt", f"{job_id}/{attempt}")
    return row.handle


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
