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
        """Jobs ``job`` may evict in ``flavor``, in candidate order."""
        queues, book = cycle.snapshot.queues, cycle.book
        own = queues[job.queue]
        fits_nominal = book_within_nominal(book, job, flavor)
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
            orders = [cands]
            by_node: dict[str, list[Job]] = {}
            for v in cands:
                for node in v.placement.nodes:
                    by_node.setdefault(node, []).append(v)
            busiest = sorted(by_node, key=lambda n: (-len(by_node[n]), n))[: self.node_trials]
            for node in busiest:
                first = by_node[node]
                ids = {v.id for v in first}
                orders.append(first + [v for v in cands if v.id not in ids])
            matters = relevance(cycle, job, flavor, shape, cands)
            plans = [p for p in (self.trial(cycle, job, flavor, shape, o, capped, matters)
                                 for o in orders) if p]
            if plans:
                return min(plans, key=lambda p: p.rank(cycle.priority_of))
        return None

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
