"""Preemption: evict the fewest jobs that let a blocked job start.

Who may be evicted (Kueue's rules), in *candidate order*:
1. jobs already being preempted (free: their room is on its way back);
2. jobs of other queues of the job's cohort that use a resource the job needs and their
   queue borrows in the flavour, when the job's queue's ``reclaim_within_cohort`` allows
   (``any``, or ``lower-priority``: only lower priority);
3. preemptible jobs of the job's own queue with lower priority (``within_queue:
   lower-priority``);
lower priority first, then the most recent checkpoint (or start, where there is none): the
least work lost first. The priority compared is the ordering plugin's effective priority
where it defines one (e.g. least attained service), else the job's own. Non-preemptible jobs
are never candidates, nor jobs that have run less than their queue's ``min_runtime_s``.

When a set *fits*: with its victims gone (own-queue ones included), the job passes admission
and its queue stays within its nominal quota: reclaiming is for taking back what was lent,
not for borrowing more. Only a queue with ``borrow_within_cohort: lower-priority`` may evict
while borrowing, and then only jobs of lower priority than the preemptor (Kueue's
``borrowWithinCohort``); its jobs try that first (fewer victims), then the search without
borrowing.

The set itself is chosen by ``rota.scheduler.victims``: the minimum number of victims where
the candidates that matter are few (``exact_limit``), a set from which none can be spared
otherwise; among equal sets the lowest priorities, then the least work lost since the last
checkpoint. Choosing victims is separate from evicting them: the cycle turns the plan into
``Preempt`` decisions.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rota.core import (
    BorrowWithinCohort, Job, JobState, ReclaimWithinCohort, WithinQueue,
)
from rota.scheduler.plugins.registry import register
from rota.scheduler.victims import Plan, Search, needs

__all__ = ["MinimalVictims", "Plan", "VictimArgs", "may_fit", "nominal_reachable", "relevance"]


class VictimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_preemptors: int = Field(8, ge=1, description="jobs that may preempt in one cycle")
    node_trials: int = Field(16, ge=0, description="per-node greedy victim searches per preemptor")
    exact_limit: int = Field(10, ge=0, le=16, description="candidates that matter up to which "
                                                         "the minimum victim set is searched exactly")
    budget: int = Field(512, ge=1, description="fit checks one exact search may make")


@register("preemption")
class MinimalVictims:
    name = "minimal-victims"
    Args = VictimArgs

    def __init__(self, args: VictimArgs) -> None:
        self.max_preemptors = args.max_preemptors
        self.node_trials = args.node_trials
        self.exact_limit = args.exact_limit
        self.budget = args.budget

    def candidates(self, cycle, job: Job, flavor: str, borrow: bool = False) -> list[Job]:
        """Jobs ``job`` may evict in ``flavor``, in candidate order (``borrow``: the search
        that lets its queue borrow, which takes only lower priorities from other queues).
        The answer depends on the job only through its queue, priority and the resources it
        needs, and on which queues of its cohort borrow them, so it is remembered for those
        until the cycle's evictable jobs change."""
        index = _index(cycle)
        wanted = needs(job)
        own = cycle.snapshot.queues[job.queue]
        lenders = tuple(q for q in index.cohorts.get(own.cohort, ()) if q != job.queue
                        and cycle.book.borrowing(q, flavor, wanted))
        key = (job.queue, cycle.priority_of(job), flavor, borrow, wanted, lenders)
        hit = index.memo.get(key)
        if hit is None:
            hit = index.memo[key] = self._candidates(cycle, index, job, flavor, borrow,
                                                     wanted, lenders)
        return hit

    @staticmethod
    def _candidates(cycle, index, job: Job, flavor: str, borrow: bool, wanted: frozenset,
                    lenders: tuple[str, ...]) -> list[Job]:
        queues = cycle.snapshot.queues
        own = queues[job.queue]
        known, mine = index.prio, cycle.priority_of(job)

        def prio(v: Job) -> float:
            return known[id(v)]
        out = list(index.preempting)
        if own.within_queue is WithinQueue.LOWER_PRIORITY:
            out += [v for v in index.by_queue.get(job.queue, ()) if prio(v) < mine]
        policy = own.reclaim_within_cohort
        if policy is not ReclaimWithinCohort.NEVER:
            for q in lenders:  # queues of the cohort that borrow what the job needs
                if not _limited(queues[q], flavor, wanted):
                    continue
                for v in index.by_queue.get(q, ()):
                    if v.flavor != flavor or not wanted & needs(v):
                        continue
                    lower = prio(v) < mine
                    if lower or (policy is ReclaimWithinCohort.ANY and not borrow):
                        out.append(v)
        out.sort(key=lambda v: (v.state is not JobState.PREEMPTING, v.queue == job.queue,
                                prio(v), -_saved_at(v), v.id))
        return out

    def find(self, cycle, job: Job, capped: bool = False) -> Plan | None:
        """The best victim set over the job's flavours, or None if no set lets it start."""
        queue = cycle.snapshot.queues[job.queue]
        passes = [False]
        if queue.borrow_within_cohort is BorrowWithinCohort.LOWER_PRIORITY:
            passes = [True, False]
        demand = job.total()
        for flavor, models in cycle.flavors(job):
            quota = queue.quotas.get(flavor)
            for borrow in passes:
                if not borrow and quota is not None and not nominal_reachable(
                        cycle, job, flavor, quota, demand):
                    continue  # no eviction brings its queue within nominal with it
                cands = self.candidates(cycle, job, flavor, borrow)
                if not cands:
                    continue
                shape = cycle.shape(job, models)
                search = Search(cycle, job, flavor, shape, capped, borrow, self.exact_limit,
                                self.budget, self.node_trials)
                real = [v for v in cands if v.state is not JobState.PREEMPTING]
                if not search.quota_allows(real) or not may_fit(cycle, job, shape, cands):
                    continue  # even with every candidate gone: no quota, or too few GPUs
                plan = search.best(cands, relevance(cycle, job, flavor, shape, cands))
                if plan is not None:
                    return plan
        return None


def _saved_at(v: Job) -> float:
    """When the victim's work was last saved: its last checkpoint, else its start."""
    if v.last_checkpoint_at is not None:
        return v.last_checkpoint_at
    return v.started_at or 0.0


def nominal_reachable(cycle, job: Job, flavor: str, quota, demand) -> bool:
    """Whether the job's queue could be within its nominal quota with the job once every job
    of the queue it may evict (and every one already leaving) were gone: a necessary
    condition of the search without borrowing, from the queue's own jobs alone."""
    index = _index(cycle)
    own = cycle.snapshot.queues[job.queue]
    mine = cycle.priority_of(job)
    back: dict[str, int] = {}
    leaving = [v for v in index.preempting if v.queue == job.queue and v.flavor == flavor]
    if own.within_queue is WithinQueue.LOWER_PRIORITY:
        leaving += [v for v in index.by_queue.get(job.queue, ())
                    if v.flavor == flavor and index.prio[id(v)] < mine]
    for v in leaving:
        for r, amount in v.total().items():
            back[r] = back.get(r, 0) + amount
    usage = cycle.book.usage
    return all(usage[(job.queue, flavor, r)] - back.get(r, 0) + demand.get(r, 0) <= n
               for r, n in quota.nominal.items())


class _Index:
    """The cycle's evictable jobs, grouped once per change of them: those already being
    preempted, the preemptible others by queue, and the queues of each cohort."""

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
        for q in cycle.snapshot.queues.values():
            if q.cohort is not None:
                self.cohorts.setdefault(q.cohort, []).append(q.name)
        self.memo: dict[tuple, list[Job]] = {}


def _index(cycle) -> _Index:
    index = cycle.__dict__.get("_victim_index")
    if index is None or index.evictable is not cycle.evictable:
        index = cycle.__dict__["_victim_index"] = _Index(cycle)
    return index


def _limited(queue, flavor: str, resources: frozenset[str]) -> bool:
    """Whether the queue's quota in ``flavor`` limits one of ``resources`` (it can borrow it)."""
    quota = queue.quotas.get(flavor)
    return quota is not None and any(r in quota.nominal for r in resources)


def may_fit(cycle, job: Job, shape, cands: list[Job]) -> bool:
    """False only if ``job`` cannot be placed even with every candidate released: a replica of
    whole GPUs needs that many wholly free devices on one node, and at most the devices free
    now or held by a candidate can be. A necessary condition, so a False spares trials that
    would all fail; fractional and GPU-less shapes are not bounded here (always True)."""
    if shape.count < 1 or shape.fractional:
        return True
    state = cycle.state
    keys = set(shape.pools)
    nodes: set[int] = set()
    for key in keys:
        pool = state.pools.get(key)
        if pool is not None:
            for bucket in pool.whole[1:]:
                nodes.update(bucket)
    held: dict[int, set[int]] = {}
    for v in cands:
        for rep in v.placement.replicas:
            slot = state.by_name.get(rep.node)
            if slot is not None and any(p.key in keys for p in slot.pools):
                held.setdefault(slot.i, set()).update(d.index for d in rep.devices)
    nodes.update(held)
    fit = 0
    for i in nodes:
        fit += (state.slots[i].whole + len(held.get(i, ()))) // shape.count
        if fit >= job.replicas:
            return True
    return False


def relevance(cycle, job: Job, flavor: str, shape, cands: list[Job]) -> dict[str, bool]:
    """Per candidate: can releasing it change whether ``job`` fits in ``flavor``? Only if it
    frees quota that admission reads (same flavour, and the job's queue or a queue of its
    cohort) or capacity on a node of one of the shape's pools."""
    queues, by_name = cycle.snapshot.queues, cycle.state.by_name
    cohort = queues[job.queue].cohort
    pools = set(shape.pools)
    out = {}
    for v in cands:
        quota = v.flavor == flavor and (
            v.queue == job.queue or (cohort is not None and queues[v.queue].cohort == cohort))
        out[v.id] = quota or any(
            slot is not None and any(p.key in pools for p in slot.pools)
            for slot in (by_name.get(rep.node) for rep in v.placement.replicas))
    return out
