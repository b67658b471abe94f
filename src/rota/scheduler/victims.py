"""Choosing victims: which candidates to evict so that one blocked job starts.

Vocabulary (see ``rota.scheduler.candidates`` for candidates, their order, the passes and
when a candidate is *valid*):
- *fits*, in a pass: with the released jobs gone, the job passes admission (quota) in the
  flavour, its queue stays within its nominal quota of every resource it requests unless the
  pass lets it borrow, and the whole gang is placed.
- a set is *valid* in a pass when, released in candidate order, each victim is valid at its
  turn;
- the *rank* of a set: fewest victims; then, for sets of equal size, the set whose victims come
  earliest in candidate order, compared from the latest of each (the set whose last victim is
  the earliest, then the next, ...); so equal-sized sets prefer borrowers of other queues, then
  lower priorities, then the least work lost.

The search looks past the victims this cycle already chose for other jobs of other queues
(``Cycle.handover``): they are gone by the time this job could start. If the job fits then
with nobody released, it has nothing to evict: it waits for that handover. Per pass:
1. free candidates are released in order until the job fits; if it does, the free jobs it
   does not need are put back and nobody is evicted;
2. otherwise, with every free job released, a *greedy* pass releases the valid candidates in
   candidate order until the job fits, then puts back, latest first, every victim it can spare
   (Kueue's classic preemption, with its fill-back: the set is then minimal, no victim can be
   spared). ``classic`` stops here;
3. ``minimal-victims`` goes on: if at most ``exact_limit`` candidates matter (free quota the
   job reads, or capacity on a node it may use), every set of 1..g of them (``g``: the greedy
   set's size) is tried in rank order, and the first valid set that fits is the answer: the
   minimum, best ranked. The fit checks are capped at ``budget``; past it, or with more
   candidates, the best of the greedy pass and a greedy pass per node with candidates (the
   busiest ``node_trials`` first, that node's candidates first) stands (minimal, not always
   minimum);
4. the free jobs the chosen victims make unnecessary are put back.

Every what-if is undone: the overlay through its journal, quota by charging back.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

from rota.core import Job, Placement
from rota.scheduler.candidates import Candidate, Setting, Variant, needs, valid, within_nominal_with
from rota.scheduler.placement import place_gang

__all__ = ["Plan", "Search", "needs", "within_nominal"]


@dataclass(slots=True)
class Plan:
    victims: list[Job]
    free: list[Job]  # jobs already preempting whose space the preemptor takes
    flavor: str
    placement: Placement
    borrow: bool = False  # found in a pass that lets the queue end borrowing


def within_nominal(book, job: Job, flavor: str) -> bool:
    """True if the job's queue stays within its nominal quota in ``flavor`` of every resource
    the job requests, with the job."""
    return within_nominal_with(book, job.queue, flavor, job.total())


class Search:
    """One victim search for ``job`` in one flavour (``setting``), in one pass: ``borrow``,
    may its queue end above its nominal quota."""

    def __init__(self, cycle, job: Job, setting: Setting, shape, capped: bool, borrow: bool,
                 exact_limit: int, budget: int, node_trials: int) -> None:
        self.cycle, self.job, self.setting, self.shape = cycle, job, setting, shape
        self.flavor = setting.flavor
        self.capped, self.borrow = capped, borrow
        self.exact_limit, self.budget, self.node_trials = exact_limit, budget, node_trials
        self.state, self.book = cycle.state, cycle.book
        self.position = {c.job.id: k for k, c in enumerate(setting.candidates)}
        self.checks = 0
        self.keep_nominal = True  # rota's rule for victims taken while borrowing (candidates)

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

    def valid(self, c: Candidate) -> bool:
        return valid(self.cycle, c, self.borrow, self.setting.short, self.keep_nominal)

    def fits(self) -> bool:
        self.checks += 1
        job, cycle = self.job, self.cycle
        if not cycle.policy.admission.admits(self.book, job.queue, self.flavor, job.total()):
            return False
        if not self.borrow and not within_nominal(self.book, job, self.flavor):
            return False
        mark = self.state.mark()
        placement, _ = place_gang(self.state, self.shape, job.replicas, cycle.placement,
                                  self.capped)
        self.state.undo(mark)
        return placement is not None

    # -- the search ----------------------------------------------------------------------------

    def best(self, matters: dict[str, bool], minimum: bool) -> Plan | None:
        """The plan of the module docstring (``minimum``: go on to step 3), or None if no set
        of candidates lets the job start in this pass."""
        cands = [c for c in self.setting.candidates
                 if not (self.borrow and c.variant is Variant.UNBORROWED)]
        free = [c for c in cands if c.variant is Variant.FREE]
        real = [c for c in cands if c.variant is not Variant.FREE]
        self._handover(-1)  # evicted in this cycle for others: gone when this job starts
        mark = self.state.mark()
        released: list[Job] = []
        try:
            if self.fits():
                return None  # it waits for what other preemptors' victims give back
            fitted = False
            for c in free:                                                       # 1
                self.release(c.job)
                released.append(c.job)
                if self.fits():
                    fitted = True
                    break
            victims: list[Job] | None = []
            if not fitted:
                victims = self._victims(real, matters, minimum) if real else None  # 2, 3
                if victims is None:
                    return None
                for v in victims:
                    self.release(v)
                    released.append(v)
            spare = [v for v in released if self._free(v)]
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
            return Plan(victims, [v for v in released if self._free(v)], self.flavor,
                        placement, self.borrow)
        finally:
            self.restore(mark, released)
            self._handover(1)

    def _free(self, v: Job) -> bool:
        k = self.position.get(v.id)
        return k is not None and self.setting.candidates[k].variant is Variant.FREE

    def fits_without(self, jobs: Iterable[Job]) -> bool:
        """Whether the job fits with ``jobs`` released (and the handover looked past), as the
        search judges it; nothing changes. For checks of a plan from outside."""
        self._handover(-1)
        mark = self.state.mark()
        done: list[Job] = []
        try:
            for v in jobs:
                self.release(v)
                done.append(v)
            return self.fits()
        finally:
            self.restore(mark, done)
            self._handover(1)

    def _handover(self, sign: int) -> None:
        for v in self.cycle.handover:
            self.book.charge(v.queue, v.flavor, v.total(), sign)

    def _victims(self, real: list[Candidate], matters: dict[str, bool],
                 minimum: bool) -> list[Job] | None:
        """With every free job released: the best set of real victims, or None."""
        found = self._greedy(real, matters)
        if not minimum:
            return found
        relevant = [c for c in real if matters[c.job.id]]
        if found is not None and len(relevant) <= self.exact_limit \
                and not self._unbeatable(found, relevant):
            exact = self._exact(relevant, len(found))
            if exact is not None:
                return exact
        if found is None and self._monotone(real):
            return None  # every order releases the same candidates: none fits
        if found is not None and self._unbeatable(found, relevant):
            return found
        for order in self._node_orders(real):
            other = self._greedy(order, matters)
            if other is not None and (found is None or self._rank(other) < self._rank(found)):
                found = other
        return found

    def quota_allows(self, real: list[Candidate]) -> bool:
        """Whether the job would pass the quota part of ``fits`` with every candidate's quota
        given back, and the handover's (a necessary condition, cheap next to a placement:
        quota only grows as victims are uncharged)."""
        book, job = self.book, self.job
        back: dict[tuple[str, str], dict[str, int]] = {}  # all of a queue's in one charge
        for v in (*(c.job for c in real), *self.cycle.handover):
            total = back.setdefault((v.queue, v.flavor), {})
            for r, amount in v.total().items():
                total[r] = total.get(r, 0) + amount
        for (queue, flavor), total in back.items():
            book.charge(queue, flavor, total, -1)
        try:
            if not self.cycle.policy.admission.admits(book, job.queue, self.flavor, job.total()):
                return False
            return self.borrow or within_nominal(book, job, self.flavor)
        finally:
            for (queue, flavor), total in back.items():
                book.charge(queue, flavor, total, 1)

    def _rank(self, victims: Iterable[Job]) -> tuple:
        """Fewest victims, then the earliest in candidate order, latest member first."""
        positions = sorted((self.position[v.id] for v in victims), reverse=True)
        return (len(positions), positions)

    def _unbeatable(self, found: list[Job], relevant: list[Candidate]) -> bool:
        """One victim, and no candidate that matters comes before it."""
        return len(found) == 1 and all(self.position[c.job.id] >= self.position[found[0].id]
                                       for c in relevant)

    def _monotone(self, real: list[Candidate]) -> bool:
        """True when one order suffices: every candidate is of the job's own queue (always
        valid, no order skips one) and the shape is not a fraction of a GPU. Then each node
        holds a number of whole-GPU replicas that only grows as more is released there, and
        quota only grows as victims are uncharged: if releasing every candidate does not make
        the job fit, no order does."""
        return not self.shape.fractional and all(c.variant is Variant.OWN for c in real)

    def _greedy(self, order: list[Candidate], matters: dict[str, bool]) -> list[Job] | None:
        """Release the valid candidates of ``order`` until the job fits, then put back,
        latest first, every victim it can spare (Kueue's fill-back).

        ``matters`` (see ``plugins.preempt.relevance``) spares the what-ifs that cannot change
        the answer: releasing or re-taking a job that does not matter leaves "fits" as it was."""
        mark = self.state.mark()
        removed: list[Job] = []
        try:
            for c in order:
                if not self.valid(c):
                    continue  # its queue has stopped borrowing: nothing left to reclaim there
                self.release(c.job)
                removed.append(c.job)
                if len(removed) > 1 and not matters[c.job.id]:
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

    def _exact(self, relevant: list[Candidate], most: int) -> list[Job] | None:
        """The best-ranked valid set of at most ``most`` victims that fits, trying sets in
        rank order; None if the budget of fit checks runs out first."""
        for k in range(1, most + 1):
            for combo in sorted(itertools.combinations(relevant, k),
                                key=lambda cs: self._rank(c.job for c in cs)):
                if self.checks >= self.budget:
                    return None
                if self._fits_without(combo):
                    return [c.job for c in combo]
        return None

    def _fits_without(self, combo: tuple[Candidate, ...]) -> bool:
        mark = self.state.mark()
        done: list[Job] = []
        try:
            for c in combo:  # combinations keep candidate order
                if not self.valid(c):
                    return False
                self.release(c.job)
                done.append(c.job)
            return self.fits()
        finally:
            self.restore(mark, done)

    def _node_orders(self, real: list[Candidate]):
        """The candidate order once per node with candidates (the busiest ``node_trials``
        nodes), that node's candidates first."""
        by_node: dict[str, list[Candidate]] = {}
        for c in real:
            for node in c.job.placement.nodes:
                by_node.setdefault(node, []).append(c)
        busiest = sorted(by_node, key=lambda n: (-len(by_node[n]), n))[: self.node_trials]
        for node in busiest:
            first = by_node[node]
            ids = {c.job.id for c in first}
            yield first + [c for c in real if c.job.id not in ids]
