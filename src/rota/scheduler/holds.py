"""Quota a cycle holds for jobs that wait: what a queue is owed, kept from the other queues.

A job that waits on quota its queue's nominal quota covers (the cohort lent it out) has that
quota charged to its queue for the rest of the cycle (``hold_owed``), so that no later job
borrows it; a queue that may not reclaim from anyone holds the part it has left
(``hold_partial``); a job waiting behind its queue's borrowing head keeps its share from the
other queues' jobs (``hold_follower``). Quota kept against the other queues only is lifted while
a job of the owning queue is tried (``lifted``). Everything held is charged to the cycle's quota
book, whose log ``Cycle.close`` rolls back.

``QuotaHolds`` is a part of ``rota.scheduler.context.Cycle``: it reads the cycle's snapshot,
quota book and ``flavors``, and keeps its own tables (``start_holds``).
"""

from __future__ import annotations

from contextlib import nullcontext

from rota.core import Job, ReclaimWithinCohort
from rota.scheduler.victims import within_nominal


class QuotaHolds:
    """The quota-holding moves of a cycle (see the module docstring)."""

    def start_holds(self) -> None:
        """The tables of an empty cycle: nothing held, kept or noted."""
        # quota charged for jobs that do not run yet (a reservation, quota owed to a waiting
        # job), per (queue, flavour, resource): not usage a reclaim could take back
        self.held: dict[tuple[str, str, str], int] = {}
        # quota held for a queue against the other queues' jobs (``keep``): queue -> (job,
        # flavour, amounts), lifted while a job of that queue is tried
        self.kept: dict[str, list[tuple[str, str, dict[str, int]]]] = {}
        self.partial: list[tuple[str, str, str, dict[str, int]]] = []  # see ``hold_owed``
        # (queue, book version) -> the version of that book with the queue's holds lifted
        self.lift_names: dict[tuple[str, int], int] = {}

    def hold_owed(self, job: Job) -> None:
        """``job`` waits on quota although its queue's nominal quota covers it: the cohort has
        lent that quota out. Charge it to the queue for the rest of the cycle, so that no later
        job borrows what is owed to it (Kueue reserves it so). A queue that may not take back
        what it lent from anyone (``reclaim_within_cohort`` not ``any``) holds, for a job its
        nominal quota covers only in part, that part: what is left of its nominal quota, up to
        the request (Kueue's ``quotaResourcesToReserve``), so that the borrowers do not take
        the rest of its quota away too: from when the jobs within nominal quota have had their
        turn (``hold_partial``; Kueue tries borrowing workloads last)."""
        queue = self.snapshot.queues[job.queue]
        if queue.cohort is None:
            return
        demand, partial = job.total(), None
        keeps = queue.reclaim_within_cohort is not ReclaimWithinCohort.ANY
        for flavor, _ in self.flavors(job):
            quota = queue.quotas.get(flavor)
            if quota is None:
                return
            if within_nominal(self.book, job, flavor):
                held = {r: demand[r] for r in quota.nominal if demand.get(r, 0) > 0}
                if held:
                    self.hold_quota(job.queue, flavor, held)
                return
            if keeps and partial is None:
                left = {r: min(demand[r], n - self.book.usage[(job.queue, flavor, r)])
                        for r, n in quota.nominal.items() if demand.get(r, 0) > 0}
                partial = (flavor, {r: v for r, v in left.items() if v > 0})
        if partial is not None and partial[1]:
            self.partial.append((job.id, job.queue, *partial))

    def hold_partial(self) -> None:
        """Hold the parts of nominal quota noted by ``hold_owed`` (once the jobs within nominal
        quota have had their turn), against the other queues' jobs only (``keep``)."""
        for job_id, queue, flavor, amounts in self.partial:
            quota = self.snapshot.queues[queue].quotas[flavor]
            left = {r: min(v, quota.nominal[r] - self.book.usage[(queue, flavor, r)])
                    for r, v in amounts.items()}  # never beyond the queue's nominal quota
            left = {r: v for r, v in left.items() if v > 0}
            if left:
                self.keep(job_id, queue, flavor, left)
        self.partial = []

    def hold_follower(self, job: Job) -> None:
        """``job`` waits behind its queue's borrowing head although its queue's nominal quota
        covers it: keep that quota for its queue against the jobs of other queues tried
        before it (``keep``), as ``hold_owed`` does."""
        queue = self.snapshot.queues[job.queue]
        for flavor, _ in self.flavors(job):
            quota = queue.quotas.get(flavor)
            if quota is None:
                return
            if within_nominal(self.book, job, flavor):
                demand = job.total()
                held = {r: demand[r] for r in quota.nominal if demand.get(r, 0) > 0}
                if held:
                    self.keep(job.id, job.queue, flavor, held)
                return

    def keep(self, job_id: str, queue: str, flavor: str, amounts: dict[str, int]) -> None:
        """Hold ``amounts`` for ``queue`` on behalf of a waiting job, against the jobs of other
        queues only: the queue's own jobs lift it while they are tried (``lifted``)."""
        self.hold_quota(queue, flavor, amounts)
        self.kept.setdefault(queue, []).append((job_id, flavor, amounts))

    def lifted(self, queue: str, tried: str | None = None):
        """The quota kept for ``queue`` lifted for the duration (a job of the queue is tried
        or weighed); afterwards the hold of ``tried`` is forgotten."""
        if not self.kept.get(queue):
            return _UNLIFTED
        return _Lifted(self, queue, tried)

    def lift(self, queue: str, sign: int, drop: str | None = None) -> None:
        """Take back (``sign=-1``) or put back (``+1``) the quota kept for ``queue``; putting
        back, forget the hold of ``drop`` (the job just tried)."""
        holds = self.kept.get(queue, [])
        if sign > 0 and drop is not None:
            self.kept[queue] = holds = [h for h in holds if h[0] != drop]
        for _, flavor, amounts in holds:
            self.book.charge(queue, flavor, amounts, sign)
            for r, v in amounts.items():
                self.held[(queue, flavor, r)] += sign * v

    def hold_quota(self, queue: str, flavor: str, amounts) -> None:
        """Charge ``amounts`` to the queue for a job that does not run yet, for the rest of
        the cycle, and note it as held (``held``)."""
        self.book.charge(queue, flavor, amounts, 1)
        for r, v in amounts.items():
            key = (queue, flavor, r)
            self.held[key] = self.held.get(key, 0) + v


_UNLIFTED = nullcontext()  # nothing kept for the queue: nothing to lift


class _Lifted:
    """``QuotaHolds.lifted`` for a queue with quota kept: lift on entry, put back on exit; a book
    put back as it was gets back its version, so the answers remembered for it hold again."""

    __slots__ = ("cycle", "queue", "tried", "before", "inside")

    def __init__(self, cycle: QuotaHolds, queue: str, tried: str | None) -> None:
        self.cycle, self.queue, self.tried = cycle, queue, tried

    def __enter__(self) -> None:
        cycle, book = self.cycle, self.cycle.book
        self.before = book.version
        cycle.lift(self.queue, -1)
        # the same book with the same queue's holds lifted is the same book: same name
        key = (self.queue, self.before)
        book.version = self.inside = cycle.lift_names.setdefault(key, book.version)

    def __exit__(self, *exc) -> None:
        cycle, book = self.cycle, self.cycle.book
        same = book.version == self.inside and all(
            h[0] != self.tried for h in cycle.kept.get(self.queue, ()))
        cycle.lift(self.queue, 1, self.tried)
        if same:
            book.version = self.before
