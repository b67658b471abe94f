"""The working context of one cycle: overlay, quota book, and the moves every step shares.

``Cycle`` turns jobs into placement shapes, starts a job (admission, then placement), and
releases or re-takes what an active job holds (for preemption and backfill what-ifs); the
quota it holds for jobs that wait comes from ``rota.scheduler.holds``. It does not decide the
order of work: that is ``cycle.run_cycle``.

A cycle runs on a ``Base`` (the overlay, quota book and allocations of the active jobs): a
throwaway one built from the snapshot, or one the caller keeps between cycles. Every change
the cycle makes to it goes to a journal or an undo log, and ``close`` takes it back.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from functools import cached_property

from rota.core import Job, JobState, Placement
from rota.scheduler import data
from rota.scheduler.base import Base, position
from rota.scheduler.holds import QuotaHolds
from rota.scheduler.kinds import JobKinds
from rota.core.decisions import Bind, Reason, ReasonCode, Reserve
from rota.scheduler.placement import Shape, find_replica, holds, place_gang
from rota.scheduler.reasons import resource_reason
from rota.core.nodes import features_needed
from rota.core.snapshot import Snapshot
from rota.scheduler.state import ALL_MODELS, Cap, Slot
from rota.scheduler.victims import Plan, within_nominal


@dataclass(slots=True)
class Attempt:
    """A failed start: the reasons, and whether resources (not quota) were what was missing."""

    reasons: list[Reason]
    quota_ok: bool


def placement_for(plugin, snapshot: Snapshot, mix):
    """What a cycle places with: the plugin's ``for_cycle(snapshot, mix)`` where it has one (a
    copy with state of its own, planning for ``mix``), else the plugin itself."""
    for_cycle = getattr(plugin, "for_cycle", None)
    return plugin if for_cycle is None else for_cycle(snapshot, mix)


class Cycle(QuotaHolds, JobKinds):
    """One cycle on top of a ``Base``: the base's overlay (through a view of its own), quota
    book and allocations, plus what this cycle changes, recorded so that ``close`` gives the
    base back exactly as it was (see ``rota.scheduler.base``)."""

    def __init__(self, snapshot: Snapshot, policy, now: float, base: Base | None = None,
                 mix=None) -> None:
        self.snapshot, self.policy, self.now = snapshot, policy, now
        seen = snapshot  # the whole snapshot: with a kept base, its active jobs are the base's
        if base is None:
            base = Base.of(snapshot)
        else:
            seen = replace(snapshot, jobs=(*base.active.values(), *snapshot.jobs))
        # the placement plugin's copy for this cycle (see ``placement_for``): every placement
        # of the cycle goes through it, so nothing of this cycle reaches the next
        self.placement = data.aware(placement_for(policy.placement, seen, mix), policy, now)
        self.rng = random.Random(policy.seed)
        if base.busy:
            raise RuntimeError("a cycle already runs on this base")
        base.busy = True
        self.base = base
        self.state = base.view()
        self.book = base.book
        self.book.begin()
        self.active = list(base.active.values())
        self.models, self.groups = base.models, base.groups
        self._alloc = base.alloc
        self.allocations = 0  # changes to what projects hold in this cycle (``allocated``)
        self._counted: list[Job] = []  # jobs counted in allocations by this cycle
        self._capped: list[Slot] = []  # nodes this cycle capped
        self._capacity = base.capacity
        self._flavors, self._shapes = base.flavor_answers, base.shapes
        self._pool_members = base.pool_members
        self.sizes = base.sizes
        self.switching = base.switching
        self._failed: dict[tuple, tuple[int, Attempt]] = {}
        self._nodes_of: dict[tuple, frozenset[int]] = {}
        self._tried: dict[tuple, tuple[int, int, Attempt]] = {}
        self._past: dict[tuple[str, float], float] = {}
        self.start_kinds(policy)  # priorities, kinds of jobs (``rota.scheduler.kinds``)
        # jobs that took resources in this cycle (bound, or nominated after preemption), as
        # SCHEDULED copies; active jobs chosen as victims in this cycle; jobs that may be evicted
        self.bound: list[Job] = []
        self.gone: set[str] = set()
        self.evictable = [j for j in self.active if j.queue in snapshot.queues]
        # victims (and jobs already preempting) of other queues than their preemptor's, chosen
        # in this cycle: still charged to their queues, but gone for later victim searches
        self.handover: list[Job] = []
        self.start_holds()  # quota held for waiting jobs (``rota.scheduler.holds``)
        self.reservation: Reserve | None = None
        self.reserved_quota: tuple | None = None  # (queue, flavour, demand) of the reserved job
        self.reserved_borrows = False  # the reserved job's queue is above nominal at its start
        self._outranks: dict[tuple, tuple[int, bool]] = {}  # answers at a book version
        self.preemptors = 0  # jobs that evicted for themselves in this cycle
        self.hopeless: set[tuple] = set()  # preemption searches that found no victim set
        self._plans: dict[str, tuple[tuple, Plan]] = {}  # job -> (versions, its plan)
        self._could: dict[tuple, tuple[tuple[int, int], bool]] = {}  # see ``could_start``

    def close(self) -> None:
        """Undo everything this cycle changed on its base: overlay (journal), caps, quota
        charges (the book's log), allocations."""
        self.state.undo(0)
        for slot in self._capped:
            slot.cap = None
        for job in reversed(self._counted):
            self._count(job, -1)
        self.book.rollback()
        self.base.busy = False

    # -- the view ordering plugins read -------------------------------------------------------

    def allocated(self, project: str) -> dict[str, int]:
        return self._alloc[project]

    def capacity(self) -> dict[str, int]:
        return self._capacity

    def weight(self, project: str) -> float:
        return self.snapshot.project(project).weight

    def past_gpu_seconds(self, project: str, half_life_s: float) -> float:
        key = (project, half_life_s)
        hit = self._past.get(key)
        if hit is None:
            usage = self.snapshot.usage.get(project)
            hit = self._past[key] = 0.0 if usage is None else usage.gpu_seconds * math.pow(
                0.5, max(0.0, self.now - usage.as_of) / half_life_s)
        return hit

    def holding(self) -> list[Job]:
        """Every job that holds resources in the overlay now."""
        return [j for j in self.active if j.id not in self.gone] + self.bound

    def protected(self) -> list[Job]:
        """The jobs holding resources now that may not be preempted: not preemptible, or
        within their queue's minimum runtime (remembered while the holding jobs stay the
        same)."""
        key = (len(self.bound), len(self.gone))
        hit = self.__dict__.get("_protected")
        if hit is None or hit[0] != key:
            hit = self._protected = (key, [j for j in self.holding() if self.young(j)
                                           or not j.preemptible])
        return hit[1]

    @cached_property
    def any_min_runtime(self) -> bool:
        """Whether some queue has a minimum runtime: without one no job is ever too young."""
        return any(q.min_runtime_s > 0 for q in self.snapshot.queues.values())

    def young(self, job: Job) -> bool:
        """Whether a running ``job`` has run less than its queue's minimum runtime."""
        queue = self.snapshot.queues.get(job.queue)
        return (job.state is not JobState.PREEMPTING and queue is not None
                and queue.protects(job, self.now))

    def _count(self, job: Job, sign: int) -> None:
        self.allocations += 1
        alloc = self._alloc[job.project]
        for r, v in job.total().items():
            alloc[r] += sign * v

    # -- shapes -------------------------------------------------------------------------------

    def flavors(self, job: Job) -> list[tuple[str, tuple[str, ...]]]:
        g = job.request.gpu
        key = (job.queue, g.models, g.count > 0)
        hit = self._flavors.get(key)
        if hit is None:
            queue = self.snapshot.queues[job.queue]
            hit = self._flavors[key] = self.book.flavors_for(queue, g.models, g.count > 0, self.models)
        return hit

    def shape(self, job: Job, models: tuple[str, ...]) -> Shape:
        """One replica of ``job`` on ``models``; jobs alike in request, queue, resource group,
        selector and whether they run in a container image share one (equal shapes also share
        the failed-placement cache)."""
        req, g = job.request, job.request.gpu
        key = (req.cpu_milli, req.memory_mib, g.count, g.share, g.memory_mib, job.queue,
               job.resource_group, job.selector, job.image is None, models, g.profile,
               self.until(job))
        hit = self._shapes.get(key)
        if hit is None:
            hit = self._shapes[key] = self._new_shape(job, models)
        return data.with_data(hit, job, self.snapshot, self.policy) if job.datasets else hit

    def _new_shape(self, job: Job, models: tuple[str, ...]) -> Shape:
        req, g = job.request, job.request.gpu
        queue = self.snapshot.queues[job.queue]
        groups = ((job.resource_group,) if job.resource_group
                  else queue.resource_groups or tuple(self.groups))
        if g.count == 0 or len(models) == len(self.models):
            models, pools = (), tuple((rg, ALL_MODELS) for rg in groups)
        else:
            pools = tuple((rg, m) for rg in groups for m in models)
        return Shape(req.cpu_milli, req.memory_mib, g.count, g.share, g.memory_mib, models,
                     job.selector, pools, features_needed(job), g.profile, self.until(job))

    def until(self, job: Job) -> float | None:
        """Until when ``job`` would run if it started now, where it must keep off the devices
        a planned MIG switch takes away (``Shape.until``): a job that may not be preempted,
        while a switch is planned somewhere; None for any other."""
        if not self.switching or job.preemptible:
            return None
        return math.inf if job.walltime_s is None else self.now + job.walltime_s

    # -- starting a job -----------------------------------------------------------------------

    def try_start(self, job: Job, capped: bool) -> Bind | Attempt:
        """Admit and place ``job`` now, in the first of its queue's flavours that allows it.

        A failed start is remembered for jobs alike (queue, request, gang, resource group,
        selector, container image or not): it fails again, for the same reasons, while neither
        free capacity has grown (the overlay's epoch) nor the quota book has changed (its
        version)."""
        key = (self.alike(job), capped, self.until(job))
        hit = self._tried.get(key)
        if hit is not None and hit[0] == self.state.epoch and hit[1] == self.book.version:
            return hit[2]
        result = self._try_start(job, capped)
        if isinstance(result, Attempt):
            self._tried[key] = (self.state.epoch, self.book.version, result)
        return result

    def _try_start(self, job: Job, capped: bool) -> Bind | Attempt:
        reasons: list[Reason] = []
        quota_ok = False
        demand = job.total()
        for flavor, models in self.flavors(job):
            refusal = self.admit(job, flavor, demand, capped)
            if refusal is not None:
                reasons.append(refusal)
                continue
            quota_ok = True
            placement, attempt = self.place(job, self.shape(job, models), capped)
            if placement is not None:
                return self.bind(job, flavor, placement)
            reasons.extend(attempt.reasons)
        return Attempt(reasons, quota_ok)

    def nodes_of(self, job: Job) -> frozenset[int]:
        """The nodes (slot indexes) that could hold a replica of ``job`` when empty, over its
        flavours."""
        key = (job.queue, job.request, job.resource_group, job.selector, job.image is None)
        hit = self._nodes_of.get(key)
        if hit is None:
            ids: set[int] = set()
            for _, models in self.flavors(job):
                shape = self.shape(job, models)
                pools = [self.state.pools[k] for k in shape.pools if k in self.state.pools]
                ids.update(s.i for s in self.members(shape.pools, pools)[0] if holds(s, shape))
            hit = self._nodes_of[key] = frozenset(ids)
        return hit

    def admit(self, job: Job, flavor: str, demand, capped: bool) -> Reason | None:
        """Admission of ``job`` in ``flavor``; a job the reservation caps (it would still run
        when the reserved job starts) is checked with the reserved job's quota held, as its
        nodes are capped: jobs that end before may use that quota meanwhile."""
        check, book, hold = self.policy.admission.check, self.book, self.reserved_quota
        if not capped or hold is None:
            return check(book, job.queue, flavor, demand)
        mark = book.mark()
        book.charge(*hold, 1)
        try:
            return check(book, job.queue, flavor, demand)
        finally:
            book.charge(*hold, -1)
            book.restore(mark)  # the book is as it was: answers remembered still hold

    def capped(self, job: Job) -> bool:
        """Whether the cycle's reservation caps ``job``: it would still run when the reserved
        job is to start, and it does not outrank the reservation. A capped job starts only
        where the reservation leaves room and quota, and never evicts (``Walk._step``)."""
        return self.reservation is not None and not self.policy.backfill.ends_before(
            job, self.reservation, self.now) and not self.outranks_reservation(job)

    def outranks_reservation(self, job: Job) -> bool:
        """Whether ``job`` is not held back by the reservation: the reserved job borrows at
        its start, and ``job`` is of another queue whose nominal quota covers it (in some
        flavour, with what its queue uses now): a lender's entitlement comes before a
        borrower's reservation."""
        if self.reserved_quota is None or not self.reserved_borrows \
                or self.reserved_quota[0] == job.queue:
            return False
        key = self.kind_of(job)
        hit = self._outranks.get(key)
        if hit is None or hit[0] != self.book.version:
            hit = self._outranks[key] = (self.book.version, any(
                within_nominal(self.book, job, flavor) for flavor, _ in self.flavors(job)))
        return hit[1]

    def could_start(self, job: Job) -> bool:
        """Whether ``job`` would pass admission and placement now, in some flavour (a what-if:
        nothing is taken or charged). Jobs alike in queue, request, gang size, resource group,
        selector and container image or not get one answer while neither the overlay nor the
        book changes."""
        key = self.alike(job)
        versions = (self.state.version, self.book.version)
        hit = self._could.get(key)
        if hit is not None and hit[0] == versions:
            return hit[1]
        answer = False
        for flavor, models in self.flavors(job):
            if self.policy.admission.admits(self.book, job.queue, flavor, job.total()):
                if self.fits(job, self.shape(job, models)):
                    answer = True
                    break
        self._could[key] = (versions, answer)
        return answer

    def victims_for(self, job: Job, capped: bool) -> Plan | None:
        """The preemption plugin's victim plan for ``job`` now, or None: none while the cycle's
        preemptor budget is spent, or where a search with the same key failed before in this
        cycle (``search_key``). A what-if: nothing is evicted; a plan found is the answer again
        while neither the overlay nor the quota book has changed."""
        plugin = self.policy.preemption
        if plugin is None or self.preemptors >= plugin.max_preemptors:
            return None
        key = search_key(self, job, capped)
        if key in self.hopeless:
            return None
        versions = (self.state.version, self.book.version, capped, len(self.gone))
        hit = self._plans.get(job.id)
        if hit is not None and hit[0] == versions:
            return hit[1]
        plan = self.find_victims(job, capped)
        if plan is None:
            self.hopeless.add(key)
        else:
            self._plans[job.id] = (versions, plan)
        return plan

    def find_victims(self, job: Job, capped: bool = False) -> Plan | None:
        """The preemption plugin's search for ``job``, every time (a what-if: the overlay and
        the quota book are as they were after it, and so are their versions)."""
        mark = self.book.mark()
        try:
            return self.policy.preemption.find(self, job, capped)
        finally:
            self.book.restore(mark)  # what the search charged, it charged back

    def fits(self, job: Job, shape: Shape) -> bool:
        """Whether ``place`` would find room for ``job`` now (a what-if: nothing is taken;
        one replica needs no trial placement, a gang is placed and undone)."""
        if job.replicas > 1:
            mark = self.state.mark()
            placement, _ = self.place(job, shape, False)
            self.state.undo(mark)
            return placement is not None
        hit = self._failed.get((shape, 1, False))
        if hit is not None and hit[0] == self.state.epoch:
            return False
        return find_replica(self.state, shape, self.placement, False) is not None

    def place(self, job: Job, shape: Shape, capped: bool) -> tuple[Placement | None, Attempt]:
        key = (shape, job.replicas, capped)
        hit = self._failed.get(key)
        if hit is not None and hit[0] == self.state.epoch:
            return None, hit[1]
        placement, fitted = place_gang(self.state, shape, job.replicas, self.placement, capped)
        if placement is not None:
            return placement, Attempt([], True)
        attempt = Attempt([self.placement_reason(job, shape, fitted, capped)], True)
        self._failed[key] = (self.state.epoch, attempt)
        return None, attempt

    def bind(self, job: Job, flavor: str, placement: Placement) -> Bind:
        bound = getattr(self.placement, "bound", None)
        if bound is not None:
            bound(placement)  # a plugin that follows its own binds (round-robin)
        self.book.charge(job.queue, flavor, job.total(), 1)
        self._count(job, 1)
        self._counted.append(job)
        self.bound.append(replace(job, state=JobState.SCHEDULED, placement=placement,
                                  flavor=flavor, started_at=self.now))
        return Bind(job.id, placement, flavor, self.book.borrowing(job.queue, flavor))

    def placement_reason(self, job: Job, shape: Shape, fitted: int, capped: bool) -> Reason:
        if shape in getattr(self.placement, "data_waits", ()):  # ``rota.scheduler.data``
            return self.placement.data_waits[shape]
        if capped and self.reservation is not None:
            mark = self.state.mark()
            free_fit, _ = place_gang(self.state, shape, job.replicas, self.placement, False)
            self.state.undo(mark)
            if free_fit is not None:
                return Reason(ReasonCode.RESERVED, detail=f"would delay {self.reservation.job}, "
                              f"reserved to start at {self.reservation.start_at:g}")
        if shape.until is not None:
            mark = self.state.mark()
            free_fit, _ = place_gang(self.state, replace(shape, until=None), job.replicas,
                                     self.placement, False)
            self.state.undo(mark)
            if free_fit is not None:
                return self.switch_reason(free_fit, shape.until)
        if fitted:
            return Reason(ReasonCode.GANG, "replicas", job.replicas, fitted, job.replicas)
        return self.resource_reason(shape)

    def switch_reason(self, placement: Placement, until: float) -> Reason:
        """Why a job that fits only on devices a planned MIG switch takes away waits: the
        switch's time (``capacity``), when the job would end (``requested``; None: it has no
        walltime), and the nodes (``detail``)."""
        ends = [d.switch_at for rep in placement.replicas
                for d in self.state.by_name[rep.node].node.devices
                if d.switch_at is not None and any(s.index == d.index for s in rep.devices)]
        return Reason(ReasonCode.MIG_SWITCH, requested=None if math.isinf(until) else until,
                      capacity=min(ends, default=None), detail=", ".join(placement.nodes))

    def resource_reason(self, shape: Shape) -> Reason:
        return resource_reason(self, shape)

    def members(self, keys: tuple, pools: list) -> tuple[list, int]:
        """The nodes of some pools and the most GPUs one of them has (membership does not
        change during a cycle)."""
        hit = self._pool_members.get(keys)
        if hit is None:
            ids = {i for p in pools for bucket in p.whole for i in bucket}
            slots = [self.state.slots[i] for i in sorted(ids)]
            hit = self._pool_members[keys] = (slots, max((len(s.milli) for s in slots), default=0))
        return hit

    # -- holding and releasing what active jobs have ------------------------------------------

    def hold(self, job: Job, placement: Placement | None = None) -> None:
        """Take what ``placement`` (by default the job's own) names, on top of the overlay."""
        req = job.request
        for rep in (placement or job.placement).replicas:
            slot = self.state.by_name.get(rep.node)
            if slot is None:
                continue
            positions = [position(slot, d.index) for d in rep.devices]
            self.state.take(slot, req.cpu_milli, req.memory_mib, list(rep.devices), positions)

    def release(self, job: Job) -> None:
        req = job.request
        for rep in job.placement.replicas:
            slot = self.state.by_name.get(rep.node)
            if slot is None:
                continue
            deltas = tuple((position(slot, d.index), d.milli, d.memory_mib) for d in rep.devices)
            self.state.give(slot, req.cpu_milli, req.memory_mib, deltas)

    def cap_reserved_nodes(self, placement: Placement) -> None:
        """After a reservation's shadow state is built: cap its nodes at what is free there."""
        for name in placement.nodes:
            s = self.state.by_name[name]
            self.state.set_cap(s, Cap(s.cpu, s.mem, list(s.milli), list(s.gmem)))
            self._capped.append(s)


def search_key(cycle: Cycle, job: Job, capped: bool) -> tuple:
    """What a preemption search depends on besides the overlay: what the job's start reads of
    it (``Cycle.alike``), its priority, whether the reservation caps it, and until when it must
    keep off devices a planned MIG switch removes (``Cycle.until``). Within a cycle the overlay
    only loses free capacity and evictable jobs, so a search that failed fails again for any job
    with the same key."""
    return (cycle.alike(job), cycle.priority_of(job), capped, cycle.until(job))
