"""``Store``: the one object the control loop and the API call to persist anything.

Transaction boundaries: every public method is exactly one transaction, committed before it
returns (so a submitted job is durable when ``submit`` returns its id, and a decision is durable
before the control loop acts on it). Submits from concurrent threads share transactions: one
writer thread commits whatever queued up while it was busy as one transaction and one fsync
(``rota.store.group``); each caller still returns only once its own job is committed. Writes
run as write transactions (``BEGIN IMMEDIATE`` on SQLite, row locks on PostgreSQL);
``snapshot`` reads one consistent view (a SQLite read transaction; ``REPEATABLE READ`` on
PostgreSQL).

Writes that only a race can break (a backend report and a user's cancel on the same job) are
retried a few times on ``Conflict``; each retry re-reads the row and re-checks the transition.

Time: ``snapshot`` and ``apply`` take the cycle's ``now``; everything else stamps rows with the
injected ``clock`` (``time.time`` by default).

Authentication is cached for ``auth_ttl_s`` (``rota.store.authcache``); every write that changes
what a principal is made of clears the cache once it has committed.

Durability on SQLite: WAL with ``synchronous=FULL`` (``rota.store.engine``), so a commit that
returned is in the log on disk and survives a kill of the process and a crash of the machine.

``Store`` is put together from parts on one base (``rota.store.transactions``): ``Tenancy``
(projects, users, tokens), ``Inventory`` (flavours, queues, nodes) and ``Billing`` (usage,
accounting, budgets); this module holds the jobs, the scheduling cycle and the leases.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping

from sqlalchemy import Connection

from rota.core import End, IllegalTransition, JobId, JobState, Placement, RotaError
from rota.core import Decisions, Job, Snapshot
from rota.store import access, briefs, changes, cycle, jobs, lease, marks, submit
from rota.store import moves as job_moves
from rota.store.authcache import DEFAULT_TTL_S
from rota.store.billing import Billing
from rota.store.changes import Change
from rota.store.engine import resolve_url
from rota.store.errors import NotFound
from rota.store.group import DEFAULT_MAX_BATCH, GroupCommit
from rota.store.held import HeldCache
from rota.store.inventory import Inventory
from rota.store.records import (
    ApplyResult, AttemptRecord, EligibilityFacts, FairUse, JobEvent, JobFilter, JobRecord, Move,
    Page, Replayed, StateMove, Submission, SubmitOptions,
)
from rota.store.datasets import Datasets
from rota.store.services import Services
from rota.store.tenancy import Tenancy

DEFAULT_HALF_LIFE_S = 7 * 86400.0


class Store(Tenancy, Inventory, Billing):
    """Open with ``Store.open(url_or_data_dir)``: migrates the schema to the newest revision."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time,
                 usage_half_life_s: float = DEFAULT_HALF_LIFE_S, auth_ttl_s: float = DEFAULT_TTL_S,
                 max_batch: int = DEFAULT_MAX_BATCH) -> None:
        super().__init__(url, clock, usage_half_life_s, auth_ttl_s)
        self._jobs = cycle.JobCache()
        self._nodes = cycle.NodeCache()
        self._held = HeldCache()
        self._fair_use: FairUse | None = None  # read once, cleared by ``put_fair_use``
        self.group: GroupCommit[tuple[Submission, SubmitOptions], JobRecord | Replayed] = \
            GroupCommit(self._write, lambda conn, subs: submit.submit_many(
                conn, subs, self.clock()), max_batch)

    @classmethod
    def open(cls, url_or_path: str | Path, **kwargs: Any) -> Store:
        return cls(resolve_url(url_or_path), **kwargs)

    def close(self) -> None:
        self.group.close()
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def services(self) -> Services:
        """Model-serving services and their replicas (``rota.store.services``)."""
        return Services(self)

    @property
    def datasets(self) -> Datasets:
        """Datasets, what nodes' caches hold, quotas on cached bytes (``rota.store.datasets``)."""
        return Datasets(self)

    # memberships: here, beside ``request_cancel``, which ending one may run
    def remove_member(self, user: str, project: str, cancel: bool = False) -> list[str]:
        """End a membership (``rota.store.access``); with ``cancel``, the user's PENDING jobs
        of the project are cancelled. The ids of those jobs (cancelled or kept)."""
        with self._auth_write() as conn:
            pending = access.remove_member(conn, user, project)
        for job_id in pending if cancel else ():
            try:
                self.request_cancel(job_id, by="an operator, as its owner left the project")
            except (NotFound, IllegalTransition):  # it moved on or went meanwhile
                continue
        return pending

    # jobs
    def submit(self, submission: Submission, member: bool = False) -> JobId:
        """Store a new PENDING job; durable when the id is returned. ``member``: refuse it
        unless its user is a member of its project (checked in the same transaction)."""
        return JobId(self.submit_record(submission, member).id)

    def submit_record(self, submission: Submission, member: bool = False) -> JobRecord:
        """``submit``, returning the stored record (no second read)."""
        return self.submit_future(submission, member).result()

    def submit_future(self, submission: Submission, member: bool = False, *,
                      options: SubmitOptions | None = None) -> Future:
        """``submit_record`` without blocking: a future of the record, resolved once the job
        is committed (``asyncio.wrap_future`` awaits it). With ``options`` (which then say
        ``member``), fair-use caps and an idempotency key apply (``rota.store.submit``), and
        a key used before resolves to ``Replayed``."""
        return self.group.start((submission, options or SubmitOptions(member=member)))

    def replay(self, user: str, options: SubmitOptions) -> Replayed | None:
        """The submission ``user``'s idempotency key made within its day, if any."""
        with self._read() as conn:
            return submit.replay(conn, user, options, self.clock())

    def forget_keys(self, now: float) -> int:
        """Drop idempotency keys that no longer name anything; how many."""
        with self._write() as conn:
            return submit.forget_keys(conn, now - submit.KEY_TTL_S)

    def fair_use(self) -> FairUse:
        """The fair-use caps in force (``rota.store.records.FairUse``)."""
        if self._fair_use is None:
            with self._read() as conn:
                self._fair_use = submit.read_fair_use(conn)
        return self._fair_use

    def put_fair_use(self, stored: dict[str, dict[str, Any]] | None) -> None:
        """Set the caps an operator wrote per scope (``user``, ``project``); None: defaults."""
        with self._write() as conn:
            submit.put_fair_use(conn, stored)
        self._fair_use = None

    def job_ids(self, project: str) -> list[str]:
        """The ids of every job of ``project``, in any state."""
        with self._read() as conn:
            return jobs.job_ids(conn, project)

    def storage_rows(self, project: str) -> list[tuple[str, JobState, str | None]]:
        """Each job of ``project`` as (id, state, upload id or None), in any state."""
        with self._read() as conn:
            return jobs.storage_rows(conn, project)

    def get_job(self, job_id: str) -> JobRecord:
        with self._read() as conn:
            return jobs.record(conn, job_id)

    def list_jobs(self, where: JobFilter = JobFilter(), limit: int = 100,
                  after: str | None = None, newest_first: bool = False) -> Page:
        with self._read() as conn:
            return jobs.list_jobs(conn, where, limit, after, newest_first)

    def brief_page(self, where: JobFilter = JobFilter(), limit: int = 100,
                   after: str | None = None,
                   columns: tuple[str, ...] = briefs.BRIEF_COLUMNS) -> tuple[str, str | None]:
        """Jobs newest first as brief views, as the JSON text the database wrote
        (``briefs.brief_page``: an array of the values of ``columns`` per job), and the next
        cursor."""
        with self._read() as conn:
            return briefs.brief_page(conn, where, limit, after, columns, self.clock())

    def events(self, job_id: str, after: int = 0, limit: int = 1000) -> list[JobEvent]:
        with self._read() as conn:
            return jobs.events(conn, job_id, after, limit)

    def state_moves(self, after: int = 0, limit: int = 10_000) -> list[StateMove]:
        """Every job's state changes recorded after event ``after``, oldest first (metrics)."""
        with self._read() as conn:
            return jobs.state_moves(conn, after, limit)

    def last_event(self) -> int:
        with self._read() as conn:
            return jobs.last_event(conn)

    def request_cancel(self, job_id: str, by: str) -> JobRecord:
        """Cancel a pending job now, or flag an active one for the control loop to stop."""
        def run(conn: Connection) -> JobRecord:
            job_moves.request_cancel(conn, job_id, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def force_cancel(self, job_id: str, by: str) -> JobRecord:
        """End a job CANCELLED now, whatever its backend reports (an operator's way out for a
        job whose backend handle can no longer be adopted or polled): its placement is freed
        for the next pass. The control loop makes one best-effort stop of what it launched."""
        def run(conn: Connection) -> JobRecord:
            row = jobs.get(conn, job_id, lock=True)
            if JobState(row.state).terminal:
                raise IllegalTransition(f"job {row.id} is already {row.state}")
            why = f"force-cancelled by {by}"
            job_moves.move(conn, row, JobState.CANCELLED, self.clock(), why,
                           {"by": by, "force": True}, end=End.CANCELLED, reason=why,
                           cancel_requested=True)
            return jobs.record(conn, job_id)
        return self._retry(run)

    def transition_many(self, moves: list[Move]) -> list[JobRecord | RotaError]:
        """The moves of one control-loop pass in one transaction (one commit, one flush to
        disk); each outcome is the job after its move, or the error that refused that move
        alone."""
        if not moves:
            return []

        def run(conn: Connection) -> list[JobRecord | RotaError]:
            return job_moves.transition_many(conn, moves, self.clock())
        return self._retry(run)

    def held_jobs(self) -> list[JobRecord]:
        """Every job that holds resources (SCHEDULED, RUNNING, PREEMPTING), in id order; read
        in full only where it changed since the last call (``rota.store.held``)."""
        with self._read() as conn:
            return self._held.held(conn)

    def get_jobs(self, job_ids: list[str]) -> list[JobRecord]:
        """The jobs that exist among ``job_ids``, in id order."""
        with self._read() as conn:
            return jobs.records(conn, job_ids)

    def transition(self, job_id: str, new_state: JobState, *, exit_code: int | None = None,
                   reason: str | None = None, backend_handle: dict[str, Any] | None = None,
                   expected_version: int | None = None, end: End | None = None,
                   hold: str | None = None, eligible_at: float | None = None,
                   max_rss_kib: int | None = None) -> JobRecord:
        """A move reported by a backend (RUNNING, SUCCEEDED, FAILED, CANCELLED, or PENDING to
        requeue with ``attempts + 1``), with how the attempt ended (``end``, and its peak
        memory ``max_rss_kib`` where known) and, for a requeue, a ``hold`` or the backoff's
        ``eligible_at``. With ``expected_version`` it is not retried."""
        def run(conn: Connection) -> JobRecord:
            job_moves.transition(conn, job_id, JobState(new_state), self.clock(),
                                 expected_version, exit_code, reason, backend_handle, end, hold,
                                 eligible_at, max_rss_kib)
            return jobs.record(conn, job_id)
        if expected_version is not None:
            with self._write() as conn:
                return run(conn)
        return self._retry(run)

    def eligibility_facts(self, now: float) -> EligibilityFacts:
        """What may keep pending jobs from starting now (``rota.control.eligibility``)."""
        with self._read() as conn:
            return jobs.eligibility_facts(conn, now)

    def submit_array(self, submissions: list[Submission], member: bool = False, *,
                     options: SubmitOptions | None = None) -> list[JobRecord] | Replayed:
        """The tasks of one array, all or none, sharing the first task's id as ``array_id``
        (``Replayed`` for an idempotency key used before; see ``submit_future``)."""
        chosen = options or SubmitOptions(member=member)

        def run(conn: Connection) -> list[JobRecord] | Replayed:
            return submit.submit_array(conn, submissions, self.clock(), chosen)
        return self._retry(run)

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        """Every attempt of the job, first first."""
        with self._read() as conn:
            return jobs.attempt_history(conn, job_id)

    def attempt_handle(self, job_id: str, attempt: int) -> Mapping[str, Any] | None:
        """The backend handle of one attempt of the job (``jobs.attempt_handle``)."""
        with self._read() as conn:
            return jobs.attempt_handle(conn, job_id, attempt)

    def note(self, job_id: str, kind: str, message: str) -> None:
        """An event in the job's history (``kind``: a word, e.g. ``idle-warning``)."""
        def run(conn: Connection) -> None:
            marks.note(conn, job_id, kind, message, self.clock())
        self._retry(run)

    def note_many(self, job_ids: list[str], kind: str, message: str) -> None:
        """The same event in the history of each of ``job_ids``, in one transaction; a job
        gone meanwhile is skipped."""
        def run(conn: Connection) -> None:
            for job_id in job_ids:
                try:
                    marks.note(conn, job_id, kind, message, self.clock())
                except NotFound:
                    continue
        if job_ids:
            self._retry(run)

    def record_checkpoint(self, job_id: str, attempt: int | None = None) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            marks.record_checkpoint(conn, job_id, attempt, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def hold(self, job_id: str, reason: str, by: str) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            marks.hold(conn, job_id, reason, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def update_pending(self, job_id: str, change: Change, by: str,
                       operator: bool = False) -> tuple[JobRecord, list[str]]:
        """Change a pending job's walltime, priority or queue (``rota.store.changes``): the
        job, and what changed in words."""
        def run(conn: Connection) -> tuple[JobRecord, list[str]]:
            said = changes.update_pending(conn, job_id, change, by, operator, self.clock())
            return jobs.record(conn, job_id), said
        return self._retry(run)

    def requeue(self, job_id: str, by: str) -> JobRecord:
        """Send a job holding resources back to pending through its grace period
        (``rota.store.changes.requeue``)."""
        def run(conn: Connection) -> JobRecord:
            changes.requeue(conn, job_id, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def release(self, job_id: str, by: str) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            marks.release(conn, job_id, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def record_handle(self, job_id: str, handle: dict[str, Any],
                      launched: str | None = None) -> JobRecord:
        """Save the handle of an attempt found after a restart, or (``launched``: the
        backend's name) of a launch not started yet, without a state move."""
        def run(conn: Connection) -> JobRecord:
            marks.record_handle(conn, job_id, handle, self.clock(), launched)
            return jobs.record(conn, job_id)
        return self._retry(run)

    def record_waiting(self, job_id: str, reason: str) -> None:
        """Why a SCHEDULED job's backend has not started it yet (``marks.record_waiting``)."""
        self._retry(lambda conn: marks.record_waiting(conn, job_id, reason, self.clock()))

    def record_placement(self, job_id: str, placement: Placement) -> JobRecord:
        """Record where the backend put a job that holds resources (``marks.record_placement``)."""
        def run(conn: Connection) -> JobRecord:
            marks.record_placement(conn, job_id, placement, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    # leases (``rota.store.lease``)
    def take_lease(self, name: str, holder: str, ttl_s: float, now: float,
                   may_replace: Callable[[str], bool] = lambda _holder: False) -> lease.Lease:
        """Take ``name`` for ``holder`` until ``now + ttl_s``; ``LeaseHeld`` while another
        live holder (that ``may_replace`` does not accept) has it."""
        return self._retry(lambda conn: lease.take(conn, name, holder, ttl_s, now, may_replace))

    def renew_lease(self, name: str, holder: str, ttl_s: float, now: float) -> lease.Lease | None:
        """Extend ``holder``'s lease; None when it is no longer ``holder``'s."""
        with self._write() as conn:
            return lease.renew(conn, name, holder, ttl_s, now)

    def release_lease(self, name: str, holder: str) -> bool:
        with self._write() as conn:
            return lease.release(conn, name, holder)

    def get_lease(self, name: str) -> lease.Lease | None:
        with self._read() as conn:
            return lease.current(conn, name)

    # the scheduling cycle
    def snapshot(self, now: float) -> Snapshot:
        """Everything ``run_cycle`` reads. ``now`` is the cycle's time; usage is handed over
        as stored (decayed to its ``as_of``): the fair-share plugin decays it to ``now``."""
        with self._read() as conn:
            return cycle.snapshot(conn, self._jobs, self._nodes)

    def queue_overview(self) -> tuple[Snapshot, dict[str, int]]:
        """The queues with the jobs that hold resources, and each queue's pending jobs
        counted (``rota.store.cycle.queue_overview``): the queues' view without every job."""
        with self._read() as conn:
            return cycle.queue_overview(conn, self._jobs)

    def holding_jobs(self) -> tuple[Job, ...]:
        """The jobs that hold resources now (``rota.store.cycle.JobCache.holding``)."""
        with self._read() as conn:
            return self._jobs.holding(conn)

    def apply(self, decisions: Decisions, now: float) -> ApplyResult:
        """Persist one cycle's decisions in one transaction (see ``rota.store.cycle``)."""
        with self._write() as conn:
            return cycle.apply(conn, decisions, now)
