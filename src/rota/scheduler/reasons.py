"""Why a job that its quota admits finds no room: the structured reasons of a failed placement.

- ``resource_reason``: the resource no eligible node has enough of, with the most any of them
  has free (``gpu`` in GPUs or a share of one, ``mig-<profile>`` in MIG instances of that
  profile, ``gpu_memory`` in MiB of one GPU, ``cpu`` in milli-cores, ``memory`` in MiB), or, when each resource is free somewhere but never all on
  one node (one with the node features the job needs, ``rota.core.nodes``), a reason that
  says so;
- ``protected_reason``: the job would fit if jobs that may not be preempted were gone, and
  only then (``not-preemptible``, naming them; ``min-runtime`` when every one of them is
  preemptible but has not yet run its queue's minimum runtime, naming them with the seconds
  each has left): evicting anything else would not help;
- ``young_reason``: a job its quota refuses whose queue could reclaim the cohort's quota
  from borrowers of other queues, but only from some that have not yet run their queue's
  minimum runtime (``min-runtime``, with the quota reason's figures and limit).

Reasons are data; ``rota.core.wording`` turns them into sentences.
"""

from __future__ import annotations

from rota.core import CPU, GPU, MEMORY, MILLI, Job, ReclaimWithinCohort
from rota.core.decisions import Reason, ReasonCode
from rota.core.mig import quota_resource
from rota.scheduler.placement import Shape, accepts, place_gang
from rota.scheduler.state import Slot

NAMED = 5  # protected jobs named in a reason, at most


def resource_reason(cycle, shape: Shape) -> Reason:
    """Which resource no node has enough of, with the most any eligible node has free.

    GPU figures come from the bucket indexes: the most wholly free GPUs any node has is the
    highest non-empty whole bucket, the largest free share sits on a node of the highest
    non-empty fraction bucket. Only cpu, memory and GPU memory look at every eligible node."""
    state = cycle.state
    pools = [state.pools[k] for k in shape.pools if k in state.pools]
    slots, most_gpus = cycle.members(shape.pools, pools)
    if shape.count:
        if shape.fractional:
            top = max((lv for p in pools for lv, b in enumerate(p.frac) if b), default=None)
            best = 0 if top is None else max(
                m for p in pools for i in p.frac[top] for m in state.slots[i].milli)
            if any(s.mig for s in slots):  # a MIG instance is never shared
                best = max((s.milli[p] for s in slots for p, kind in enumerate(s.profiles)
                            if not kind), default=0)
            if best < shape.share:
                return Reason(ReasonCode.RESOURCES, GPU, shape.share / MILLI, best / MILLI, 1.0)
            memory = memory_reason(shape, slots)
            if memory is not None:
                return memory
        else:
            best = max((w for p in pools for w, b in enumerate(p.whole) if b), default=0)
            counted = quota_resource(shape.profile) if shape.profile else GPU
            if shape.profile or any(s.mig for s in slots):  # buckets count MIG instances too
                best = max((len(_free_kind(s, shape)) for s in slots), default=0)
                most_gpus = max((sum(1 for p in s.profiles if p == shape.profile)
                                 for s in slots), default=0)
            if best < shape.count:
                return Reason(ReasonCode.RESOURCES, counted, shape.count, best, most_gpus)
    for resource, need, attr in ((CPU, shape.cpu, "cpu"), (MEMORY, shape.mem, "mem")):
        if any(getattr(s, attr) >= need for s in slots):
            continue  # enough somewhere: the usual case, found without a full scan
        best = max((getattr(s, attr) for s in slots), default=0)
        if best < need:
            return Reason(ReasonCode.RESOURCES, resource, need, best)
    return Reason(ReasonCode.RESOURCES, GPU if shape.count else CPU, detail=_split(shape))


def _free_kind(slot: Slot, shape: Shape) -> list[int]:
    """The wholly free devices of ``slot`` of the kind ``shape`` takes: MIG instances of its
    profile, or whole GPUs, of its models."""
    models = shape.models
    return [p for p, profile in enumerate(slot.profiles) if profile == shape.profile
            and slot.wholly_free(p) and (not models or accepts(models, slot.models[p]))]


def _split(shape: Shape) -> str:
    """Why a replica finds no node when each resource is free somewhere: never all on one
    node, or (for a job that needs node features) never on a node with those features, which
    the figures above do not tell apart."""
    if not shape.features:
        return "no single node has every resource of a replica free at once"
    named = ", ".join(sorted(shape.features))
    return (f"no node with the feature{'s' if len(shape.features) > 1 else ''} it needs "
            f"({named}) has every resource of a replica free at once")


def memory_reason(shape: Shape, slots: list[Slot]) -> Reason | None:
    """A fraction whose share is free on some GPU, but never with its memory: the most GPU
    memory free on a GPU with the share free (MiB), against the memory it needs there and
    the largest such GPU's."""
    best, need, largest = -1, shape.gpu_mem or 0, 0
    for s in slots:
        for p, m in enumerate(s.milli):
            if m < shape.share or s.profiles[p] != shape.profile \
                    or (shape.models and not accepts(shape.models, s.models[p])):
                continue
            want = shape.gpu_mem if shape.gpu_mem is not None else \
                shape.share * s.dev_mem[p] // MILLI
            if s.gmem[p] >= want:
                return None  # memory is not what is missing
            best, need = max(best, s.gmem[p]), max(need, want)
            largest = max(largest, s.dev_mem[p])
    if best < 0:
        return None
    return Reason(ReasonCode.RESOURCES, "gpu_memory", need, best, largest)


def protected_reason(cycle, job: Job, reasons: list[Reason]) -> list[Reason]:
    """``reasons`` of a job that found no room (and no victims), or, if it would fit once the
    non-preemptible jobs on its nodes were gone, a ``not-preemptible`` reason naming the
    fewest of them it would need gone (the resource figures of its first room reason)."""
    room = next((r for r in reasons if r.code in (ReasonCode.RESOURCES, ReasonCode.GANG)), None)
    if room is None or not cycle.protected():
        return reasons
    for flavor, models in cycle.flavors(job):
        if cycle.policy.admission.check(cycle.book, job.queue, flavor, job.total()) is not None:
            continue
        shape = cycle.shape(job, models)
        needed = _needed(cycle, job, shape)
        if needed:
            return [_protected(cycle, room, needed)]
    return reasons


def _protected(cycle, room: Reason, needed: list[Job]) -> Reason:
    """The reason naming the protected jobs a job needs gone: ``min-runtime`` if all of them
    are only too young to evict (each named with the seconds it has left), else
    ``not-preemptible``."""
    if all(j.preemptible for j in needed):
        return Reason(ReasonCode.MIN_RUNTIME, room.resource, room.requested, room.free,
                      room.capacity, _young_names(cycle, needed))
    names = [j.id for j in needed]
    detail = ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more"
                                         if len(names) > NAMED else "")
    return Reason(ReasonCode.NOT_PREEMPTIBLE, room.resource, room.requested, room.free,
                  room.capacity, detail)


def young_reason(cycle, job: Job, reasons: list[Reason]) -> list[Reason]:
    """``reasons`` of a job its quota refuses, or a ``min-runtime`` reason if the quota its
    queue may reclaim from the other queues of its cohort would admit it once their jobs
    were gone, young ones included, and not without the young ones."""
    quota = next((r for r in reasons if r.code is ReasonCode.QUOTA), None)
    queues = cycle.snapshot.queues
    own = queues[job.queue]
    if quota is None or own.cohort is None or not cycle.any_min_runtime or \
            own.reclaim_within_cohort is ReclaimWithinCohort.NEVER:
        return reasons
    others = [j for j in cycle.holding() if j.queue != job.queue and j.preemptible
              and queues[j.queue].cohort == own.cohort]
    if not any(cycle.young(j) for j in others):
        return reasons
    for flavor, _ in cycle.flavors(job):
        mine = [j for j in others if j.flavor == flavor]
        old = [j for j in mine if not cycle.young(j)]
        if _admits_without(cycle, job, flavor, mine) and \
                not _admits_without(cycle, job, flavor, old):
            young = sorted((j for j in mine if cycle.young(j)), key=lambda j: j.id)
            return [Reason(ReasonCode.MIN_RUNTIME, quota.resource, quota.requested, quota.free,
                           quota.capacity, _young_names(cycle, young), quota.limit)]
    return reasons


def _admits_without(cycle, job: Job, flavor: str, gone: list[Job]) -> bool:
    book = cycle.book
    mark = book.mark()
    for j in gone:
        book.charge(j.queue, flavor, j.total(), -1)
    try:
        return cycle.policy.admission.check(book, job.queue, flavor, job.total()) is None
    finally:
        for j in gone:
            book.charge(j.queue, flavor, j.total(), 1)
        book.restore(mark)  # charged back: the book is as it was


def _young_names(cycle, young: list[Job]) -> str:
    queues, now = cycle.snapshot.queues, cycle.now
    names = [f"{j.id} ({queues[j.queue].min_runtime_s - (now - j.started_at):.0f}s left)"
             for j in young]
    return ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more"
                                       if len(names) > NAMED else "")


def _needed(cycle, job: Job, shape: Shape) -> list[Job]:
    """The protected jobs on the shape's nodes whose room the job needs (none of them can be
    spared), with the jobs it could evict there gone too (of lower priority, or of another
    queue); [] if it does not fit even with all of them gone."""
    state = cycle.state
    pools = set(shape.pools)
    on_nodes = [j for j in cycle.holding() if any(
        slot is not None and any(p.key in pools for p in slot.pools)
        for slot in (state.by_name.get(r.node) for r in j.placement.replicas))]
    protected = {id(j) for j in cycle.protected()}
    keep = [j for j in on_nodes if id(j) in protected]
    if not keep:
        return []
    mine = cycle.priority_of(job)
    evictable = [j for j in on_nodes if id(j) not in protected and (
        j.queue != job.queue or cycle.priority_of(j) < mine)]
    mark = state.mark()
    try:
        for j in evictable + keep:
            cycle.release(j)
        if not _fits(cycle, job, shape):
            return []
        needed = list(keep)
        for j in reversed(keep):
            cycle.hold(j)
            if _fits(cycle, job, shape):
                needed.remove(j)
            else:
                cycle.release(j)
        return sorted(needed, key=lambda j: j.id)
    finally:
        state.undo(mark)


def _fits(cycle, job: Job, shape: Shape) -> bool:
    mark = cycle.state.mark()
    placement, _ = place_gang(cycle.state, shape, job.replicas, cycle.placement)
    cycle.state.undo(mark)
    return placement is not None
