"""What the elastic planner (``rota.scheduler.elastic``) reads of a cycle's input: the room
left on each node, which devices and nodes jobs use, and the scale-in decisions.

Vocabulary:
- *room* of a node: its CPU and memory minus what active jobs and work outside rota hold
  there, and its *free GPUs*: healthy whole GPUs (not MIG instances) that nothing holds any
  share of, by model;
- *used*: a device some active job or foreign work holds a share of; a node some active job
  or foreign work holds anything on.

Scale-in (``scale_in``), never for what a job uses:
- an attached pool GPU whose job has ended (is neither active nor pending) is detached
  (``job-ended``): what was attached for a job is returned when it ends;
- an attached pool GPU no job uses, attached for no job still pending, is detached once it
  has been idle for ``Limits.detach_grace_s`` (``idle``);
- an added node on which nothing runs is removed once it has been empty for
  ``Limits.remove_after_s``, unless its group would fall below ``min_size``.
Capacity still on its way (``ready_at`` after now) is never taken back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rota.core.capacity import Detach, ElasticState, Limits, RemoveNode
from rota.core.nodes import Node
from rota.core.snapshot import Snapshot


@dataclass(slots=True)
class Room:
    node: Node
    cpu_milli: int
    memory_mib: int
    free_gpus: dict[str, int] = field(default_factory=dict)  # model -> wholly free GPUs


def used_devices(snapshot: Snapshot) -> set[tuple[str, int]]:
    """(node, device index) of every device an active job or foreign work holds a share of."""
    out = {(r.node, d.index) for j in snapshot.active if j.placement is not None
           for r in j.placement.replicas for d in r.devices}
    out.update((n.name, d.index) for n in snapshot.nodes for f in n.foreign for d in f.devices)
    return out


def used_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes on which an active job or foreign work holds anything."""
    out = {r.node for j in snapshot.active if j.placement is not None
           for r in j.placement.replicas}
    out.update(n.name for n in snapshot.nodes if n.foreign)
    return out


def rooms(snapshot: Snapshot) -> dict[str, Room]:
    """The room of every schedulable node without a problem."""
    held_cpu: dict[str, int] = {}
    held_mem: dict[str, int] = {}
    for job in snapshot.active:
        assert job.placement is not None
        for rep in job.placement.replicas:
            held_cpu[rep.node] = held_cpu.get(rep.node, 0) + job.request.cpu_milli
            held_mem[rep.node] = held_mem.get(rep.node, 0) + job.request.memory_mib
    used = used_devices(snapshot)
    return {n.name: _room(n, held_cpu.get(n.name, 0), held_mem.get(n.name, 0), used)
            for n in snapshot.nodes if n.schedulable and not n.problem}


def _room(node: Node, cpu: int, mem: int, used: set[tuple[str, int]]) -> Room:
    cpu += sum(f.cpu_milli for f in node.foreign)
    mem += sum(f.memory_mib for f in node.foreign)
    room = Room(node, max(0, node.cpu_milli - cpu), max(0, node.memory_mib - mem))
    for d in node.devices:
        if d.healthy and not d.mig and (node.name, d.index) not in used:
            room.free_gpus[d.model] = room.free_gpus.get(d.model, 0) + 1
    return room


def scale_in(snapshot: Snapshot, state: ElasticState, limits: Limits, now: float
             ) -> tuple[list[Detach], list[RemoveNode]]:
    """What to give back now (module docstring)."""
    devices, nodes = used_devices(snapshot), used_nodes(snapshot)
    alive = {j.id for j in snapshot.jobs}
    pending = {j.id for j in snapshot.pending}
    detaches = []
    for a in state.attachments:
        if a.ready_at > now or a.device is None or (a.node, a.device) in devices:
            continue
        if a.job and a.job not in alive:
            detaches.append(Detach(a.pool, a.gpu, a.node, "job-ended"))
        elif (a.job not in pending and a.idle_since is not None
              and now - a.idle_since >= limits.detach_grace_s):
            detaches.append(Detach(a.pool, a.gpu, a.node, "idle"))
    removals = []
    size = {g.name: len(state.members.get(g.name, ())) for g in state.groups}
    for n in state.added:
        size[n.group] += 1
    for n in sorted(state.added, key=lambda n: (n.idle_since or now, n.node)):
        if (n.ready_at > now or n.node in nodes or n.idle_since is None
                or now - n.idle_since < limits.remove_after_s):
            continue
        if size[n.group] - 1 < state.group(n.group).min_size:
            continue
        size[n.group] -= 1
        removals.append(RemoveNode(n.group, n.node))
    return detaches, removals
