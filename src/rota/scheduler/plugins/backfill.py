"""EASY backfill, as Slurm's sched/backfill does it.

The highest-ranked job that cannot start gets a *reservation*: the earliest time it could
start if running jobs end at their walltimes (``started_at + walltime``), giving back their
nodes and their quota, and the nodes and GPUs it would get then. A job held by quota (its
queue's, or the cohort's lent out to borrowers) is reserved for from when enough of it comes
back, like one held by room. Jobs ranked below it may still start now if they cannot delay
it:

- a job whose walltime ends before the reservation's start uses anything free now;
- any other job must also fit in what the reservation leaves on its nodes at that start (the
  reserved nodes are capped at "free at the shadow time minus the reservation"), and in the
  quota left with the reserved job's quota held (charged to its queue, even where borrowers
  still hold it: no such job borrows it again before the reservation starts);
- except a lender's: where the reserved job would borrow at its start (its queue above
  nominal with it), a job of another queue that its own queue's nominal quota covers is not
  held back by the reservation at all (neither its nodes nor its quota): a borrower's
  reservation never holds what a lender is entitled to (``Cycle.outranks_reservation``).

A running job without walltime is assumed to run forever; if the top job cannot fit even after
every job with a walltime has ended, it gets no reservation (its start time is unknown).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rota.core import Job
from rota.core.decisions import Reserve
from rota.scheduler.placement import place_gang
from rota.scheduler.plugins.registry import register
from rota.scheduler.victims import within_nominal


class EasyArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@register("backfill")
class EasyBackfill:
    name = "easy"
    Args = EasyArgs

    def __init__(self, args: EasyArgs) -> None:
        pass

    def reserve(self, cycle, job: Job) -> Reserve | None:
        """Compute ``job``'s reservation on the cycle's overlay, cap its nodes, hold its quota."""
        ending = sorted(
            ((j.expected_end, j.id, j) for j in cycle.holding() if j.expected_end is not None),
            key=lambda t: (t[0], t[1]))
        state, book = cycle.state, cycle.book
        mark, booked = state.mark(), book.mark()
        found = None
        released: list[Job] = []
        try:
            for k, (end, _, ended) in enumerate(ending):
                cycle.release(ended)
                if ended.queue in cycle.snapshot.queues:
                    book.charge(ended.queue, ended.flavor, ended.total(), -1)
                    released.append(ended)
                if k + 1 < len(ending) and ending[k + 1][0] == end:
                    continue  # release everything that ends at the same moment first
                found = self._fit(cycle, job)
                if found is not None:
                    flavor, placement = found
                    borrows = not within_nominal(book, job, flavor)  # at the shadow time
                    reservation = Reserve(job.id, max(end, cycle.now), placement)
                    mark2 = state.mark()
                    cycle.hold(job, placement)  # the shadow state, minus the reservation
                    cycle.cap_reserved_nodes(placement)
                    state.undo(mark2)
                    break
            else:
                return None
        finally:
            for ended in released:
                book.charge(ended.queue, ended.flavor, ended.total(), 1)
            book.restore(booked)  # charged back: the book is as it was
            state.undo(mark)
        cycle.reserved_quota = (job.queue, flavor, job.total())
        cycle.reserved_borrows = borrows
        return reservation

    @staticmethod
    def _fit(cycle, job: Job):
        for flavor, models in cycle.flavors(job):
            if not cycle.policy.admission.admits(cycle.book, job.queue, flavor, job.total()):
                continue
            shape = cycle.shape(job, models)
            if not _enough_whole(cycle.state, shape, job.replicas):
                continue
            mark = cycle.state.mark()
            placement, _ = place_gang(cycle.state, shape, job.replicas, cycle.placement)
            cycle.state.undo(mark)
            if placement is not None:
                return flavor, placement
        return None

    @staticmethod
    def ends_before(job: Job, reservation: Reserve, now: float) -> bool:
        return job.walltime_s is not None and now + job.walltime_s <= reservation.start_at


def _enough_whole(state, shape, replicas: int) -> bool:
    """False only if too few nodes of the shape's pools have enough wholly free GPUs for the
    gang's replicas of whole GPUs (a necessary condition of a placement, read from the pools'
    buckets; fractional and GPU-less shapes always pass)."""
    if shape.count < 1 or shape.fractional:
        return True
    fit = 0
    for key in shape.pools:
        pool = state.pools.get(key)
        if pool is None:
            continue
        for free in range(shape.count, len(pool.whole)):
            fit += len(pool.whole[free]) * (free // shape.count)
            if fit >= replicas:
                return True
    return False
