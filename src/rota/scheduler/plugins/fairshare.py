"""Fair sharing of a cohort's lent quota by queue weight: Kueue's fair sharing, as plugins.

Shares are ``rota.scheduler.shares``: a queue's share is what it borrows of the cohort's
lendable quota (its dominant resource, per mille), divided by its ``weight``.

- order ``queue-share``: each queue's jobs by priority, then submission; the queue whose next
  job goes next is, as Kueue's fair-sharing tournament picks it: one whose queue would not
  borrow any resource the job asks for, once admitted; then the lowest share after admitting
  it; then the higher priority; then the earlier submission. Shares are recomputed after
  every job, so what the cycle placed counts at once (progressive filling).
- preemption ``fair-sharing``: a job may evict its own queue's lower priorities (as
  ``within_queue`` allows) and jobs of queues of its cohort that borrow a resource it is short
  of (as ``reclaim_within_cohort`` allows), taking, one at a time, from the queue with the
  highest share (its own queue counted with the job admitted): from its own queue freely,
  and from another queue freely while its own queue would stay within nominal quota with it;
  otherwise only where the strategy allows, in order (Kueue's ``preemptionStrategies``):
  ``less-than-or-equal-to-final-share`` (the job's queue's share with the job is at most the
  other queue's share without the victim), then ``less-than-initial-share`` (at most one victim
  per queue: the job's queue's share with the job is below the other queue's share now).
  Then every victim the job fits without is given back, the latest first. A job may evict
  while its queue borrows wherever its queue may reclaim (``borrow_within_cohort`` plays no
  part, as in Kueue).

The proof that two jobs under these strategies never evict each other in turn is Kueue's
(its fair-sharing concepts page): a preemptor's share after admission is below its victim's
queue's share after admission.
"""

from __future__ import annotations

import heapq
from typing import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rota.core import BorrowWithinCohort, Job, ReclaimWithinCohort, WithinQueue
from rota.scheduler.candidates import (
    Candidate, Setting, Variant, candidates, index_of, short_of,
)
from rota.scheduler.placement import place_gang
from rota.scheduler.plugins.order import BestEffortFifo, priority_key
from rota.scheduler.plugins.preempt import borrows_after, may_fit
from rota.scheduler.plugins.registry import register
from rota.scheduler.shares import charged_flavor, requested, share_of
from rota.scheduler.victims import Plan, Search

STRATEGIES = ("less-than-or-equal-to-final-share", "less-than-initial-share")


@register("order")
class QueueShare(BestEffortFifo):
    name = "queue-share"
    pending_key = staticmethod(priority_key)
    by_share = True  # the cycle takes this order as it is (``rota.scheduler.turns``)

    def sequence(self, jobs: Sequence[Job], view) -> Iterator[Job]:
        """Progressive filling between queues. A queue's next job that could neither start
        nor evict now (or that its queue could never admit) is yielded at once, where it
        waits and takes nothing, so that it does not stand for its queue (Kueue's
        best-effort FIFO sets such a head aside): the queue's next job does."""
        by_queue: dict[str, list[Job]] = {}
        for j in sorted(jobs, key=priority_key, reverse=True):
            by_queue.setdefault(j.queue, []).append(j)  # popped from the end
        heap = []
        shares: dict[tuple[int, int], tuple] = {}  # see ``_share_part``
        for q, stack in by_queue.items():
            yield from self._hopeless(stack, view)
            if stack:
                heap.append((self.key(stack[-1], view, shares), q))
        heapq.heapify(heap)
        while heap:
            _, q = heapq.heappop(heap)
            stack = by_queue[q]
            yield stack.pop()
            yield from self._hopeless(stack, view)
            if stack:
                heapq.heappush(heap, (self.key(stack[-1], view, shares), q))

    @staticmethod
    def _hopeless(stack: list[Job], view) -> Iterator[Job]:
        while len(stack) > 1 and stuck(stack[-1], view):
            yield stack.pop()

    @staticmethod
    def key(job: Job, view, shares: dict | None = None) -> tuple:
        """Kueue's tournament: not borrowing what the job asks for, lowest share after
        admission, highest priority, earliest submission."""
        if job.queue not in view.book.queues:
            return (0, (0, 0.0), -job.priority, job.submit_time, job.id)
        borrowing, share = _share_part(job, view) if shares is None else \
            _kept_share_part(job, view, shares)
        return (borrowing, share, -view.priority_of(job), job.submit_time, job.id)


def _share_part(job: Job, view) -> tuple[int, tuple]:
    """The tournament's first two keys for ``job``: whether it would borrow what it asks for
    once admitted, and its queue's share then."""
    flavor = charged_flavor(view, job)
    share = share_of(view.book, job.queue, flavor, job.total())
    borrowing = flavor is not None and share.borrows_any(requested(flavor, job))
    return int(borrowing), share.key()


def _kept_share_part(job: Job, view, shares: dict) -> tuple[int, tuple]:
    """``_share_part``, one answer for jobs alike in what their start reads (``Cycle.alike``:
    queue, request, gang size, and so flavours) while the quota book keeps its version (equal
    versions, equal book): it reads nothing else of the job or the cycle."""
    key = (view.book.version, view.alike(job))
    hit = shares.get(key)
    if hit is None:
        hit = shares[key] = _share_part(job, view)
    return hit


def stuck(job: Job, view) -> bool:
    """Whether ``job`` could neither start nor evict now (a what-if: nothing changes; a
    search that fails is remembered for the cycle, as the cycle's own are). A job the
    cycle's reservation caps never evicts (``Cycle.capped``): it is stuck unless it could
    start, and no search is made for it."""
    if job.queue not in view.book.queues:
        return False
    if not view.admissible(job):
        return True
    with view.lifted(job.queue):  # as the cycle tries it
        if view.could_start(job):
            return False
        if view.capped(job):
            return True
        return view.victims_for(job, False) is None


class FairArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_preemptors: int = Field(8, ge=1, description="jobs that may preempt in one cycle")
    strategies: list[str] = Field(default_factory=lambda: list(STRATEGIES),
                                  description="Kueue's preemptionStrategies, in order")

    @field_validator("strategies")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        allowed = ([STRATEGIES[0]], [STRATEGIES[1]], list(STRATEGIES))
        if value not in allowed:
            raise ValueError(f"must be one of {allowed}, got {value}")
        return value


@register("preemption")
class FairSharing:
    name = "fair-sharing"
    Args = FairArgs
    spares = True  # the cycle gives back the victims its later plans left unneeded

    def __init__(self, args: FairArgs) -> None:
        self.max_preemptors = args.max_preemptors
        self.strategies = tuple(args.strategies)

    @staticmethod
    def evicts_while_borrowing(queue) -> bool:
        """Under fair sharing a job may evict wherever its queue may reclaim, even above its
        queue's nominal quota (Kueue's flavour assigner with fair sharing on)."""
        return queue.reclaim_within_cohort is not ReclaimWithinCohort.NEVER \
            or queue.borrow_within_cohort is not BorrowWithinCohort.NEVER

    def find(self, cycle, job: Job, capped: bool = False) -> Plan | None:
        """The victims of the best of the job's flavours (as ``minimal-victims`` chooses:
        taking back only other queues' jobs first, then ending within nominal, then the
        queue's order), as fair sharing finds them in each. A flavour where the job's queue
        could not pass its quota even with every reachable candidate gone is passed over
        before its candidate list is built (``reclaim_bound``)."""
        best, rank = None, None
        for k, (flavor, models) in enumerate(cycle.flavors(job)):
            if not reclaim_bound(cycle, job, flavor):
                continue  # no search could give back enough quota: no list to build
            cands = fair_candidates(cycle, job, flavor)
            if not cands:
                continue
            shape = cycle.shape(job, models)
            search = FairSearch(cycle, job, cands, shape, capped)
            reach = search.reachable()
            real = [c for c in reach if c.variant is not Variant.FREE]
            if not search.quota_allows(real) or not may_fit(cycle, job, shape, reach):
                continue
            plan = search.run(self.strategies)
            if plan is None:
                continue
            key = (any(v.queue == job.queue for v in plan.victims),
                   borrows_after(cycle, job, plan), k)
            if rank is None or key < rank:
                best, rank = plan, key
        return best


def fair_candidates(cycle, job: Job, flavor: str) -> Setting | None:
    """The candidates of ``job`` in ``flavor`` under fair sharing, in Kueue's candidate
    order, or None if it may not evict there: the classic list of an entitled job
    (``rota.scheduler.candidates.candidates``, remembered per question until the cycle's
    evictable jobs change), whose every job of another queue is ENTITLED, since fair sharing
    may reclaim wherever its queue may."""
    queue = cycle.snapshot.queues[job.queue]
    quota = queue.quotas.get(flavor)
    demand = job.total()
    short = short_of(cycle, job, flavor, quota)
    if quota is not None:
        if not cycle.book.admissible_ever(job.queue, demand, [flavor]):
            return None
        if not FairSharing.evicts_while_borrowing(queue) and any(demand.get(r, 0) > quota.nominal[r]
                                  for r in short if r in quota.nominal):
            return None
    out = candidates(cycle, job, flavor, short, True)
    return Setting(flavor, short, False, out, (True,)) if out else None


def reclaim_bound(cycle, job: Job, flavor: str) -> bool:
    """False only if the job would fail its queue's quota in ``flavor`` even with every
    candidate that ``FairSearch.reachable`` could keep given back (``Search.quota_allows``):
    a necessary condition of a search there, read from the cycle's evictable jobs by queue
    before any candidate list is built. It gives back, with the handover, what the queue's
    own preemptible jobs there hold where ``within_queue`` could let it evict one (its lowest
    priority there is below the job's, or equal under ``lower-or-newer-equal-priority``), and
    what those of each other queue of the cohort hold where reclaim could take one; of the
    latter, unless the job's queue is within nominal quota with the job (as ``reachable``
    judges it), only of queues that borrow with a share at least the lowest the job's queue
    could have (its preemptible and leaving jobs there all gone). Each is a superset of what
    the search could give back, and quota only grows as jobs are uncharged, so a False here
    is a False there."""
    queue = cycle.snapshot.queues[job.queue]
    quota = queue.quotas.get(flavor)
    if quota is None:
        return True  # the flavour does not limit the queue
    book, index, own = cycle.book, index_of(cycle), job.queue
    short = short_of(cycle, job, flavor, quota)  # as the candidate list reads it
    demand, mine = job.total(), cycle.priority_of(job)
    lowest = index.lowest(own, flavor)
    evicts_own = queue.within_queue is not WithinQueue.NEVER and (lowest < mine or (
        lowest == mine and queue.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY))
    back = [(own, index.held(own, flavor))] if evicts_own else []
    reclaim = queue.reclaim_within_cohort
    for v in cycle.handover:
        book.charge(v.queue, v.flavor, v.total(), -1)
    gone: list[tuple[str, dict[str, int]]] = []
    try:
        if queue.cohort is not None and reclaim is not ReclaimWithinCohort.NEVER:
            others = [q for q in index.cohorts.get(queue.cohort, ()) if q != own and (
                reclaim is ReclaimWithinCohort.ANY or index.lowest(q, flavor) < mine)]
            if not all(book.usage[(own, flavor, r)] + demand.get(r, 0) <= quota.nominal[r]
                       for r in short if r in quota.nominal):
                least = dict(demand)
                for _, amounts in (*back, (own, index.held(own, flavor, True))):
                    for r, amount in amounts.items():
                        least[r] = least.get(r, 0) - amount
                floor = share_of(book, own, flavor, least).key()
                others = [q for q in others if _at_least(share_of(book, q), floor)]
            back += [(q, index.held(q, flavor)) for q in others]
        for q, amounts in back:
            if amounts:
                book.charge(q, flavor, amounts, -1)
                gone.append((q, amounts))
        return cycle.policy.admission.admits(book, own, flavor, demand)
    finally:
        for q, amounts in gone:
            book.charge(q, flavor, amounts, 1)
        for v in cycle.handover:
            book.charge(v.queue, v.flavor, v.total(), 1)


def _at_least(share, floor: tuple) -> bool:
    return share.borrowing and share.key() >= floor


class FairSearch(Search):
    """Kueue's fair preemption for one job in one flavour (see the module docstring)."""

    def __init__(self, cycle, job: Job, found: Setting, shape, capped: bool) -> None:
        super().__init__(cycle, job, found, shape, capped, True, 0, 1, 0)

    def run(self, strategies: tuple[str, ...]) -> Plan | None:
        free = [c.job for c in self.setting.candidates if c.variant is Variant.FREE]
        self._handover(-1)
        mark = self.state.mark()
        released: list[Job] = []
        try:
            if self.fits():
                return None  # it waits for what other preemptors' victims give back
            for v in free:
                self.release(v)
                released.append(v)
                if self.fits():
                    return self._plan(released, [])
            targets = self._targets(strategies)
            if targets is None:
                return None
            for v in targets:
                self.release(v)
                released.append(v)
            for v in reversed(released[:-1]):  # give back whoever is not needed
                self.retake(v)
                if self.fits():
                    released.remove(v)
                else:
                    self.release(v)
            return self._plan(released, [v for v in released if v not in free])
        finally:
            self.restore(mark, released)
            self._handover(1)

    def reachable(self) -> list[Candidate]:
        """The candidates the strategies could ever take, a superset found without trying:
        every free one and every one of the job's queue; of another queue, one only while
        that queue borrows now and, unless the job's queue is within nominal quota with the
        job, its share now is at least the lowest share the job's queue could have with the
        job (all of its own candidates gone). Taking a queue's jobs only lowers its share, so
        a queue below that never qualifies (both strategies compare the job's queue's share
        with the other's, now or after the victim). If the job fits with none of the others,
        the search cannot find victims."""
        cands = self.setting.candidates
        own = self.job.queue
        self._handover(-1)
        try:
            if self._within_nominal():
                return list(cands)
            least = dict(self.job.total())
            for c in cands:
                if c.job.queue == own and c.job.flavor == self.flavor:
                    for r, amount in c.job.total().items():
                        least[r] = least.get(r, 0) - amount
            floor = share_of(self.book, own, self.flavor, least).key()
            shares: dict[str, tuple | None] = {}
            out = []
            for c in cands:
                q = c.job.queue
                if c.variant is not Variant.FREE and q != own:
                    if q not in shares:
                        theirs = share_of(self.book, q)
                        shares[q] = theirs.key() if theirs.borrowing else None
                    if shares[q] is None or shares[q] < floor:
                        continue
                out.append(c)
            return out
        finally:
            self._handover(1)

    def _plan(self, released: list[Job], victims: list[Job]) -> Plan:
        sub = self.state.mark()
        placement, _ = place_gang(self.state, self.shape, self.job.replicas,
                                  self.cycle.placement, self.capped)
        self.state.undo(sub)
        ids = {v.id for v in victims}
        return Plan(victims, [v for v in released if v.id not in ids], self.flavor, placement,
                    True)

    def _targets(self, strategies: tuple[str, ...]) -> list[Job] | None:
        """Release victims by the strategies until the job fits; the victims, or None. Every
        release here is undone by the caller's ``restore`` only for those it returns, so the
        others are taken back before returning."""
        by_queue: dict[str, list[Job]] = {}
        for c in self.setting.candidates:
            if c.variant is not Variant.FREE:
                by_queue.setdefault(c.job.queue, []).append(c.job)
        taken: list[Job] = []
        try:
            retry = self._first(strategies[0], by_queue, taken)
            if retry is None:
                return list(taken)
            if len(strategies) > 1 and self._second(retry, taken):
                return list(taken)
            return None
        finally:
            for v in reversed(taken):
                self.retake(v)

    def _first(self, strategy: str, by_queue: dict[str, list[Job]], taken: list[Job]):
        """Strategy one over the queues by share; None once the job fits, else the
        candidates it passed over (for the second strategy), by queue."""
        retry: dict[str, list[Job]] = {}
        own = self.job.queue
        entitled = self._within_nominal()  # as the queue stands before any victim (Kueue)
        while True:
            target = self._next(by_queue, own)
            if target is None:
                return retry
            stack = by_queue[target]
            if target == own or entitled:
                if self._take(stack.pop(0), taken):
                    return None
                continue
            mine, theirs = self._mine(), share_of(self.book, target)
            if (mine.key() > theirs.key()) if strategy == STRATEGIES[0] \
                    else not mine.key() < theirs.key():
                # no victim qualifies: one only lowers its queue's share (``after``)
                retry.setdefault(target, []).extend(stack)
                stack.clear()
                continue
            while stack:
                v = stack.pop(0)
                after = share_of(self.book, target, v.flavor, v.total(), -1)
                ok = mine.key() <= after.key() if strategy == STRATEGIES[0] \
                    else mine.key() < theirs.key()
                ok = ok and not self._owed_back(v, taken)
                if ok:
                    if self._take(v, taken):
                        return None
                    break  # shares moved: choose the queue again
                retry.setdefault(target, []).append(v)

    def _second(self, retry: dict[str, list[Job]], taken: list[Job]) -> bool:
        """Strategy two: at most one victim per queue, from the queues by share, while the
        job's queue's share with it is below theirs; True once the job fits."""
        while True:
            target = self._next(retry, None)
            if target is None:
                return False
            v = retry.pop(target)[0]
            if self._mine().key() < share_of(self.book, target).key() \
                    and not self._owed_back(v, taken) and self._take(v, taken):
                return True

    def _owed_back(self, v: Job, taken: list[Job]) -> bool:
        """Whether taking ``v`` by a strategy would leave one of its queue's victims (``v``
        or one taken before) owed back: within its queue's nominal quota if it came back, so
        that it would take the room back at once and the job evict again (rota's rule; Kueue
        lets that loop happen where a queue's share stays high after its last victim, as with
        weight 0). A job within its own queue's nominal quota takes freely. Read from the
        book's usage less ``v``'s, without charging it."""
        book, gone = self.book, v.total()
        for w in (*taken, v):
            if w.queue != v.queue:
                continue
            quota = book.queues[w.queue].quotas.get(w.flavor)
            if quota is None:
                return True
            less = gone if w.flavor == v.flavor else {}
            if all(book.usage[(w.queue, w.flavor, r)] - less.get(r, 0) + amount
                   <= quota.nominal[r]
                   for r, amount in w.total().items() if amount > 0 and r in quota.nominal):
                return True
        return False

    def _take(self, v: Job, taken: list[Job]) -> bool:
        self.release(v)
        taken.append(v)
        return self.fits()

    def _mine(self):
        return share_of(self.book, self.job.queue, self.flavor, self.job.total())

    def _within_nominal(self) -> bool:
        """The job's queue stays within nominal quota, with the job, of what it is short of."""
        quota = self.book.queues[self.job.queue].quotas.get(self.flavor)
        if quota is None:
            return True
        demand = self.job.total()
        return all(self.book.usage[(self.job.queue, self.flavor, r)] + demand.get(r, 0)
                   <= quota.nominal[r] for r in self.setting.short if r in quota.nominal)

    def _next(self, by_queue: dict[str, list[Job]], own: str | None) -> str | None:
        """The queue to take from next: the highest share (``own`` counted with the job),
        among those with candidates left that borrow (``own`` needs not); on equal shares,
        the one whose next candidate comes first in candidate order."""
        position = self.position
        best, best_key = None, None
        for q, stack in by_queue.items():
            if not stack:
                continue
            if q == own:
                share = self._mine()
            else:
                share = share_of(self.book, q)
                if not share.borrowing:
                    continue
            key = (share.key(), -position[stack[0].id])
            if best_key is None or key > best_key:
                best, best_key = q, key
        return best


__all__ = ["FairArgs", "FairSharing", "QueueShare", "STRATEGIES", "fair_candidates"]
