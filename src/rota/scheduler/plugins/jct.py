"""Ordering plugins aimed at job completion time: shortest job first and least attained service.

- ``shortest-first``: the job with the shortest walltime goes first (submission order among
  equals; jobs without walltime last). With walltimes equal to true run times this is the
  oracle SJF of the scheduling literature; with user estimates it is what Slurm-style sites
  get. Not preemptive.
- ``las``: least attained service, discretised as Tiresias does (Gu et al., NSDI '19): a job's
  attained service is the GPU-seconds it has run (earlier attempts included); thresholds cut it
  into levels, level 0 first, submission order inside a level. It is preemptive through its
  *effective priority* (``job.priority``, then a lower level ranks higher): a waiting job may
  evict a running job of its queue that has climbed to a higher level, with the minimal-victims
  preemption plugin and ``within_queue: lower-priority``. A waiting job keeps its level, so the
  order of waiting jobs only changes when they run.
- ``fair-shortest-first``: fair share between projects, shortest walltime inside each. The
  project with the least decayed GPU usage per unit of weight goes next (the ``fairshare``
  key: past GPU-seconds decayed with ``half_life_s``, plus what it holds now, placements of
  this cycle included, as if held for one half-life), and it offers its job with the
  shortest walltime (``shortest-first``'s key). Not preemptive. Keys are recomputed after
  every job, so a project that has just been given GPUs yields to the next one.

Ordering contract (what a caller that keeps a long backlog relies on): every plugin here has
a ``pending_key(job)`` that does not change while the job waits, and ``sequence`` yields the
jobs of one project in ascending ``pending_key`` (for ``shortest-first`` and ``las`` all jobs
are in that order). A caller may therefore keep each project's backlog sorted by
``pending_key`` and show a cycle only the head of it: the jobs it leaves out come after the
ones shown in the sequence, whatever the order between projects.
"""

from __future__ import annotations

import bisect
import math
from typing import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rota.core import Job
from rota.scheduler.plugins.order import BestEffortFifo, FairShare, OrderView
from rota.scheduler.plugins.registry import register


@register("order")
class ShortestFirst(BestEffortFifo):
    name = "shortest-first"

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        yield from sorted(jobs, key=self.pending_key)

    @staticmethod
    def pending_key(job: Job) -> tuple:
        """The job's place in the order; it does not change while the job waits."""
        walltime = math.inf if job.walltime_s is None else job.walltime_s
        return (walltime, job.submit_time, job.id)


@register("order")
class FairShortestFirst(FairShare):
    """Fair share between projects (``FairShare.key``), shortest walltime first inside each
    (``ShortestFirst.pending_key``: walltime, then submission; jobs without walltime last)."""

    name = "fair-shortest-first"
    pending_key = staticmethod(ShortestFirst.pending_key)


class LasArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    thresholds_gpu_s: list[float] = Field(
        default_factory=lambda: [3600.0],
        description="attained GPU-seconds at which a job moves to the next level")

    @field_validator("thresholds_gpu_s")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if not v or any(t <= 0 for t in v) or any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("must be a non-empty list of positive, increasing GPU-seconds")
        return v


@register("order")
class LeastAttainedService(BestEffortFifo):
    name = "las"
    Args = LasArgs

    def __init__(self, args: LasArgs) -> None:  # type: ignore[override]
        self.thresholds = list(args.thresholds_gpu_s)

    def level(self, job: Job, now: float) -> int:
        return bisect.bisect_right(self.thresholds, job.attained(now))

    def effective_priority(self, job: Job, now: float) -> float:
        # ``self.level`` inlined: it runs for every pending and running job of every cycle
        attained, started = job.attained_gpu_s, job.started_at
        if started is not None and now > started:
            attained += job.gpus * (now - started)
        return job.priority * (len(self.thresholds) + 1) - bisect.bisect_right(
            self.thresholds, attained)

    def sequence(self, jobs: Sequence[Job], view: OrderView) -> Iterator[Job]:
        now = view.now
        # a cycle remembers effective priorities (preemption asks again): use its answers
        prio = getattr(view, "priority_of", None) or (lambda j: self.effective_priority(j, now))
        yield from sorted(jobs, key=lambda j: (-prio(j), j.submit_time, j.id))

    def pending_key(self, job: Job) -> tuple:
        """The job's place in the order; it does not change while the job waits."""
        return (-self.effective_priority(job, job.submit_time), job.submit_time, job.id)
