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

from dataclasses import dataclass, field

from rota.core.jobs import Placement
from rota.core.reasons import Holder, Reason, ReasonCode  # noqa: F401 - a decision's words


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
