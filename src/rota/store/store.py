"""``Store``: the one object the control loop and the API call to persist anything.

Transaction boundaries: every public method is exactly one transaction, committed before it
returns (so a submitted job is durable when ``submit`` returns its id, and a decision is durable
before the control loop acts on it). Submits from concurrent threads share transactions: one
writer thread commits whatever queued up while it was busy as one transaction and one fsync
(``rota.store.group``); each caller still returns only once its own job is committed. Writes run as write transactions (``BEGIN IMMEDIATE`` on
SQLite, row locks on PostgreSQL); ``snapshot`` reads one consistent view (a SQLite read
transaction; ``REPEATABLE READ`` on PostgreSQL).

Writes that only a race can break (a backend report and a user's cancel on the same job) are
retried a few times on ``Conflict``; each retry re-reads the row and re-checks the transition.

Time: ``snapshot`` and ``apply`` take the cycle's ``now``; everything else stamps rows with the
injected ``clock`` (``time.time`` by default).

Authentication is cached for ``auth_ttl_s`` (``rota.store.authcache``); every write that changes
what a principal is made of clears the cache once it has committed.

Durability on SQLite: WAL with ``synchronous=FULL`` (``rota.store.engine``), so a commit that
returned is in the log on disk and survives a kill of the process and a crash of the machine.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from sqlalchemy import Connection

from rota.core import (
    End, Flavor, IllegalTransition, JobId, JobState, Node, Placement, Project, Queue, RotaError,
)
from rota.core import Decisions, Snapshot, Usage
from rota.core.accounting import BudgetStatus, Report, check_budget, tally
from rota.store import (
    access, accounting, admin, briefs, cycle, jobs, lease, queueset, submit,
)
from rota.store.held import HeldCache
from rota.store.engine import WRITE, display_url, make_engine, migrate, resolve_url
from rota.store.authcache import DEFAULT_TTL_S, AuthCache
from rota.store.errors import Conflict, NotFound
from rota.store.group import DEFAULT_MAX_BATCH, GroupCommit
from rota.store.services import Services
from rota.store.records import (
    ApplyResult, AttemptRecord, EligibilityFacts, FairUse, JobEvent, JobFilter, JobRecord, Move,
    Page, Replayed, StateMove, Submission, SubmitOptions,
)
from rota.store.tokens import IssuedToken, Principal, Role, TokenInfo

T = TypeVar("T")
DEFAULT_HALF_LIFE_S = 7 * 86400.0
RETRIES = 5


class Store:
    """Open with ``Store.open(url_or_data_dir)``: migrates the schema to the newest revision."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time,
                 usage_half_life_s: float = DEFAULT_HALF_LIFE_S, auth_ttl_s: float = DEFAULT_TTL_S,
                 max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.url = url  # never print it: it may hold a password (``display_url``)
        self.display_url = display_url(url)
        self.clock = clock
        self.usage_half_life_s = usage_half_life_s
        self._engine = make_engine(url)
        self.revision = migrate(self._engine)
        self._auth = AuthCache(auth_ttl_s)
        self._jobs = cycle.JobCache()
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
    def dialect(self) -> str:
        return self._engine.dialect.name

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._engine.execution_options(**{WRITE: True}).begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        engine = self._engine
        if engine.dialect.name == "postgresql":
            engine = engine.execution_options(isolation_level="REPEATABLE READ")
        with engine.begin() as conn:
            yield conn

    def _retry(self, fn: Callable[[Connection], T]) -> T:
        for attempt in range(RETRIES):
            try:
                with self._write() as conn:
                    return fn(conn)
            except Conflict:
                if attempt == RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    # projects, users, tokens
    def create_project(self, name: str, weight: float = 1.0) -> Project:
        project = Project(name, weight)
        with self._write() as conn:
            admin.create_project(conn, project, self.clock())
        return project

    def set_project_weight(self, name: str, weight: float) -> None:
        with self._write() as conn:
            admin.set_project_weight(conn, name, weight)

    def list_projects(self) -> list[Project]:
        with self._read() as conn:
            return admin.list_projects(conn)

    def create_user(self, name: str, projects: Iterable[str] = (),
                    unix_user: str | None = None) -> None:
        """A user, its projects and its OS account (None: the account named ``name``)."""
        with self._write() as conn:
            admin.create_user(conn, name, self.clock(), unix_user)
            for project in projects:
                admin.add_member(conn, name, project)
        self._auth.invalidate()

    def set_unix_user(self, name: str, unix_user: str | None) -> None:
        with self._write() as conn:
            admin.set_unix_user(conn, name, unix_user)

    def list_users(self) -> list[str]:
        with self._read() as conn:
            return admin.list_users(conn)

    def unix_users(self) -> dict[str, str]:
        """user -> the OS account its jobs run as."""
        with self._read() as conn:
            return admin.unix_users(conn)

    def user_records(self) -> list[admin.UserRecord]:
        with self._read() as conn:
            return admin.user_records(conn)

    def add_member(self, user: str, project: str) -> None:
        with self._write() as conn:
            admin.add_member(conn, user, project)
        self._auth.invalidate()

    def remove_member(self, user: str, project: str, cancel: bool = False) -> list[str]:
        """End a membership (``rota.store.access``); with ``cancel``, the user's PENDING jobs
        of the project are cancelled. The ids of those jobs (cancelled or kept)."""
        try:
            with self._write() as conn:
                pending = access.remove_member(conn, user, project)
        finally:
            self._auth.invalidate()
        for job_id in pending if cancel else ():
            try:
                self.request_cancel(job_id, by="an operator, as its owner left the project")
            except (NotFound, IllegalTransition):  # it moved on or went meanwhile
                continue
        return pending

    def set_disabled(self, user: str, disabled: bool) -> None:
        """Disable (or enable again) every token of ``user`` (``rota.store.access``)."""
        try:
            with self._write() as conn:
                access.set_disabled(conn, user, disabled, self.clock())
        finally:
            self._auth.invalidate()

    def revoke_tokens(self, user: str) -> int:
        """Revoke every live token of ``user`` at once; how many."""
        try:
            with self._write() as conn:
                return access.revoke_all(conn, user, self.clock())
        finally:
            self._auth.invalidate()

    def revoke_hashed(self, hashes: list[str]) -> dict[str, TokenInfo]:
        """Revoke the live tokens with these hashes (``rota.store.tokens.token_hash``); hash ->
        each token revoked."""
        try:
            with self._write() as conn:
                return access.revoke_hashed(conn, hashes, self.clock())
        finally:
            self._auth.invalidate()

    def issue_token(self, user: str, name: str, role: Role | str = Role.MEMBER) -> IssuedToken:
        """A new token; its plaintext is in the result and nowhere else, ever."""
        with self._write() as conn:
            return admin.issue_token(conn, user, name, role, self.clock())

    def issue_job_token(self, job_id: str, attempt: int) -> str:
        """A token for attempt ``attempt`` of the job, acting for its owner on that job only
        (it reads the job and reports its checkpoints); revoked when the attempt ends."""
        return self.issue_job_tokens([(job_id, attempt)])[job_id]

    def list_tokens(self, user: str | None = None) -> list[TokenInfo]:
        with self._read() as conn:
            return admin.list_tokens(conn, user)

    def revoke_token(self, user: str, name: str) -> None:
        try:
            with self._write() as conn:
                admin.revoke_token(conn, user, name, self.clock())
        finally:
            self._auth.invalidate()

    def authenticate(self, token: object) -> Principal:
        """The principal of a valid token; ``Unauthenticated`` otherwise. A success is cached
        for ``auth_ttl_s`` (see ``rota.store.authcache``)."""
        def load() -> Principal:
            with self._read() as conn:
                return admin.authenticate(conn, token)
        if not isinstance(token, str):
            return load()
        return self._auth.get(token, load)

    def cached_principal(self, token: str) -> Principal | None:
        """The principal of ``token`` if the cache holds it now; None: call ``authenticate``."""
        return self._auth.peek(token)

    # configuration and inventory
    def put_flavor(self, flavor: Flavor) -> None:
        with self._write() as conn:
            admin.put_flavor(conn, flavor)

    def list_flavors(self) -> list[Flavor]:
        with self._read() as conn:
            return admin.list_flavors(conn)

    def put_queue(self, queue: Queue, projects: tuple[str, ...] | None = None) -> None:
        """Create or replace ``queue``, admitting the jobs of ``projects`` (None: every one)."""
        with self._write() as conn:
            admin.put_queue(conn, queue, projects)

    def apply_queue_set(self, flavors: Iterable[Flavor],
                        listed: Mapping[str, tuple[Queue, tuple[str, ...] | None]],
                        idle: Mapping[str, dict[str, Any] | None]) -> queueset.QueueSetApplied:
        """A queues file's flavours, queues (name -> queue and binding) and idle defaults in
        one transaction; open unlimited queues it leaves out retire (``rota.store.queueset``)."""
        with self._write() as conn:
            return queueset.apply(conn, flavors, listed, idle)

    def bindings(self) -> dict[str, tuple[str, ...] | None]:
        """The projects each queue admits (None: every project); see ``rota.store.admin``."""
        with self._read() as conn:
            return admin.bindings(conn)

    def put_idle(self, scope: str, policy: dict[str, Any] | None) -> None:
        """Idle reclamation defaults of queue ``scope``, or of every queue (``*``)."""
        with self._write() as conn:
            admin.put_idle(conn, scope, policy)

    def idle_defaults(self) -> dict[str, dict[str, Any]]:
        """scope (a queue, or ``*``) -> its idle reclamation defaults, as stored."""
        with self._read() as conn:
            return admin.idle_defaults(conn)

    def delete_queue(self, name: str) -> None:
        """Refused with ``InUse`` while the queue holds live jobs (``rota.store.admin``)."""
        with self._write() as conn:
            admin.delete_queue(conn, name)

    def delete_project(self, name: str) -> list[str]:
        """Refused with ``InUse`` while the project has jobs; returns the queues it was
        removed from."""
        try:
            with self._write() as conn:
                return admin.delete_project(conn, name)
        finally:
            self._auth.invalidate()

    def get_queue(self, name: str) -> Queue:
        with self._read() as conn:
            return admin.get_queue(conn, name)

    def list_queues(self) -> list[Queue]:
        with self._read() as conn:
            return admin.list_queues(conn)

    def upsert_nodes(self, inventory: Iterable[Node], backend: str) -> None:
        with self._write() as conn:
            admin.upsert_nodes(conn, inventory, backend, self.clock())

    def set_schedulable(self, node: str, schedulable: bool) -> None:
        with self._write() as conn:
            admin.set_schedulable(conn, node, schedulable)

    def list_nodes(self) -> list[tuple[Node, str, float]]:
        with self._read() as conn:
            return admin.list_nodes(conn)

    def node_records(self) -> list[admin.NodeRecord]:
        with self._read() as conn:
            return admin.node_records(conn)

    def set_node(self, node: str, schedulable: bool, drain: bool = False, reason: str = "",
                 evict_by: str | None = None) -> tuple[list[str], list[str]]:
        """Cordon, drain or resume a node (``rota.store.admin.set_node``); with ``evict_by``
        the jobs holding resources there are evicted in the same transaction. Returns
        (evicted, kept) job ids."""
        with self._write() as conn:
            admin.set_node(conn, node, schedulable, drain, reason)
            if evict_by is None:
                return [], []
            return admin.evict(conn, node, evict_by, self.clock())

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
            return briefs.brief_page(conn, where, limit, after, columns)

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
            jobs.request_cancel(conn, job_id, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def transition_many(self, moves: list[Move]) -> list[JobRecord | RotaError]:
        """The moves of one control-loop pass in one transaction (one commit, one flush to
        disk); each outcome is the job after its move, or the error that refused that move
        alone."""
        if not moves:
            return []

        def run(conn: Connection) -> list[JobRecord | RotaError]:
            return jobs.transition_many(conn, moves, self.clock())
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

    def issue_job_tokens(self, attempts: list[tuple[str, int]]) -> dict[str, str]:
        """``issue_job_token`` for many attempts, in one transaction: job id -> token."""
        def run(conn: Connection) -> dict[str, str]:
            return admin.issue_job_tokens(conn, attempts, self.clock())
        return self._retry(run) if attempts else {}

    def transition(self, job_id: str, new_state: JobState, *, exit_code: int | None = None,
                   reason: str | None = None, backend_handle: dict[str, Any] | None = None,
                   expected_version: int | None = None, end: End | None = None,
                   hold: str | None = None, eligible_at: float | None = None) -> JobRecord:
        """A move reported by a backend (RUNNING, SUCCEEDED, FAILED, CANCELLED, or PENDING to
        requeue with ``attempts + 1``), with how the attempt ended (``end``) and, for a
        requeue, a ``hold`` or the backoff's ``eligible_at``. With ``expected_version`` it is
        not retried."""
        def run(conn: Connection) -> JobRecord:
            jobs.transition(conn, job_id, JobState(new_state), self.clock(), expected_version,
                            exit_code, reason, backend_handle, end, hold, eligible_at)
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

    def note(self, job_id: str, kind: str, message: str) -> None:
        """An event in the job's history (``kind``: a word, e.g. ``idle-warning``)."""
        def run(conn: Connection) -> None:
            jobs.note(conn, job_id, kind, message, self.clock())
        self._retry(run)

    def note_many(self, job_ids: list[str], kind: str, message: str) -> None:
        """The same event in the history of each of ``job_ids``, in one transaction; a job
        gone meanwhile is skipped."""
        def run(conn: Connection) -> None:
            for job_id in job_ids:
                try:
                    jobs.note(conn, job_id, kind, message, self.clock())
                except NotFound:
                    continue
        if job_ids:
            self._retry(run)

    def record_checkpoint(self, job_id: str, attempt: int | None = None) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            jobs.record_checkpoint(conn, job_id, attempt, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def hold(self, job_id: str, reason: str, by: str) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            jobs.hold(conn, job_id, reason, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def release(self, job_id: str, by: str) -> JobRecord:
        def run(conn: Connection) -> JobRecord:
            jobs.release(conn, job_id, by, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def record_handle(self, job_id: str, handle: dict[str, Any]) -> JobRecord:
        """Save the handle of an attempt found after a restart, without a state move."""
        def run(conn: Connection) -> JobRecord:
            jobs.record_handle(conn, job_id, handle, self.clock())
            return jobs.record(conn, job_id)
        return self._retry(run)

    def record_placement(self, job_id: str, placement: Placement) -> JobRecord:
        """Record where the backend put a job that holds resources (``jobs.record_placement``)."""
        def run(conn: Connection) -> JobRecord:
            jobs.record_placement(conn, job_id, placement, self.clock())
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
            return cycle.snapshot(conn, self._jobs)

    def apply(self, decisions: Decisions, now: float) -> ApplyResult:
        """Persist one cycle's decisions in one transaction (see ``rota.store.cycle``)."""
        with self._write() as conn:
            return cycle.apply(conn, decisions, now)

    def bill(self, gpu_seconds: dict[str, float], billed_until: dict[str, float],
             now: float) -> None:
        """Add GPU-seconds per project and record up to when each job is billed, in one
        transaction: a restarted control plane bills from there, never twice."""
        with self._write() as conn:
            for project, seconds in sorted(gpu_seconds.items()):
                cycle.add_usage(conn, project, seconds, now, self.usage_half_life_s)
            jobs.note_billed(conn, billed_until)

    def add_usage(self, project: str, gpu_seconds: float, now: float) -> Usage:
        with self._write() as conn:
            return cycle.add_usage(conn, project, gpu_seconds, now, self.usage_half_life_s)

    def usage(self, now: float) -> dict[str, float]:
        """Each project's GPU-seconds decayed to ``now`` with the store's half-life."""
        with self._read() as conn:
            stored = cycle.stored_usage(conn)
        return {p: cycle.decayed(u.gpu_seconds, u.as_of, now, self.usage_half_life_s)
                for p, u in stored.items()}

    # exact accounting and budgets (``rota.store.accounting``, ``rota.core.accounting``)
    def report(self, since: float, until: float, by: Iterable[str], now: float,
               projects: Iterable[str] | None = None) -> tuple[Report, str | None]:
        """GPU-hours, idle GPU-hours and cost of ``[since, until)`` grouped by ``by``, of
        ``projects`` (None: every project), attempts still running counted up to ``now``; and
        the currency of the costs (None: no prices are set)."""
        names = None if projects is None else sorted(set(projects))
        with self._read() as conn:
            held = accounting.allocations(conn, since, until, names)
            idle = accounting.idle(conn, since, until, names)
            currency, per_model = accounting.read_prices(conn)
        return tally(held, idle, tuple(by), since, until, now, per_model), currency

    def put_prices(self, currency: str | None, per_model: dict[str, float]) -> None:
        """Replace the prices of a GPU-hour per model (no currency: no prices)."""
        with self._write() as conn:
            accounting.put_prices(conn, currency, per_model)

    def prices(self) -> tuple[str | None, dict[str, float]]:
        with self._read() as conn:
            return accounting.read_prices(conn)

    def note_idle(self, spans: dict[tuple[str, int, float], float]) -> None:
        """Record idle spans, (job, attempt, since) -> until (``rota.control.idle``)."""
        if spans:
            with self._write() as conn:
                accounting.note_idle(conn, spans)

    def set_budget(self, project: str, soft: float | None, hard: float | None) -> None:
        """A project's monthly limits in GPU-hours (both None: no budget)."""
        budget = check_budget(soft, hard)
        with self._write() as conn:
            accounting.set_budget(conn, project, budget, self.clock())

    def budget_status(self, now: float, projects: Iterable[str] | None = None
                      ) -> dict[str, BudgetStatus]:
        """Each project with a budget (of ``projects``; None: all): its limits and what it
        used in the calendar month (UTC) of ``now``, up to ``now``."""
        start, end, month = accounting.month_bounds(now)
        with self._read() as conn:
            found = accounting.read_budgets(conn)
            if projects is not None:
                found = {p: b for p, b in found.items() if p in set(projects)}
            used = accounting.used_gpu_hours(conn, now, found) if found else {}
        return {p: BudgetStatus(p, budget, month, start, end, used[p])
                for p, (budget, _) in found.items()}

    def budgets_warned(self) -> dict[str, str]:
        """project -> the month (``2026-11``) whose soft limit it was last warned of."""
        with self._read() as conn:
            return {p: warned for p, (_, warned) in accounting.read_budgets(conn).items()}

    def mark_budget_warned(self, projects: Iterable[str], month: str) -> None:
        with self._write() as conn:
            accounting.mark_warned(conn, projects, month)
