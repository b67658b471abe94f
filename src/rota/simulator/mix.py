"""Training gangs, notebooks and inference services on one cluster, on a virtual clock, under
exclusive whole-GPU FIFO or with rota's mechanisms switched on (docs/efficiency.md).

Vocabulary:
- *ask*: what holds or waits for GPUs: a training gang (``t<n>``), a notebook session
  (``n<n>``), a service replica (``s<i>.<r>``); each is one rota ``Job`` in one queue, with
  priority services 2 > notebooks 1 > training 0 and only training preemptible;
- *tick*: the clock moves in steps of ``tick_s``; everything of a tick happens at its start;
- *mechanisms* (``mix_config.MECHANISMS``), each changing one thing:
  - ``fractions``: notebooks ask ``notebooks.gpu_milli`` and service replicas their model's
    share, instead of a whole GPU each;
  - ``packing``: ``binpack`` placement instead of ``spread``;
  - ``idle``: a notebook whose GPU stayed idle for ``idle_for_min`` is reclaimed
    (``rota.scheduler.idle.judge``, Backend.AI's utilisation rule) and asks again at its next
    burst; without it a session holds its GPU from its start to its end;
  - ``scale-to-zero``: a service with no request for ``idle_min`` gives back its replicas and
    asks for them again at its next request, which then waits a cold start; without it every
    replica is asked for at time 0 and kept;
  - ``preemption``: order ``priority`` and ``minimal-victims`` preemption (instead of
    ``besteffort-fifo``, arrival order skipping what cannot start, and none): a notebook or replica may evict training, which resumes later from its
    last checkpoint (every ``training.checkpoint_min``; the run time since is lost).

Each tick: gangs that ended are released and gangs that arrived ask; notebooks end, reclaim or
ask; services scale; then cycles run while something changed: ``run_cycle`` over the pending
asks on the cluster's ``Base``, its binds start at once, its victims go back to pending. Then
the tick's requests are answered: a replica is ready ``cold_start_s`` after it was bound, and
a request is on time when ready replicas with room for it (``replica_rps`` each) answer it
within ``target_s``. After ``hours`` sessions and services stop and the gangs run to the end.

Invariants: the decisions are ``run_cycle``'s alone; the base holds exactly the bound asks; an
ask is pending, bound or neither, never both.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from rota.core import (
    MILLI, GpuDevice, GpuRequest, Job, JobId, JobKind, Node, NodeName, Project, Queue,
    ReplicaRequest,
)
from rota.scheduler import Policy, Snapshot, apply_decisions, build_policy, run_cycle
from rota.scheduler.base import Base
from rota.scheduler.idle import IdlePolicy, Reclaim, Seen, judge
from rota.simulator.alibaba import DEVICE_MEMORY_MIB
from rota.simulator.checkpoints import saved_progress
from rota.simulator.mix_config import Experiment, mechanisms
from rota.simulator.mix_workload import HOUR, Workload, ticks

TRAINING, NOTEBOOKS, SERVICES = "training", "notebooks", "services"
CLASSES = (TRAINING, NOTEBOOKS, SERVICES)
PRIORITY = {TRAINING: 0, NOTEBOOKS: 1, SERVICES: 2}
KIND = {TRAINING: JobKind.BATCH, NOTEBOOKS: JobKind.INTERACTIVE, SERVICES: JobKind.SERVICE}
QUEUE = "mix"


def policy_spec(on: frozenset[str]) -> dict:
    """The scheduler policy of a set of mechanisms."""
    pre = "preemption" in on
    return {"order": "priority" if pre else "besteffort-fifo", "admission": "quota",
            "placement": "binpack" if "packing" in on else "spread",
            "preemption": "minimal-victims" if pre else "none", "backfill": "none"}


def cluster(exp: Experiment) -> tuple[Node, ...]:
    return tuple(Node(NodeName(f"node{i:03d}"), 96000, 393216,
                      tuple(GpuDevice(k, exp.gpu_model, DEVICE_MEMORY_MIB)
                            for k in range(exp.node_gpus)))
                 for i in range(exp.nodes))


@dataclass(slots=True)
class MixResult:
    configuration: str
    seed: int
    gpus: int
    horizon: float
    warmup: float
    alloc: dict[str, list[tuple[float, int]]]  # class -> (time, milli-GPU held) after changes
    useful: dict[str, float]  # class -> useful GPU-seconds in [warmup, horizon)
    gangs: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)  # notebook asks: seconds to start
    requests: int = 0  # service requests in the window
    on_time: int = 0  # of them, answered within the target
    cold_starts: int = 0
    reclaims: int = 0
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    cycles: int = 0
    rejected: int = 0


@dataclass(slots=True)
class Gangs:
    """The training side's state (engine-internal)."""

    next: int = 0  # the next gang to arrive
    progress: dict[str, float] = field(default_factory=dict)  # run time saved or done
    started: dict[str, float] = field(default_factory=dict)  # this attempt's start
    first: dict[str, float] = field(default_factory=dict)
    finish: dict[str, float] = field(default_factory=dict)
    ends: list[tuple[float, str]] = field(default_factory=list)  # heap of (end, id)
    gpus: int = 0  # GPUs the running gangs hold


def simulate(exp: Experiment, work: Workload, configuration: str, seed: int = 0) -> MixResult:
    """One run of one seed's workload under one configuration."""
    return Engine(exp, work, configuration, seed).run()


class Engine:
    def __init__(self, exp: Experiment, work: Workload, configuration: str, seed: int) -> None:
        self.exp, self.work, self.on = exp, work, mechanisms(configuration)
        self.policy: Policy = build_policy(policy_spec(self.on))
        self.tick = exp.tick_s
        self.base = Base(cluster(exp), {QUEUE: Queue(QUEUE)})
        self.projects = {QUEUE: Project(QUEUE)}
        self.pending: dict[str, Job] = {}
        self.bound: dict[str, tuple[Job, float]] = {}  # id -> (job, bound at)
        self.asked: dict[str, float] = {}  # id -> when its current ask was made
        self.nominated: frozenset[str] = frozenset()
        self.dirty = False
        self.held = {c: 0 for c in CLASSES}
        self.horizon = exp.hours * HOUR
        self.result = MixResult(configuration, seed, exp.gpus, self.horizon,
                                exp.warmup_h * HOUR, {c: [(0.0, 0)] for c in CLASSES},
                                {c: 0.0 for c in CLASSES})
        self.gangs = Gangs()
        self.by_gang = {g.id: g for g in work.gangs}
        self.sessions = {s.id: s for s in work.sessions}
        self.burst = {s.id: 0 for s in work.sessions}  # the first burst not over yet
        self.session_next = 0
        self.open: dict[str, float] = {}  # open sessions -> when they were last reclaimed
        self.active: set[str] = set()  # the open sessions in a burst this tick
        self.last_request = [-math.inf] * len(work.services)
        nb, sv = exp["notebooks"], exp["services"]
        self.idle_rule = IdlePolicy(gpu_util_below=nb["idle_util_below"],
                                    for_s=nb["idle_for_min"] * 60.0)
        fractions = "fractions" in self.on
        self.nb_milli = int(nb["gpu_milli"]) if fractions else MILLI
        self.sv_milli = [s.share if fractions else MILLI for s in work.services]

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> MixResult:
        for k in range(ticks(self.exp)):
            t = k * self.tick
            self._training(t)
            self._notebooks(t)
            self._scale(k, t)
            self._schedule(t)
            self._answer(k, t)
            self._work(t)
        self._close(ticks(self.exp) * self.tick)
        self._drain()
        self.result.gangs = [(g.arrival, self.gangs.first.get(g.id), self.gangs.finish.get(g.id))
                             for g in self.work.gangs]
        return self.result

    def _measured(self, t: float) -> bool:
        return self.result.warmup <= t < self.horizon

    def _schedule(self, now: float) -> None:
        """Cycles while something changed: binds start at once, victims go back to pending."""
        while self.dirty and self.pending:
            self.dirty = False
            base = self.base
            snap = Snapshot(base.nodes, base.queues, tuple(self.pending.values()),
                            self.projects, base.flavors, {}, self.nominated)
            decisions = run_cycle(snap, self.policy, now, base=base)
            self.result.cycles += 1
            self.nominated = decisions.nominated
            if not decisions.changes_anything:
                return
            after = {j.id: j for j in apply_decisions(snap, decisions, now).jobs}
            for p in decisions.preemptions:
                self._preempted(p.job, now)
            for rej in decisions.rejects:
                del self.pending[rej.job]
                self.result.rejected += 1
            for b in decisions.binds:
                self._bind(b.job, after[b.job], now)

    # -- asks, binds and releases ---------------------------------------------------------------

    def _ask(self, ask_id: str, cls: str, request: ReplicaRequest, now: float,
             submitted: float) -> None:
        self.pending[ask_id] = Job(JobId(ask_id), QUEUE, QUEUE, request, priority=PRIORITY[cls],
                                   kind=KIND[cls], submit_time=submitted,
                                   preemptible=cls == TRAINING, grace_s=0.0)
        self.asked[ask_id] = now
        self.dirty = True

    def _bind(self, ask_id: str, job: Job, now: float) -> None:
        del self.pending[ask_id]
        self.base.hold(job)
        self.bound[ask_id] = (job, now)
        cls = _class(ask_id)
        self._allocate(cls, _milli(job), now)
        if cls == TRAINING:
            g = self.gangs
            g.started[ask_id] = now
            g.first.setdefault(ask_id, now)
            g.gpus += job.request.gpu.count
            heapq.heappush(g.ends, (now + self.by_gang[ask_id].run - g.progress.get(ask_id, 0.0),
                                    ask_id))
        elif cls == NOTEBOOKS and self._measured(self.asked[ask_id]):
            self.result.waits.append(now - self.asked[ask_id])

    def _release(self, ask_id: str, now: float) -> None:
        job, _ = self.bound.pop(ask_id)
        self.base.release(ask_id)
        self._allocate(_class(ask_id), -_milli(job), now)
        if _class(ask_id) == TRAINING:
            self.gangs.gpus -= job.request.gpu.count
        self.dirty = True

    def _allocate(self, cls: str, milli: int, now: float) -> None:
        self.held[cls] += milli
        series = self.result.alloc[cls]
        if series[-1][0] == now:
            series[-1] = (now, self.held[cls])
        else:
            series.append((now, self.held[cls]))

    # -- training -------------------------------------------------------------------------------

    def _training(self, now: float) -> None:
        g, gangs = self.gangs, self.work.gangs
        while g.ends and g.ends[0][0] <= now:
            end, ask_id = heapq.heappop(g.ends)
            if ask_id in self.bound and self._end_of(ask_id) == end:
                g.finish[ask_id] = now
                self._release(ask_id, now)
        while g.next < len(gangs) and gangs[g.next].arrival <= now and now < self.horizon:
            gang = gangs[g.next]
            self._ask(gang.id, TRAINING, ReplicaRequest(0, 0, GpuRequest(gang.gpus)),
                      gang.arrival, gang.arrival)
            g.next += 1

    def _end_of(self, ask_id: str) -> float:
        g = self.gangs
        return g.started[ask_id] + self.by_gang[ask_id].run - g.progress.get(ask_id, 0.0)

    def _preempted(self, ask_id: str, now: float) -> None:
        """A gang evicted: back to pending (its place in FIFO kept), from its last checkpoint."""
        g, gang = self.gangs, self.by_gang[ask_id]
        progress = g.progress.get(ask_id, 0.0) + now - g.started[ask_id]
        saved = saved_progress(progress, self.exp["training"]["checkpoint_min"] * 60.0)
        lost = (progress - saved) * gang.gpus
        self.result.preemptions += 1
        self.result.lost_gpu_s += lost
        if self._measured(now):
            self.result.useful[TRAINING] -= self.exp["training"]["useful_ratio"] * lost
        g.progress[ask_id] = saved
        self._release(ask_id, now)
        self._ask(ask_id, TRAINING, ReplicaRequest(0, 0, GpuRequest(gang.gpus)), gang.arrival,
                  gang.arrival)

    def _drain(self) -> None:
        """After the horizon: gangs run to their ends, the clock jumping from end to end."""
        g = self.gangs
        self._schedule(self.horizon)
        while g.ends:
            now = math.ceil(g.ends[0][0] / self.tick) * self.tick
            self._training(now)
            self._schedule(now)
        self.result.rejected += len(self.pending)  # stuck: nothing left could start them

    # -- notebooks ------------------------------------------------------------------------------

    def _notebooks(self, now: float) -> None:
        sessions = self.work.sessions
        while (self.session_next < len(sessions) and sessions[self.session_next].arrival <= now
               and now < self.horizon):
            self.open[sessions[self.session_next].id] = -math.inf
            self.session_next += 1
        self.active.clear()
        for sid in list(self.open):
            s = self.sessions[sid]
            if now >= s.end:
                self._leave(sid, now)
                continue
            i = self.burst[sid]
            while i < len(s.bursts) and s.bursts[i][1] <= now:
                i += 1
            self.burst[sid] = i
            active = i < len(s.bursts) and s.bursts[i][0] <= now
            if active:
                self.active.add(sid)
            if sid in self.bound:
                if not active and "idle" in self.on:
                    self._judge(sid, s.bursts[i - 1][1] if i else s.arrival, now)
            elif sid not in self.pending and self._wants(sid, i, active):
                start = s.bursts[i][0] if "idle" in self.on else s.arrival
                self._ask(sid, NOTEBOOKS, ReplicaRequest(0, 0, GpuRequest(1, self.nb_milli)),
                          start, start)

    def _work(self, now: float) -> None:
        """The tick's useful work of training and of the notebooks bound in a burst, after
        the tick's binds."""
        if not self._measured(now):
            return
        self.result.useful[TRAINING] += (self.exp["training"]["useful_ratio"]
                                         * self.gangs.gpus * self.tick)
        per = min(self.exp["notebooks"]["active_util"], self.nb_milli / MILLI) * self.tick
        self.result.useful[NOTEBOOKS] += per * sum(1 for sid in self.active if sid in self.bound)

    def _wants(self, sid: str, i: int, active: bool) -> bool:
        """Whether a session holding nothing asks for its GPU now: without idle reclamation,
        once, at its start; with it, at each burst that began after its last reclaim."""
        if "idle" not in self.on:
            return self.open[sid] == -math.inf
        return active and self.open[sid] < self.sessions[sid].bursts[i][0]

    def _judge(self, sid: str, idle_since: float, now: float) -> None:
        """Backend.AI's utilisation rule on an idle notebook holding its GPU."""
        _, bound_at = self.bound[sid]
        seen = Seen(started_at=bound_at, low_since=max(idle_since, bound_at))
        if isinstance(judge(self.idle_rule, seen, now, interactive=True), Reclaim):
            self._release(sid, now)
            self.open[sid] = now
            self.result.reclaims += 1

    def _leave(self, sid: str, now: float) -> None:
        """A session ends: its GPU is given back; an ask still waiting counts its wait."""
        if sid in self.bound:
            self._release(sid, now)
        if sid in self.pending:
            del self.pending[sid]
            if self._measured(self.asked[sid]):
                self.result.waits.append(now - self.asked[sid])
        del self.open[sid]

    # -- services -------------------------------------------------------------------------------

    def _replicas(self, i: int) -> list[str]:
        return [f"s{i}.{r}" for r in range(self.work.services[i].replicas)]

    def _scale(self, k: int, now: float) -> None:
        idle_s = self.exp["services"]["idle_min"] * 60.0
        for i in range(len(self.work.services)):
            ids = self._replicas(i)
            asked = any(r in self.bound or r in self.pending for r in ids)
            if "scale-to-zero" not in self.on:
                if k == 0:
                    for r in ids:
                        self._ask(r, SERVICES, self._replica_request(i), now, now)
                continue
            if self.work.requests[k, i]:
                self.last_request[i] = now
                if not asked:
                    self.result.cold_starts += 1
                    for r in ids:
                        self._ask(r, SERVICES, self._replica_request(i), now, now)
            elif asked and now - self.last_request[i] >= idle_s:
                for r in ids:
                    if r in self.bound:
                        self._release(r, now)
                    self.pending.pop(r, None)

    def _replica_request(self, i: int) -> ReplicaRequest:
        return ReplicaRequest(0, 0, GpuRequest(1, self.sv_milli[i]))

    def _answer(self, k: int, now: float) -> None:
        """The tick's requests: on time when ready replicas answer them within the target."""
        if not self._measured(now):
            return
        sv = self.exp["services"]
        for i, service in enumerate(self.work.services):
            n = int(self.work.requests[k, i])
            if not n:
                continue
            ready = sum(1 for r in self._replicas(i) if r in self.bound
                        and self.bound[r][1] + sv["cold_start_s"] <= now + sv["target_s"])
            on_time = min(n, int(ready * sv["replica_rps"] * self.tick))
            self.result.requests += n
            self.result.on_time += on_time
            self.result.useful[SERVICES] += on_time * service.share / MILLI / sv["replica_rps"]

    def _close(self, now: float) -> None:
        """At the horizon: sessions end, services stop; no new gang arrives."""
        for sid in list(self.open):
            self._leave(sid, now)
        for i in range(len(self.work.services)):
            for r in self._replicas(i):
                if r in self.bound:
                    self._release(r, now)
                self.pending.pop(r, None)


def _class(ask_id: str) -> str:
    return {"t": TRAINING, "n": NOTEBOOKS, "s": SERVICES}[ask_id[0]]


def _milli(job: Job) -> int:
    return job.replicas * job.request.gpu.count * job.request.gpu.share
