"""Preemption plugins: evict jobs so that a blocked job starts, with Kueue's rules.

Who may be evicted, in which order and in which passes (Kueue's classic preemption: the
eligibility of the job, its candidates, their order, the passes with and without borrowing)
is ``rota.scheduler.candidates``; which of them, ``rota.scheduler.victims``. Two plugins:

- ``classic``: Kueue's classic preemption exactly: in each pass, release the valid candidates
  in order until the job fits, then give back, latest first, each one it can spare; none of
  rota's rules against churn (a victim taken while borrowing keeps its queue at nominal, the
  cycle's own fill-back across its preemptions);
- ``minimal-victims`` (rota's default): the same candidates and passes, but the fewest victims:
  the minimum set while the candidates that matter are few (``exact_limit``), else the best of
  several greedy orders (per node with candidates); equal-sized sets prefer candidates earlier
  in Kueue's order. It differs from ``classic`` only where fewer victims suffice.

A job whose queue could be within nominal quota only by evicting also has its place in the
cycle's order decided from these rules (``nominal_reachable``, read by ``turns``). Choosing
victims is separate from evicting them: the cycle turns the plan into ``Preempt`` decisions.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rota.core import BorrowWithinCohort, Job
from rota.scheduler.candidates import Candidate, Variant, allows, index_of, setting
from rota.scheduler.placement import place_gang
from rota.scheduler.plugins.registry import register
from rota.scheduler.victims import Plan, Search, within_nominal

__all__ = ["ClassicPreemption", "MinimalVictims", "Plan", "VictimArgs", "may_fit",
           "nominal_reachable", "relevance"]


class VictimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_preemptors: int = Field(8, ge=1, description="jobs that may preempt in one cycle")
    node_trials: int = Field(16, ge=0, description="per-node greedy victim searches per preemptor")
    exact_limit: int = Field(10, ge=0, le=16, description="candidates that matter up to which "
                                                         "the minimum victim set is searched exactly")
    budget: int = Field(512, ge=1, description="fit checks one exact search may make")


class ClassicArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_preemptors: int = Field(8, ge=1, description="jobs that may preempt in one cycle")


@register("preemption")
class MinimalVictims:
    name = "minimal-victims"
    Args = VictimArgs
    minimum = True  # go on from Kueue's greedy set to the fewest victims
    spares = True  # the cycle gives back the victims its later plans left unneeded

    def __init__(self, args: VictimArgs) -> None:
        self.max_preemptors = args.max_preemptors
        self.node_trials = args.node_trials
        self.exact_limit = args.exact_limit
        self.budget = args.budget

    @staticmethod
    def evicts_while_borrowing(queue) -> bool:
        """Whether a job of ``queue`` may evict even where its own request is above its
        queue's nominal quota (Kueue's ``borrowWithinCohort``)."""
        return queue.borrow_within_cohort is not BorrowWithinCohort.NEVER

    def find(self, cycle, job: Job, capped: bool = False) -> Plan | None:
        """The best victim set over the job's flavours, or None (Kueue's flavour choice: a
        flavour where only other queues' jobs are taken back before one where its own queue's
        are evicted, then one where its queue ends within nominal, then the queue's order).
        In a flavour, ``classic`` takes the first pass that finds a set (Kueue);
        ``minimal-victims`` the best of its passes (fewest victims, then rank; a tie goes to
        the pass without borrowing, which takes back borrowed quota instead of evicting jobs
        its queue is then owed back), and across flavours the fewest victims come after
        Kueue's preferences."""
        best, rank = None, None
        for k, (flavor, models) in enumerate(cycle.flavors(job)):
            found = setting(cycle, job, flavor)
            if found is None or not found.candidates:
                continue
            shape = cycle.shape(job, models)
            plan, key = self._in_flavor(cycle, job, found, shape, capped)
            if plan is None:
                continue
            if self.minimum and not plan.borrow:
                plan = self._spare_own(cycle, job, found, shape, capped, plan)
            own = any(v.queue == job.queue for v in plan.victims)
            key = (own, borrows_after(cycle, job, plan), *(key if self.minimum else ()), k)
            if rank is None or key < rank:
                best, rank = plan, key
        return best

    def _in_flavor(self, cycle, job: Job, found, shape, capped: bool):
        """The plan of one flavour, and its rank among the passes' (see ``find``)."""
        best, rank = None, None
        for borrow in found.passes:
            plan = self._pass(cycle, job, found, shape, capped, borrow)
            if plan is None:
                continue
            if not self.minimum:
                return plan, ()
            key = (*plan_rank(found, plan), borrow)
            if rank is None or key < rank:
                best, rank = plan, key
        return best, rank

    def _spare_own(self, cycle, job: Job, found, shape, capped: bool, plan: Plan) -> Plan:
        """A plan of a pass that let the job's queue end within nominal, without the victims
        of its own queue it fits beside once its queue may borrow (latest first): such a
        victim would start again at once by borrowing what the plan frees (rota's rule;
        Kueue evicts it, and it comes back)."""
        search = Search(cycle, job, found, shape, capped, True, 0, 1, 0)
        victims = list(plan.victims)
        for v in reversed(plan.victims):
            if v.queue != job.queue:
                continue
            rest = [x for x in victims if x.id != v.id]
            if search.fits_without([*plan.free, *rest]):
                victims = rest
        if len(victims) == len(plan.victims):
            return plan
        sub = cycle.state.mark()
        search._handover(-1)
        for x in (*plan.free, *victims):
            search.release(x)
        placement, _ = place_gang(cycle.state, shape, job.replicas, cycle.placement, capped)
        search.restore(sub, [*plan.free, *victims])
        search._handover(1)
        return Plan(victims, plan.free, plan.flavor, placement, True)

    def _pass(self, cycle, job: Job, found, shape, capped: bool, borrow: bool) -> Plan | None:
        search = Search(cycle, job, found, shape, capped, borrow, self.exact_limit,
                        self.budget, self.node_trials)
        search.keep_nominal = self.minimum  # classic: Kueue's rule exactly
        cands = [c for c in found.candidates if not (borrow and c.variant is Variant.UNBORROWED)]
        real = [c for c in cands if c.variant is not Variant.FREE]
        if not search.quota_allows(real) or not may_fit(cycle, job, shape, cands):
            return None  # even with every candidate gone: no quota, or too few GPUs
        return search.best(relevance(cycle, job, found.flavor, shape, cands), self.minimum)


def borrows_after(cycle, job: Job, plan: Plan) -> bool:
    """Whether the job's queue would be above its nominal quota with the job once the plan's
    victims (and the jobs already leaving it counts on) are gone."""
    book = cycle.book
    gone = [*plan.victims, *plan.free]
    for v in gone:
        book.charge(v.queue, v.flavor, v.total(), -1)
    try:
        return not within_nominal(book, job, plan.flavor)
    finally:
        for v in gone:
            book.charge(v.queue, v.flavor, v.total(), 1)


def plan_rank(found, plan: Plan) -> tuple:
    """A plan's victims ranked as ``Search`` ranks sets: fewest, then earliest in candidate
    order (latest member first)."""
    position = {c.job.id: k for k, c in enumerate(found.candidates)}
    victims = sorted((position[v.id] for v in plan.victims), reverse=True)
    return (len(victims), victims)


@register("preemption")
class ClassicPreemption(MinimalVictims):
    name = "classic"
    Args = ClassicArgs
    minimum = False
    spares = False  # the cycle gives back no victim of its plans (Kueue's scheduler does not)

    def __init__(self, args: ClassicArgs) -> None:
        super().__init__(VictimArgs(max_preemptors=args.max_preemptors))


def nominal_reachable(cycle, job: Job, flavor: str, quota, demand) -> bool:
    """Whether the job's queue could be within its nominal quota with the job once every job
    of the queue it may evict (and every one already leaving) were gone: a necessary
    condition of a pass without borrowing, from the queue's own jobs alone."""
    index = index_of(cycle)
    key = ("back", cycle.kind_of(job), flavor)  # the same for jobs alike, until an eviction
    back = index.memo.get(key)
    if back is None:
        own = cycle.snapshot.queues[job.queue]
        mine = cycle.priority_of(job)
        back = index.memo[key] = {}
        leaving = [v for v in index.preempting if v.queue == job.queue and v.flavor == flavor]
        leaving += [v for v in index.by_queue.get(job.queue, ()) if v.flavor == flavor
                    and allows(own.within_queue, mine, index.prio[id(v)], job, v)]
        for v in leaving:
            for r, amount in v.total().items():
                back[r] = back.get(r, 0) + amount
    usage = cycle.book.usage
    return all(usage[(job.queue, flavor, r)] - back.get(r, 0) + demand.get(r, 0) <= n
               for r, n in quota.nominal.items() if demand.get(r, 0) > 0)


def may_fit(cycle, job: Job, shape, cands: list[Candidate]) -> bool:
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
    for c in cands:
        for rep in c.job.placement.replicas:
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


def relevance(cycle, job: Job, flavor: str, shape, cands: list[Candidate]) -> dict[str, bool]:
    """Per candidate: can releasing it change whether ``job`` fits in ``flavor``? Only if it
    frees quota that admission reads (same flavour, and the job's queue or a queue of its
    cohort) or capacity on a node of one of the shape's pools."""
    queues, by_name = cycle.snapshot.queues, cycle.state.by_name
    cohort = queues[job.queue].cohort
    pools = set(shape.pools)
    out = {}
    for c in cands:
        v = c.job
        quota = v.flavor == flavor and (
            v.queue == job.queue or (cohort is not None and queues[v.queue].cohort == cohort))
        out[v.id] = quota or any(
            slot is not None and any(p.key in pools for p in slot.pools)
            for slot in (by_name.get(rep.node) for rep in v.placement.replicas))
    return out
