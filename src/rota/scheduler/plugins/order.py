"""Ordering plugins: which pending job is tried next.

``sequence(jobs, view)`` is a generator. The cycle tries each job it yields before asking for
the next, so a plugin may look at ``view`` (what is allocated now, including placements made
earlier in this cycle) to decide. ``pending_key(job)`` is a job's place in the order while it
waits (for the fairness orderings: its place among its project's jobs); a caller that keeps a
long backlog sorted by it may hand a cycle only the head of each project's backlog. ``blocking`` plugins stop a queue at its first job that
cannot start (strict FIFO); the others let later jobs go ahead.
"""

from __future__ import annotations

import heapq
from typing import Iterator, Protocol, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rota.core import CPU, GPU, MEMORY, Job
from rota.scheduler.plugins.registry import NoArgs, register


class OrderView(Protocol):
    now: float
    allocations: int  # grows whenever what a project holds (``allocated``) changes

    def allocated(self, project: str) -> dict[str, int]: ...
    def capacity(self) -> dict[str, int]: ...
    def weight(self, project: str) -> float: ...
    def past_gpu_seconds(self, project: str, half_life_s: float) -> float: ...


def fifo_key(j: Job) -> tuple:
    return (j.submit_time, j.id)


def priority_key(j: Job) -> tuple:
    return (-j.priority, j.submit_time, j.id)


@register("order")
class StrictFifo:
    """Submission order; a queue whose head cannot start waits behind it (Kueue StrictFIFO)."""

    name = "fifo"
    blocking = True

    def __init__(self, args: NoArgs) -> None:
        pass

    pending_key = staticmethod(fifo_key)

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        yield from sorted(jobs, key=fifo_key)


@register("order")
class BestEffortFifo(StrictFifo):
    """Submission order; a head that cannot fit does not block the jobs behind it."""

    name = "besteffort-fifo"
    blocking = False


@register("order")
class Lifo(BestEffortFifo):
    name = "lifo"
    pending_key = staticmethod(lambda j: (-j.submit_time, j.id))

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        yield from sorted(jobs, key=lambda j: (-j.submit_time, j.id))


@register("order")
class Priority(BestEffortFifo):
    """Highest priority first, submission order among equals."""

    name = "priority"
    pending_key = staticmethod(priority_key)

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        yield from sorted(jobs, key=priority_key)


class ProjectRoundRobin(BestEffortFifo):
    """Base of the fairness orderings: each project's jobs in ``pending_key`` order (priority,
    then submission, unless a subclass says otherwise), and the project with the lowest
    ``key`` goes next. A key reads the view only through what the project holds
    (``allocated``; the rest is fixed for the cycle), so it is recomputed after a job whenever
    that changed: a placement made in this cycle counts at once (progressive filling)."""

    pending_key = staticmethod(priority_key)

    def key(self, project: str, view: OrderView) -> float:
        raise NotImplementedError

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        by_project: dict[str, list[Job]] = {}
        for j in sorted(jobs, key=self.pending_key, reverse=True):
            by_project.setdefault(j.project, []).append(j)  # popped from the end
        heap = [(self.key(p, view), p) for p in by_project]
        heapq.heapify(heap)
        while heap:
            key, p = heapq.heappop(heap)
            stack = by_project[p]
            changes = view.allocations
            yield stack.pop()
            if stack:
                if view.allocations != changes:
                    key = self.key(p, view)
                heapq.heappush(heap, (key, p))


@register("order")
class DominantResourceFairness(ProjectRoundRobin):
    """DRF: the project with the smallest weighted dominant share goes next, where a project's
    dominant share is ``max(allocated[r] / capacity[r])`` over cpu, memory and gpu."""

    name = "drf"

    def key(self, project: str, view: OrderView) -> float:
        alloc, cap = view.allocated(project), view.capacity()
        share = max((alloc.get(r, 0) / cap[r] for r in (CPU, MEMORY, GPU) if cap.get(r)), default=0.0)
        return share / view.weight(project)


class FairShareArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    half_life_s: float = Field(7 * 86400, gt=0, description="half-life of past usage, seconds")


@register("order")
class FairShare(ProjectRoundRobin):
    """Fair share with usage decay: the project with the least usage per unit of weight goes
    next. Usage is past GPU-seconds decayed with ``half_life_s``, plus what the project holds
    now (including placements of this cycle) counted as if held for one half-life."""

    name = "fairshare"
    Args = FairShareArgs

    def __init__(self, args: FairShareArgs) -> None:
        self.half_life_s = args.half_life_s

    def key(self, project: str, view: OrderView) -> float:
        past = view.past_gpu_seconds(project, self.half_life_s)
        now = view.allocated(project).get(GPU, 0) / 1000 * self.half_life_s
        return (past + now) / view.weight(project)
