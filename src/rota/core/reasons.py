"""Why a job waits or is refused, as data: ``ReasonCode``, ``Reason`` and the ``Holder`` of an
estimate (``rota.core.decisions`` says what each field means). Apart from the decisions, which
place jobs, so that what words them (``rota.core.wording``, ``rota.core.jobwords``: ``rota
show``'s fast path) loads no job model.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
    MIG_SWITCH = "mig-switch"        # it fits only on MIG instances a planned switch removes
    DATA_LOCALITY = "data-locality"  # it waits a bounded while for a node caching its data


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
