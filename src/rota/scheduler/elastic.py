"""The elastic capacity planner: ``plan_capacity(snapshot, waits, state, limits, now)``.

Pure, as ``run_cycle`` is, and meant to run right after it in the same cycle: the cycle has
bound, borrowed and preempted what it could (as it does without elastic capacity), and the
jobs it left waiting (its ``Wait`` decisions, in its order, with their estimated starts where
the forecast gave them) are the planner's input, with the capacity sources and what was taken
from them (``rota.core.capacity.ElasticState``).

The steps:

1. Scale-in (``rota.scheduler.elastic_room.scale_in``): attached GPUs whose job ended, idle
   attached GPUs past their grace period, empty added nodes past ``remove_after_s``; never a
   device or node a job uses.
2. For each waiting job, in the cycle's order, one decision:
   a. a job that waits for something capacity cannot give (quota, its turn, a hold, its
      victims' exit) is held (``not-room``); one for which capacity is on its way is held
      (``in-flight``);
   b. its options: wait (start: its estimated start; none known: never); join an added node
      on its way, where the room its own job (and the jobs before this one in the plan)
      leave allows (start: when it is ready; a single-replica job: held, ``in-flight``);
      attach ``k`` GPUs of a pool to a node the fabric reaches (a single-replica job of whole
      GPUs or a share of one; ``k`` = its GPUs minus the node's free GPUs of the pool's
      model; the node's CPU, memory and free slots must allow it and the pool must have
      ``k`` free GPUs of a model the job accepts); or add nodes from a group (as many as its
      replicas need, within the group's ``max_size``);
   c. an option that would take the job's project over its budget (cost per hour of what is
      held for its jobs) or the cluster over its cap on elastic GPUs is left out;
   d. the earliest start wins, then the lowest cost (cost per hour times the job's walltime,
      or one hour without one), then waiting, joining, attaching, adding, then names; waiting
      and joining cost nothing, so capacity is taken only when it starts the job sooner;
   e. what it takes (pool GPUs, slots, the node's CPU and memory, group size, budget, cap)
      is taken for the rest of the plan, so that no pool GPU is given twice; capacity on its
      way has taken its share already (the slots of attaches on their way, and the CPU and
      memory of the jobs they are for, on their nodes).

Free pool GPUs are those neither attached nor faulty, in the pool's order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from rota.core import MILLI, Job, model_matches
from rota.core.capacity import (
    AddNodes, Attach, CapacityPlan, ElasticState, GpuPool, Hold, Limits, NodeGroup,
)
from rota.core.decisions import ReasonCode, Wait
from rota.core.nodes import DEFAULT_GROUP, features_needed
from rota.core.snapshot import Snapshot
from rota.scheduler.elastic_room import Room, rooms, scale_in

# a wait for these is a wait for room: more capacity could start the job
ROOM_CODES = frozenset({ReasonCode.RESOURCES, ReasonCode.GANG, ReasonCode.RESERVED,
                        ReasonCode.NOT_PREEMPTIBLE, ReasonCode.MIN_RUNTIME})
KIND_ORDER = {"wait": 0, "join": 1, "attach": 2, "add": 3}


@dataclass(slots=True)
class _Upcoming:
    """An added node on its way (or asked for in this plan) and the room left on it."""

    group: NodeGroup
    ready_at: float
    cpu_milli: int
    memory_mib: int
    gpus: int

    def fits(self, job: Job) -> bool:
        r = job.request
        return (job.replicas == 1 and _per_node(job, self.group) > 0
                and r.cpu_milli <= self.cpu_milli and r.memory_mib <= self.memory_mib
                and r.gpu.count <= self.gpus and not r.gpu.fractional)

    def take(self, job: Job) -> None:
        self.cpu_milli -= job.request.cpu_milli
        self.memory_mib -= job.request.memory_mib
        self.gpus -= job.request.gpu.count


@dataclass(slots=True)
class _Book:
    """What the plan has left to give, changed as it decides (step 2e)."""

    free: dict[str, list[str]]             # pool -> free GPU ids, in order
    slots: dict[tuple[str, str], int]      # (pool, node) -> free slots
    rooms: dict[str, Room]
    sizes: dict[str, int]                  # group -> nodes, with those on their way
    groups: dict[str, NodeGroup] = field(default_factory=dict)
    upcoming: list[_Upcoming] = field(default_factory=list)
    spend: dict[str, float] = field(default_factory=dict)  # project -> cost per hour held
    elastic_gpus: int = 0


@dataclass(frozen=True, slots=True)
class _Option:
    start: float
    cost: float
    kind: str
    name: str
    gpus: int = 0
    rate: float = 0.0
    decision: Attach | AddNodes | _Upcoming | None = None

    def key(self) -> tuple:
        return (self.start, self.cost, KIND_ORDER[self.kind], self.name)


def plan_capacity(snapshot: Snapshot, waits: Sequence[Wait], state: ElasticState,
                  limits: Limits, now: float) -> CapacityPlan:
    plan = CapacityPlan()
    plan.detaches, plan.removals = scale_in(snapshot, state, limits, now)          # 1
    book = _book(snapshot, state, plan, now)
    jobs = {j.id: j for j in snapshot.pending}
    coming = {a.job for a in state.attachments if a.ready_at > now} | {
        n.job for n in state.added if n.ready_at > now}
    for wait in waits:                                                              # 2
        job = jobs.get(wait.job)
        if job is None:
            continue
        if not any(r.code in ROOM_CODES for r in wait.reasons):                   # a
            plan.holds.append(Hold(job.id, wait.estimated_start, "not-room"))
            continue
        if job.id in coming:
            plan.holds.append(Hold(job.id, wait.estimated_start, "in-flight"))
            continue
        _decide(job, wait, state, limits, book, plan, now)
    return plan


def _book(snapshot: Snapshot, state: ElasticState, plan: CapacityPlan, now: float) -> _Book:
    gone = {(d.pool, d.gpu) for d in plan.detaches}
    attached = [a for a in state.attachments if (a.pool, a.gpu) not in gone]
    taken = {(a.pool, a.gpu) for a in state.attachments}  # detaching GPUs are not free yet
    book = _Book(
        free={p.name: [g for g in p.gpus if (p.name, g) not in taken and g not in p.faulty]
              for p in state.pools},
        slots={(p.name, n): s for p in state.pools for n, s in p.reach.items()},
        rooms=rooms(snapshot),
        sizes={g.name: len(state.members.get(g.name, ())) for g in state.groups},
        groups={g.name: g for g in state.groups})
    for a in state.attachments:  # a detaching GPU still fills its slot until it is gone
        book.slots[a.pool, a.node] -= 1
    pending = {j.id: j for j in snapshot.pending}
    claimed = {(a.job, a.node) for a in state.attachments
               if a.ready_at > now and a.job in pending and a.node in book.rooms}
    for job_id, node in sorted(claimed):  # the CPU and memory attaches on their way will take
        room = book.rooms[node]
        room.cpu_milli -= pending[job_id].request.cpu_milli
        room.memory_mib -= pending[job_id].request.memory_mib
    removed = {r.node for r in plan.removals}
    for n in state.added:
        if n.ready_at > now:
            group = state.group(n.group)
            up = _Upcoming(group, n.ready_at, group.shape.cpu_milli, group.shape.memory_mib,
                           group.shape.gpus)
            if n.job in pending:  # the job it was asked for comes first
                up.take(pending[n.job])
            book.upcoming.append(up)
        if n.node not in removed:
            book.sizes[n.group] += 1
            book.elastic_gpus += state.group(n.group).shape.gpus
    book.elastic_gpus += len(attached)
    projects = {j.id: j.project for j in snapshot.jobs}
    for a in attached:
        if a.job in projects:
            p = projects[a.job]
            book.spend[p] = book.spend.get(p, 0.0) + state.pool(a.pool).cost_per_gpu_h
    for n in state.added:
        if n.node not in removed and n.job in projects:
            p = projects[n.job]
            book.spend[p] = book.spend.get(p, 0.0) + state.group(n.group).cost_per_node_h
    return book


def _decide(job: Job, wait: Wait, state: ElasticState, limits: Limits, book: _Book,
            plan: CapacityPlan, now: float) -> None:
    waiting = wait.estimated_start if wait.estimated_start is not None else math.inf
    options = [o for pool in state.pools for o in _attaches(job, pool, book, now)]
    options += [o for g in state.groups if (o := _add(job, g, book, now)) is not None]
    options += [_Option(up.ready_at, 0.0, "join", f"{up.group.name}@{up.ready_at:g}",
                        decision=up) for up in book.upcoming if up.fits(job)]
    budget = limits.budgets.get(job.project, limits.budgets.get("*"))
    spend = book.spend.get(job.project, 0.0)
    allowed, why = [], "no-source"
    for o in options:
        if budget is not None and spend + o.rate > budget + 1e-9:
            why = "budget"
        elif (limits.max_elastic_gpus is not None
              and book.elastic_gpus + o.gpus > limits.max_elastic_gpus):
            why = "cap" if why == "no-source" else why
        else:
            allowed.append(o)
    if not allowed:
        plan.holds.append(Hold(job.id, wait.estimated_start, why))
        return
    best = min(allowed, key=_Option.key)
    if waiting <= best.start:
        plan.holds.append(Hold(job.id, wait.estimated_start, "sooner"))
        return
    _take(job, best, book, plan)


def _take(job: Job, o: _Option, book: _Book, plan: CapacityPlan) -> None:
    book.spend[job.project] = book.spend.get(job.project, 0.0) + o.rate
    book.elastic_gpus += o.gpus
    d = o.decision
    if isinstance(d, Attach):
        book.free[d.pool] = [g for g in book.free[d.pool] if g not in d.gpus]
        book.slots[d.pool, d.node] -= len(d.gpus)
        room = book.rooms[d.node]
        room.cpu_milli -= job.request.cpu_milli
        room.memory_mib -= job.request.memory_mib
        plan.attaches.append(d)
    elif isinstance(d, AddNodes):
        book.sizes[d.group] += d.count
        plan.adds.append(d)
        group = book.groups[d.group]
        if job.replicas == 1:  # what its one node has left, for the jobs after it
            up = _Upcoming(group, d.ready_at, group.shape.cpu_milli, group.shape.memory_mib,
                           group.shape.gpus)
            up.take(job)
            book.upcoming.append(up)
    elif isinstance(d, _Upcoming):
        d.take(job)
        plan.holds.append(Hold(job.id, d.ready_at, "in-flight"))


def _hours(job: Job) -> float:
    return job.walltime_s / 3600.0 if job.walltime_s is not None else 1.0


def _attaches(job: Job, pool: GpuPool, book: _Book, now: float) -> list[_Option]:
    """Attaching GPUs of ``pool`` for ``job``: one option per node that can take it."""
    g = job.request.gpu
    if job.replicas != 1 or g.count < 1 or g.profile or not model_matches(pool.model, g.models):
        return []
    if g.memory_mib is not None and g.memory_mib > pool.memory_mib:
        return []
    out = []
    for name in sorted(pool.reach):
        room = book.rooms.get(name)
        if room is None or not _may_run(job, room) or room.cpu_milli < job.request.cpu_milli \
                or room.memory_mib < job.request.memory_mib:
            continue
        local = room.free_gpus.get(pool.model, 0) if not g.fractional else 0
        k = g.count - local if not g.fractional else 1
        if k < 1 or k > book.slots[pool.name, name] or k > len(book.free[pool.name]):
            continue
        gpus = tuple(book.free[pool.name][:k])
        rate = k * pool.cost_per_gpu_h
        decision = Attach(job.id, pool.name, gpus, name, now + pool.attach_s, rate)
        out.append(_Option(now + pool.attach_s, rate * _hours(job), "attach",
                           f"{pool.name}/{name}", k, rate, decision))
    return out


def _may_run(job: Job, room: Room) -> bool:
    """Whether ``job`` may run on the room's node: its resource group, selector and the
    node features it needs."""
    node = room.node
    return (job.resource_group in (None, node.resource_group)
            and all(node.labels.get(k) == v for k, v in job.selector)
            and features_needed(job) <= node.features)


def _add(job: Job, group: NodeGroup, book: _Book, now: float) -> _Option | None:
    """Adding nodes of ``group`` for ``job``, if its nodes can hold the job's replicas."""
    per = _per_node(job, group)
    if per == 0:
        return None
    count = math.ceil(job.replicas / per)
    if book.sizes[group.name] + count > group.max_size:
        return None
    rate = count * group.cost_per_node_h
    decision = AddNodes(job.id, group.name, count, now + group.start_s, rate)
    return _Option(now + group.start_s, rate * _hours(job), "add", group.name,
                   count * group.shape.gpus, rate, decision)


def _per_node(job: Job, group: NodeGroup) -> int:
    """Replicas of ``job`` one empty node of ``group`` holds (0: none)."""
    shape, req, g = group.shape, job.request, job.request.gpu
    if job.resource_group not in (None, DEFAULT_GROUP) or job.selector or g.profile:
        return 0
    if features_needed(job) - {"gpu-sharing"}:
        return 0  # added nodes run commands; containers are not part of a shape yet
    fits = [shape.cpu_milli // req.cpu_milli if req.cpu_milli else math.inf,
            shape.memory_mib // req.memory_mib if req.memory_mib else math.inf]
    if g.count:
        if not model_matches(shape.model, g.models):
            return 0
        if g.memory_mib is not None and g.memory_mib > shape.gpu_memory_mib:
            return 0
        fits.append(shape.gpus * (MILLI // g.share) if g.fractional else shape.gpus // g.count)
    per = min(fits)
    return int(min(per, job.replicas)) if per != math.inf else job.replicas
