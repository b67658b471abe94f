"""``run_cycle(snapshot, policy, now) -> Decisions``: one pure, deterministic scheduling pass.

The steps:

1. Build the overlay: every node's capacity minus what active jobs hold; quota usage per queue.
   With ``base=``, a ``Base`` the caller keeps between cycles supplies it (and the active
   jobs; the snapshot then lists only the pending jobs to consider), and is given back as it
   was when the cycle ends (see ``rota.scheduler.base``).
2. Screen pending jobs: reject the ones that can never run here (unknown queue, no GPU model
   matching their patterns, no flavour of their queue covering them, larger than any node).
3. Walk the pending jobs in the ordering plugin's sequence, jobs within their queue's nominal
   quota before jobs that must borrow, and potential preemptors before their victims
   (``rota.scheduler.turns``). For each:
   a. strict ordering: a queue whose earlier job is blocked stays blocked; a job held by a
      higher-priority job of its queue that waits for room (``Walk.hold``) waits too;
   b. admit (quota) and place (gang, devices); if a backfill reservation exists and the job
      would still run at its start, it must fit around it (unless the reserved job borrows
      and the job's queue's nominal quota covers it: a lender is not held back by a
      borrower's reservation);
   c. otherwise try preemption (within the preemptor budget), unless the job would still run
      at a backfill reservation's start: such a job waits its turn after the reserved one, and
      what it could evict for (room around the reservation) would not stay its own;
   d. otherwise, if backfill is on and nothing is reserved yet, reserve for this job (room and
      quota, from when running jobs end at their walltimes);
   e. otherwise it waits, with the reasons collected on the way; if its queue's nominal quota
      covers it and only the cohort's lending stands in its way, that quota is held for it for
      the rest of the cycle (no later job borrows what is owed to it).
4. Give back the victims the cycle's other evictions made unnecessary (``spare``: every
   preemptor still fits, in turn, with that victim running), then return the decisions.
   Nothing is applied: the caller does that (and, with a base, tells it the deltas:
   ``Base.hold`` for bound jobs, ``Base.release`` for jobs that gave back).

What a placement learns across cycles is an input, never plugin state: with ``mix=``, the
arrival mix the caller keeps (``capgd`` plans for it; ``Arrivals`` observes each snapshot's new
pending jobs into it before the cycle). The cycle places through a copy of the placement plugin
of its own (``context.placement_for``) and changes neither the policy nor the mix, so the same
snapshot, policy, time and mix always give the same decisions.
"""

from __future__ import annotations

from dataclasses import replace

from rota.core import Job, JobState
from rota.scheduler.base import Base
from rota.scheduler.context import Cycle
from rota.core.decisions import (
    Bind, Decisions, Preempt, Reason, ReasonCode, Reject, Wait,
)
from rota.scheduler.plugins.capacity import ArrivalMix
from rota.scheduler.policy import Policy
from rota.core.snapshot import Snapshot
from rota.scheduler.reasons import protected_reason, young_reason
from rota.scheduler.spare import Eviction, spare_victims
from rota.scheduler.turns import Turns


def run_cycle(snapshot: Snapshot, policy: Policy, now: float, base: Base | None = None,
              mix: ArrivalMix | None = None) -> Decisions:
    if base is None:
        cycle = Cycle(snapshot, policy, now, mix=mix)                       # 1: a throwaway base
        return _run(cycle, snapshot, policy, now)
    base.fits(snapshot)
    cycle = Cycle(snapshot, policy, now, base, mix)                         # 1
    try:
        return _run(cycle, snapshot, policy, now)
    finally:
        cycle.close()


def _run(cycle: Cycle, snapshot: Snapshot, policy: Policy, now: float) -> Decisions:
    out = Decisions()
    pending: list[Job] = []
    for job in snapshot.pending:                                            # 2
        refusal = cycle.base.screen(cycle, job)
        if refusal is None:
            pending.append(job)
        else:
            out.rejects.append(Reject(job.id, (refusal,)))
    walk = Walk(cycle, out)
    for job in walk.turns(pending):                                         # 3
        walk.step(job)
    if policy.preemption is not None and policy.preemption.spares:
        spare_victims(cycle, out, walk.evictions)
    return out                                                              # 4


class Walk:
    """Step 3 over the pending jobs, with what the steps share: the preemptor budget, the
    preemption searches that failed, the queues a strict order blocks, and the *holds*: a
    job that waits for room holds it against the lower-priority jobs of its queue that could
    use its nodes (``hold``)."""

    def __init__(self, cycle: Cycle, out: Decisions) -> None:
        self.cycle, self.policy, self.out = cycle, cycle.policy, out
        self.blocked: dict[str, tuple[Reason, ...]] = {}  # queue -> why its later jobs wait
        self.holds: dict[str, list[tuple[float, frozenset, Reason]]] = {}
        self.shared = SharedReasons()
        self.evictions: list[Eviction] = []  # the cycle's preemptions, in order
        # jobs alike whose step changed nothing: class -> (the cycle's state then, reasons)
        # (and whether it held back lower priorities: ``hold``)
        self.dead: dict[tuple, tuple[tuple, tuple[Reason, ...], bool]] = {}

    def turns(self, pending: list[Job]):
        self._turns = Turns(self.cycle, pending)
        return self._turns

    def step(self, job: Job) -> None:
        """Step 3 for one job, with the quota kept for its queue against the other queues
        (``Cycle.keep``) lifted while it is tried."""
        with self.cycle.lifted(job.queue, job.id):
            self._step(job)

    def _step(self, job: Job) -> None:
        cycle, policy, out = self.cycle, self.policy, self.out
        held = self.blocked.get(job.queue) or self._held(job)               # a
        if held is not None:
            out.waits.append(Wait(job.id, held))
            return
        capped = cycle.capped(job)
        kind, moment = self._kind(job, capped), self._moment()
        dead = self.dead.get(kind)
        if dead is not None and dead[0] == moment:  # a job alike waited, and nothing changed
            out.waits.append(Wait(job.id, dead[1]))
            if dead[2]:
                self.hold(job, dead[1], None)
            return
        result = cycle.try_start(job, capped)                               # b
        if isinstance(result, Bind):
            self._turns.moves(job)
            if cycle.reservation is not None:
                result = Bind(result.job, result.placement, result.flavor, result.borrowing, True)
            out.binds.append(result)
            return
        if not capped and not _for_data(result) and self._preempt(job):    # c
            return
        estimate = None
        if policy.backfill is not None and cycle.reservation is None:
            reservation = policy.backfill.reserve(cycle, job)               # d
            if reservation is not None:
                cycle.reservation = reservation
                out.reservations.append(reservation)
                estimate = reservation.start_at
        reasons = result.reasons
        if estimate is None and not result.quota_ok:
            cycle.hold_owed(job)
            if policy.preemption is not None and not capped:
                reasons = young_reason(cycle, job, reasons)
        elif estimate is None and policy.preemption is not None and not capped:
            reasons = protected_reason(cycle, job, reasons)
        shared = self.shared.of(reasons)
        out.waits.append(Wait(job.id, shared, estimate))                    # e
        if policy.order.blocking and estimate is None:
            self.blocked[job.queue] = (Reason(ReasonCode.BLOCKED, detail=(
                f"{job.id} is ahead of it in queue {job.queue}")),)
        holds = self.hold(job, reasons, estimate)
        if estimate is None and self._moment() == moment:
            self.dead[kind] = (moment, shared, holds)

    def _kind(self, job: Job, capped: bool) -> tuple:
        """What a step depends on of the job itself: jobs of one kind (``Cycle.kind_of``),
        tried when the cycle's state is the same (``_moment``), wait for the same reasons; a
        step also reads whether the reservation caps the job, and whether it may preempt
        (behind a borrowing head)."""
        return (self.cycle.kind_of(job), capped, self._turns.may_preempt(job))

    def _moment(self) -> tuple:
        """The cycle's state a step reads beyond the job: the overlay, the quota book, the
        jobs leaving and evicting, the reservation and the quota to hold for partly covered
        jobs (``hold_owed``)."""
        cycle = self.cycle
        return (cycle.state.version, cycle.book.version, len(cycle.gone), cycle.preemptors,
                id(cycle.reservation), len(cycle.partial))

    def _preempt(self, job: Job) -> bool:
        """Step c: find victims for ``job`` and evict them; True if it did."""
        cycle = self.cycle
        if not self._turns.may_preempt(job):
            return False
        plan = cycle.victims_for(job, False)
        if plan is None:
            return False
        cycle.preemptors += 1
        self._turns.moves(job)
        preempts, extra = _evict(cycle, job, plan)
        self.evictions.append(Eviction(job, plan, extra))
        self.out.preemptions.extend(preempts)
        self.out.waits.append(Wait(job.id, (Reason(ReasonCode.PREEMPTING, detail=(
            _preempting_detail(plan))),)))
        return True

    def hold(self, job: Job, reasons, estimate: float | None) -> bool:
        """A job that waits for room (not for quota) holds it against the lower-priority jobs
        of its queue that could use its nodes: in a ``strict_priority`` queue while no
        reservation says when it starts; under a preempting policy while it waits only for a
        reservation ahead of it (those jobs would take room it evicts them from once the
        reservation no longer caps it)."""
        queue = self.cycle.snapshot.queues[job.queue]
        codes = {r.code for r in reasons}
        room = bool(codes & {ReasonCode.RESOURCES, ReasonCode.GANG, ReasonCode.NOT_PREEMPTIBLE,
                             ReasonCode.MIN_RUNTIME,
                             ReasonCode.RESERVED})
        strict = queue.strict_priority and estimate is None and room
        capped = self.policy.preemption is not None and ReasonCode.RESERVED in codes
        if not (strict or capped):
            return False
        why = "strict priority" if strict else "it waits for the reservation ahead of it"
        reason = Reason(ReasonCode.BLOCKED, detail=(
            f"{job.id} (priority {self.cycle.priority_of(job):g}) waits for room ahead of it "
            f"in queue {job.queue}: {why}"))
        self.holds.setdefault(job.queue, []).append(
            (self.cycle.priority_of(job), self.cycle.nodes_of(job), reason, strict))
        return True

    def _held(self, job: Job) -> tuple[Reason, ...] | None:
        holds = self.holds.get(job.queue)
        if not holds:
            return None
        mine, nodes = self.cycle.priority_of(job), None
        for priority, theirs, reason, strict in holds:
            if priority <= mine or not (strict or job.preemptible):
                continue
            nodes = self.cycle.nodes_of(job) if nodes is None else nodes
            if nodes & theirs:
                return (reason,)
        return None


def _evict(cycle: Cycle, job: Job, plan) -> tuple[list[Preempt], dict[str, int]]:
    """Commit a victim plan in the overlay. Victims keep their space and quota until they have
    exited (a grace period may run for a while), and the preemptor's placement is held on top
    of them: nothing else in this cycle may be placed there. Its queue is charged only what the
    preemptor needs beyond what victims of the same queue and flavour give back, so the queue's
    usage stays at its peak over the handover, ``max(now, after the victims left)``. Victims of
    other queues stay charged to theirs as well, which over-counts the cohort for the jobs
    that start now (safe: both states hold); later victim searches of this cycle look past
    them (``Cycle.handover``), since their preemptors start only once they have left."""
    chosen = {v.id for v in plan.victims} | {v.id for v in plan.free}
    cycle.evictable = [v for v in cycle.evictable if v.id not in chosen]
    cycle.gone |= chosen
    cycle.hold(job, plan.placement)
    returned: dict[str, int] = {}
    for v in (*plan.victims, *plan.free):
        if v.queue == job.queue and v.flavor == plan.flavor:
            for r, amount in v.total().items():
                returned[r] = returned.get(r, 0) + amount
        elif v.queue != job.queue and v.queue in cycle.snapshot.queues:
            cycle.handover.append(v)
    extra = {r: max(0, amount - returned.get(r, 0)) for r, amount in job.total().items()}
    cycle.book.charge(job.queue, plan.flavor, extra, 1)
    cycle.bound.append(replace(job, state=JobState.SCHEDULED, placement=plan.placement,
                               flavor=plan.flavor, started_at=cycle.now))
    return [Preempt(v.id, job.id, v.grace_s, "priority" if v.queue == job.queue else "reclaim")
            for v in plan.victims], extra


def _for_data(attempt) -> bool:
    """Whether the job waits for a node that caches its data (``rota.scheduler.data``): a
    bounded wait, for which nothing is preempted."""
    return any(r.code is ReasonCode.DATA_LOCALITY for r in attempt.reasons)


def _preempting_detail(plan) -> str:
    names = [v.id for v in plan.victims] or [v.id for v in plan.free]
    verb = "preempting" if plan.victims else "waiting for preempted jobs to exit:"
    return f"{verb} {', '.join(names)}"


class SharedReasons:
    """The distinct reasons of an attempt, in order, as one shared tuple per distinct value:
    a cycle over 50,000 jobs keeps a few hundred reasons, not 50,000 copies of them.

    Most attempts repeat the very reason objects of an earlier one (quota answers and failed
    placements are remembered), so they are looked up by identity first; the objects are kept
    alive here, so that an id cannot be reused for another object during the cycle."""

    def __init__(self) -> None:
        self.by_value: dict = {}  # reason -> itself; tuple of reasons -> itself
        self.by_ids: dict[tuple[int, ...], tuple[tuple, tuple[Reason, ...]]] = {}

    def of(self, raw: list[Reason]) -> tuple[Reason, ...]:
        key = tuple(map(id, raw))
        hit = self.by_ids.get(key)
        if hit is not None:
            return hit[1]
        distinct: list[Reason] = []
        for r in raw:
            r = self.by_value.setdefault(r, r)  # equal reasons are now the same object
            if all(r is not kept for kept in distinct):
                distinct.append(r)
        out = self.by_value.setdefault(tuple(distinct), tuple(distinct))
        self.by_ids[key] = (tuple(raw), out)
        return out
