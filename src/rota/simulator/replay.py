"""Time replay of a job trace on a virtual clock, driving the control plane's ``run_cycle``.

Vocabulary:
- *event*: a job arrives (at its submission time, seconds from the first submission) or ends
  (its start plus its remaining run time). Events of the same second are handled together,
  then one *cycle* runs: ``run_cycle`` on a snapshot of the pending jobs shown, on top of the
  engine's ``Base`` (what running jobs hold, kept between cycles: told ``hold`` at every start
  and ``release`` at every end or eviction), and its decisions are applied with
  ``apply_decisions`` (binds start jobs, victims of preemption go back to pending at once,
  with their remaining run time: checkpoint and restore).
- *checkpoint interval* (``ReplayConfig.checkpoint_every_s``): without one, a victim saves
  at eviction and loses nothing; with one, jobs save every that many seconds of run time
  (``rota.simulator.checkpoints``) and a victim resumes from its last save: the run time
  since is *lost* (``Run.lost_gpu_s``, GPU-seconds) and run again. With
  ``checkpoint_aware``, running jobs show the scheduler their ``last_checkpoint_at``, so
  victim choice weighs what each would lose; without it they show none, and the scheduler
  counts from each attempt's start.
- *queue depth* ``K``: pending jobs wait in one sorted list per project and gang size, by
  the ordering plugin's ``pending_key`` (a job's place in the order while it waits:
  submission time, walltime, LAS level, priority); a cycle sees only the first ``K`` of each
  list (as Slurm's ``default_queue_depth``). Lists per gang size, not per project alone, so
  that ``K`` gangs that cannot fit never hide a smaller job of their project (under SJF they
  would: the shortest jobs of a project are often big gangs). When a cycle used up every
  candidate of some list and that list has more, or evicted victims (their preemptors start
  in the next cycle), another cycle runs at the same second.
- *skipped cycle*: one that cannot change anything, so it is not run: nothing pending; or
  the policy does not preempt and the free GPUs are fewer than the smallest pending gang; or
  the order is strict, there is one queue, nothing ended since the last cycle and that cycle
  started nothing (new arrivals queue behind the blocked head); or it would repeat the last
  cycle run, which changed nothing: the same jobs shown, nothing started, ended or evicted
  since, and every answer it reads of the clock the same (``rota.simulator.quiet``).

Invariants: a job is pending, running, finished or rejected, once; GPUs allocated never
exceed the cluster's; the scheduling decisions are ``run_cycle``'s alone (no policy logic
here beyond which ``K`` jobs of each list it is shown).
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from rota.core import (
    GpuDevice, GpuRequest, InvalidSpec, Job, JobId, Node,
    NodeName, Project, Queue, ReplicaRequest,
)
from rota.scheduler import Policy, Snapshot, Usage, apply_decisions, build_policy, run_cycle
from rota.scheduler.base import Base
from rota.scheduler.plugins.jct import ShortestFirst
from rota.simulator.checkpoints import last_checkpoint, saved_progress
from rota.simulator.philly import NODE_GPUS, PhillyJob, gang
from rota.simulator.quiet import Holdings, QuietCycles

QUEUE = "philly"
GPU_MODEL, GPU_MEMORY_MIB = "P100", 16384
# policy name -> (policy spec, the walltime jobs carry: a noisy estimate or the true run time)
POLICIES: dict[str, tuple[dict[str, Any], str]] = {
    "fifo": ({"preset": "fifo"}, "estimate"),
    "besteffort": ({"preset": "besteffort"}, "estimate"),
    "easy": ({"preset": "fifo", "backfill": "easy"}, "estimate"),
    "besteffort-easy": ({"preset": "besteffort", "backfill": "easy"}, "estimate"),
    "sjf": ({"preset": "besteffort", "order": "shortest-first"}, "oracle"),
    "sjf-est": ({"preset": "besteffort", "order": "shortest-first"}, "estimate"),
    "sjf-easy": ({"preset": "besteffort", "order": "shortest-first", "backfill": "easy"},
                 "estimate"),
    "las": ({"preset": "besteffort", "order": "las", "preemption": "minimal-victims"},
            "estimate"),
    "fair": ({"preset": "fair"}, "estimate"),
    "fairshare": ({"preset": "fairshare"}, "estimate"),
    "fair-sjf": ({"preset": "fair-sjf"}, "estimate"),
    "fair-sjf-easy": ({"preset": "fair-sjf", "backfill": "easy"}, "estimate"),
    "fair-sharing": ({"preset": "fair-sharing"}, "estimate"),
}
END, LEVEL = 0, 1  # kinds of timed events: a job ends; a running job crosses a LAS threshold


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    gpus: int
    depth: int = 16
    walltime_noise: float = 1.0
    restart_overhead_s: float = 0.0
    seed: int = 0
    quotas: Mapping[str, Queue] | None = None  # VC -> its queue; None: one queue, no quota
    checkpoint_every_s: float | None = None  # None: a victim saves at eviction, losing nothing
    checkpoint_aware: bool = True  # running jobs show the scheduler their last checkpoint
    skip_repeats: bool = True  # skip cycles repeating the last, quiet one (False: run them)

    def __post_init__(self) -> None:
        if self.gpus < NODE_GPUS or self.gpus % NODE_GPUS:
            raise InvalidSpec("gpus", f"must be a positive multiple of {NODE_GPUS}, got {self.gpus}")
        if self.depth < 1:
            raise InvalidSpec("depth", f"must be at least 1, got {self.depth}")
        if not (math.isfinite(self.walltime_noise) and self.walltime_noise >= 1):
            raise InvalidSpec("walltime_noise", f"must be >= 1, got {self.walltime_noise}")
        if not (math.isfinite(self.restart_overhead_s) and self.restart_overhead_s >= 0):
            raise InvalidSpec("restart_overhead", f"must be >= 0, got {self.restart_overhead_s}")
        every = self.checkpoint_every_s
        if every is not None and not (math.isfinite(every) and every > 0):
            raise InvalidSpec("checkpoint_every", f"must be > 0, got {every}")


@dataclass(slots=True)
class Run:
    """One trace job through the replay (engine-internal, mutable)."""

    src: PhillyJob
    submit: float
    replicas: int
    per_replica: int
    estimate: float  # walltime estimate of the whole run
    remaining: float
    attained: float = 0.0  # GPU-seconds held so far
    first_start: float | None = None
    finish: float | None = None
    started: float = 0.0  # start of the current run
    overhead: float = 0.0  # restore time at the start of the current run
    preemptions: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds run since a last checkpoint when evicted
    token: int = 0
    key: tuple = ()
    job: Job | None = None


@dataclass(slots=True)
class ReplayResult:
    policy: str
    gpus: int
    runs: list[Run]
    rejected: list[Run]
    stuck: list[Run]  # pending when nothing could ever change any more
    util: list[tuple[float, int]]  # (time, allocated GPUs) after each change
    cycles: int = 0
    skipped: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def policy_for(name: str) -> Policy:
    if name not in POLICIES:
        raise InvalidSpec("policy", f"unknown replay policy {name!r}; known: {', '.join(POLICIES)}")
    return build_policy(POLICIES[name][0])


def nodes_for(gpus: int) -> tuple[Node, ...]:
    """``gpus / 8`` nodes of 8 GPUs, with no CPU or memory (jobs ask for none)."""
    return tuple(Node(NodeName(f"node{i:04d}"), 0, 0, tuple(
        GpuDevice(k, GPU_MODEL, GPU_MEMORY_MIB) for k in range(NODE_GPUS)))
        for i in range(gpus // NODE_GPUS))


def replay(trace: list[PhillyJob], policy: str, config: ReplayConfig) -> ReplayResult:
    return Engine(trace, policy, config).run()


class Engine:
    def __init__(self, trace: list[PhillyJob], policy: str, config: ReplayConfig) -> None:
        if not trace:
            raise InvalidSpec("trace", "no jobs to replay")
        self.name, self.cfg = policy, config
        self.policy = policy_for(policy)
        # lists sorted by walltime first: along a list, a job never ends sooner than the one
        # before it (``_depth``)
        self.by_walltime = getattr(self.policy.order, "pending_key", None) is ShortestFirst.pending_key
        _, self.walltime = POLICIES[policy]
        self.nodes = nodes_for(config.gpus)
        vcs = sorted({j.vc for j in trace})
        self.queues = dict(config.quotas) if config.quotas is not None else {QUEUE: Queue(QUEUE)}
        self.projects = {vc: Project(vc) for vc in vcs}
        # what running jobs hold, kept between cycles: told of every start, end and eviction
        self.base = Base(self.nodes, self.queues)
        self.half_life = self.policy.usage_half_life_s
        # LAS: running jobs change level as they run; a timed event at each threshold lets a
        # cycle preempt them then
        self.thresholds = tuple(getattr(self.policy.order, "thresholds", ()))
        if self.policy.preemption is None:
            self.thresholds = ()
        rng = random.Random(config.seed)
        t0 = trace[0].submit
        self.runs = []
        for j in trace:
            replicas, per = gang(j.num_gpus)
            noise = rng.uniform(1.0, config.walltime_noise)
            self.runs.append(Run(j, j.submit - t0, replicas, per, j.duration * noise, j.duration))
        self.by_id = {r.src.id: r for r in self.runs}
        # pending jobs, one sorted list per (project, gang size): see ``_cycle``
        self.pending: dict[tuple[str, int], list[tuple]] = {}
        self.sizes: dict[int, int] = {}  # gang size -> pending jobs of that size
        self.requests: dict[int, ReplicaRequest] = {}  # GPUs per replica -> its request
        self.running: dict[str, Run] = {}
        self.ends: list[tuple[float, int, str, int, int]] = []
        self.seq = 0
        self.allocated = 0
        self.usage = {vc: 0.0 for vc in vcs}
        self.usage_at = 0.0
        self.rate = {vc: 0 for vc in vcs}  # GPUs each project holds now
        self.result = ReplayResult(policy, config.gpus, self.runs, [], [], [(0.0, 0)])
        self.freed = True  # capacity grew (or the start) since the last cycle
        self.last_bound = True
        self.nominated: frozenset[str] = frozenset()  # left waiting for their victims
        self.moves = 0  # starts, ends, evictions, level events and checkpoints shown so far
        self.quiet = QuietCycles(self.policy, config.skip_repeats and not any(
            q.min_runtime_s > 0 for q in self.queues.values()))

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> ReplayResult:
        arrivals, i, n = self.runs, 0, len(self.runs)
        while True:
            t_arr = arrivals[i].submit if i < n else math.inf
            t_end = self.ends[0][0] if self.ends else math.inf
            now = min(t_arr, t_end)
            if now == math.inf:
                break
            self._decay(now)
            while self.ends and self.ends[0][0] <= now:
                self._end(*heapq.heappop(self.ends))
            while i < n and arrivals[i].submit <= now:
                self._enqueue(arrivals[i])
                i += 1
            self._schedule(now)
        self.result.stuck = [r for lst in self.pending.values() for *_, rid in lst
                             for r in (self.by_id[rid],)]
        return self.result

    def _schedule(self, now: float) -> None:
        if self._skip():
            self.result.skipped += 1
            return
        while self._cycle(now) and not self._skip():
            pass

    def _skip(self) -> bool:
        if not self.sizes:
            return True
        free = self.cfg.gpus - self.allocated
        if self.policy.preemption is None and free < min(self.sizes):
            return True
        return (self.policy.order.blocking and self.policy.preemption is None
                and len(self.queues) == 1 and not self.freed and not self.last_bound)

    def _cycle(self, now: float) -> bool:
        """One cycle; True if another must run at once (victims were evicted, or a project's
        candidates ran out). A cycle that would repeat the last one, which changed nothing,
        is skipped (``rota.simulator.quiet``)."""
        self._show_checkpoints(now)
        shown = {key: lst[: self._depth(key[1])] for key, lst in self.pending.items() if lst}
        jobs = [self._job(self.by_id[rid]) for lst in shown.values() for *_, rid in lst]
        base = self.base
        running = list(base.active.values())
        holdings = Holdings(self.usage, base.alloc, self.projects)
        if self.quiet.repeats(now, jobs, self.nominated, self.moves, running, holdings):
            self.result.skipped += 1
            self.freed, self.last_bound = False, False  # as after the quiet cycle it repeats
            return False
        self.result.cycles += 1
        usage = {vc: Usage(u, now) for vc, u in self.usage.items() if u}
        snap = Snapshot(base.nodes, base.queues, tuple(jobs), self.projects, base.flavors, usage,
                        self.nominated)
        decisions = run_cycle(snap, self.policy, now, base=base)
        self.quiet.ran(now, jobs, self.nominated, self.moves, running, decisions, holdings)
        self.nominated = decisions.nominated  # the preemptors the next cycle tries first
        self.freed, self.last_bound = False, bool(decisions.binds)
        if not decisions.changes_anything:
            return False
        after = {j.id: j for j in apply_decisions(snap, decisions, now).jobs}
        for p in decisions.preemptions:
            self._stop(self.by_id[p.job], now)
        for rej in decisions.rejects:
            run = self.by_id[rej.job]
            self._dequeue(run)
            self.result.rejected.append(run)
        for b in decisions.binds:
            self._start(self.by_id[b.job], after[b.job], now)
        gone: dict[tuple[str, int], int] = {}
        for job_id in [b.job for b in decisions.binds] + [r.job for r in decisions.rejects]:
            key = self._list_of(self.by_id[job_id])
            gone[key] = gone.get(key, 0) + 1
        if decisions.preemptions:
            return True  # the victims are gone at once: their preemptors start in the next cycle
        return any(gone.get(key, 0) >= len(lst) and self.pending[key]
                   for key, lst in shown.items())

    def _depth(self, size: int) -> int:
        """How many jobs of a list of ``size``-GPU gangs a cycle is shown: ``K``; and, without
        backfill, never more than can start in it (the free GPUs' worth, plus one per
        preemptor the cycle allows) plus the first that cannot, which may block its queue. The
        jobs after it, alike in queue and request and no more urgent, cannot start in this
        cycle either. With backfill they can (a shorter walltime fits before a reservation
        that an earlier job of the list does not), so it gets all ``K``; unless the lists are
        sorted by walltime first (shortest-first), where a later job of a list never ends
        sooner than an earlier one, and the bound holds again."""
        if self.policy.backfill is not None and not self.by_walltime:
            return self.cfg.depth
        preemptors = 0 if self.policy.preemption is None else self.policy.preemption.max_preemptors
        return min(self.cfg.depth, (self.cfg.gpus - self.allocated) // size + preemptors + 1)

    # -- jobs ---------------------------------------------------------------------------------

    def _job(self, run: Run) -> Job:
        if run.job is None:
            remaining_estimate = max(run.remaining, run.estimate - (run.src.duration - run.remaining))
            walltime = run.remaining if self.walltime == "oracle" else remaining_estimate
            run.job = Job(JobId(run.src.id), run.src.vc, self._queue(run),
                          self._request(run.per_replica), replicas=run.replicas,
                          walltime_s=walltime + run.overhead, submit_time=run.submit,
                          grace_s=0.0, attained_gpu_s=run.attained)
        return run.job

    def _request(self, gpus: int) -> ReplicaRequest:
        """One shared request per replica size: the scheduler's memo keys holding it then
        compare by identity, not field by field."""
        hit = self.requests.get(gpus)
        if hit is None:
            hit = self.requests[gpus] = ReplicaRequest(0, 0, GpuRequest(gpus))
        return hit

    def _queue(self, run: Run) -> str:
        return run.src.vc if self.cfg.quotas is not None else QUEUE

    @staticmethod
    def _list_of(run: Run) -> tuple[str, int]:
        return (run.src.vc, run.src.num_gpus)

    def _enqueue(self, run: Run) -> None:
        run.key = (*self.policy.order.pending_key(self._job(run)), run.src.id)
        bisect.insort(self.pending.setdefault(self._list_of(run), []), run.key)
        size = run.src.num_gpus
        self.sizes[size] = self.sizes.get(size, 0) + 1

    def _dequeue(self, run: Run) -> None:
        lst = self.pending[self._list_of(run)]
        k = bisect.bisect_left(lst, run.key)
        assert lst[k] == run.key, f"{run.src.id} is not pending"
        del lst[k]
        size = run.src.num_gpus
        self.sizes[size] -= 1
        if not self.sizes[size]:
            del self.sizes[size]

    def _start(self, run: Run, job: Job, now: float) -> None:
        self._dequeue(run)
        run.job, run.started, run.token = job, now, run.token + 1
        run.overhead = self.cfg.restart_overhead_s if run.preemptions else 0.0
        if run.first_start is None:
            run.first_start = now
        self.running[run.src.id] = run
        self.base.hold(job)
        self.seq += 1
        heapq.heappush(self.ends, (now + run.overhead + run.remaining, self.seq, run.src.id,
                                   run.token, END))
        self._wake_at_next_level(run, now)
        self._allocate(run, +1, now)

    def _wake_at_next_level(self, run: Run, now: float) -> None:
        """With LAS, a timed event when the running ``run`` crosses its next threshold."""
        if not self.thresholds:
            return
        attained = run.attained + (now - run.started) * run.src.num_gpus
        level = bisect.bisect_right(self.thresholds, attained)
        if level < len(self.thresholds):
            self.seq += 1
            t = now + (self.thresholds[level] - attained) / run.src.num_gpus
            heapq.heappush(self.ends, (t, self.seq, run.src.id, run.token, LEVEL))

    def _show_checkpoints(self, now: float) -> None:
        """With checkpoints shown to a preempting policy: each running job's
        ``last_checkpoint_at`` brought to ``now`` in the base the cycle reads."""
        every = self.cfg.checkpoint_every_s
        if every is None or not self.cfg.checkpoint_aware or self.policy.preemption is None:
            return
        for run in self.running.values():
            saved = last_checkpoint(run.started + run.overhead, now, every)
            if run.job is not None and saved != run.job.last_checkpoint_at:
                run.job = replace(run.job, last_checkpoint_at=saved)
                self.base.hold(run.job)
                self.moves += 1

    def _stop(self, run: Run, now: float) -> None:
        """Preempted: back to pending with what is left to run (from its last checkpoint,
        with an interval: the run time since is lost)."""
        del self.running[run.src.id]
        self.base.release(run.src.id)
        held = now - run.started
        remaining = max(0.0, run.remaining - max(0.0, held - run.overhead))
        every = self.cfg.checkpoint_every_s
        if every is not None and remaining > 0:
            progress = run.src.duration - remaining
            saved = saved_progress(progress, every)
            run.lost_gpu_s += (progress - saved) * run.src.num_gpus
            remaining = run.src.duration - saved
        run.remaining = remaining
        run.attained += held * run.src.num_gpus
        run.preemptions += 1
        run.token += 1
        run.job = None
        self._allocate(run, -1, now)
        self._enqueue(run)

    def _end(self, t: float, _seq: int, rid: str, token: int, kind: int) -> None:
        run = self.by_id[rid]
        if run.token != token or rid not in self.running:
            return  # preempted since: a stale event
        if kind == LEVEL:
            self.freed = True  # its LAS level fell: a cycle may now preempt it
            self.moves += 1
            self._wake_at_next_level(run, t)
            return
        del self.running[rid]
        self.base.release(rid)
        run.attained += (t - run.started) * run.src.num_gpus
        run.remaining, run.finish = 0.0, t
        self._allocate(run, -1, t)

    def _allocate(self, run: Run, sign: int, now: float) -> None:
        self.moves += 1
        self.allocated += sign * run.src.num_gpus
        self.rate[run.src.vc] += sign * run.src.num_gpus
        assert 0 <= self.allocated <= self.cfg.gpus, "GPUs over-allocated"
        if sign < 0:
            self.freed = True
        util = self.result.util
        if util[-1][0] == now:
            util[-1] = (now, self.allocated)
        else:
            util.append((now, self.allocated))

    def _decay(self, now: float) -> None:
        """Bring each project's decayed GPU-seconds to ``now`` (exact for constant holdings)."""
        dt = now - self.usage_at
        if dt <= 0:
            return
        f = math.pow(0.5, dt / self.half_life)
        grow = (1 - f) * self.half_life / math.log(2)
        for vc, u in self.usage.items():
            self.usage[vc] = u * f + self.rate[vc] * grow
        self.usage_at = now

