"""What a cycle decides, as data. Applying decisions is the caller's business.

- ``Bind``: start ``job`` at ``placement``, charged to queue flavour ``flavor``.
- ``Preempt``: evict ``job`` so that ``by`` can run; the victim has ``grace_s`` to checkpoint.
- ``Reserve``: ``job`` is the top blocked job; it is promised ``placement`` at ``start_at``.
- ``Wait``: ``job`` stays pending for ``reasons``; ``estimated_start`` where walltimes tell.
- ``Reject``: ``job`` can never run on this cluster as specified (``reasons`` say why).

A ``Reason`` is structured (code, resource, requested, free, capacity, detail, limit); only
the CLI and API turn it into a sentence. ``limit`` names the quota limit that holds a job
back (``nominal``, ``cohort``, ``borrowing_limit``, ``lending_limit``) where one does; a
``gpu_memory`` reason's amounts are MiB of one GPU. An ``estimate`` reason (the forecast's,
``rota.scheduler.forecast``) names in ``holders`` the jobs whose end lets the job start, and
in ``detail``, where it has no estimate, why not (``no-walltime``, ``never``,
``never-quota``, ``never-room``, ``window``, ``steps``, ``depth``; ``capacity`` is then the
forecast's bound: its window in seconds, its steps, or how many jobs it follows).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rota.core.jobs import Placement


class ReasonCode(enum.StrEnum):
    QUOTA = "quota"                  # queue (and cohort) quota does not allow the job now
    RESOURCES = "resources"          # no node has the free capacity for a replica
    GANG = "gang"                    # only some replicas of the gang fit
    BLOCKED = "blocked"              # strict FIFO: an earlier job of the queue is blocked
    RESERVED = "reserved"            # starting it now would delay the reserved job
    PREEMPTING = "preempting"        # victims are being evicted for it
    NOT_PREEMPTIBLE = "not-preemptible"  # it fits only where jobs that may not be evicted run
    MIN_RUNTIME = "min-runtime"      # ... where jobs run that have not run their minimum runtime
    NO_MATCHING_GPU = "no-matching-gpu"
    NO_FLAVOR = "no-flavor"          # the queue has no flavour covering the job's GPU models
    NEVER_FITS = "never-fits"        # larger than any node that could take it
    UNKNOWN_QUEUE = "unknown-queue"
    ACCOUNT = "account"              # its owner has no OS account this control plane may use
    HELD = "held"                    # held back until someone releases it
    NOT_BEFORE = "not-before"        # its start_at, or a retry's backoff, is still ahead
    DEPENDENCY = "dependency"        # a job it depends on has not ended as it needs
    ARRAY_LIMIT = "array-limit"      # its array runs as many tasks at once as it may
    BUDGET = "budget"                # its project reached its hard budget for the month
    ESTIMATE = "estimate"            # the forecast's: who holds what it needs, until when


@dataclass(frozen=True, slots=True)
class Holder:
    """A job that holds what a pending job needs (``rota.scheduler.forecast``): where, until
    when (None: it has no walltime), and whether it runs now (else it is forecast to start
    before the pending job)."""

    job: str
    nodes: tuple[str, ...]
    end: float | None
    running: bool


@dataclass(frozen=True, slots=True)
class Reason:
    code: ReasonCode
    resource: str | None = None
    requested: float | None = None
    free: float | None = None
    capacity: float | None = None
    detail: str = ""
    limit: str | None = None
    holders: tuple[Holder, ...] = ()


@dataclass(frozen=True, slots=True)
class Bind:
    job: str
    placement: Placement
    flavor: str
    borrowing: bool = False
    backfilled: bool = False


@dataclass(frozen=True, slots=True)
class Preempt:
    job: str
    by: str
    grace_s: float
    reason: str  # "priority" (same queue) or "reclaim" (quota lent in the cohort)


@dataclass(frozen=True, slots=True)
class Reserve:
    job: str
    start_at: float
    placement: Placement


@dataclass(frozen=True, slots=True)
class Wait:
    job: str
    reasons: tuple[Reason, ...]
    estimated_start: float | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    job: str
    reasons: tuple[Reason, ...]


@dataclass(slots=True)
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    preemptions: list[Preempt] = field(default_factory=list)
    reservations: list[Reserve] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    @property
    def changes_anything(self) -> bool:
        return bool(self.binds or self.preemptions or self.rejects)

    @property
    def nominated(self) -> frozenset[str]:
        """The jobs this cycle left waiting for their victims to exit (``preempting``): the
        next snapshot's ``nominated``."""
        return frozenset(w.job for w in self.waits
                         if w.reasons and w.reasons[0].code is ReasonCode.PREEMPTING)
