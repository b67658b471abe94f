"""The order in which a cycle tries its pending jobs: the ordering plugin's sequence, with the
rules that keep a cohort from churning (Kueue orders its queue heads much the same way).

0. *Preemptors first.* The jobs that evicted jobs for themselves and have not started since
   (the snapshot's ``nominated``: the cycle before left them waiting for their victims) go
   before every other, highest priority first: what was freed for them is theirs (Kueue's
   ``PrioritizePreemptorWorkloads``).
1. *Nominal first.* A job that fits within its queue's nominal quota (in some flavour of its
   queue; see ``borrows``) goes before every job that would start by borrowing from the
   cohort. One that quota refuses now counts as within nominal if evicting could make it so:
   where the policy preempts, if its queue would be within nominal with it once the jobs of
   the queue it may evict were gone (as the victim search asks); otherwise if the job alone
   is within nominal. The jobs that could start now only by borrowing (and, in a queue that
   may evict while borrowing, every job that must borrow) are tried after the whole
   sequence: where the policy preempts, highest (effective) priority first, then in sequence
   order (a job that borrows may evict only lower priorities, so none of them could evict
   one tried before it); otherwise in sequence order. A job that must borrow but cannot
   start now keeps its turn: it takes nothing, and EASY backfill reserves for the
   highest-ranked job that cannot start. Under a blocking (strict FIFO) ordering, the jobs of
   a queue behind a deferred job wait with it, so the queue keeps its order.
2. *Rivals first.* Where the policy preempts, a preemptible job is not tried before a pending
   job of its queue with a higher priority (or, in a queue with ``within_queue:
   lower-or-newer-equal-priority``, an equal priority submitted before it) that fits within
   nominal quota (a *rival*: it could evict the job next cycle, and the room would change
   hands twice); the rival is tried first, at once. In a ``strict_priority`` queue every job is tried after the
   higher-priority jobs of its queue, whatever the policy.
3. *Behind a borrowing head.* A job with a pending rival that must borrow, may evict while
   borrowing (its queue sets ``borrow_within_cohort``, or its request is within its queue's
   nominal quota), could ever be admitted and could start or evict now (its queue's *head*)
   is tried with the jobs that must borrow, after that head, and does not preempt in this
   cycle if the head started or evicted: the queue keeps priority order while its head
   borrows (Kueue tries one head per queue), so the room its head evicts for is not taken
   back. What its queue's nominal quota owes such a job is held for its queue from its turn
   on (``Cycle.hold_follower``): the jobs of other queues tried in between do not borrow it.

An ordering by share between queues (``queue-share``) is Kueue's fair-sharing tournament,
which already tries the jobs that would not borrow first and keeps each queue's priority
order: its sequence is taken as it is, without these rules.
   A head that can do neither holds nobody back (Kueue's best-effort FIFO goes on to the
   next job).

Each pending job is yielded once. Whether a job must borrow is asked when its turn comes, on
the quota book as the cycle has changed it so far.
"""

from __future__ import annotations

from typing import Iterator

from rota.core import BorrowWithinCohort, Job, WithinQueue
from rota.scheduler.candidates import allows, index_of
from rota.scheduler.plugins.preempt import nominal_reachable
from rota.scheduler.victims import within_nominal


class Turns:
    def __init__(self, cycle, pending: list[Job]) -> None:
        self.cycle = cycle
        order = cycle.policy.order
        self.sequence = order.sequence(pending, cycle)
        self.blocking = order.blocking
        self.preempts = cycle.policy.preemption is not None
        # an ordering by share between queues (queue-share) orders every job itself
        self.by_share = bool(getattr(order, "by_share", False))
        self.done: set[str] = set()
        self.behind: dict[str, str] = {}  # job -> the borrowing head it waits behind
        self.moved: set[str] = set()  # heads that started or evict in this cycle
        self.rivals: dict[str, list[tuple]] = {}  # queue -> its pending jobs, by priority
        self.next: dict[str, int] = {}  # queue -> first rival not looked at yet
        self.heads: dict[str, Job] = {}  # queue -> its borrowing head (rule 3)
        self._borrows: dict[tuple, tuple[int, bool]] = {}  # answers at a book version
        self._evicts: dict[tuple, tuple[list[Job], bool]] = {}  # see ``evicts_borrowing``
        self._defers: dict[tuple, tuple[tuple, list[Job], bool]] = {}  # see ``_deferred``
        chosen = cycle.snapshot.nominated
        self.nominated = sorted((j for j in pending if j.id in chosen),
                                key=lambda j: (-cycle.priority_of(j), j.submit_time, j.id))
        self._index(pending)

    def may_preempt(self, job: Job) -> bool:
        """A job behind a borrowing head does not preempt while that head started or evicts
        in this cycle (the room it evicted for stays its own); behind a head that could do
        neither, it goes on as any other (Kueue's best-effort FIFO tries the next job)."""
        head = self.behind.get(job.id)
        return head is None or head not in self.moved

    def moves(self, job: Job) -> None:
        """``job`` started, or evicts, in this cycle."""
        self.moved.add(job.id)

    def _by_priority(self, deferred: list[Job]) -> list[Job]:
        """Deferred jobs, where the policy preempts: highest priority first, then in sequence;
        in a queue that lets an older equal priority evict a newer one, that queue's jobs of
        equal priority take its places among them oldest first."""
        prio = self.cycle.priority_of
        out = [j for _, j in sorted(enumerate(deferred), key=lambda e: (-prio(e[1]), e[0]))]
        queues = self.cycle.snapshot.queues
        slots: dict[str, list[int]] = {}
        for k, job in enumerate(out):
            if queues[job.queue].within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY:
                slots.setdefault(job.queue, []).append(k)
        for places in slots.values():
            jobs = sorted((out[k] for k in places), key=self._rank)
            for k, job in zip(places, jobs):
                out[k] = job
        return out

    def __iter__(self) -> Iterator[Job]:
        for job in self.nominated:                                              # 0
            self.done.add(job.id)
            yield job
        if self.by_share:
            # the ordering is Kueue's fair-sharing tournament, which puts the jobs that would
            # not borrow first and keeps each queue's priority order itself
            for job in self.sequence:
                if job.id not in self.done:
                    self.done.add(job.id)
                    yield job
            return
        deferred: list[Job] = []
        held_back: set[str] = set()  # blocking order: queues whose later jobs wait behind
        for job in self.sequence:                                               # 1
            if job.id in self.done:
                continue
            if self._may_have_rival(job):
                yield from self._nominal_rivals(job)
            if self._behind_head(job):
                self.behind[job.id] = self.heads[job.queue].id
                if not self.borrows(job):
                    self.cycle.hold_follower(job)  # what its queue owes it, kept from others
                deferred.append(job)
                continue
            if job.queue in held_back or self._deferred(job):
                deferred.append(job)
                if self.blocking:
                    held_back.add(job.queue)
                continue
            self.done.add(job.id)
            yield job
        self.cycle.hold_partial()  # what lenders that cannot reclaim keep, from now on
        if self.preempts and not self.blocking:
            later = self._by_priority(deferred)
        else:
            later = deferred
        for job in later:
            if job.id not in self.done:
                self.done.add(job.id)
                yield job

    def _deferred(self, job: Job) -> bool:
        """Whether the job goes after the jobs within nominal quota: it must borrow and could
        start now, or evict while borrowing (``_would_borrow_now``); one answer for jobs alike
        while the overlay, the quota book and the evictable jobs stay the same."""
        cycle = self.cycle
        key = cycle.kind_of(job)
        moment = (cycle.state.version, cycle.book.version)
        hit = self._defers.get(key)
        if hit is None or hit[0] != moment or hit[1] is not cycle.evictable:
            hit = self._defers[key] = (moment, cycle.evictable,
                                       self.borrows(job) and self._would_borrow_now(job))
        return hit[2]

    def borrows(self, job: Job) -> bool:
        """See ``_borrowing``; weighed, as the job is tried, without the quota kept for its
        queue against the others (``Cycle.keep``)."""
        with self.cycle.lifted(job.queue):
            return self._borrowing(job)

    def _borrowing(self, job: Job) -> bool:
        """True if the job would make its queue, in a cohort, borrow (``_borrows_now``),
        remembered until the quota book changes."""
        queue = self.cycle.snapshot.queues.get(job.queue)
        if queue is None or queue.cohort is None:
            return False
        key = (job.queue, job.request, job.replicas)
        hit = self._borrows.get(key)
        if hit is not None and hit[0] == self.cycle.book.version:
            return hit[1]
        answer = self._borrows_now(job, queue)
        self._borrows[key] = (self.cycle.book.version, answer)
        return answer

    def _borrows_now(self, job: Job, queue) -> bool:
        """The flavour the job would be charged to decides: the first whose quota admits it
        now (it borrows if its queue is above nominal there with it); where none admits it,
        it borrows unless evicting could bring it within nominal in some flavour."""
        book, admission = self.cycle.book, self.cycle.policy.admission
        demand = job.total()
        flavors = self.cycle.flavors(job)
        for flavor, _ in flavors:
            if queue.quotas.get(flavor) is None:
                return False
            if admission.check(book, job.queue, flavor, demand) is None:
                return not within_nominal(book, job, flavor)
        return not any(self._nominal_by_evicting(job, flavor, queue.quotas[flavor], demand)
                       for flavor, _ in flavors)

    def _nominal_by_evicting(self, job: Job, flavor: str, quota, demand) -> bool:
        """Whether evicting could bring the job's queue within nominal with it: where the
        policy preempts, once the jobs of its queue it may evict were gone (the victim search
        asks the same); otherwise, whether the job alone is within nominal."""
        if self.preempts:
            return nominal_reachable(self.cycle, job, flavor, quota, demand)
        return all(demand.get(r, 0) <= n for r, n in quota.nominal.items())

    def _would_borrow_now(self, job: Job) -> bool:
        """A job that must borrow goes after the jobs within nominal quota only if it could
        start now, or could evict while borrowing (``evicts_borrowing``): one that cannot
        takes its turn in the sequence, where it waits, evicts within its queue to fit
        within nominal, or is reserved for (EASY reserves for the highest-ranked job that
        cannot start)."""
        if self.evicts_borrowing(job):
            return True
        with self.cycle.lifted(job.queue):
            return self.cycle.could_start(job)

    def evicts_borrowing(self, job: Job, running: bool = True) -> bool:
        """Whether the job may evict while its queue ends borrowing: the preemption plugin
        lets any job of its queue do so (``evicts_while_borrowing``: ``borrow_within_cohort``,
        and under fair sharing ``reclaim_within_cohort``), or (Kueue's heuristic for a queue's
        own jobs) its request is within its queue's nominal quota in some flavour and, with
        ``running``, a job of its queue that it may evict runs there."""
        queue = self.cycle.snapshot.queues[job.queue]
        if not self.preempts:
            return queue.borrow_within_cohort is not BorrowWithinCohort.NEVER
        if self.cycle.policy.preemption.evicts_while_borrowing(queue):
            return True
        if queue.within_queue is WithinQueue.NEVER:
            return False
        key = (self.cycle.kind_of(job), running)
        jobs = self.cycle.evictable  # the answer changes only with the evictable jobs
        hit = self._evicts.get(key)
        if hit is None or hit[0] is not jobs:
            hit = self._evicts[key] = (jobs, self._evicts_own(job, queue, running))
        return hit[1]

    def _evicts_own(self, job: Job, queue, running: bool) -> bool:
        demand = job.total()
        index, mine = None, self.cycle.priority_of(job)
        newer = queue.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
        for flavor, _ in self.cycle.flavors(job):
            quota = queue.quotas.get(flavor)
            if quota is None or any(demand.get(r, 0) > n for r, n in quota.nominal.items()):
                continue
            if not running:
                return True
            index = index or index_of(self.cycle)
            lowest = index.lowest(job.queue, flavor)
            if lowest < mine:
                return True
            if lowest == mine and newer and any(
                    v.flavor == flavor and allows(queue.within_queue, mine, index.prio[id(v)],
                                                  job, v)
                    for v in index.by_queue.get(job.queue, ())):
                return True
        return False

    def _index(self, pending: list[Job]) -> None:
        queues, prio = self.cycle.snapshot.queues, self.cycle.priority_of
        for job in pending:
            queue = queues.get(job.queue)
            if queue is not None and (queue.strict_priority or (
                    self.preempts and queue.within_queue is not WithinQueue.NEVER)):
                self.rivals.setdefault(job.queue, []).append(
                    (-prio(job), job.submit_time, job.id, job))
        for entries in self.rivals.values():
            entries.sort(key=lambda e: e[:3])

    def _may_have_rival(self, job: Job) -> bool:
        """Whether ``_nominal_rivals`` could yield or note anything for ``job``: its queue's
        next rival not looked at yet ranks before it. Asked first because most jobs (all of
        one priority) have none, and a generator per job costs more than this check."""
        entries = self.rivals.get(job.queue)
        if not entries:
            return False
        i = self.next.get(job.queue, 0)
        return i < len(entries) and entries[i][:3] < self._bound(job)

    def _nominal_rivals(self, job: Job) -> Iterator[Job]:                        # 2
        """Rivals of ``job`` within nominal quota, tried now, highest priority first; each
        pending job is looked at once. A rival that must borrow is left to the second pass
        (it must borrow for the rest of this one), and may become its queue's head."""
        entries = self.rivals.get(job.queue)
        if not entries or not (job.preemptible or self.cycle.snapshot.queues[job.queue].strict_priority):
            return
        bound = self._bound(job)
        i = self.next.get(job.queue, 0)
        while i < len(entries) and entries[i][:3] < bound:
            rival = entries[i][3]
            i += 1
            self.next[job.queue] = i
            if rival.id in self.done:
                continue
            if self.borrows(rival):
                if job.queue not in self.heads and self._may_lead(rival):
                    self.heads[job.queue] = rival
            elif not self._behind_head(rival):  # else it waits behind the head, as ``job``
                self.done.add(rival.id)
                yield rival

    def _may_lead(self, rival: Job) -> bool:
        """A rival that must borrow leads its queue if it may evict while borrowing (whether
        or not its victims have left already: what they freed is its own), could ever be
        admitted, and could start or evict now (a head that can do neither holds nobody back:
        Kueue's best-effort FIFO goes on to the next job)."""
        cycle = self.cycle
        if not (self.evicts_borrowing(rival, running=False) and cycle.book.admissible_ever(
                rival.queue, rival.total(), [f for f, _ in cycle.flavors(rival)])):
            return False
        plugin = cycle.policy.preemption
        return cycle.could_start(rival) or (plugin is not None and
                                            cycle.find_victims(rival) is not None)

    def _behind_head(self, job: Job) -> bool:                                  # 3
        head = self.heads.get(job.queue)
        return (head is not None and head.id != job.id and job.preemptible
                and self._rank(head) < self._bound(job))

    def _rank(self, job: Job) -> tuple:
        return (-self.cycle.priority_of(job), job.submit_time, job.id)

    def _bound(self, job: Job) -> tuple:
        """What a rival of ``job`` ranks below: a higher priority, or, where the queue lets a
        job evict equal priorities submitted after it, an older equal one."""
        mine = self.cycle.priority_of(job)
        newer = self.cycle.snapshot.queues[job.queue].within_queue \
            is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
        return (-mine, job.submit_time, job.id) if newer else (-mine, float("-inf"), "")
