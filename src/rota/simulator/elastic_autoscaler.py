"""Node-only autoscaling as Kubernetes' cluster-autoscaler does it, the baseline of the
elastic experiment (docs/elastic.md). A model of its documented behaviour, not its code:

- scale-up (every ``scan-interval``, 10 s): the pods the scheduler left unschedulable are
  bin-packed, largest first, onto the room of nodes already on their way (upcoming nodes),
  then onto new empty nodes of the group's shape (its binpacking estimator); the new nodes
  are asked for at once, within the group's maximum size. Pods that fit nowhere, even on an
  empty node, ask for nothing. It does not wait for running pods to end, as it does not know
  when they will;
- scale-down: a node the autoscaler added that has been empty for ``scale-down-unneeded-
  time`` (10 min) is removed, but none within ``scale-down-delay-after-add`` (10 min) of the
  last scale-up. A node where a pod runs is never removed: training jobs here are not moved
  (cluster-autoscaler also drains nodes below 50 % use whose pods fit elsewhere; a running
  GPU job has no elsewhere to go without losing its progress, so that rule is left out).
"""

from __future__ import annotations

from dataclasses import dataclass

from rota.core import Job
from rota.core.capacity import NodeShape


@dataclass(slots=True)
class Room:
    cpu_milli: int
    memory_mib: int
    gpus: int

    @classmethod
    def of(cls, shape: NodeShape) -> Room:
        return cls(shape.cpu_milli, shape.memory_mib, shape.gpus)

    def take(self, job: Job) -> bool:
        """Take one replica of ``job`` if it fits; whether it did."""
        r = job.request
        if r.cpu_milli > self.cpu_milli or r.memory_mib > self.memory_mib \
                or r.gpu.count > self.gpus:
            return False
        self.cpu_milli -= r.cpu_milli
        self.memory_mib -= r.memory_mib
        self.gpus -= r.gpu.count
        return True


def scale_up(unschedulable: list[Job], upcoming: int, shape: NodeShape, size: int,
             max_size: int) -> int:
    """How many nodes to add now for ``unschedulable`` jobs, ``upcoming`` nodes being on
    their way and the group holding ``size`` nodes (upcoming ones included) of ``max_size``."""
    rooms = [Room.of(shape) for _ in range(upcoming)]
    new = 0
    for job in sorted(unschedulable, key=lambda j: (-j.request.gpu.count, j.submit_time, j.id)):
        for _ in range(job.replicas):
            if not Room.of(shape).take(job):
                break  # it fits no node of the group: asks for nothing
            if any(room.take(job) for room in rooms):
                continue
            if size + new >= max_size:
                return new
            rooms.append(Room.of(shape))
            rooms[-1].take(job)
            new += 1
    return new


def removable(empty_since: dict[str, float], last_scale_up: float | None, now: float,
              unneeded_s: float, delay_after_add_s: float) -> list[str]:
    """The added nodes to remove now: empty for ``unneeded_s`` (``empty_since``: node ->
    since when nothing runs there), none within ``delay_after_add_s`` of the last scale-up."""
    if last_scale_up is not None and now - last_scale_up < delay_after_add_s:
        return []
    return sorted(n for n, since in empty_since.items() if now - since >= unneeded_s)
