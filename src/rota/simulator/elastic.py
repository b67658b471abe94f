"""One run of the elastic capacity experiment on a virtual clock (docs/elastic.md).

Events: job arrivals and ends, capacity becoming ready (an attached pool GPU, an added node)
and pool GPUs coming back from a detach. After the events of an instant, ``run_cycle`` runs on
a full snapshot of the ready nodes (with their attached GPUs) and the jobs, and its binds
start at once. Every ``scan_s`` seconds while a job waits or elastic capacity is held, the
regime's scaler runs:

- ``node-only``: cluster-autoscaler's model (``rota.simulator.elastic_autoscaler``) on the
  jobs the cycle left waiting for room;
- ``pool``: rota's planner (``rota.scheduler.elastic.plan_capacity``) on the cycle's waits,
  each with the forecast's estimated start (``rota.scheduler.forecast``), with the GPU pool
  and the node group; its decisions are applied as they are: an attach makes a device of the
  node ``attach_s`` later, a detach takes the device away at once and gives the GPU back to
  the pool ``detach_s`` later, a node is ready after its sampled start latency.

A pool GPU attached while it is still attached (or coming back) is counted as a *double
attach*; the planner's contract makes one impossible, and the run counts them to show it.

Invariants: the decisions are ``run_cycle``'s and the scalers' alone; a job is pending,
running, finished or rejected, once; a removed node or detached GPU had no job on it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from dataclasses import dataclass, field, replace

from rota.core import GpuDevice, InvalidSpec, Job, JobId, Node, NodeName, Queue
from rota.core.capacity import (
    AddedNode, Attachment, CapacityPlan, ElasticState, GpuPool, Limits, NodeGroup, NodeShape,
)
from rota.scheduler import Policy, Snapshot, apply_decisions, build_policy, run_cycle
from rota.scheduler.elastic import ROOM_CODES, plan_capacity
from rota.scheduler.forecast import forecast
from rota.simulator.elastic_autoscaler import removable, scale_up
from rota.simulator.elastic_workload import HOUR, REGIMES, Experiment, Work

QUEUE = "q"
POOL, GROUP = "fabric", "cloud"
DRAIN_H = 48.0  # after the last arrival and its longest run, a run stops anyway


@dataclass(slots=True)
class Run:
    work: Work
    job: Job
    start: float | None = None
    finish: float | None = None
    rejected: bool = False
    pool_free: int = 0  # pool GPUs free when it arrived


@dataclass(slots=True)
class Att:
    gpu: str
    node: str
    asked: float
    ready_at: float
    job: str
    device: int | None = None  # its index on the node, once ready (kept after a detach)
    idle_since: float | None = None
    detached: float | None = None  # when it was taken from the node
    returned: float | None = None  # when it was back in the pool after a detach


@dataclass(slots=True)
class Added:
    node: str
    asked: float
    ready_at: float
    job: str
    idle_since: float | None = None
    removed: float | None = None


@dataclass(slots=True)
class ElasticResult:
    regime: str
    seed: int
    exp: Experiment
    runs: list[Run]
    atts: list[Att]
    added: list[Added]
    series: list[tuple[float, int, int, int]] = field(default_factory=list)  # t, nodes, attached, pending
    double_attaches: int = 0
    cycles: int = 0
    plans: int = 0
    end: float = 0.0


def shape(exp: Experiment) -> NodeShape:
    return NodeShape(exp.node_cpu_milli, exp.node_memory_mib, exp.node_gpus, exp.gpu_model,
                     exp.gpu_memory_mib)


def _node(name: str, exp: Experiment) -> Node:
    return Node(NodeName(name), exp.node_cpu_milli, exp.node_memory_mib,
                tuple(GpuDevice(k, exp.gpu_model, exp.gpu_memory_mib)
                      for k in range(exp.node_gpus)))


def simulate(exp: Experiment, work: list[Work], regime: str, seed: int) -> ElasticResult:
    """One regime and seed (the seed draws node start latencies)."""
    if regime not in REGIMES:
        raise InvalidSpec("regime", f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    return Engine(exp, work, regime, seed).run()


class Engine:
    def __init__(self, exp: Experiment, work: list[Work], regime: str, seed: int) -> None:
        self.exp, self.regime = exp, regime
        self.policy: Policy = build_policy(exp.policy)
        self.rng = random.Random(seed)
        self.nodes = {f"base{i:02d}": _node(f"base{i:02d}", exp) for i in range(exp.base_nodes)}
        self.pool = GpuPool(POOL, exp.gpu_model, exp.gpu_memory_mib,
                            tuple(f"pool{i:03d}" for i in range(exp.pool_gpus)),
                            {n: exp.pool_slots for n in self.nodes}, exp.attach_s,
                            exp.detach_s, exp.pool_cost_gpu_h)
        lo, hi = exp.node_start_s
        self.group = NodeGroup(GROUP, shape(exp), 0, exp.max_nodes, (lo + hi) / 2,
                               exp.node_cost_h)
        self.limits = Limits(detach_grace_s=exp.detach_grace_s, remove_after_s=exp.unneeded_s)
        runs = [Run(w, Job(JobId(w.id), "p", QUEUE, w.request, walltime_s=w.walltime,
                           submit_time=w.arrival, grace_s=0.0)) for w in work]
        self.result = ElasticResult(regime, seed, exp, runs, [], [])
        self.by_id = {r.work.id: r for r in runs}
        self.arrivals = sorted(runs, key=lambda r: (r.work.arrival, r.work.id))
        self.pending: dict[str, Run] = {}
        self.running: dict[str, Run] = {}
        self.events: list[tuple[float, int, str, object]] = []  # (t, n, kind, what)
        self.counter = itertools.count()
        self.waits: list = []
        self.last_scan: float = -1.0  # none yet
        self.now = 0.0
        self.last_scale_up: float | None = None
        self.names = itertools.count()

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> ElasticResult:
        i, n = 0, len(self.arrivals)
        stop = self.exp.hours * HOUR + self.exp.max_run_h * HOUR + DRAIN_H * HOUR
        while True:
            nxt = min(self.arrivals[i].work.arrival if i < n else math.inf,
                      self.events[0][0] if self.events else math.inf)
            scan = self._next_scan()
            now = min(nxt, scan)
            if now == math.inf or now > stop:
                break
            self.now = now
            changed = False
            while self.events and self.events[0][0] <= now:
                _, _, kind, what = heapq.heappop(self.events)
                getattr(self, "_" + kind)(what, now)
                changed = True
            while i < n and self.arrivals[i].work.arrival <= now:
                run = self.arrivals[i]
                run.pool_free = self._pool_free() if self.regime == "pool" else 0
                self.pending[run.work.id] = run
                i += 1
                changed = True
            if changed:
                self._cycle(now)
            if now >= scan:
                self._scan(now)
            self._record(now)
        self.result.end = self.now
        return self.result

    def _next_scan(self) -> float:
        """The next scan: on the ``scan_s`` grid, after the last one and not before now, while
        a job waits or capacity is held."""
        if not self.pending and not self._held():
            return math.inf
        grid = self.exp.scan_s
        after_last = (math.floor(self.last_scan / grid) + 1) * grid if self.last_scan >= 0 else 0.0
        return max(after_last, math.ceil(self.now / grid) * grid)

    def _held(self) -> bool:
        return any(a.returned is None for a in self.result.atts) or any(
            a.removed is None for a in self.result.added)

    def _push(self, t: float, kind: str, what: object) -> None:
        heapq.heappush(self.events, (t, next(self.counter), kind, what))

    def _snapshot(self) -> Snapshot:
        jobs = tuple(r.job for r in (*self.running.values(), *self.pending.values()))
        return Snapshot(tuple(self.nodes[k] for k in sorted(self.nodes)),
                        {QUEUE: Queue(QUEUE)}, jobs)

    def _cycle(self, now: float) -> None:
        if not self.pending:
            self.waits = []
            return
        snap = self._snapshot()
        decisions = run_cycle(snap, self.policy, now)
        self.result.cycles += 1
        after = {j.id: j for j in apply_decisions(snap, decisions, now).jobs}
        for rej in decisions.rejects:
            self.pending.pop(rej.job).rejected = True
        for b in decisions.binds:
            run = self.pending.pop(b.job)
            run.job, run.start = after[b.job], now
            self.running[b.job] = run
            self._push(now + run.work.run, "end", run)
        self.waits = [w for w in decisions.waits if w.job in self.pending]

    def _end(self, run: Run, now: float) -> None:
        run.finish = now
        del self.running[run.work.id]

    def _record(self, now: float) -> None:
        nodes = self.exp.base_nodes + sum(a.removed is None for a in self.result.added)
        attached = sum(a.returned is None for a in self.result.atts)
        point = (now, nodes, attached, len(self.pending))
        series = self.result.series
        if series and series[-1][0] == now:
            series[-1] = point
        elif not series or series[-1][1:] != point[1:]:
            series.append(point)

    # -- scaling ----------------------------------------------------------------------------------

    def _scan(self, now: float) -> None:
        self.last_scan = now
        self._idle(now)
        if self.regime == "node-only":
            self._autoscale(now)
        else:
            self._plan(now)

    def _idle(self, now: float) -> None:
        """Since when each ready attached GPU and added node has had no job."""
        devices = {(r.node, d.index) for run in self.running.values()
                   for r in run.job.placement.replicas for d in r.devices}
        nodes = {node for node, _ in devices} | {
            r.node for run in self.running.values() for r in run.job.placement.replicas}
        for a in self.result.atts:
            if a.device is not None and a.detached is None:
                used = (a.node, a.device) in devices
                a.idle_since = None if used else (a.idle_since if a.idle_since is not None else now)
        for n in self.result.added:
            if n.removed is None and n.ready_at <= now:
                used = n.node in nodes
                n.idle_since = None if used else (n.idle_since if n.idle_since is not None else now)

    def _room_waits(self) -> list:
        return [w for w in self.waits if any(r.code in ROOM_CODES for r in w.reasons)]

    def _autoscale(self, now: float) -> None:
        live = [n for n in self.result.added if n.removed is None]
        upcoming = sum(n.ready_at > now for n in live)
        jobs = [self.pending[w.job].job for w in self._room_waits()]
        count = scale_up(jobs, upcoming, self.group.shape, len(live), self.group.max_size)
        for _ in range(count):
            self._add_node("", now)
        if count:
            self.last_scale_up = now
        empty = {n.node: n.idle_since for n in live if n.idle_since is not None}
        for name in removable(empty, self.last_scale_up, now, self.exp.unneeded_s,
                              self.exp.delay_after_add_s):
            self._remove_node(name, now)

    def _plan(self, now: float) -> None:
        snap = self._snapshot()
        waits = self.waits
        if self._room_waits():  # the forecast only where capacity could start a job
            estimates = forecast(snap, self.policy, now)
            waits = [replace(w, estimated_start=estimates[w.job].start)
                     if w.job in estimates else w for w in waits]
        plan = plan_capacity(snap, waits, self._state(), self.limits, now)
        self.result.plans += 1
        self._apply(plan, now)

    def _state(self) -> ElasticState:
        atts = tuple(Attachment(POOL, a.gpu, a.node, a.ready_at, a.job,
                                None if a.detached is not None else a.device, a.idle_since)
                     for a in self.result.atts if a.returned is None)
        added = tuple(AddedNode(GROUP, n.node, n.ready_at, n.job, n.idle_since)
                      for n in self.result.added if n.removed is None)
        return ElasticState((self.pool,), (self.group,), atts, added)

    def _apply(self, plan: CapacityPlan, now: float) -> None:
        for d in plan.detaches:
            a = next(a for a in self.result.atts if a.gpu == d.gpu and a.returned is None)
            node = self.nodes[a.node]
            self.nodes[a.node] = replace(node, devices=tuple(
                x for x in node.devices if x.index != a.device))
            a.detached = now
            self._push(now + self.pool.detach_s, "returned", a)
        for r in plan.removals:
            self._remove_node(r.node, now)
        for at in plan.attaches:
            for gpu in at.gpus:
                if any(a.gpu == gpu and a.returned is None for a in self.result.atts):
                    self.result.double_attaches += 1
                att = Att(gpu, at.node, now, at.ready_at, at.job)
                self.result.atts.append(att)
                self._push(at.ready_at, "attached", att)
        for add in plan.adds:
            for _ in range(add.count):
                self._add_node(add.job, now)

    def _add_node(self, job: str, now: float) -> None:
        lo, hi = self.exp.node_start_s
        added = Added(f"cloud{next(self.names):03d}", now, now + self.rng.uniform(lo, hi), job)
        self.result.added.append(added)
        self._push(added.ready_at, "node_up", added)

    def _remove_node(self, name: str, now: float) -> None:
        added = next(n for n in self.result.added if n.node == name and n.removed is None)
        assert not any(name == r.node for run in self.running.values()
                       for r in run.job.placement.replicas), "a node a job uses is removed"
        added.removed = now
        del self.nodes[name]

    # -- capacity becoming ready ----------------------------------------------------------------

    def _attached(self, att: Att, now: float) -> None:
        node = self.nodes[att.node]
        index = max((d.index for d in node.devices), default=-1) + 1
        device = GpuDevice(index, self.pool.model, self.pool.memory_mib, uuid=f"{POOL}-{att.gpu}")
        self.nodes[att.node] = replace(node, devices=(*node.devices, device))
        att.device, att.idle_since = index, now

    def _returned(self, att: Att, now: float) -> None:
        att.returned = now

    def _node_up(self, added: Added, now: float) -> None:
        self.nodes[added.node] = _node(added.node, self.exp)
        added.idle_since = now

    def _pool_free(self) -> int:
        return self.exp.pool_gpus - sum(a.returned is None for a in self.result.atts)
