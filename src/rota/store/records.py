"""What goes into the store and what comes out of it, as frozen values.

- ``Submission``: a new job, in core-level fields (the request of one replica, replicas,
  walltime, priority, preemptibility, grace, resource group, selector) plus ``run``, an opaque
  JSON mapping for the backend (entrypoint, workdir, env, ...). Whatever reads a job file
  (``rota.spec``) or an API body builds one; ``Submission.from_job`` takes a core ``Job``.
- ``JobRecord``: a stored job: the core ``Job`` the scheduler sees, and what only the store
  knows (state reason, latest wait reasons and estimated start, exit code, attempts, backend
  handle, up to when its GPU use is billed, ``version``). ``attempts`` is the number of the
  job's current attempt, from 0: every requeue starts the next one; ``failures`` the requeues
  that spent the restart budget (all but those after a preemption).
- ``JobFilter`` and ``Page``: listing with keyset pagination; ``after`` is an opaque cursor.
- ``JobEvent``: one line of a job's history; ``AttemptRecord``: one attempt of a job (when it
  was bound, launched and ended, where, how it ended, its last checkpoint).
- ``SubmitOptions``: how a submit is checked (membership, fair-use caps) and its idempotency
  key; ``Replayed``: the answer to a key used before, the job that submit made.
- ``Cap`` and ``FairUse``: operators' fair-use caps per user and per project, with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from rota.core import Job, JobKind, JobState, ReplicaRequest
from rota.core import Reason


@dataclass(frozen=True, slots=True)
class Submission:
    project: str
    queue: str
    user: str
    request: ReplicaRequest = ReplicaRequest()
    name: str = ""
    replicas: int = 1
    priority: int = 0
    kind: JobKind = JobKind.BATCH
    walltime_s: float | None = None
    preemptible: bool = True
    grace_s: float = 30.0
    resource_group: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    run: Mapping[str, Any] = field(default_factory=dict)
    start_at: float | None = None        # not before then
    depends: tuple[tuple[str, str], ...] = ()  # (after_ok | after_any | after_failed, job id)
    array_index: int | None = None       # a task of an array (``Store.submit_array``)
    array_limit: int | None = None

    @classmethod
    def from_job(cls, job: Job, name: str = "", run: Mapping[str, Any] | None = None) -> Submission:
        """The submission of a core job; its id, state and placement are ignored."""
        return cls(project=job.project, queue=job.queue, user=job.user, request=job.request,
                   name=name, replicas=job.replicas, priority=job.priority, kind=job.kind,
                   walltime_s=job.walltime_s, preemptible=job.preemptible, grace_s=job.grace_s,
                   resource_group=job.resource_group, selector=dict(job.selector),
                   labels=dict(job.labels), run=dict(run or {}))


@dataclass(frozen=True, slots=True)
class JobRecord:
    job: Job
    name: str
    reason: str
    wait_reasons: tuple[Reason, ...]
    estimated_start: float | None
    finished_at: float | None
    exit_code: int | None
    attempts: int
    cancel_requested: bool
    preempt_deadline: float | None
    backend_handle: Mapping[str, Any] | None
    run: Mapping[str, Any]
    version: int
    updated_at: float
    billed_until: float | None = None
    failures: int = 0
    held: str = ""                      # why it is held back (empty: it is not)
    lost_streak: int = 0                # attempts in a row lost to faults of the infrastructure
    eligible_at: float | None = None    # not before then: its start_at, or a retry's backoff
    last_checkpoint_at: float | None = None
    depends: tuple[tuple[str, str], ...] = ()
    array_id: str | None = None
    array_index: int | None = None
    array_limit: int | None = None

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def state(self) -> JobState:
        return self.job.state


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Every given criterion must hold; a collection matches any of its members."""

    projects: frozenset[str] | None = None
    states: frozenset[JobState] | None = None
    user: str | None = None
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    items: tuple[JobRecord, ...]
    next_after: str | None  # pass back as ``after`` for the next page; None: no more


@dataclass(frozen=True, slots=True)
class JobEvent:
    id: int
    job: str
    time: float
    kind: str
    message: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StateMove:
    """A job's state change as its history recorded it (``Store.state_moves``): the event's id
    and time, the job's queue and submit time, the states, how the attempt ended (None where
    the move did not end one) and the attempt (None in a history written before it was kept)."""

    id: int
    time: float
    queue: str
    submit_time: float
    old: str
    new: str
    end: str | None
    attempt: int | None


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What ``Store.apply`` wrote, and the decisions it dropped because the job had moved on
    since the snapshot (job id -> why)."""

    bound: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    stale: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    job: str
    attempt: int
    bound_at: float
    launched_at: float | None
    ended_at: float | None
    placement: Any                      # as stored: [{"node", "devices": [...]}, ...]
    end: str | None                     # a ``rota.core.End`` once it ended
    exit_code: int | None
    reason: str
    last_checkpoint_at: float | None
    max_rss_kib: int | None = None      # its peak resident memory, where its backend told it


DEPENDENCY_KINDS = ("after_ok", "after_any", "after_failed")


@dataclass(frozen=True, slots=True)
class PendingFacts:
    """What may keep one pending job from starting, as the store knows it."""

    held: str = ""
    eligible_at: float | None = None
    depends: tuple[tuple[str, str], ...] = ()
    array: tuple[str, int, int | None] | None = None  # (array id, index, limit)


@dataclass(frozen=True, slots=True)
class EligibilityFacts:
    """``pending``: the pending jobs that something may keep back; ``states``: the states of
    the jobs they depend on; ``array_active``: per array, its tasks holding resources."""

    pending: Mapping[str, PendingFacts] = field(default_factory=dict)
    states: Mapping[str, JobState] = field(default_factory=dict)
    array_active: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """How one submit is admitted. ``member``: refuse it unless its user is a member of its
    project; ``capped``: hold it to the fair-use caps on pending jobs (``FairUse``); ``key``:
    its idempotency key (the same user's same key within ``KEY_TTL_S`` is the same submit),
    ``fingerprint`` the SHA-256 of its request, to refuse a key reused for another request."""

    member: bool = False
    capped: bool = False
    key: str | None = None
    fingerprint: str = ""


KEY_TTL_S = 86400.0  # how long an idempotency key names its submission


@dataclass(frozen=True, slots=True)
class Replayed:
    """A submit whose key was used before for the same request: the job that first submit
    made (an array's first task, with ``tasks`` its number of tasks; None: one job)."""

    record: JobRecord
    tasks: int | None = None


@dataclass(frozen=True, slots=True)
class Cap:
    """What one user (or one project) may have at once; None: no cap. ``pending``: jobs
    waiting; ``submits_per_s`` and ``burst``: submissions per second, sustained and at once;
    ``storage``: bytes of the job directories, with their unpacked uploads (projects only;
    ``rota.api.storage``)."""

    pending: int | None = None
    submits_per_s: float | None = None
    burst: int | None = None
    storage: int | None = None

    def merged(self, stored: Mapping[str, Any] | None) -> Cap:
        """These caps with the keys an operator set (``stored``) in their place."""
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in (stored or {}).items() if k in known})


@dataclass(frozen=True, slots=True)
class FairUse:
    """The fair-use caps of a control plane (``DEFAULT_FAIR_USE`` where nobody set one)."""

    user: Cap = Cap()
    project: Cap = Cap()

    @classmethod
    def of(cls, stored: Mapping[str, Mapping[str, Any]]) -> FairUse:
        return cls(DEFAULT_FAIR_USE.user.merged(stored.get("user")),
                   DEFAULT_FAIR_USE.project.merged(stored.get("project")))


DEFAULT_FAIR_USE = FairUse(
    user=Cap(pending=10_000, submits_per_s=20.0, burst=200),
    project=Cap(pending=50_000, submits_per_s=100.0, burst=1000, storage=100 * 1024 ** 3))


@dataclass(frozen=True, slots=True)
class Move:
    """A state move a backend reported, with what comes with it (``Store.transition``)."""

    job: str
    state: JobState
    exit_code: int | None = None
    reason: str | None = None
    backend_handle: Mapping[str, Any] | None = None
    end: Any = None                 # a rota.core.End
    hold: str | None = None
    eligible_at: float | None = None
    max_rss_kib: int | None = None  # the ending attempt's peak resident memory, where known
