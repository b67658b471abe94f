"""Choosing victims: the fewest jobs whose eviction lets one blocked job start.

Vocabulary:
- *candidates*: the jobs the preemption plugin allows the job to evict, in candidate order
  (see ``plugins.preempt``); *free* candidates are already being preempted: their room is on
  its way back and costs no new eviction.
- *fits*: with the released jobs gone, the job passes admission (quota) in the flavour, its
  queue stays within its nominal quota unless the search allows borrowing, and the whole
  gang is placed.
- a *valid* set: released in candidate order, every victim of another queue finds its queue
  borrowing, in a resource that victim uses and the job needs, when its turn comes, and
  leaves it at or above its nominal quota of each resource it borrows that the job needs
  (reclaim takes back what is borrowed, from jobs that use it; Kueue lets the last victim
  take its queue below nominal, which would leave that victim owed the room back at once).
- the *rank* of a set: fewest victims; then the lowest priorities (the set whose most
  important victim is the least important, and so on down); then the least work lost
  (GPU-seconds since each victim's last checkpoint, ``Job.work_at_risk``); then the most
  recently started; then ids.

The search looks past the victims this cycle already chose for other jobs of other queues
(``Cycle.handover``): they are gone by the time this job could start. If the job fits then
with nobody released, it has nothing to evict: it waits for that handover.
1. free candidates are released in order until the job fits; if it does, the free jobs it
   does not need are put back and nobody is evicted;
2. otherwise, with every free job released, a *greedy* pass releases candidates in candidate
   order (once in the global order, once per node with candidates, that node's first) until
   the job fits, then puts back every victim it can spare: a set from which no victim can be
   spared. The best of them bounds the answer (``g`` victims);
3. if at most ``exact_limit`` candidates matter (free quota the job reads, or capacity on a
   node it may use), every set of 1..g of them is tried in rank order, and the first that fits
   is the answer: the minimum set, best ranked. The fit checks are capped at ``budget``; past
   it, or with more candidates, the greedy set stands (minimal, not always minimum);
4. the free jobs the chosen victims make unnecessary are put back.

Every what-if is undone: the overlay through its journal, quota by charging back.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

from rota.core import Job, JobState, Placement
from rota.scheduler.placement import place_gang


@dataclass(slots=True)
class Plan:
    victims: list[Job]
    free: list[Job]  # jobs already preempting whose space the preemptor takes
    flavor: str
    placement: Placement
    borrow: bool = False  # found by the search that lets the queue borrow


def rank(victims: Iterable[Job], priority_of: Callable[[Job], float], now: float) -> tuple:
    """The rank of a victim set (see the module docstring): smaller is better."""
    vs = list(victims)
    return (len(vs), sorted((priority_of(v) for v in vs), reverse=True),
            sum(v.work_at_risk(now) for v in vs), sorted(-(v.started_at or 0.0) for v in vs),
            sorted(v.id for v in vs))


def needs(job: Job) -> frozenset[str]:
    """The resources a job asks for (a quota vector's non-zero entries)."""
    return _needs(job.request)


@lru_cache(maxsize=4096)
def _needs(request) -> frozenset[str]:
    return frozenset(r for r, v in request.vector().items() if v > 0)


def within_nominal(book, job: Job, flavor: str) -> bool:
    """True if the job's queue stays within its nominal quota in ``flavor`` with the job."""
    quota = book.queues[job.queue].quotas.get(flavor)
    if quota is None:
        return True
    demand = job.total()
    return all(book.usage[(job.queue, flavor, r)] + demand.get(r, 0) <= n
               for r, n in quota.nominal.items())


class Search:
    """One victim search for ``job`` in ``flavor``; ``borrow``: may its queue end up above its
    nominal quota."""

    def __init__(self, cycle, job: Job, flavor: str, shape, capped: bool, borrow: bool,
                 exact_limit: int, budget: int, node_trials: int) -> None:
        self.cycle, self.job, self.flavor, self.shape = cycle, job, flavor, shape
        self.capped, self.borrow = capped, borrow
        self.exact_limit, self.budget, self.node_trials = exact_limit, budget, node_trials
        self.state, self.book = cycle.state, cycle.book
        self.needs = needs(job)
        self.checks = 0

    # -- moves ---------------------------------------------------------------------------------

    def release(self, v: Job) -> None:
        self.cycle.release(v)
        self.book.charge(v.queue, v.flavor, v.total(), -1)

    def retake(self, v: Job) -> None:
        self.cycle.hold(v)
        self.book.charge(v.queue, v.flavor, v.total(), 1)

    def restore(self, mark: int, released: list[Job]) -> None:
        for v in released:
            self.book.charge(v.queue, v.flavor, v.total(), 1)
        self.state.undo(mark)

    def reclaimable(self, v: Job) -> bool:
        """For a job of another queue: whether its queue borrows a resource that both it uses
        and this job needs, and would still use at least its nominal quota of every resource
        it borrows that this job needs once it is gone. Reclaim takes back what is borrowed,
        never more: a victim that took its queue below nominal would be owed the room back
        at once."""
        if v.queue == self.job.queue or v.state is JobState.PREEMPTING:
            return True
        quota = self.book.queues[v.queue].quotas.get(self.flavor)
        if quota is None:
            return False
        usage, held, demand, borrowed = self.book.usage, self.cycle.held, v.total(), False
        for r in self.needs:
            nominal = quota.nominal.get(r)
            key = (v.queue, self.flavor, r)
            used = usage[key] - held.get(key, 0)  # what runs (or is nominated), not holds
            if nominal is None or used <= nominal:
                continue
            if used - demand.get(r, 0) < nominal:
                return False
            borrowed = borrowed or demand.get(r, 0) > 0
        return borrowed

    def fits(self) -> bool:
        self.checks += 1
        job, cycle = self.job, self.cycle
        if cycle.policy.admission.check(self.book, job.queue, self.flavor, job.total()) is not None:
            return False
        if not self.borrow and not within_nominal(self.book, job, self.flavor):
            return False
        mark = self.state.mark()
        placement, _ = place_gang(self.state, self.shape, job.replicas, cycle.placement,
                                  self.capped)
        self.state.undo(mark)
        return placement is not None

    # -- the search ----------------------------------------------------------------------------

    def best(self, cands: list[Job], matters: dict[str, bool]) -> Plan | None:
        """The plan of the module docstring, or None if no set of candidates lets it start."""
        free = [v for v in cands if v.state is JobState.PREEMPTING]
        real = [v for v in cands if v.state is not JobState.PREEMPTING]
        self._handover(-1)  # evicted in this cycle for others: gone when this job starts
        mark = self.state.mark()
        released: list[Job] = []
        try:
            if self.fits():
                return None  # it waits for what other preemptors' victims give back
            fitted = False
            for v in free:                                                       # 1
                self.release(v)
                released.append(v)
                if self.fits():
                    fitted = True
                    break
            victims: list[Job] | None = []
            if not fitted:
                victims = self._victims(real, matters) if real else None         # 2, 3
                if victims is None:
                    return None
                for v in victims:
                    self.release(v)
                    released.append(v)
            spare = [v for v in released if v.state is JobState.PREEMPTING]
            for v in reversed(spare[:-1] if fitted else spare):                  # 4
                self.retake(v)
                if self.fits():
                    released.remove(v)
                else:
                    self.release(v)
            sub = self.state.mark()
            placement, _ = place_gang(self.state, self.shape, self.job.replicas,
                                      self.cycle.placement, self.capped)
            self.state.undo(sub)
            return Plan(victims, [v for v in released if v.state is JobState.PREEMPTING],
                        self.flavor, placement, self.borrow)
        finally:
            self.restore(mark, released)
            self._handover(1)

    def fits_without(self, jobs: Iterable[Job]) -> bool:
        """Whether the job fits with ``jobs`` released (and the handover looked past), as the
        search judges it; nothing changes. For checks of a plan from outside."""
        self._handover(-1)
        try:
            return self._fits_without(tuple(jobs))
        finally:
            self._handover(1)

    def _handover(self, sign: int) -> None:
        for v in self.cycle.handover:
            self.book.charge(v.queue, v.flavor, v.total(), sign)

    def _victims(self, real: list[Job], matters: dict[str, bool]) -> list[Job] | None:
        """With every free job released: the best set of real victims, or None."""
        found = self._greedy(real, matters)
        relevant = [v for v in real if matters[v.id]]
        if found is not None and len(relevant) <= self.exact_limit \
                and not self._unbeatable(found, real):
            exact = self._exact(relevant, len(found))
            if exact is not None:
                return exact
        if found is None and self._monotone(real):
            return None  # every order releases the same candidates: none fits
        if found is not None and self._unbeatable(found, real):
            return found
        for order in self._node_orders(real):
            other = self._greedy(order, matters)
            if other is not None and (found is None or self._rank(other) < self._rank(found)):
                found = other
        return found

    def quota_allows(self, real: list[Job]) -> bool:
        """Whether the job would pass the quota part of ``fits`` with every candidate's quota
        given back, and the handover's (a necessary condition, cheap next to a placement:
        quota only grows as victims are uncharged)."""
        book, job = self.book, self.job
        back: dict[tuple[str, str], dict[str, int]] = {}  # all of a queue's in one charge
        for v in (*real, *self.cycle.handover):
            total = back.setdefault((v.queue, v.flavor), {})
            for r, amount in v.total().items():
                total[r] = total.get(r, 0) + amount
        for (queue, flavor), total in back.items():
            book.charge(queue, flavor, total, -1)
        try:
            if self.cycle.policy.admission.check(book, job.queue, self.flavor, job.total()) \
                    is not None:
                return False
            return self.borrow or within_nominal(book, job, self.flavor)
        finally:
            for (queue, flavor), total in back.items():
                book.charge(queue, flavor, total, 1)

    def _rank(self, victims: Iterable[Job]) -> tuple:
        return rank(victims, self.cycle.priority_of, self.cycle.now)

    def _unbeatable(self, found: list[Job], real: list[Job]) -> bool:
        """One victim, and no single candidate ranks before it."""
        return len(found) == 1 and self._rank(found) <= min(self._rank([v]) for v in real)

    def _monotone(self, real: list[Job]) -> bool:
        """True when one order suffices: every candidate is of the job's own queue (no order
        skips one) and the shape is not a fraction of a GPU. Then each node holds a number of
        whole-GPU replicas that only grows as more is released there, and quota only grows
        as victims are uncharged: if releasing every candidate does not make the job fit, no
        order does."""
        return not self.shape.fractional and all(v.queue == self.job.queue for v in real)

    def _greedy(self, order: list[Job], matters: dict[str, bool]) -> list[Job] | None:
        """Release ``order`` until the job fits, then put back every victim it can spare.

        ``matters`` (see ``plugins.preempt.relevance``) spares the what-ifs that cannot change
        the answer: releasing or re-taking a job that does not matter leaves "fits" as it was."""
        mark = self.state.mark()
        removed: list[Job] = []
        try:
            for v in order:
                if not self.reclaimable(v):
                    continue  # its queue has stopped borrowing: nothing left to reclaim there
                self.release(v)
                removed.append(v)
                if len(removed) > 1 and not matters[v.id]:
                    continue  # it did not fit before this release and still does not
                if self.fits():
                    break
            else:
                return None
            for v in reversed(removed[:-1]):  # put back whoever is not needed
                self.retake(v)
                if not matters[v.id] or self.fits():
                    removed.remove(v)
                else:
                    self.release(v)
            return list(removed)
        finally:
            self.restore(mark, removed)

    def _exact(self, relevant: list[Job], most: int) -> list[Job] | None:
        """The best-ranked set of at most ``most`` victims that fits, trying sets in rank
        order; None if the budget of fit checks runs out first."""
        for k in range(1, most + 1):
            for combo in sorted(itertools.combinations(relevant, k), key=self._rank):
                if self.checks >= self.budget:
                    return None
                if self._fits_without(combo):
                    return list(combo)
        return None

    def _fits_without(self, combo: tuple[Job, ...]) -> bool:
        mark = self.state.mark()
        done: list[Job] = []
        try:
            for v in combo:  # combinations keep candidate order
                if not self.reclaimable(v):
                    return False
                self.release(v)
                done.append(v)
            return self.fits()
        finally:
            self.restore(mark, done)

    def _node_orders(self, real: list[Job]):
        """The candidate order once per node with candidates (the busiest ``node_trials``
        nodes), that node's candidates first."""
        by_node: dict[str, list[Job]] = {}
        for v in real:
            for node in v.placement.nodes:
                by_node.setdefault(node, []).append(v)
        busiest = sorted(by_node, key=lambda n: (-len(by_node[n]), n))[: self.node_trials]
        for node in busiest:
            first = by_node[node]
            ids = {v.id for v in first}
            yield first + [v for v in real if v.id not in ids]
