"""A queue's share of what its cohort lends: Kueue's dominant resource share (DRS).

Vocabulary, for queue ``q`` of a cohort (amounts from the quota book):

- ``borrowed(q, r) = sum over flavours f of max(0, usage(q, f, r) - nominal(q, f, r))``: what
  the queue uses beyond its nominal quota of resource ``r``, over the flavours its quota lists;
- ``lendable(r) = sum over flavours f of pool(cohort, f, r)``: what the cohort's members lend
  of ``r`` (their nominal quota less what lending limits keep back);
- ``ratio(q) = max over r of borrowed(q, r) * 1000 / lendable(r)`` (resources the cohort does
  not lend are left out), and the *share* is ``ratio / weight``. A queue that borrows nothing
  has share 0; one that borrows with weight 0 has an infinite share, and two such queues
  compare by their ratios.
- *after admission*: the same with a job's demand added to its queue in one flavour.

A queue without a cohort borrows nothing. The weight is ``Queue.weight`` (Kueue's
``fairSharing.weight``, Volcano's queue ``weight``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from rota.core import Job


@dataclass(frozen=True, slots=True)
class Share:
    borrowed: frozenset[tuple[str, str]]  # (flavour, resource) pairs the queue borrows
    ratio: float  # the largest borrowed part of a lendable resource, per mille
    weight: float

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    @property
    def infinite(self) -> bool:
        """Borrowing with weight 0 (Kueue: an infinite share)."""
        return self.weight == 0 and self.ratio > 0

    @property
    def value(self) -> float:
        if self.ratio == 0:
            return 0.0
        return math.inf if self.weight == 0 else self.ratio / self.weight

    def key(self) -> tuple[int, float]:
        """Sorts as Kueue's ``CompareDRS``: finite shares by value, then the infinite ones by
        their ratios."""
        return (1, self.ratio) if self.infinite else (0, self.value)

    def borrows_any(self, pairs) -> bool:
        """Whether the queue borrows one of ``pairs`` ((flavour, resource))."""
        return bool(self.borrowed & frozenset(pairs))


NONE = Share(frozenset(), 0.0, 1.0)


def share_of(book, queue: str, flavor: str | None = None,
             demand: Mapping[str, int] | None = None, sign: int = 1) -> Share:
    """The share of ``queue`` now, or with ``demand`` added (``sign=-1``: taken away) in
    ``flavor``. The share now is kept on the book until the queue is charged again."""
    if demand is None:
        hit = book.shares.get(queue)
        if hit is None:
            hit = book.shares[queue] = _share(book, queue, None, None, 1)
        return hit
    return _share(book, queue, flavor, demand, sign)


def _share(book, queue: str, flavor: str | None, demand: Mapping[str, int] | None,
           sign: int) -> Share:
    q = book.queues[queue]
    if q.cohort is None:
        return NONE
    borrowed: dict[str, int] = {}
    pairs = set()
    for f, quota in q.quotas.items():
        for r, nominal in quota.nominal.items():
            used = book.usage[(queue, f, r)]
            if demand is not None and f == flavor:
                used += sign * demand.get(r, 0)
            if used > nominal:
                borrowed[r] = borrowed.get(r, 0) + used - nominal
                pairs.add((f, r))
    if not borrowed:
        return Share(frozenset(), 0.0, q.weight)
    ratio = 0.0
    for r, amount in borrowed.items():
        lendable = lendable_of(book, q.cohort, r)
        if lendable > 0:
            ratio = max(ratio, amount * 1000 / lendable)
    return Share(frozenset(pairs), ratio, q.weight)


def lendable_of(book, cohort: str, resource: str) -> int:
    """What the cohort's members lend of ``resource``, over every flavour (the pool never
    changes after the book is made, so the sums are kept on it)."""
    sums = book.__dict__.get("_lendable")
    if sums is None:
        sums = book.__dict__["_lendable"] = {}
        for (c, _, r), amount in book.pool.items():
            sums[(c, r)] = sums.get((c, r), 0) + amount
    return sums.get((cohort, resource), 0)


def charged_flavor(cycle, job: Job) -> str | None:
    """The flavour ``job`` would be charged to now: the first of its queue's flavours whose
    quota admits it, else the first (None: the queue has none that may take it)."""
    flavors = cycle.flavors(job)
    for flavor, _ in flavors:
        if cycle.policy.admission.admits(cycle.book, job.queue, flavor, job.total()):
            return flavor
    return flavors[0][0] if flavors else None


def requested(flavor: str, job: Job) -> frozenset[tuple[str, str]]:
    """The (flavour, resource) pairs ``job`` asks for in ``flavor``."""
    return frozenset((flavor, r) for r, v in job.total().items() if v > 0)
