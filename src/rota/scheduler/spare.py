"""The cycle's own fill-back: victims that the cycle's other evictions made unnecessary.

Each preemption plan is minimal when it is made (``rota.scheduler.victims``: no victim can be
spared with the others gone), but a cycle may make several, and a later plan's victims may
free the quota or the room an earlier one evicted for (two queues reclaiming from the same
borrower, one of them evicting its own job first). Kueue's scheduler lives with that; rota
does what Kueue does for one plan, for the whole cycle: once every job has had its turn, it
tries to give back each victim, the latest first, and keeps it running if every preemptor of
the cycle still fits, admitted again in the order they preempted (quota, within nominal where
its plan did not let its queue borrow, and the whole gang placed) with every other victim
gone. A spared victim's ``Preempt`` decision is dropped; a preemptor left with no victim of
its own waits for the others' to exit.

Every what-if is undone: the overlay through its journal, quota by charging back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rota.core import Job
from rota.core.decisions import Decisions, Reason, ReasonCode, Wait
from rota.scheduler.placement import place_gang
from rota.scheduler.victims import Plan, within_nominal


@dataclass(slots=True)
class Eviction:
    """One preemption of the cycle: the preemptor, its plan, and what its queue was charged."""

    job: Job
    plan: Plan
    extra: dict[str, int]


def spare_victims(cycle, out: Decisions, evictions: list[Eviction]) -> None:
    """Drop the ``Preempt`` decisions of victims the cycle's preemptors do without."""
    victims = [v for e in evictions for v in e.plan.victims]
    if len(evictions) < 2 or not victims:
        return
    kept: set[str] = set()
    for v in reversed(victims):
        if _all_fit(cycle, evictions, kept | {v.id}):
            kept.add(v.id)
    if not kept:
        return
    out.preemptions[:] = [p for p in out.preemptions if p.job not in kept]
    for e in evictions:
        e.plan.victims = [v for v in e.plan.victims if v.id not in kept]
    details = {e.job.id: detail(e.plan, victims, kept) for e in evictions}
    out.waits[:] = [Wait(w.job, (Reason(ReasonCode.PREEMPTING, detail=details[w.job]),),
                         w.estimated_start) if w.job in details else w for w in out.waits]


def detail(plan: Plan, victims: list[Job], kept: set[str]) -> str:
    """The ``preempting`` reason's detail of a plan's preemptor."""
    names = [v.id for v in plan.victims]
    if names:
        return f"preempting {', '.join(names)}"
    gone = [v.id for v in (*plan.free, *victims) if v.id not in kept]
    return f"waiting for preempted jobs to exit: {', '.join(dict.fromkeys(gone))}"


def _all_fit(cycle, evictions: list[Eviction], kept: set[str]) -> bool:
    """Whether every preemptor fits, in order, with the victims in ``kept`` still running and
    every other victim (and every job already leaving that a plan counted on) gone."""
    state, book = cycle.state, cycle.book
    mark = state.mark()
    charges: list[tuple[str, str, dict, int]] = []

    def charge(queue: str, flavor: str, amounts, sign: int) -> None:
        book.charge(queue, flavor, amounts, sign)
        charges.append((queue, flavor, amounts, sign))
    try:
        for e in evictions:
            cycle.release(replace(e.job, placement=e.plan.placement))
            charge(e.job.queue, e.plan.flavor, e.extra, -1)
            for v in (*e.plan.victims, *e.plan.free):
                if v.id not in kept:
                    cycle.release(v)
                    charge(v.queue, v.flavor, v.total(), -1)
        for e in evictions:
            job, flavor = e.job, e.plan.flavor
            if cycle.policy.admission.check(book, job.queue, flavor, job.total()) is not None:
                return False
            if not e.plan.borrow and not within_nominal(book, job, flavor):
                return False
            models = dict(cycle.flavors(job))[flavor]
            placement, _ = place_gang(state, cycle.shape(job, models), job.replicas,
                                      cycle.placement, False)
            if placement is None:
                return False
            charge(job.queue, flavor, job.total(), 1)
        return True
    finally:
        for queue, flavor, amounts, sign in reversed(charges):
            book.charge(queue, flavor, amounts, -sign)
        state.undo(mark)
