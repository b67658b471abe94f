"""Repeated quiet cycles: a cycle the replay need not run, because the last one it ran changed
nothing and the next would read exactly what that one read.

A cycle's decisions (binds, preemptions, rejects) are a function of the jobs it is shown,
the base (what running jobs hold), the preemptors it is told of (``nominated``) and the
policy, and of the clock only through these reads (``rota.scheduler``; each cycle seeds its
own random numbers):

1. a queue's minimum runtime (``Queue.protects``);
2. past GPU-seconds decayed to ``now`` (the ``fairshare`` orders' key);
3. effective priorities (``effective_priority(job, now)``, LAS levels);
4. EASY backfill: the reservation starts at ``max(end, now)``, ``end`` the earliest moment
   running jobs' walltimes give the reserved job its room; a later job is capped by it unless
   ``now + walltime <= start``.

So a cycle at ``now`` decides as the quiet cycle at ``at`` did, and changes nothing either,
when nothing between them moved (no start, end, eviction or LAS level event, the same jobs
shown, the same ``nominated``), and each read gives the same answer: no queue has a minimum
runtime; an order that decays usage (``fairshare``, ``fair-shortest-first``) ranks the shown
jobs' projects the same (its keys are read only to rank projects, and a cycle that binds
nothing never reads them again: ``ProjectRoundRobin.sequence``); every running job's effective priority is the same
at both moments (pending jobs' do not depend on the clock: they hold nothing); and, where the
quiet cycle reserved, the reservation still starts at or after ``now`` (then ``end`` was its
start, and is again), and no shown job ended before it at ``at`` but not at ``now``.
Step by step the two cycles then read the same answers, so they take the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from rota.core import Job, Project
from rota.core.decisions import Decisions
from rota.scheduler import Policy
from rota.scheduler.plugins.order import FairShare


@dataclass(frozen=True, slots=True)
class Holdings:
    """What an order that decays usage reads of the projects, answered as a cycle at ``now``
    answers it (``Cycle.past_gpu_seconds``, ``allocated``, ``weight``): past GPU-seconds
    brought to ``now``, what each project holds, and the projects' weights."""

    usage: Mapping[str, float]
    alloc: Mapping[str, Mapping[str, int]]
    projects: Mapping[str, Project]

    def past_gpu_seconds(self, project: str, half_life_s: float) -> float:
        return self.usage.get(project, 0.0)

    def allocated(self, project: str) -> Mapping[str, int]:
        return self.alloc.get(project, {})

    def weight(self, project: str) -> float:
        return (self.projects.get(project) or Project(project)).weight


@dataclass(frozen=True, slots=True)
class Quiet:
    """The last cycle run, which changed nothing, and what it read."""

    at: float
    shown: tuple[str, ...]
    nominated: frozenset[str]
    moves: int  # the engine's count of starts, ends, evictions and level events then
    reserve_at: float | None  # its reservation's start, if it reserved
    priorities: tuple[float, ...]  # running jobs' effective priorities at ``at``
    ranking: tuple[str, ...]  # the shown jobs' projects in a decaying order's ranking at ``at``


class QuietCycles:
    def __init__(self, policy: Policy, clock_free: bool) -> None:
        """``clock_free``: no queue has a minimum runtime (read 1); False turns skipping off."""
        order = policy.order
        self.policy = policy
        self.usable = clock_free
        self.ranked = isinstance(order, FairShare)  # read 2
        self.effective = getattr(order, "effective_priority", None)  # read 3
        self.last: Quiet | None = None

    def ran(self, now: float, jobs: list[Job], nominated: frozenset[str], moves: int,
            running: list[Job], decisions: Decisions, holdings: Holdings) -> None:
        """Note the cycle just run at ``now`` on ``jobs``, with the projects' ``holdings``
        as it read them."""
        if not self.usable or decisions.changes_anything:
            self.last = None
            return
        reserve_at = decisions.reservations[0].start_at if decisions.reservations else None
        self.last = Quiet(now, tuple(j.id for j in jobs), nominated, moves, reserve_at,
                          self._priorities(running, now), self._ranking(jobs, holdings))

    def repeats(self, now: float, jobs: list[Job], nominated: frozenset[str], moves: int,
                running: list[Job], holdings: Holdings) -> bool:
        """Whether a cycle at ``now`` on ``jobs`` would decide as the last quiet one."""
        q = self.last
        if q is None or moves != q.moves or nominated != q.nominated or len(jobs) != len(q.shown):
            return False
        if any(j.id != k for j, k in zip(jobs, q.shown)):
            return False
        if self._priorities(running, now) != q.priorities:
            return False
        if self._ranking(jobs, holdings) != q.ranking:
            return False
        if q.reserve_at is None:
            return True
        start = q.reserve_at
        return start >= now and not any(
            j.walltime_s is not None and q.at + j.walltime_s <= start < now + j.walltime_s
            for j in jobs)

    def _ranking(self, jobs: list[Job], holdings: Holdings) -> tuple[str, ...]:
        """The projects of ``jobs`` in the order's ranking (its key, then the name, as its
        sequence breaks ties), where the order decays usage; else nothing."""
        if not self.ranked:
            return ()
        key = self.policy.order.key
        return tuple(p for _, p in sorted((key(p, holdings), p) for p in {j.project for j in jobs}))

    def _priorities(self, running: list[Job], now: float) -> tuple[float, ...]:
        if self.effective is None:
            return ()
        return tuple(self.effective(j, now) for j in running)
