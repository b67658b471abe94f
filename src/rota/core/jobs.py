"""Jobs, their placements and their lifecycle.

States and the legal moves between them (``TRANSITIONS``)::

    PENDING ──bind──> SCHEDULED ──started──> RUNNING ──exit 0──> SUCCEEDED
       ^                  │                     │ └──exit≠0 / lost──> FAILED
       │                  └──────preempt────────┴──> PREEMPTING ──grace over──> PENDING
       └──────────── requeue (lost node, restart policy) ────────┘
    any non-terminal ──cancel──> CANCELLED;  PENDING ──reject──> FAILED

A SCHEDULED job is bound and being started: launched or not, it becomes RUNNING once its
backend runs it (a backend with a queue of its own may hold a launch a while: *starting*).
A job occupies resources in SCHEDULED, RUNNING and PREEMPTING (a victim keeps its GPUs until
it has checkpointed and exited). SUCCEEDED, FAILED and CANCELLED are terminal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Mapping, NewType

from rota.core.errors import IllegalTransition, InvalidSpec
from rota.core.resources import ReplicaRequest

JobId = NewType("JobId", str)


class JobState(enum.StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PREEMPTING = "preempting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

    @property
    def holds_resources(self) -> bool:
        return self in (JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTING)


S = JobState
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    S.PENDING: frozenset({S.SCHEDULED, S.CANCELLED, S.FAILED}),
    S.SCHEDULED: frozenset({S.RUNNING, S.PREEMPTING, S.PENDING, S.FAILED, S.CANCELLED, S.SUCCEEDED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.PREEMPTING, S.PENDING}),
    S.PREEMPTING: frozenset({S.PENDING, S.SUCCEEDED, S.FAILED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


def check_transition(current: JobState, new: JobState) -> None:
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        raise IllegalTransition(f"a {current} job cannot become {new}; allowed: {allowed}")


class End(enum.StrEnum):
    """How one attempt of a job ended, as its history shows it.

    ``node-lost`` and ``gpu-unhealthy`` are faults of the infrastructure, not of the job: they
    requeue it without spending its restart budget. ``preempted`` does not spend it either,
    nor ``no-account`` (its owner's OS account could not run it when it was to be launched:
    nothing started, and it waits in the queue until the account exists), nor ``displaced``
    (its backend held it unstarted because work outside rota took the devices it was placed
    on: nothing started, and it is placed again)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"                  # a non-zero exit, or a command that could not start
    PREEMPTED = "preempted"
    WALLTIME = "walltime"
    RECLAIMED_IDLE = "reclaimed-idle"
    NODE_LOST = "node-lost"            # its node, supervisor or pod vanished without a word
    GPU_UNHEALTHY = "gpu-unhealthy"
    CANCELLED = "cancelled"
    LAUNCH_FAILED = "launch-failed"
    NO_ACCOUNT = "no-account"
    DISPLACED = "displaced"            # its devices were taken by work outside rota first

    @property
    def spares_budget(self) -> bool:
        """A requeue after this end does not spend the job's restart budget."""
        return self in (End.NODE_LOST, End.GPU_UNHEALTHY, End.PREEMPTED, End.NO_ACCOUNT,
                        End.DISPLACED)

    @property
    def fault(self) -> bool:
        """The infrastructure failed, not the job."""
        return self in (End.NODE_LOST, End.GPU_UNHEALTHY)


class JobKind(enum.StrEnum):
    BATCH = "batch"
    INTERACTIVE = "interactive"
    SERVICE = "service"


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """``milli`` of device ``index``'s compute and ``memory_mib`` of its memory."""

    index: int
    milli: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class ReplicaPlacement:
    node: str
    devices: tuple[DeviceShare, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where each replica of a job runs, in replica rank order."""

    replicas: tuple[ReplicaPlacement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.node for r in self.replicas))


class _TotalSlot:
    """The slot ``Job.total`` keeps its answer in: not a field, so it takes no part in
    equality, hashing, ``repr``, ``replace`` or pickling (a copy made with ``replace`` works
    its own out, from its own request)."""

    __slots__ = ("_total",)


@dataclass(frozen=True, slots=True)
class Job(_TotalSlot):
    """A unit of work: ``replicas`` copies of ``request``, placed all together or not at all.

    ``flavor`` names the queue flavour the job is charged to once admitted; ``started_at`` is
    the time it was bound while it is SCHEDULED, and the time it began running once it runs.
    Both are ``None`` while it is pending. ``last_checkpoint_at`` is when the running attempt
    last saved a checkpoint (``None``: never, so an eviction loses
    everything since ``started_at``). ``image`` is the container image the job runs in
    (``None``: it runs as a command on the node): the scheduler places such a job only on a node
    that runs container images (``rota.core.nodes.features_needed``). ``datasets`` are the
    names of the datasets it reads (``rota.core.datasets``; the snapshot says what each is).
    """

    id: JobId
    project: str
    queue: str
    request: ReplicaRequest
    user: str = ""
    priority: int = 0
    kind: JobKind = JobKind.BATCH
    replicas: int = 1
    walltime_s: float | None = None
    submit_time: float = 0.0
    preemptible: bool = True
    resource_group: str | None = None
    selector: tuple[tuple[str, str], ...] = ()
    grace_s: float = 30.0
    state: JobState = JobState.PENDING
    placement: Placement | None = None
    flavor: str | None = None
    started_at: float | None = None
    labels: tuple[tuple[str, str], ...] = field(default=())
    attained_gpu_s: float = 0.0  # GPU-seconds run in earlier attempts (preempted, requeued)
    last_checkpoint_at: float | None = None  # the latest checkpoint of this run; None: none yet
    image: str | None = None  # the container image it runs in; None: a command on the node
    datasets: tuple[str, ...] = ()  # names of the datasets it reads

    def __post_init__(self) -> None:
        if not self.id:
            raise InvalidSpec("id", "must not be empty")
        if self.replicas < 1:
            raise InvalidSpec("replicas", f"must be at least 1, got {self.replicas}")
        if self.walltime_s is not None and self.walltime_s <= 0:
            raise InvalidSpec("walltime", f"must be positive, got {self.walltime_s}")
        if self.grace_s < 0:
            raise InvalidSpec("checkpoint.grace", f"must not be negative, got {self.grace_s}")
        if self.state.holds_resources and self.placement is None:
            raise InvalidSpec("placement", f"a {self.state} job must have a placement")
        if self.placement is not None and len(self.placement.replicas) != self.replicas:
            raise InvalidSpec(
                "placement", f"has {len(self.placement.replicas)} replicas, job has {self.replicas}"
            )

    def move_to(self, new: JobState, **changes: object) -> Job:
        """This job in state ``new``; raises ``IllegalTransition`` for a move the table forbids."""
        check_transition(self.state, new)
        return replace(self, state=new, **changes)  # type: ignore[arg-type]

    @property
    def expected_end(self) -> float | None:
        if self.started_at is None or self.walltime_s is None:
            return None
        return self.started_at + self.walltime_s

    @property
    def gpus(self) -> float:
        """GPUs the whole gang holds while it runs (fractions count as such)."""
        return self.replicas * self.request.gpu.milli / 1000

    def work_at_risk(self, now: float) -> float:
        """GPU-seconds an eviction at ``now`` would lose: what ran since the last checkpoint,
        or since the start when there is none."""
        since = self.last_checkpoint_at if self.last_checkpoint_at is not None else self.started_at
        return 0.0 if since is None else self.gpus * max(0.0, now - since)

    def attained(self, now: float) -> float:
        """GPU-seconds of service received by ``now``: earlier attempts plus the current one."""
        running = 0.0 if self.started_at is None else max(0.0, now - self.started_at)
        return self.attained_gpu_s + self.gpus * running

    def total(self) -> Mapping[str, int]:
        """The quota vector of the whole gang (read-only: one shared value per request and
        gang size, since schedulers ask for it again and again), kept on the job after the
        first call: a job is frozen, so its request and gang size never change."""
        try:
            return self._total
        except AttributeError:
            total = _total(self.request, self.replicas)
            object.__setattr__(self, "_total", total)
            return total


@lru_cache(maxsize=4096)
def _total(request: ReplicaRequest, replicas: int) -> Mapping[str, int]:
    return MappingProxyType({k: v * replicas for k, v in request.vector().items()})
