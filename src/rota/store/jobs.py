"""Job rows read: a job by its id, pages of jobs, their events and state changes, the history
of their attempts, and what may keep a pending job from starting now; and the names every part
of the store checks (``check_name``).

Every function takes an open connection; the caller (``Store``) owns the transaction. Writes to
job rows are ``rota.store.moves``'s (state changes) and ``rota.store.marks``'s (the writes that
keep a job's state); submits are ``rota.store.submit``'s.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sqlalchemy import Connection, Text, cast, func, or_, select

from rota.core import InvalidSpec, JobState
from rota.store import convert
from rota.store.errors import NotFound
from rota.store.records import (
    AttemptRecord, EligibilityFacts, JobEvent, JobFilter, JobRecord, Page, PendingFacts, StateMove,
)
from rota.store.schema import attempts, job_events, jobs

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
