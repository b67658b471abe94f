"""Who a blocked job may evict, and how: Kueue's classic preemption rules, in rota's terms.

Vocabulary, for a job J of queue Q with demand D (its gang's quota vector) in flavour f:

- *short*: the resources J needs preempted for. Where Q's quota refuses J, the resources of D
  that Q cannot take now (``D[r] > available``); where quota admits J and only room on nodes
  is missing, every resource J requests.
- *eligible*: J may evict at all in f only if each short resource is within Q's nominal quota
  by J's own request (``D[r] <= nominal``: J is owed that much whatever the others use) or Q
  sets ``borrow_within_cohort`` (Kueue's flavour assigner: a request above nominal preempts only
  while borrowing is allowed).
- *candidates*, each with a *variant* that says in which passes it may go:
  - OWN: a job of Q in f that uses a short resource, allowed by Q's ``within_queue``
    (``lower-priority``; ``lower-or-newer-equal-priority``: also an equal priority submitted
    after J). Valid in every pass.
  - ENTITLED: a job of another queue of Q's cohort in f, using a short resource, whose queue
    borrows a short resource, allowed by Q's ``reclaim_within_cohort``, while Q with J would
    be within its nominal quota of every resource J requests: J takes back what Q lent
    (Kueue's hierarchical advantage). Valid in every pass.
  - UNBORROWED: such a job when Q with J would be above nominal, and Q may not evict while
    borrowing (or the job's priority is not below J's, or above ``max_priority_threshold``):
    valid only in a pass that ends with Q within nominal.
  - BORROWED: such a job that ``borrow_within_cohort: lower-priority`` lets J evict while Q
    borrows (lower priority than J, and not above the threshold). Valid in every pass.
  - FREE: a job already being preempted: its room is on its way back and evicting it again
    costs nothing (rota's addition: Kueue lists the evicted ones of the groups above first).
- *order*: free first; then jobs of other queues before Q's own; lower priority first; then
  the most recent checkpoint (else start): the least work lost; then id.
- *passes*: whether Q may end above its nominal quota, tried in turn (Kueue's heuristics):
  [borrow] when no candidate is of another queue, or when Q may not evict while borrowing and
  is not strictly below nominal in every short resource (it can only evict its own jobs, and
  may then borrow up to its borrowing limit); [no-borrow, borrow] when Q may not evict while
  borrowing and no candidate is ENTITLED; else [borrow, no-borrow].
- *valid* at its turn in a pass: a candidate of another queue only while its queue still uses
  more than its nominal quota of some short resource that the candidate uses (after the
  victims released before it: reclaim takes back what is borrowed, from the jobs that use it;
  the last victim may take its queue below nominal, as in Kueue), an UNBORROWED one only in a pass without borrowing, and a BORROWED one only if
  its queue keeps at least its nominal quota of each short resource it borrows (rota's rule:
  a queue that a borrower took below nominal would take the room back at once, and the
  borrower would evict again; Kueue lets that happen).

Choosing among the valid candidates (Kueue's greedy with fill-back, or rota's fewest victims)
is ``rota.scheduler.victims``; the plugins are ``rota.scheduler.plugins.preempt``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from rota.core import BorrowWithinCohort, Job, JobState, ReclaimWithinCohort, WithinQueue


class Variant(enum.IntEnum):
    FREE = 0
    OWN = 1
    ENTITLED = 2
    UNBORROWED = 3
    BORROWED = 4


@dataclass(frozen=True, slots=True)
class Candidate:
    job: Job
    variant: Variant
    reason: str  # "priority" (its own queue) or "reclaim"


@dataclass(slots=True)
class Setting:
    """What one victim search in one flavour is about: the short resources, whether Q with J
    stays within nominal, the candidates in order, and the passes to try."""

    flavor: str
    short: frozenset[str]
    entitled: bool
    candidates: list[Candidate]
    passes: tuple[bool, ...]  # borrow allowed, per pass, in order


def needs(job: Job) -> frozenset[str]:
    """The resources a job asks for (a quota vector's non-zero entries)."""
    return _needs(job.request)


@lru_cache(maxsize=4096)
def _needs(request) -> frozenset[str]:
    return frozenset(r for r, v in request.vector().items() if v > 0)


def short_of(cycle, job: Job, flavor: str, quota) -> frozenset[str]:
    """The resources ``job`` needs preempted for in ``flavor`` (see the module docstring)."""
    demand = job.total()
    if quota is None:
        return needs(job)
    book = cycle.book
    short = set()
    for r, amount in demand.items():
        if amount > 0 and r in quota.nominal:
            avail = book.available(job.queue, flavor, r)
            if avail is not None and amount > avail:
                short.add(r)
    return frozenset(short) or needs(job)


def eligible(queue, quota, demand: Mapping[str, int], short: frozenset[str], cycle,
             flavor: str) -> bool:
    """Whether a job of ``queue`` may evict at all in the flavour: each short resource its own
    request keeps within nominal, or the queue may evict while borrowing; and never beyond
    what the queue could ever be admitted (its potential quota)."""
    if quota is None:
        return True
    if not cycle.book.admissible_ever(queue.name, demand, [flavor]):
        return False
    if queue.borrow_within_cohort is not BorrowWithinCohort.NEVER:
        return True
    return all(demand.get(r, 0) <= quota.nominal[r] for r in short if r in quota.nominal)


def within_nominal_with(book, queue: str, flavor: str, demand: Mapping[str, int]) -> bool:
    """Whether the queue, with ``demand`` added, uses at most its nominal quota of every
    resource the demand asks for (Kueue: the request fits the queue's own quota)."""
    quota = book.queues[queue].quotas.get(flavor)
    if quota is None:
        return True
    return all(book.usage[(queue, flavor, r)] + amount <= quota.nominal[r]
               for r, amount in demand.items() if amount > 0 and r in quota.nominal)


def below_nominal(book, queue: str, flavor: str, resources: frozenset[str]) -> bool:
    """Whether the queue uses strictly less than its nominal quota of each of ``resources``."""
    quota = book.queues[queue].quotas.get(flavor)
    if quota is None:
        return True
    return all(book.usage[(queue, flavor, r)] < quota.nominal[r]
               for r in resources if r in quota.nominal)


def allows(policy, mine: float, theirs: float, job: Job, other: Job) -> bool:
    """Whether a preemption policy (within the queue, or reclaim in the cohort) lets a job of
    priority ``mine`` evict one of priority ``theirs``."""
    if policy in (WithinQueue.NEVER, ReclaimWithinCohort.NEVER):
        return False
    if policy is ReclaimWithinCohort.ANY:
        return True
    if theirs < mine:
        return True
    return policy is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY and theirs == mine \
        and (job.submit_time, job.id) < (other.submit_time, other.id)


def reclaim_variant(queue, entitled: bool, mine: float, theirs: float) -> Variant:
    """The variant of a job of another queue that the queue's reclaim policy allows."""
    if entitled:
        return Variant.ENTITLED
    if queue.borrow_within_cohort is BorrowWithinCohort.NEVER or theirs >= mine:
        return Variant.UNBORROWED
    threshold = queue.max_priority_threshold
    if threshold is not None and theirs > threshold:
        return Variant.UNBORROWED
    return Variant.BORROWED


def passes_for(queue, book, flavor: str, short: frozenset[str],
               candidates: list[Candidate]) -> tuple[bool, ...]:
    """Kueue's order of passes (see the module docstring): borrow allowed, per pass."""
    others = any(c.variant >= Variant.ENTITLED for c in candidates)
    forbidden = queue.borrow_within_cohort is BorrowWithinCohort.NEVER
    if not others or (forbidden and not below_nominal(book, queue.name, flavor, short)):
        return (True,)
    if forbidden and not any(c.variant is Variant.ENTITLED for c in candidates):
        return (False, True)
    return (True, False)


def saved_at(v: Job) -> float:
    """When the victim's work was last saved: its last checkpoint, else its start."""
    if v.last_checkpoint_at is not None:
        return v.last_checkpoint_at
    return v.started_at or 0.0


class Index:
    """The cycle's evictable jobs, grouped once per change of them: those already being
    preempted, the preemptible others by queue, each one's priority, and the queues of each
    cohort; and the candidate lists made from them (``setting``), remembered per question, as
    are each queue's lowest priority and what its jobs hold, per flavour."""

    def __init__(self, cycle) -> None:
        self.evictable = cycle.evictable
        self.preempting = [v for v in cycle.evictable if v.state is JobState.PREEMPTING]
        self.by_queue: dict[str, list[Job]] = {}
        queues, now = cycle.snapshot.queues, cycle.now
        for v in cycle.evictable:
            if v.state is not JobState.PREEMPTING and v.preemptible and not (
                    v.queue in queues and queues[v.queue].protects(v, now)):
                self.by_queue.setdefault(v.queue, []).append(v)
        self.prio = {id(v): cycle.priority_of(v) for v in cycle.evictable}  # kept alive above
        self.cohorts: dict[str, list[str]] = {}
        for q in queues.values():
            if q.cohort is not None:
                self.cohorts.setdefault(q.cohort, []).append(q.name)
        self.memo: dict[tuple, list[Candidate] | dict[str, int]] = {}  # answers per question
        self._lowest: dict[tuple[str, str], float] = {}
        self._sums: dict[tuple[str, str, bool], dict[str, int]] = {}

    def lowest(self, queue: str, flavor: str) -> float:
        """The lowest priority of the queue's evictable jobs in ``flavor`` (inf: none)."""
        key = (queue, flavor)
        hit = self._lowest.get(key)
        if hit is None:
            hit = self._lowest[key] = min(
                (self.prio[id(v)] for v in self.by_queue.get(queue, ()) if v.flavor == flavor),
                default=math.inf)
        return hit


    def held(self, queue: str, flavor: str, leaving: bool = False) -> dict[str, int]:
        """What the queue's preemptible jobs in ``flavor`` hold, summed per resource (with
        ``leaving``: its jobs already being preempted there instead)."""
        key = (queue, flavor, leaving)
        hit = self._sums.get(key)
        if hit is None:
            jobs = [v for v in self.preempting if v.queue == queue] if leaving \
                else self.by_queue.get(queue, ())
            hit = self._sums[key] = {}
            for v in jobs:
                if v.flavor == flavor:
                    for r, amount in v.total().items():
                        hit[r] = hit.get(r, 0) + amount
        return hit


def index_of(cycle) -> Index:
    index = cycle.__dict__.get("_victim_index")
    if index is None or index.evictable is not cycle.evictable:
        index = cycle.__dict__["_victim_index"] = Index(cycle)
    return index


def running_usage(cycle, queue: str, flavor: str, r: str) -> int:
    """What the queue's running (or nominated) jobs use of ``r``: its usage without the quota
    held for jobs that do not run yet (a reservation, quota owed to a waiting job)."""
    key = (queue, flavor, r)
    return cycle.book.usage[key] - cycle.held.get(key, 0)


def borrows(cycle, queue: str, flavor: str, resources: frozenset[str]) -> bool:
    """Whether the queue's running jobs use more than its nominal quota of one of
    ``resources`` in ``flavor`` (a queue without quota there never borrows)."""
    quota = cycle.book.queues[queue].quotas.get(flavor)
    if quota is None:
        return False
    return any(running_usage(cycle, queue, flavor, r) > quota.nominal[r]
               for r in resources if r in quota.nominal)


def setting(cycle, job: Job, flavor: str) -> Setting | None:
    """The victim search of ``job`` in ``flavor``: None if the job may not evict there."""
    queue = cycle.snapshot.queues[job.queue]
    quota = queue.quotas.get(flavor)
    demand = job.total()
    short = short_of(cycle, job, flavor, quota)
    if not eligible(queue, quota, demand, short, cycle, flavor):
        return None
    entitled = within_nominal_with(cycle.book, job.queue, flavor, demand)
    # a queue above nominal with the job, that may not evict while borrowing and is not below
    # nominal in what it is short of, has the one pass that allows borrowing: no job of
    # another queue is valid in it (each would be UNBORROWED), so none is listed
    others = entitled or queue.borrow_within_cohort is not BorrowWithinCohort.NEVER \
        or below_nominal(cycle.book, job.queue, flavor, short)
    cands = candidates(cycle, job, flavor, short, entitled, others)
    return Setting(flavor, short, entitled, cands,
                   passes_for(queue, cycle.book, flavor, short, cands))


def candidates(cycle, job: Job, flavor: str, short: frozenset[str],
               entitled: bool, others: bool = True) -> list[Candidate]:
    """The candidates of ``job`` in ``flavor``, in order (see the module docstring); without
    ``others``, those of its own queue only. The list depends on the job only through its
    queue, priority (and submission, for ``lower-or-newer-equal-priority``), the short
    resources, whether it is entitled, and which queues of its cohort borrow them, so it is
    remembered for those until the cycle's evictable jobs change."""
    index = index_of(cycle)
    queue = cycle.snapshot.queues[job.queue]
    lenders = tuple(q for q in index.cohorts.get(queue.cohort, ()) if q != job.queue
                    and borrows(cycle, q, flavor, short)) \
        if others and queue.cohort is not None else ()
    newer = queue.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
    key = (job.queue, cycle.priority_of(job), (job.submit_time, job.id) if newer else None,
           flavor, short, entitled, lenders)
    hit = index.memo.get(key)
    if hit is None:
        hit = index.memo[key] = _candidates(cycle, index, job, flavor, short, entitled, lenders)
    return hit


def _candidates(cycle, index: Index, job: Job, flavor: str, short: frozenset[str],
                entitled: bool, lenders: tuple[str, ...]) -> list[Candidate]:
    queues = cycle.snapshot.queues
    queue, prio, mine = queues[job.queue], index.prio, cycle.priority_of(job)
    out = [Candidate(v, Variant.FREE, "priority" if v.queue == job.queue else "reclaim")
           for v in index.preempting]
    for v in index.by_queue.get(job.queue, ()):
        if v.flavor == flavor and short & needs(v) and \
                allows(queue.within_queue, mine, prio[id(v)], job, v):
            out.append(Candidate(v, Variant.OWN, "priority"))
    if queue.reclaim_within_cohort is not ReclaimWithinCohort.NEVER:
        for q in lenders:
            for v in index.by_queue.get(q, ()):
                theirs = prio[id(v)]
                if v.flavor == flavor and short & needs(v) and \
                        allows(queue.reclaim_within_cohort, mine, theirs, job, v):
                    out.append(Candidate(v, reclaim_variant(queue, entitled, mine, theirs),
                                         "reclaim"))
    out.sort(key=lambda c: (c.variant is not Variant.FREE, c.variant is Variant.OWN,
                            prio[id(c.job)], -saved_at(c.job), c.job.id))
    return out


def valid(cycle, c: Candidate, borrow: bool, short: frozenset[str],
          keep_nominal: bool = True) -> bool:
    """Whether candidate ``c`` may be released at its turn, in a pass that lets the queue end
    borrowing (``borrow``) or not, with the victims released before it gone; without
    ``keep_nominal`` (Kueue exactly), a BORROWED one too where its queue goes below nominal."""
    if c.variant in (Variant.FREE, Variant.OWN):
        return True
    if borrow and c.variant is Variant.UNBORROWED:
        return False
    if not borrows(cycle, c.job.queue, c.job.flavor, short & needs(c.job)):
        return False
    return c.variant is not Variant.BORROWED or not keep_nominal \
        or keeps_nominal(cycle, c.job, short)


def keeps_nominal(cycle, v: Job, short: frozenset[str]) -> bool:
    """Whether ``v``'s queue, without ``v``, still uses at least its nominal quota of each
    short resource it borrows: a job evicted by one that borrows may not leave its queue
    owed quota, which it would take back from the borrower at once (and the borrower again)."""
    quota = cycle.book.queues[v.queue].quotas.get(v.flavor)
    demand = v.total()
    for r in short:
        if quota is None or r not in quota.nominal:
            continue
        used = running_usage(cycle, v.queue, v.flavor, r)
        if used > quota.nominal[r] and used - demand.get(r, 0) < quota.nominal[r]:
            return False
    return True
