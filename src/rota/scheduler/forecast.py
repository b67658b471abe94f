"""A start estimate for every pending job, as ``squeue --start`` gives one: a forward
simulation over walltimes.

``forecast(snapshot, policy, now)`` runs the same cycle (``run_cycle``) again and again on a
copy of the snapshot, moving its time from one end of a job to the next:

1. run a cycle at time ``t`` (``now`` first) with the policy's preemption left out (the
   forecast assumes jobs end at their walltimes, not that they are evicted); a job it binds
   starts at ``t``, and from then on holds its placement until ``t`` + its walltime;
2. after the first cycle only the first ``Horizon.max_jobs`` (100) waiting jobs in the
   cycle's own order are simulated further (as Slurm's ``bf_max_job_test``): the others get
   no estimate;
3. move ``t`` to the earliest end of a job that holds resources (``started_at + walltime``;
   one already past it ends at ``t``; a PREEMPTING job ends within its grace period), and
   release every job that ends by then plus ``Horizon.resolution_s`` (60 s, as Slurm's
   ``bf_resolution``) or, further ahead, ``Horizon.spread`` (a tenth) of its distance from
   ``now``, whichever is more: one step for ends close together, so that a week's window
   takes tens of steps, not one per job; ``t`` is then the last of those ends, so an
   estimate is never earlier than the walltimes allow, and at most about a tenth later than
   they would give one by one; repeat from 1.

It stops when every job has started, after ``Horizon.steps`` (50) cycles, when the next end is
more than ``Horizon.window_s`` after ``now`` (Slurm's ``bf_window``), or when no job that
holds resources has a walltime (nothing is known to end).

Each pending job gets an ``Estimate``: its ``start``, or None and ``why`` there is none:

- ``no-walltime``: it waits behind jobs that have no walltime (``holders`` names them), which
  are assumed to run for ever;
- ``never-quota`` and ``never-room``: it does not start even once nothing holds resources any
  more: its queue's quota can never allow it (its last wait was for quota), or no node (no
  set of nodes, for a gang) can take it; ``never``: the cycle rejects it;
- ``window``: it would start after the window; ``steps``: the step budget was spent first;
- ``depth``: it is beyond the first ``max_jobs`` jobs in order.

``holders`` of a job with a start are the jobs whose end lets it start: for each device (or,
for a replica without GPUs, node) of the placement it gets, the last job to hold it before,
else the jobs that ended in the step just before it started (quota they gave back); each is a
``Holder`` (job, nodes, end, and whether it runs now or is itself forecast to start first).

Fair-share usage, arrivals and jobs the cycle does not see (held, not yet eligible) stay as
the snapshot has them. The cost is one cycle per step over at most ``max_jobs`` pending jobs:
``bench/forecast.py`` measures it, and the control loop runs it every few minutes, on a
thread of its own (``rota.control.forecasts``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rota.core import Job, JobState
from rota.core.decisions import Decisions, Holder, ReasonCode
from rota.core.snapshot import Snapshot
from rota.scheduler.apply import apply_decisions
from rota.scheduler.base import Base
from rota.scheduler.cycle import run_cycle
from rota.scheduler.policy import Policy

MAX_HOLDERS = 4  # jobs named per estimate


@dataclass(frozen=True, slots=True)
class Horizon:
    """How far a forecast looks (module docstring): Slurm's ``bf_resolution``, a week's
    window for training jobs (``bf_window`` is a day), and fewer jobs than ``bf_max_job_test``
    (500), for fewer steps, as each step is a whole cycle with its backfill reservation."""

    max_jobs: int = 100
    steps: int = 50
    window_s: float = 7 * 86400.0
    resolution_s: float = 60.0
    spread: float = 0.1  # a step further ahead spans this share of its distance from now


@dataclass(frozen=True, slots=True)
class Estimate:
    job: str
    start: float | None
    why: str = ""  # no start: no-walltime, never(-quota, -room), window, steps, depth
    holders: tuple[Holder, ...] = ()


def forecast(snapshot: Snapshot, policy: Policy, now: float,
             horizon: Horizon = Horizon()) -> dict[str, Estimate]:
    """An estimate for each pending job of ``snapshot`` (module docstring)."""
    sim = _Simulation(snapshot, replace(policy, preemption=None), now, horizon)
    return sim.run()


class _Simulation:
    """The forecast's state: a ``Base`` (``rota.scheduler.base``) with what holds resources,
    changed by deltas as jobs start and end, and the pending jobs left; each cycle runs on the
    base with only those pending jobs, as the control loop's cycles may."""

    def __init__(self, snapshot: Snapshot, policy: Policy, now: float,
                 horizon: Horizon) -> None:
        self.snapshot, self.policy, self.now, self.horizon = snapshot, policy, now, horizon
        self.base = Base.of(snapshot)
        self.holding: dict[str, Job] = {j.id: j for j in snapshot.active}
        self.ends = {j.id: self._end(j) for j in snapshot.active}  # None: no walltime
        self.running = set(self.holding)
        self.pending = list(snapshot.pending)
        self.starts: dict[str, float] = {}
        self.placed: dict[str, Job] = {}           # job -> as it started in the forecast
        self.ended: list[tuple[float, int, Job]] = []  # (end, step, job) released so far
        self.never: set[str] = set()
        self.quota: set[str] = set()               # jobs whose last wait was for quota
        self.cut: set[str] = set()                 # beyond max_jobs

    def run(self) -> dict[str, Estimate]:
        t, step, stop = self.now, 0, "steps"
        while step < self.horizon.steps:
            view = replace(self.snapshot, jobs=tuple(self.pending))
            decisions = run_cycle(view, self.policy, t, base=self.base)
            self._apply(view, decisions, t)
            if step == 0:
                self._cut(decisions)
            step += 1
            if not self.pending:
                stop = ""
                break
            ends = [e for e in self.ends.values() if e is not None]
            if not ends:
                stop = "no-walltime" if self.holding else "never"
                break
            nxt = max(t, min(ends))
            if nxt - self.now > self.horizon.window_s:
                stop = "window"
                break
            t = self._release(nxt, step)
        return self._estimates(stop)

    def _apply(self, view: Snapshot, d: Decisions, t: float) -> None:
        self.never.update(r.job for r in d.rejects)
        for w in d.waits:
            held = bool(w.reasons) and w.reasons[0].code is ReasonCode.QUOTA
            (self.quota.add if held else self.quota.discard)(w.job)
        bound = {b.job for b in d.binds}
        if not (bound or d.rejects):
            return
        after = apply_decisions(view, d, t)
        for job in after.jobs:
            if job.id in bound:
                self.starts[job.id], self.placed[job.id] = t, job
                self.base.hold(job)
                self.holding[job.id], self.ends[job.id] = job, self._end(job)
        self.pending = [j for j in after.jobs if j.id not in bound]

    def _cut(self, d: Decisions) -> None:
        """Keep the first ``max_jobs`` waiting jobs of the first cycle's order."""
        keep = {w.job for w in d.waits[:self.horizon.max_jobs]}
        self.cut = {j.id for j in self.pending if j.id not in keep}
        if self.cut:
            self.pending = [j for j in self.pending if j.id not in self.cut]

    def _end(self, job: Job) -> float | None:
        """When a job that holds resources gives them back, at the latest."""
        expected = job.expected_end
        if job.state is JobState.PREEMPTING:
            grace = self.now + job.grace_s
            expected = grace if expected is None else min(grace, expected)
        return None if expected is None else max(self.now, expected)

    def _release(self, first: float, step: int) -> float:
        """Release every job that ends by ``first`` + the resolution; the new time is the
        last of their ends."""
        cutoff = first + max(self.horizon.resolution_s,
                             self.horizon.spread * (first - self.now))
        last = first
        for jid, end in list(self.ends.items()):
            if end is not None and end <= cutoff:
                job = self.holding.pop(jid)
                del self.ends[jid]
                self.base.release(jid)
                self.ended.append((max(end, first), step, job))
                last = max(last, end)
        return last

    def _estimates(self, stop: str) -> dict[str, Estimate]:
        out: dict[str, Estimate] = {}
        for job in self.snapshot.pending:
            jid = job.id
            if jid in self.starts:
                out[jid] = Estimate(jid, self.starts[jid], "",
                                    self._holders_of(self.placed[jid], self.starts[jid]))
            elif jid in self.cut:
                out[jid] = Estimate(jid, None, "depth")
            elif jid in self.never:
                out[jid] = Estimate(jid, None, "never")
            elif stop == "no-walltime":
                out[jid] = Estimate(jid, None, stop, self._endless())
            elif stop == "never":  # nothing holds resources, and still it does not start
                out[jid] = Estimate(jid, None, "never-quota" if jid in self.quota
                                    else "never-room")
            else:
                out[jid] = Estimate(jid, None, stop)
        return out

    def _holder(self, job: Job, end: float | None) -> Holder:
        nodes = tuple(sorted({r.node for r in job.placement.replicas})) if job.placement \
            else ()
        return Holder(job.id, nodes, end, job.id in self.running)

    def _holders_of(self, job: Job, start: float) -> tuple[Holder, ...]:
        if start <= self.now or not self.ended:
            return ()
        mine = _slots(job)
        before = [(e, s, j) for e, s, j in self.ended if e <= start]
        latest: dict[tuple[str, int], tuple[float, Job]] = {}  # each slot's last holder
        for e, _, j in before:
            for slot in _slots(j) & mine:
                if slot not in latest or e > latest[slot][0]:
                    latest[slot] = (e, j)
        found = list({j.id: (e, j) for e, j in latest.values()}.values())
        if not found and before:  # not its devices: the quota the last step gave back
            step = max(s for _, s, _ in before)
            found = [(e, j) for e, s, j in before if s == step]
        found.sort(key=lambda p: (-p[0], p[1].id))
        return tuple(self._holder(j, e) for e, j in found[:MAX_HOLDERS])

    def _endless(self) -> tuple[Holder, ...]:
        endless = sorted((j for j in self.holding.values() if self.ends[j.id] is None),
                         key=lambda j: _id_key(j.id))
        return tuple(self._holder(j, None) for j in endless[:MAX_HOLDERS])


def _slots(job: Job) -> set[tuple[str, int]]:
    """The (node, device) pairs a job holds; (node, -1) for a replica without devices."""
    if job.placement is None:
        return set()
    out: set[tuple[str, int]] = set()
    for r in job.placement.replicas:
        out.update((r.node, d.index) for d in r.devices)
        if not r.devices:
            out.add((r.node, -1))
    return out


def _id_key(job_id: str) -> tuple[int, str]:
    return (int(job_id), job_id) if job_id.isdigit() else (0, job_id)
