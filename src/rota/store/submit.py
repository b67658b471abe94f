"""Submitting jobs: the checks, fair-use caps on pending jobs, idempotency keys, the inserts.

Every function takes an open connection; the caller (``Store``) owns the transaction.

- *Checks*: names; the project, user and queue exist; the queue admits the project; the user
  is a member (``SubmitOptions.member``); the jobs depended on exist and the user sees them;
  the batch options the job chooses (``run.slurm``) are ones its queue allows. The job is
  stored with the options it runs with, its queue's filling in what it leaves out
  (``rota.core.batchopts``).
- *Caps* (``SubmitOptions.capped``): a user, and a project, may have at most
  ``FairUse.user.pending`` (``project.pending``) jobs pending at once, counted in the same
  transaction as the insert, so that concurrent submitters can never pass a cap together; a
  submit over it is ``TooMany("pending_limit")``.
- *Keys* (``SubmitOptions.key``): the first submit with a user's key inserts its job(s) and
  the key in one transaction; a submit with the same key within ``KEY_TTL_S``, by the same
  user and for the same request (``fingerprint``), inserts nothing and answers ``Replayed``
  with that job; for another request it is ``KeyReused``. Two submits with one key in one
  batch are one submission. An expired key is replaced by the next submit that sends it.

A refused submission writes nothing (group commit relies on it: ``rota.store.group``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Union

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from rota.core import InvalidSpec, Job, JobId, JobState, RotaError
from rota.core.batchopts import QueueBatch, partition_label, read_options, resolve
from rota.store import convert, datasets
from rota.store.errors import Conflict, KeyReused, NotFound, QueueNotAllowed, TooMany
from rota.store.jobs import check_name, job_key, record
from rota.store.records import (
    DEPENDENCY_KINDS, KEY_TTL_S, FairUse, JobRecord, Replayed, Submission, SubmitOptions,
)
from rota.store.schema import (
    fair_use, idempotency_keys, job_events, jobs, memberships, projects, queues, users,
)

Outcome = Union[JobRecord, Replayed, RotaError]
PENDING_RETRY_S = 60.0  # said in Retry-After when a pending cap is reached
MAX_KEY = 255


def submit(conn: Connection, sub: Submission, now: float,
           options: SubmitOptions = SubmitOptions()) -> JobRecord | Replayed:
    """Insert a new PENDING job and its ``submitted`` event; the stored record (``Replayed``
    for a key used before)."""
    [outcome] = submit_many(conn, [(sub, options)], now)
    if isinstance(outcome, RotaError):
        raise outcome
    return outcome


def submit_many(conn: Connection, subs: list[tuple[Submission, SubmitOptions]],
                now: float) -> list[Outcome]:
    """Insert new PENDING jobs and their ``submitted`` events, two statements for them all;
    one outcome per submission, in order: its stored record, ``Replayed``, or the error that
    refused it. Every submission is checked before anything is written; ids are allocated in
    the order of ``subs``."""
    memo: dict[Any, Any] = {}
    outcomes: list[Any] = []  # an int: the same submission as the one at that index
    accepted: list[tuple[int, dict[str, Any], SubmitOptions]] = []
    keyed: dict[tuple[str, str], tuple[int, str]] = {}  # in this batch: (index, fingerprint)
    for sub, options in subs:
        try:
            earlier = _earlier(conn, sub, options, keyed, now)
            if earlier is None:
                sub = _validate(conn, sub, options.member, memo)
                _charge_pending(conn, sub, options, memo)
        except RotaError as exc:
            outcomes.append(exc)
            continue
        if earlier is not None:
            outcomes.append(earlier)
            continue
        if options.key is not None:
            keyed[(sub.user, options.key)] = (len(outcomes), options.fingerprint)
        accepted.append((len(outcomes), _row_values(sub, now), options))
        outcomes.append(_PLACEHOLDER)
    if accepted:
        _insert(conn, accepted, outcomes, now)
    return [Replayed(outcomes[o]) if isinstance(o, int) else o for o in outcomes]


def _earlier(conn: Connection, sub: Submission, options: SubmitOptions,
             keyed: dict[tuple[str, str], tuple[int, str]], now: float) -> Replayed | int | None:
    """The submission a key names already: ``Replayed`` (an earlier transaction's), or the
    index of one in this batch; None for a new key, or none."""
    if options.key is None:
        return None
    check_key(options.key)
    if (sub.user, options.key) in keyed:
        at, fingerprint = keyed[(sub.user, options.key)]
        if fingerprint != options.fingerprint:
            raise KeyReused(options.key)
        return at
    return replay(conn, sub.user, options, now)


def _insert(conn: Connection, accepted: list[tuple[int, dict[str, Any], SubmitOptions]],
            outcomes: list[Any], now: float) -> None:
    ids = conn.execute(_INSERT_JOBS, [values for _, values, _ in accepted]).scalars().all()
    if len(ids) != len(accepted):
        raise AssertionError(f"{len(ids)} ids returned for {len(accepted)} jobs inserted")
    conn.execute(_INSERT_EVENT, [
        {"job": key, "time": now, "kind": "submitted",
         "message": f"submitted by {values['user']} to queue {values['queue']}",
         "data": {"project": values["project"], "queue": values["queue"]}}
        for key, (_, values, _) in zip(ids, accepted)])
    for key, (at, values, options) in zip(ids, accepted):
        outcomes[at] = convert.record_from_row(SimpleNamespace(**{**_NULLS, **values, "id": key}))
        if options.key is not None:
            keep_key(conn, values["user"], options, key, None, now)


def submit_array(conn: Connection, subs: list[Submission], now: float,
                 options: SubmitOptions = SubmitOptions()) -> list[JobRecord] | Replayed:
    """The tasks of one array (one submission each, ``array_index`` set), all or none; they
    share ``array_id``, the first task's id. A key names the array as a whole."""
    if options.key is not None:
        check_key(options.key)
        found = replay(conn, subs[0].user, options, now)
        if found is not None:
            return found
    outcomes = submit_many(conn, [(s, replace(options, key=None)) for s in subs], now)
    refused = next((o for o in outcomes if isinstance(o, RotaError)), None)
    if refused is not None:
        raise refused
    records = [o for o in outcomes if isinstance(o, JobRecord)]
    first = int(records[0].id)
    conn.execute(update(jobs).where(jobs.c.id.in_([int(r.id) for r in records]))
                 .values(array_id=first))
    if options.key is not None:
        keep_key(conn, subs[0].user, options, first, len(records), now)
    return [replace(r, array_id=str(first)) for r in records]


# -- idempotency keys ------------------------------------------------------------------------

def check_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY or not key.isascii() \
            or not key.isprintable():
        raise InvalidSpec("Idempotency-Key", f"must be 1 to {MAX_KEY} printable ASCII "
                          "characters, such as a random UUID")
    return key


def replay(conn: Connection, user: str, options: SubmitOptions, now: float) -> Replayed | None:
    """What ``user``'s key names within its day: the submission it made (``KeyReused`` for
    another request); None when it names nothing (yet, or any more)."""
    row = conn.execute(select(idempotency_keys).where(
        idempotency_keys.c.user == user, idempotency_keys.c.key == options.key,
        idempotency_keys.c.created_at > now - KEY_TTL_S)).first()
    if row is None:
        return None
    if row.fingerprint != options.fingerprint:
        raise KeyReused(str(options.key))
    try:
        return Replayed(record(conn, row.job), row.tasks)
    except NotFound:  # the job is gone (deleted with its project): the key names nothing
        return None


def keep_key(conn: Connection, user: str, options: SubmitOptions, job: int,
             tasks: int | None, now: float) -> None:
    """Remember that ``user``'s key made ``job`` (replacing an expired use of the key)."""
    conn.execute(delete(idempotency_keys).where(
        idempotency_keys.c.user == user, idempotency_keys.c.key == options.key))
    try:
        conn.execute(_INSERT_KEY, {"user": user, "key": options.key, "job": job, "tasks": tasks,
                                   "fingerprint": options.fingerprint, "created_at": now})
    except IntegrityError:  # a concurrent transaction kept it first: retried, it replays
        raise Conflict(f"Idempotency-Key {options.key!r} is being used by a concurrent "
                       "submit; retry") from None


def forget_keys(conn: Connection, before: float) -> int:
    """Drop keys kept before ``before`` (no longer naming anything); how many."""
    return conn.execute(delete(idempotency_keys)
                        .where(idempotency_keys.c.created_at <= before)).rowcount


# -- fair-use caps -----------------------------------------------------------------------------

def read_fair_use(conn: Connection) -> FairUse:
    return FairUse.of({r.scope: r.caps for r in conn.execute(select(fair_use))})


def put_fair_use(conn: Connection, stored: dict[str, dict[str, Any]] | None) -> None:
    """Set the caps an operator wrote, per scope (None: back to the defaults)."""
    conn.execute(delete(fair_use))
    for scope, caps in (stored or {}).items():
        conn.execute(insert(fair_use).values(scope=scope, caps=caps))


_PENDING = {
    "user": select(func.count()).select_from(jobs).where(
        jobs.c.user == bindparam("name"), jobs.c.state == str(JobState.PENDING)),
    "project": select(func.count()).select_from(jobs).where(
        jobs.c.project == bindparam("name"), jobs.c.state == str(JobState.PENDING)),
}


def _charge_pending(conn: Connection, sub: Submission, options: SubmitOptions,
                    memo: dict[Any, Any]) -> None:
    """Count ``sub`` against its user's and project's pending caps; ``TooMany`` when either
    is reached. Counts are read once per transaction and kept up to date in ``memo``."""
    if not options.capped:
        return
    if "fair_use" not in memo:
        memo["fair_use"] = read_fair_use(conn)
    caps: FairUse = memo["fair_use"]
    counted = []
    for scope, name, cap in (("user", sub.user, caps.user.pending),
                             ("project", sub.project, caps.project.pending)):
        if cap is None:
            continue
        key = ("pending", scope, name)
        if key not in memo:
            memo[key] = conn.execute(_PENDING[scope], {"name": name}).scalar_one()
        if memo[key] >= cap:
            raise TooMany("pending_limit", f"{scope} {name} has {memo[key]} pending jobs, the "
                          f"most a {scope} may have: wait until some have started, or cancel "
                          "some (rota ps lists them)", PENDING_RETRY_S)
        counted.append(key)
    for key in counted:
        memo[key] += 1


# -- checks and rows ---------------------------------------------------------------------------

def _row_values(sub: Submission, now: float) -> dict[str, Any]:
    return dict(
        name=sub.name, project=sub.project, user=sub.user, queue=sub.queue,
        priority=sub.priority, kind=str(sub.kind), replicas=sub.replicas,
        spec=convert.spec_json(sub), state=str(JobState.PENDING), submit_time=now, reason="",
        cancel_requested=False, attempts=0, failures=0, held="", lost_streak=0, version=1,
        updated_at=now, eligible_at=sub.start_at,
        depends=[[kind, int(job)] for kind, job in sub.depends] or None,
        array_index=sub.array_index, array_limit=sub.array_limit)


_NULLS = {c.name: None for c in jobs.c}
_PLACEHOLDER = RotaError("not written")  # replaced by the record once the insert returned
# built once: a statement built per call costs more than running it (parameters vary only)
_INSERT_JOBS = insert(jobs).returning(jobs.c.id, sort_by_parameter_order=True)
_INSERT_EVENT = insert(job_events)
_INSERT_KEY = insert(idempotency_keys)


def _validate(conn: Connection, sub: Submission, member: bool,
              memo: dict[Any, Any]) -> Submission:
    """Everything that may refuse ``sub``, each lookup done once per batch (``memo``); the
    submission as it is stored: its batch options (``run.slurm``) filled in from its queue's
    (``rota.core.batchopts.resolve``)."""
    check_name(sub.project, "project")
    check_name(sub.queue, "queue")
    check_name(sub.user, "user")
    check_name(sub.name, "name", required=False)
    for field, value in (("project", sub.project), ("user", sub.user)):
        if not _found(conn, memo, field, {"name": value}):
            raise InvalidSpec(field, f"no {field} named {value!r}")
    batch = _check_queue(conn, memo, sub)
    if member and not _found(conn, memo, "member", {"user": sub.user, "project": sub.project}):
        raise InvalidSpec("project", f"{sub.user} is not a member of project {sub.project!r}")
    try:
        json.dumps(dict(sub.run), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidSpec("run", f"must be plain JSON: {exc}") from None
    _check_depends(conn, sub, member, memo)
    datasets.check_job(conn, sub.project, dict(sub.run))
    # the core job validates replicas, walltime and grace with field names
    Job(id=JobId("0"), project=sub.project, queue=sub.queue, request=sub.request,
        replicas=sub.replicas, walltime_s=sub.walltime_s, grace_s=sub.grace_s)
    return _with_batch(sub, resolve(sub.queue, batch,
                                    read_options(sub.run.get("slurm"), "slurm")))


def _with_batch(sub: Submission, options: dict[str, str]) -> Submission:
    """``sub`` with the batch options it runs with in ``run.slurm``, and, with a partition,
    the selector that keeps it on the partition's nodes."""
    if not options:
        return sub
    selector = dict(sub.selector)
    if "partition" in options:
        selector[partition_label(options["partition"])] = "true"
    return replace(sub, run={**sub.run, "slurm": options}, selector=selector)


def _check_depends(conn: Connection, sub: Submission, member: bool,
                   memo: dict[Any, Any]) -> None:
    """Every job ``sub`` depends on exists and, for a member, is of one of its projects. A job
    can only depend on jobs submitted before it, so dependencies never form a cycle."""
    for k, (kind, job_id) in enumerate(sub.depends):
        where = f"depends.{kind}[{k}]" if kind in DEPENDENCY_KINDS else "depends"
        if kind not in DEPENDENCY_KINDS:
            raise InvalidSpec("depends", f"unknown kind {kind!r}; known: "
                              f"{', '.join(DEPENDENCY_KINDS)}")
        key = ("job-project", job_id)
        if key not in memo:
            try:
                row = conn.execute(select(jobs.c.project).where(jobs.c.id == job_key(job_id)))
                memo[key] = row.scalar()
            except NotFound:
                memo[key] = None
        project = memo[key]
        seen = project is not None and (not member or _found(
            conn, memo, "member", {"user": sub.user, "project": project}))
        if not seen:
            raise InvalidSpec(where, f"no job {job_id} (a job may depend only on jobs that "
                              "exist and that its owner can see)")


_LOOKUPS = {
    "project": select(projects.c.name).where(projects.c.name == bindparam("name")),
    "user": select(users.c.name).where(users.c.name == bindparam("name")),
    "member": select(memberships.c.user).where(memberships.c.user == bindparam("user"),
                                               memberships.c.project == bindparam("project")),
}


# FOR SHARE: a queue being deleted (``admin.delete_queue`` locks it) is not referenced meanwhile
_QUEUE = (select(queues.c.projects, queues.c.slurm)
          .where(queues.c.name == bindparam("name")).with_for_update(read=True))


def _check_queue(conn: Connection, memo: dict[Any, Any],
                 sub: Submission) -> QueueBatch | None:
    """The queue exists and its binding (``queues.projects``, NULL: every project) admits
    the job's project; the queue's batch options."""
    key = ("queue", sub.queue)
    if key not in memo:
        row = conn.execute(_QUEUE, {"name": sub.queue}).first()
        if row is None:
            raise InvalidSpec("queue", f"no queue named {sub.queue!r}")
        memo[key] = (row.projects, QueueBatch.read(row.slurm))
    allowed, batch = memo[key]
    if allowed is not None and sub.project not in allowed:
        raise QueueNotAllowed(sub.queue, sub.project, tuple(allowed))
    return batch


def check_queue_admits(conn: Connection, queue: str, project: str) -> None:
    """The queue exists and admits ``project`` (a job moved to it: ``rota.store.changes``)."""
    _check_queue(conn, {}, Submission(project=project, queue=queue, user=""))


def _found(conn: Connection, memo: dict[Any, Any], kind: str, params: dict[str, str]) -> bool:
    """Whether the ``kind`` lookup finds a row, remembering only a row found (an absence is
    read again: it may be the one a caller fixes)."""
    key = (kind, *params.values())
    if key in memo:
        return True
    if conn.execute(_LOOKUPS[kind], params).first() is None:
        return False
    memo[key] = True
    return True


