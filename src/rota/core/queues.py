"""Queues, flavours, quotas, cohorts and projects, with Kueue's vocabulary.

- A *flavour* is a kind of GPU capacity, named by an operator and defined by a GPU model
  pattern (``h100: "*H100*"``). The built-in flavour ``any`` matches every model and CPU-only
  jobs.
- A *queue* has, per flavour it lists, a ``nominal`` quota over gpu (milli), cpu (milli) and
  memory (MiB); a resource left out of the quota is not limited.
- Queues that name the same *cohort* lend each other unused nominal quota. A
  ``borrowing_limit`` caps how much above nominal a queue may go; a ``lending_limit`` caps how
  much of its unused nominal quota others may borrow (the rest is guaranteed to it).
- Preemption settings: ``within_queue`` (whom a job may evict in its queue),
  ``reclaim_within_cohort`` (whom in borrowing queues of its cohort, to take back what its
  queue lent), ``borrow_within_cohort`` and ``max_priority_threshold`` (whether, and whom, it
  may evict in other queues while its own queue borrows), ``min_runtime_s`` (a running job of
  the queue is never a victim before it has run that long).
- ``strict_priority``: while a job of the queue waits for room (and no reservation says when
  it starts), jobs of lower priority of the queue do not take the nodes it could use.
- ``weight``: the queue's weight in fair sharing of its cohort (``rota.scheduler.fairshare``).
- A *project* is a tenant with a fair-share ``weight``.
- A job that names no queue goes to its project's *default queue*: among the queues that admit
  the project (a queue's binding lists the projects it admits; none admits every project), the
  one named ``default``, else the only one (``usable_queues``, ``chosen_queue``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from rota.core.errors import InvalidSpec
from rota.core.nodes import model_matches

ANY_FLAVOR = "any"
DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class Flavor:
    name: str
    models: tuple[str, ...] = ()  # GPU model patterns; empty means any model

    def matches(self, model: str) -> bool:
        return model_matches(model, self.models)


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    """Quota of one queue in one flavour. Every mapping is resource name -> amount."""

    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    lending_limit: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for what, values in (("nominal", self.nominal), ("borrowing_limit", self.borrowing_limit),
                             ("lending_limit", self.lending_limit)):
            for resource, amount in values.items():
                if amount < 0:
                    raise InvalidSpec(f"{what}.{resource}", f"must not be negative, got {amount}")
        for resource, amount in self.lending_limit.items():
            if amount > self.nominal.get(resource, 0):
                raise InvalidSpec(
                    f"lending_limit.{resource}",
                    f"{amount} exceeds the nominal quota {self.nominal.get(resource, 0)}",
                )


class WithinQueue(enum.StrEnum):
    """Whom a pending job may evict inside its own queue (Kueue ``withinClusterQueue``):
    ``lower-or-newer-equal-priority`` also lets it evict a job of equal priority submitted
    after it (Kueue's ``LowerOrNewerEqualPriority``)."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "lower-or-newer-equal-priority"


class ReclaimWithinCohort(enum.StrEnum):
    """Whom a queue may evict in other queues of its cohort to get back lent quota."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"
    ANY = "any"


class BorrowWithinCohort(enum.StrEnum):
    """Whether a job may evict jobs of other queues while its queue borrows (Kueue
    ``borrowWithinCohort``): ``never`` (the default), or ``lower-priority``: it may, and then
    only jobs of lower priority than itself (and, with ``max_priority_threshold``, of at
    most that priority) in borrowing queues of its cohort."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    quotas: Mapping[str, FlavorQuota] = field(default_factory=dict)  # flavour name -> quota, in order
    cohort: str | None = None
    within_queue: WithinQueue = WithinQueue.LOWER_PRIORITY
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.ANY
    resource_groups: tuple[str, ...] = ()  # empty: any resource group
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort.NEVER
    strict_priority: bool = False  # a job waiting for room holds it against lower priorities
    min_runtime_s: float = 0.0  # a running job of the queue younger than this is never a victim
    # with borrow_within_cohort: jobs of other queues above this priority are evicted only by a
    # job whose queue ends within nominal (Kueue ``maxPriorityThreshold``); None: no threshold
    max_priority_threshold: int | None = None
    # its share of what the cohort lends, under fair sharing (Kueue ``fairSharing.weight``):
    # a queue's share of borrowed quota is divided by it; 0 borrows only what nobody else wants
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.min_runtime_s >= 0:
            raise InvalidSpec("preemption.min_runtime",
                              f"must not be negative, got {self.min_runtime_s}")
        if not 0 <= self.weight <= 1e6:
            raise InvalidSpec("weight", f"must be between 0 and 1000000, got {self.weight}")

    def protects(self, job, now: float) -> bool:
        """Whether ``job`` (running in this queue) is still within its minimum runtime."""
        return (self.min_runtime_s > 0 and job.started_at is not None
                and now - job.started_at < self.min_runtime_s)

    @property
    def unlimited(self) -> bool:
        return not self.quotas


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise InvalidSpec("weight", f"must be positive, got {self.weight}")


def usable_queues(bindings: Mapping[str, tuple[str, ...] | None], project: str) -> list[str]:
    """The queues that admit ``project``, in ``bindings``' order (queue name: the projects
    it admits, None: every project)."""
    return [name for name, admitted in bindings.items()
            if admitted is None or project in admitted]


def chosen_queue(usable: list[str]) -> str | None:
    """The queue a job of a project goes to when it names none: ``default`` among ``usable``,
    else the only one; None: no single choice, which the user must make."""
    if DEFAULT_QUEUE in usable:
        return DEFAULT_QUEUE
    return usable[0] if len(usable) == 1 else None
