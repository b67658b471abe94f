"""Preemption: evict the fewest jobs that let a blocked job start.

Who may be evicted (Kueue's rules): preemptible jobs of the same queue with lower priority
(``within_queue: lower-priority``; the priority is the ordering plugin's effective priority
where it defines one, e.g. least attained service, else the job's own), and jobs of other queues in the cohort that are borrowing
in the flavour, when the preemptor's queue stays within its nominal quota
(``reclaim_within_cohort: any | lower-priority``). Jobs already being preempted count as free
victims: their space is on its way back.

How: victims are released one by one in candidate order (already preempting, then other
queues, then lower priority, then most recently started) until the job fits; then each victim
but the last is put back if the job still fits without it, which leaves a minimal set. This is
tried once in that order and once more per node with candidates, that node's candidates
first; the best set wins: fewest victims, then lowest priorities, then most recently started.
Choosing victims is separate from evicting them: the cycle turns the result into ``Preempt``
decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from rota.core import Job, JobState, Placement, ReclaimWithinCohort, WithinQueue
from rota.scheduler.placement import place_gang
from rota.scheduler.plugins.registry import register


class VictimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_preemptors: int = Field(8, ge=1, description="jobs that may preempt in one cycle")
    node_trials: int = Field(16, ge=0, description="per-node victim searches per preemptor")


@dataclass(slots=True)
class Plan:
    victims: list[Job]
    free: list[Job]  # jobs already preempting whose space the preemptor takes
    flavor: str
    placement: Placement

    def rank(self, priority_of) -> tuple:
        return (len(self.victims), sorted(priority_of(v) for v in self.victims),
                [-(v.started_at or 0.0) for v in self.victims])


@register("preemption")
class MinimalVictims:
    name = "minimal-victims"
    Args = VictimArgs

    def __init__(self, args: VictimArgs) -> None:
        self.max_preemptors = args.max_preemptors
        self.node_trials = args.node_trials

    def candidates(self, cycle, job: Job, flavor: str) -> list[Job]:
        """Jobs ``job`` may evict in ``flavor``, in candidate order. The answer depends on the
        job only through its queue, its priority and whether its queue stays within nominal
        quota, so it is remembered for those until the cycle's evictable jobs change."""
        fits_nominal = book_within_nominal(cycle.book, job, flavor)
        memo = cycle.__dict__.get("_victim_candidates")
        if memo is None or memo[0] is not cycle.evictable:
            memo = cycle.__dict__["_victim_candidates"] = (cycle.evictable, {})
        key = (job.queue, cycle.priority_of(job), flavor, fits_nominal)
        hit = memo[1].get(key)
        if hit is None:
            hit = memo[1][key] = self._candidates(cycle, job, flavor, fits_nominal)
        return hit

    @staticmethod
    def _candidates(cycle, job: Job, flavor: str, fits_nominal: bool) -> list[Job]:
        queues = cycle.snapshot.queues
        own = queues[job.queue]
        out = []
        prio, mine = cycle.priority_of, cycle.priority_of(job)
        for v in cycle.evictable:
            if v.state is JobState.PREEMPTING:
                out.append(v)
            elif not v.preemptible:
                continue
            elif v.queue == job.queue:
                if own.within_queue is WithinQueue.LOWER_PRIORITY and prio(v) < mine:
                    out.append(v)
            elif (own.cohort is not None and queues[v.queue].cohort == own.cohort
                  and v.flavor == flavor and fits_nominal):
                policy = own.reclaim_within_cohort
                if policy is ReclaimWithinCohort.ANY or (
                        policy is ReclaimWithinCohort.LOWER_PRIORITY and prio(v) < mine):
                    out.append(v)
        out.sort(key=lambda v: (v.state is not JobState.PREEMPTING, v.queue == job.queue,
                                prio(v), -(v.started_at or 0.0), v.id))
        return out

    def find(self, cycle, job: Job, capped: bool = False) -> Plan | None:
        """The best victim set over the job's flavours, or None if no set lets it start."""
        for flavor, models in cycle.flavors(job):
            cands = self.candidates(cycle, job, flavor)
            if not cands:
                continue
            shape = cycle.shape(job, models)
            if not may_fit(cycle, job, shape, cands):
                continue  # even with every candidate gone, too few GPUs for the gang
            matters = relevance(cycle, job, flavor, shape, cands)
            first = self.trial(cycle, job, flavor, shape, cands, capped, matters)
            if first is None and not shape.fractional and all(
                    v.queue == job.queue or v.state is JobState.PREEMPTING for v in cands):
                continue  # every order releases the same set (see ``monotone``): none fits
            if first is not None and unbeatable(first, cands, cycle.priority_of):
                return first
            plans = [first] if first is not None else []
            for order in self.node_orders(cands):
                plan = self.trial(cycle, job, flavor, shape, order, capped, matters)
                if plan is not None:
                    plans.append(plan)
            if plans:
                return min(plans, key=lambda p: p.rank(cycle.priority_of))
        return None

    def node_orders(self, cands: list[Job]):
        """The candidate order once per node with candidates (the busiest ``node_trials``
        nodes), that node's candidates first."""
        by_node: dict[str, list[Job]] = {}
        for v in cands:
            for node in v.placement.nodes:
                by_node.setdefault(node, []).append(v)
        busiest = sorted(by_node, key=lambda n: (-len(by_node[n]), n))[: self.node_trials]
        for node in busiest:
            first = by_node[node]
            ids = {v.id for v in first}
            yield first + [v for v in cands if v.id not in ids]

    def trial(self, cycle, job: Job, flavor: str, shape, order: list[Job], capped: bool,
              matters: dict[str, bool] | None = None) -> Plan | None:
        """Release ``order`` until ``job`` fits, then put back every victim it does not need.

        ``matters`` (victim id -> bool, see ``relevance``) spares the placement what-ifs that
        cannot change the answer: releasing or re-taking a victim that matters not leaves
        "fits" as it was. The victims released and put back, and so the plan, are the same."""
        state, book = cycle.state, cycle.book
        mark = state.mark()
        removed: list[Job] = []
        try:
            for v in order:
                if v.queue != job.queue and v.state is not JobState.PREEMPTING \
                        and not book.borrowing(v.queue, flavor):
                    continue  # its queue has stopped borrowing: nothing left to reclaim there
                cycle.release(v)
                book.charge(v.queue, v.flavor, v.total(), -1)
                removed.append(v)
                if len(removed) > 1 and matters is not None and not matters[v.id]:
                    continue  # it did not fit before this release and still does not
                if self.fits(cycle, job, flavor, shape, capped):
                    break
            else:
                return None
            for v in reversed(removed[:-1]):  # put back whoever is not needed
                if v.state is JobState.PREEMPTING:
                    continue
                cycle.hold(v)
                book.charge(v.queue, v.flavor, v.total(), 1)
                if matters is not None and not matters[v.id]:
                    removed.remove(v)  # it fitted before this re-take and still does
                elif not self.fits(cycle, job, flavor, shape, capped):
                    cycle.release(v)
                    book.charge(v.queue, v.flavor, v.total(), -1)
                else:
                    removed.remove(v)
            mark2 = state.mark()
            placement, _ = place_gang(state, shape, job.replicas, cycle.policy.placement, capped)
            state.undo(mark2)
            victims = [v for v in removed if v.state is not JobState.PREEMPTING]
            free = [v for v in removed if v.state is JobState.PREEMPTING]
            return Plan(victims, free, flavor, placement)
        finally:
            for v in removed:
                book.charge(v.queue, v.flavor, v.total(), 1)
            state.undo(mark)

    @staticmethod
    def fits(cycle, job: Job, flavor: str, shape, capped: bool) -> bool:
        if cycle.policy.admission.check(cycle.book, job.queue, flavor, job.total()) is not None:
            return False
        mark = cycle.state.mark()
        placement, _ = place_gang(cycle.state, shape, job.replicas, cycle.policy.placement, capped)
        cycle.state.undo(mark)
        return placement is not None


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


def unbeatable(plan: Plan, cands: list[Job], priority_of) -> bool:
    """True if no other victim set can rank before ``plan``: it evicts nobody, or (with no
    candidate already preempting, whose space a set of zero victims could take) one job of
    the lowest (priority, most recent start) among the candidates. Among sets of equal rank
    the first trial's is kept, so stopping here picks what trying every order would pick."""
    if not plan.victims:
        return True
    if len(plan.victims) > 1 or any(c.state is JobState.PREEMPTING for c in cands):
        return False
    v = plan.victims[0]
    best = min((priority_of(c), -(c.started_at or 0.0)) for c in cands)
    return (priority_of(v), -(v.started_at or 0.0)) <= best


# ``monotone``: why one order suffices when every candidate is of the job's own queue (or
# already preempting) and the shape is not a fraction of a GPU. Then no order skips a
# candidate, so every trial releases candidates until the job fits. For whole GPUs (or none),
# each node holds a number of replicas that only grows as more is released there, and a gang
# placed replica by replica fits exactly when those numbers add up to the replicas; quota only
# grows as victims are uncharged. So if releasing every candidate does not make the job fit,
# no order does, and the first trial's None is every trial's.


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


def book_within_nominal(book, job: Job, flavor: str) -> bool:
    """True if the job's queue stays within nominal quota in ``flavor`` with the job admitted."""
    quota = book.queues[job.queue].quotas.get(flavor)
    if quota is None:
        return True
    demand = job.total()
    return all(book.usage[(job.queue, flavor, r)] + demand.get(r, 0) <= n
               for r, n in quota.nominal.items())
