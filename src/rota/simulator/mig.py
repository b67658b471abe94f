"""One run of the MIG repartitioning experiment on a virtual clock (docs/mig.md).

Every GPU has a geometry (``whole`` or MIG instances); each instance is a device of its
node (``rota.core.mig.instance_index``), given whole to jobs of its profile by rota's cycle.
After the events of an instant (arrivals, ends, instances becoming usable, a planning tick),
``run_cycle`` runs on the nodes' usable devices and the jobs, and its binds start at once.
A job whose shape no GPU offers at the moment stays pending here (rota's screening would
refuse it at submit; the experiment keeps it for a later geometry).

Regimes, each switching GPUs only through ``switch``:

- ``static``: the geometries the planner (``rota.scheduler.migdemand``) sizes once for the
  day's mean arrivals, on an empty cluster, never changed;
- ``twice-daily``: a calendar: at ``day_start_h`` every GPU takes the geometry sized for the
  day's 12 hours, at ``night_start_h`` the one for the night's; a GPU whose switch would
  destroy an instance held by a job that may not be preempted waits (tried again each
  ``plan_every_s``), preemptible jobs on destroyed instances are evicted, as rota's calendar
  switcher does (``rota.control.migswitch``);
- ``demand``: every ``plan_every_s``, ``plan_geometries`` on the queue, the jobs running
  (expected ends from their walltimes, checkpoint ages) and the forecast of the next hours,
  each GPU changed at most once per ``min_interval_h``; it starts from the static geometries.

A switch evicts the jobs on destroyed instances (they go back to their last checkpoint,
every ``checkpoint_s`` of run time, and wait again); the instances it makes are usable
``downtime_s`` later, the ones that stay are untouched.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field

from rota.core import GpuDevice, GpuRequest, InvalidSpec, Job, JobId, Node, NodeName, Queue
from rota.core import ReplicaRequest
from rota.core.mig import TABLES, MigTable, instance_index, profile_compute
from rota.core.migplan import WHOLE, Instance, diff
from rota.scheduler import Snapshot, apply_decisions, build_policy, run_cycle
from rota.scheduler.migdemand import (
    WHOLE_SLOT, Forecast, GpuNow, Occupant, Pending, SwitchCost, plan_geometries, shape_size,
)
from rota.simulator.mig_workload import DAY, HOUR, REGIMES, Experiment, Work

QUEUE = "q"


@dataclass(slots=True)
class Run:
    work: Work
    remaining: float                # run time left at the start of this attempt
    pending_since: float | None
    job: Job | None = None
    start: float | None = None      # of this attempt
    first_start: float | None = None
    finish: float | None = None
    waited: float = 0.0
    used_gpu_s: float = 0.0
    lost_gpu_s: float = 0.0
    evictions: int = 0
    attempt: int = 0


@dataclass(slots=True)
class Gpu:
    node: str
    index: int
    instances: tuple[Instance, ...] | None
    last_change: float | None = None
    ready_at: dict[Instance, float] = field(default_factory=dict)


@dataclass(slots=True)
class MigResult:
    regime: str
    seed: int
    exp: Experiment
    runs: list[Run]
    switches: int = 0
    downtime_gpu_s: float = 0.0
    series: list[tuple[float, int, int]] = field(default_factory=list)  # t, pending, MIG GPUs
    end: float = 0.0


def table(exp: Experiment) -> MigTable:
    found = next((t for t in TABLES if t.gpu == exp.gpu_model), None)
    if found is None:
        raise InvalidSpec("gpu_model", f"{exp.gpu_model!r} has no MIG table; known: "
                                       f"{', '.join(t.gpu for t in TABLES)}")
    return found


def simulate(exp: Experiment, work: list[Work], forecast: dict, regime: str,
             seed: int) -> MigResult:
    """One regime and seed; ``forecast`` is ``mig_workload.expected_per_hour``."""
    if regime not in REGIMES:
        raise InvalidSpec("regime", f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    return Engine(exp, work, forecast, regime, seed).run()


class Engine:
    def __init__(self, exp: Experiment, work: list[Work], forecast: dict, regime: str,
                 seed: int) -> None:
        self.exp, self.regime, self.forecast = exp, regime, forecast
        self.table = table(exp)
        self.policy = build_policy(exp.policy)
        self.cost = SwitchCost(exp.downtime_s, exp.min_interval_h * HOUR, exp.horizon_h * HOUR)
        self.gpus = [Gpu(f"n{n:02d}", g, None) for n in range(exp.nodes)
                     for g in range(exp.gpus_per_node)]
        self.sized = {name: self._sizing(hours) for name, hours in (
            ("static", range(24)), ("day", _window(exp.day_start_h, exp.night_start_h)),
            ("night", _window(exp.night_start_h, exp.day_start_h)))}
        start = self.sized["night" if regime == "twice-daily" else "static"]
        for gpu, instances in zip(self.gpus, start):
            gpu.instances = instances
        self.result = MigResult(regime, seed, exp, [Run(w, w.run, None) for w in work])
        self.arrivals = list(self.result.runs)
        self.pending: dict[str, Run] = {}
        self.running: dict[str, Run] = {}
        self.events: list[tuple[float, int, str, object]] = []
        self.counter = itertools.count()
        self.now = 0.0

    # -- sizing: the geometries of a calendar or a static split --------------------------------

    def _sizing(self, hours) -> list[tuple[Instance, ...] | None]:
        """The planner's geometries for the mean arrivals of ``hours``, from whole GPUs."""
        hours = list(hours)
        ahead = [Forecast(shape, (sum(per[h] for h in hours) / len(hours),) * 24, run,
                          self.exp.classes[klass].priority)
                 for shape, (per, run, klass) in sorted(self.forecast.items())]
        gpus = [GpuNow(g.node, g.index, self.table, None) for g in self.gpus]
        cost = SwitchCost(0.0, 0.0, len(hours) * HOUR)
        targets = plan_geometries(gpus, [], ahead, self.exp.geometries, cost, 0.0)
        return [t.instances if t.geometry is not None else None for t in targets]

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> MigResult:
        i, n = 0, len(self.arrivals)
        stop = self.exp.days * DAY + self.exp.drain_h * HOUR
        if self.regime != "static":
            self._push(0.0, "tick", None)
        while True:
            nxt = min(self.arrivals[i].work.arrival if i < n else math.inf,
                      self.events[0][0] if self.events else math.inf)
            if nxt == math.inf or nxt > stop:
                break
            self.now = now = nxt
            while self.events and self.events[0][0] <= now:
                _, _, kind, what = heapq.heappop(self.events)
                getattr(self, "_" + kind)(what, now)
            while i < n and self.arrivals[i].work.arrival <= now:
                run = self.arrivals[i]
                run.pending_since = now
                run.job = self._job(run)
                self.pending[run.work.id] = run
                i += 1
            self._cycle(now)
            self._record(now)
            if i == n and not self.pending and not self.running:
                break
        # jobs still pending when nothing more happens wait until the run stops
        self.result.end = stop if self.pending else min(self.now, stop)
        for run in self.pending.values():
            run.waited += self.result.end - run.pending_since
        for run in self.running.values():
            run.used_gpu_s += (self.result.end - run.start) * work_size(run.work)
        return self.result

    def _push(self, t: float, kind: str, what: object) -> None:
        heapq.heappush(self.events, (t, next(self.counter), kind, what))

    def _job(self, run: Run) -> Job:
        w = run.work
        gpu = GpuRequest(w.gpus) if w.shape == WHOLE else GpuRequest(1, profile=w.shape)
        return Job(JobId(w.id), "p", QUEUE, ReplicaRequest(1000 * w.gpus, 1024 * w.gpus, gpu),
                   walltime_s=run.remaining, submit_time=w.arrival, grace_s=0.0,
                   preemptible=self.exp.classes[w.klass].preemptible)

    def _nodes(self, now: float) -> tuple[Node, ...]:
        mem = self.table.memory_gb * 1024
        by_node: dict[str, list[GpuDevice]] = {}
        for g in self.gpus:
            devices = by_node.setdefault(g.node, [])
            if g.instances is None:
                if g.ready_at.get(WHOLE_SLOT, 0.0) <= now:
                    devices.append(GpuDevice(g.index, self.exp.gpu_model, mem))
                continue
            for name, start in g.instances:
                if g.ready_at.get((name, start), 0.0) <= now:
                    p = self.table.profile(name)
                    devices.append(GpuDevice(instance_index(g.index, start), self.exp.gpu_model,
                                             p.memory_gb * 1024, profile=name, parent=g.index,
                                             start=start, compute=p.compute))
        return tuple(Node(NodeName(name), 1_000_000, 1 << 24,
                          tuple(sorted(devs, key=lambda d: d.index)))
                     for name, devs in sorted(by_node.items()))

    def _cycle(self, now: float) -> None:
        nodes = self._nodes(now)
        offered = {d.profile or WHOLE for node in nodes for d in node.devices}
        waiting = [r for r in self.pending.values() if r.work.shape in offered]
        if not waiting:
            return
        jobs = tuple(r.job for r in (*self.running.values(), *waiting))
        snap = Snapshot(nodes, {QUEUE: Queue(QUEUE)}, jobs)
        decisions = run_cycle(snap, self.policy, now)
        after = {j.id: j for j in apply_decisions(snap, decisions, now).jobs}
        for b in decisions.binds:
            run = self.pending.pop(b.job)
            run.job, run.start = after[b.job], now
            run.first_start = now if run.first_start is None else run.first_start
            run.waited += now - run.pending_since
            run.pending_since = None
            self.running[b.job] = run
            self._push(now + run.remaining, "end", (run, run.attempt))

    def _end(self, what: tuple[Run, int], now: float) -> None:
        run, attempt = what
        if attempt != run.attempt or run.work.id not in self.running:
            return   # an attempt a switch evicted
        run.used_gpu_s += (now - run.start) * work_size(run.work)
        run.finish = now
        del self.running[run.work.id]

    def _ready(self, what: object, now: float) -> None:
        pass   # instances became usable: the cycle after the events sees them

    def _record(self, now: float) -> None:
        point = (now, len(self.pending), sum(g.instances is not None for g in self.gpus))
        series = self.result.series
        if series and series[-1][0] == now:
            series[-1] = point
        elif not series or series[-1][1:] != point[1:]:
            series.append(point)

    # -- switching --------------------------------------------------------------------------------

    def _tick(self, what: object, now: float) -> None:
        if self.regime == "twice-daily":
            self._calendar(now)
        else:
            self._plan(now)
        self._push(now + self.exp.plan_every_s, "tick", None)

    def _calendar(self, now: float) -> None:
        hour = now % DAY / HOUR
        day = _in_window(hour, self.exp.day_start_h, self.exp.night_start_h)
        for gpu, target in zip(self.gpus, self.sized["day" if day else "night"]):
            change = diff(gpu.instances, target)
            if change.empty:
                continue
            held = self._holders(gpu)
            gone = change.destroy if gpu.instances is not None else (WHOLE_SLOT,)
            if any(not held[i].job.preemptible for i in gone if i in held):
                continue   # a job that may not be preempted defers the switch
            self.switch(gpu, target, now)

    def _plan(self, now: float) -> None:
        gpus = [GpuNow(g.node, g.index, self.table, g.instances, self._occupants(g, now),
                       g.last_change) for g in self.gpus]
        targets = plan_geometries(gpus, self._pending(now), self._forecast(now),
                                  self.exp.geometries, self.cost, now)
        for gpu, t in zip(self.gpus, targets):
            if t.geometry is not None:
                self.switch(gpu, t.instances, now)

    def _holders(self, gpu: Gpu) -> dict[Instance, Run]:
        out: dict[Instance, Run] = {}
        for run in self.running.values():
            for r in run.job.placement.replicas:
                if r.node != gpu.node:
                    continue
                for d in r.devices:
                    if d.index == gpu.index and gpu.instances is None:
                        out[WHOLE_SLOT] = run
                    elif gpu.instances is not None:
                        out.update({i: run for i in gpu.instances
                                    if instance_index(gpu.index, i[1]) == d.index})
        return out

    def _occupants(self, gpu: Gpu, now: float) -> dict[Instance, Occupant]:
        out = {}
        for instance, run in self._holders(gpu).items():
            spec = self.exp.classes[run.work.klass]
            age = _lost(now - run.start, spec.checkpoint_s) if spec.preemptible else 0.0
            out[instance] = Occupant(run.start + run.remaining, age, spec.preemptible,
                                     spec.priority)
        return out

    def _pending(self, now: float) -> list[Pending]:
        by_shape: dict[str, list[Run]] = {}
        for run in self.pending.values():
            by_shape.setdefault(run.work.shape, []).append(run)
        return [Pending(shape, sum(r.work.gpus for r in runs),
                        sum(now - r.pending_since for r in runs) / len(runs),
                        max(self.exp.classes[r.work.klass].priority for r in runs))
                for shape, runs in sorted(by_shape.items())]

    def _forecast(self, now: float) -> list[Forecast]:
        hour = int(now % DAY // HOUR)
        ahead = math.ceil(self.exp.horizon_h) + 1
        return [Forecast(shape, tuple(per[(hour + k) % 24] for k in range(ahead)), run,
                         self.exp.classes[klass].priority)
                for shape, (per, run, klass) in sorted(self.forecast.items())]

    def switch(self, gpu: Gpu, target: tuple[Instance, ...] | None, now: float) -> None:
        """Take ``gpu`` to ``target``: evict the jobs on what it destroys, make the new
        instances usable ``downtime_s`` later."""
        change = diff(gpu.instances, target)
        gone = change.destroy if gpu.instances is not None else (WHOLE_SLOT,)
        made = change.create if target is not None else (WHOLE_SLOT,)
        held = self._holders(gpu)
        for run in {id(r): r for i, r in held.items() if i in gone}.values():
            self._evict(run, now)
        gpu.instances, gpu.last_change = target, now
        ready = now + self.exp.downtime_s
        gpu.ready_at = {i: t for i, t in gpu.ready_at.items() if t > now}
        gpu.ready_at.update({i: ready for i in made})
        self.result.switches += 1
        self.result.downtime_gpu_s += self.exp.downtime_s * min(
            1.0, sum(shape_size(n) for n, _ in made))
        self._push(ready, "ready", None)

    def _evict(self, run: Run, now: float) -> None:
        ran = now - run.start
        spec = self.exp.classes[run.work.klass]
        lost = _lost(ran, spec.checkpoint_s)
        run.used_gpu_s += ran * work_size(run.work)
        run.lost_gpu_s += lost * work_size(run.work)
        run.remaining = run.remaining - ran + lost
        run.evictions += 1
        run.attempt += 1
        run.start, run.pending_since = None, now
        del self.running[run.work.id]
        run.job = self._job(run)
        self.pending[run.work.id] = run


def work_size(work: Work) -> float:
    return work.gpus if work.shape == WHOLE else profile_compute(work.shape) / 7


def _lost(ran: float, every: float) -> float:
    """Run time since the last checkpoint (all of it without checkpoints)."""
    return ran - math.floor(ran / every) * every if every > 0 else ran


def _window(start_h: float, end_h: float) -> list[int]:
    return [h for h in range(24) if _in_window(h + 0.5, start_h, end_h)]


def _in_window(hour: float, start_h: float, end_h: float) -> bool:
    return start_h <= hour < end_h if start_h < end_h else hour >= start_h or hour < end_h

