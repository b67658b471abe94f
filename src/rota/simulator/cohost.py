"""Kubernetes pods and Slurm gangs on the same nodes, on a virtual clock, at four grains of
sharing between the two sides (docs/cohosting.md).

Vocabulary:
- *side*: ``kubernetes`` or ``slurm`` (``rota.simulator.cohost_workload``); each side has its
  own queue, project and policy, and its own ``Base`` (what holds resources, kept between
  cycles, told of every start and end);
- *regime*: what one side's work holds against the other side's:
  - ``static``: the nodes are split between the sides (``cohost_workload.split``); each side's
    base has only its own nodes, so the other side's work never meets it;
  - ``node`` (node grain): a node on which one side holds anything is wholly held against the
    other side (all its CPU, memory and GPUs) until that side's last job there ends;
  - ``gpu`` (GPU grain): a GPU on which one side holds any share is wholly held against the
    other (a fractional pod keeps its whole GPU from Slurm); CPU and memory count as held;
  - ``fraction`` (fraction grain, rota's): the other side's exact shares, CPU and memory are
    held, nothing more, so a GPU can hold a pod's fraction and another side's fraction;
- *holding*: what one side's work on one node holds against the other side, by the regime's
  grain: a job in the other side's base (``held-by-<side>@<node>``, not preemptible, in no
  queue), replaced whenever the side's work on that node changes. Within a side, jobs share
  nodes and GPUs as the scheduler places them, whatever the regime.

Events and cycles: arrivals and ends are events; all events of the same second are handled,
then each side's cycle runs, the side whose oldest pending job arrived first going first:
``run_cycle`` on a snapshot of the side's pending jobs over its base, whose binds start at once
(``apply_decisions``). A side's cycle runs only when something changed for it since its last
one: a job of it arrived, or capacity it can use was freed (a job of it ended; outside the
static split, a job of the other side ended). Policies never preempt (``cohost_workload``).

Invariants: the decisions are ``run_cycle``'s alone; each side's base equals what its jobs
and the other side's holdings take; a job is pending, running, finished or rejected, once.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Mapping

from rota.core import (
    MILLI, DeviceShare, InvalidSpec, Job, JobId, JobState, Node, Placement, Project, Queue,
    ReplicaPlacement, ReplicaRequest,
)
from rota.scheduler import Policy, Snapshot, apply_decisions, build_policy, run_cycle
from rota.scheduler.base import Base
from rota.simulator.cohost_workload import (
    HOUR, KUBE, REGIMES, SIDES, SLURM, Experiment, Work, cluster, split, workload,
)


@dataclass(slots=True)
class Run:
    """One pod or gang through the simulation (engine-internal, mutable)."""

    work: Work
    job: Job
    start: float | None = None
    finish: float | None = None
    placement: Placement | None = None
    rejected: bool = False


@dataclass(slots=True)
class CohostResult:
    regime: str
    seed: int
    gpus: int  # the cluster's
    horizon: float  # arrivals happen in [0, horizon)
    warmup: float  # measures cover [warmup, horizon) and the jobs arriving in it
    runs: list[Run]
    alloc: dict[str, list[tuple[float, int]]]  # side -> (time, milli-GPU held) after each change
    kube_nodes: tuple[str, ...] = ()  # static split: the nodes of each side
    slurm_nodes: tuple[str, ...] = ()
    cycles: int = 0
    # side -> (time, milli-GPU the other side cannot use because of it) after each change:
    # static, its nodes' GPUs; otherwise its holdings' GPUs in the other side's base
    kept: dict[str, list[tuple[float, int]]] = field(default_factory=dict)


class NodeUse:
    """What one side's running jobs hold on one node."""

    __slots__ = ("jobs", "cpu", "mem", "milli", "gmem")

    def __init__(self) -> None:
        self.jobs = self.cpu = self.mem = 0
        self.milli: dict[int, int] = {}
        self.gmem: dict[int, int] = {}


def run_seed(exp: Experiment, pods: list, gangs: list, regime: str, seed: int) -> CohostResult:
    """One regime and seed of an experiment: its workload (``cohost_workload.workload`` of
    the pod and gang rows) on its cluster."""
    policies = {s: build_policy(exp.sides[s].policy) for s in SIDES}
    return simulate(cluster(exp), workload(exp, pods, gangs, seed), regime, policies,
                    split(exp), seed, exp.hours * HOUR, exp.warmup_h * HOUR)


def simulate(nodes: tuple[Node, ...], work: list[Work], regime: str,
             policies: Mapping[str, Policy], kube_nodes: int = 0, seed: int = 0,
             horizon: float | None = None, warmup: float = 0.0,
             every_cycle: bool = False) -> CohostResult:
    """One run; ``kube_nodes`` is the static split's share (the first nodes), used only by
    ``static``; ``horizon`` defaults to the last arrival. ``every_cycle`` runs both sides'
    cycles at every instant with pending work, even those that nothing changed for (the
    same decisions, slower: for tests)."""
    return Engine(nodes, work, regime, policies, kube_nodes, seed, horizon, warmup,
                  every_cycle).run()


class Engine:
    def __init__(self, nodes: tuple[Node, ...], work: list[Work], regime: str,
                 policies: Mapping[str, Policy], kube_nodes: int, seed: int,
                 horizon: float | None, warmup: float, every_cycle: bool = False) -> None:
        if regime not in REGIMES:
            raise InvalidSpec("regime", f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
        if regime == "static" and not 0 < kube_nodes < len(nodes):
            raise InvalidSpec("kube_nodes", f"the static split needs 1..{len(nodes) - 1} "
                              f"Kubernetes nodes, got {kube_nodes}")
        for side in SIDES:
            if side not in policies:
                raise InvalidSpec("policies", f"no policy for {side}")
            if policies[side].preemption is not None:
                raise InvalidSpec(f"{side}.policy.preemption", "must be none")
        self.regime, self.policies = regime, policies
        self.nodes = {n.name: n for n in nodes}
        if regime == "static":
            own = {KUBE: nodes[:kube_nodes], SLURM: nodes[kube_nodes:]}
        else:
            own = {KUBE: nodes, SLURM: nodes}
        self.base = {s: Base(own[s], {s: Queue(s)}) for s in SIDES}
        self.projects = {s: {s: Project(s)} for s in SIDES}
        self.use: dict[str, dict[str, NodeUse]] = {s: {} for s in SIDES}
        self.runs = [Run(w, _job(w)) for w in sorted(work, key=lambda w: (w.arrival, w.id))]
        if len({r.work.id for r in self.runs}) != len(self.runs):
            raise InvalidSpec("work", "ids repeat")
        self.by_id = {r.work.id: r for r in self.runs}
        self.pending: dict[str, dict[str, Run]] = {s: {} for s in SIDES}
        self.dirty = {s: False for s in SIDES}
        self.ends: list[tuple[float, str]] = []
        gpus = sum(len(n.devices) for n in nodes)
        end = horizon if horizon is not None else max((w.arrival for w in work), default=0.0)
        self.result = CohostResult(
            regime, seed, gpus, end, min(warmup, end), self.runs,
            {s: [(0.0, 0)] for s in SIDES},
            tuple(n.name for n in own[KUBE]) if regime == "static" else (),
            tuple(n.name for n in own[SLURM]) if regime == "static" else ())
        self.held = {s: 0 for s in SIDES}
        self.kept_at: dict[str, dict[str, int]] = {s: {} for s in SIDES}  # side -> node -> milli
        self.kept = {s: 0 for s in SIDES}
        for s in SIDES:
            whole = MILLI * sum(len(n.devices) for n in own[s]) if regime == "static" else 0
            self.result.kept[s] = [(0.0, whole)]
        self.every_cycle = every_cycle

    def run(self) -> CohostResult:
        runs, i, n = self.runs, 0, len(self.runs)
        while True:
            now = min(runs[i].work.arrival if i < n else math.inf,
                      self.ends[0][0] if self.ends else math.inf)
            if now == math.inf:
                break
            while self.ends and self.ends[0][0] <= now:
                self._end(self.by_id[heapq.heappop(self.ends)[1]], now)
            while i < n and runs[i].work.arrival <= now:
                run = runs[i]
                self.pending[run.work.side][run.work.id] = run
                self.dirty[run.work.side] = True
                i += 1
            for side in self._order():
                self._cycle(side, now)
        return self.result

    def _order(self) -> list[str]:
        """The sides with a cycle to run now, the one whose oldest pending job arrived first
        (then Kubernetes) going first."""
        sides = [s for s in SIDES if (self.dirty[s] or self.every_cycle) and self.pending[s]]
        return sorted(sides, key=lambda s: next(iter(self.pending[s].values())).work.arrival)

    def _cycle(self, side: str, now: float) -> None:
        self.dirty[side] = False
        base, pending = self.base[side], self.pending[side]
        snap = Snapshot(base.nodes, base.queues, tuple(r.job for r in pending.values()),
                        self.projects[side], base.flavors)
        decisions = run_cycle(snap, self.policies[side], now, base=base)
        self.result.cycles += 1
        assert not decisions.preemptions, "no policy here preempts"
        if not decisions.binds and not decisions.rejects:
            return
        after = {j.id: j for j in apply_decisions(snap, decisions, now).jobs}
        for rej in decisions.rejects:
            run = pending.pop(rej.job)
            run.rejected = True
        for b in decisions.binds:
            self._start(pending.pop(b.job), after[b.job], now)

    # -- starts and ends ----------------------------------------------------------------------

    def _start(self, run: Run, job: Job, now: float) -> None:
        side = run.work.side
        run.job, run.start, run.placement = job, now, job.placement
        self.base[side].hold(job)
        heapq.heappush(self.ends, (now + run.work.run, run.work.id))
        self._touch(run, +1, now)
        self._allocate(side, run.work.gpu_milli, now)

    def _end(self, run: Run, now: float) -> None:
        side = run.work.side
        run.finish = now
        self.base[side].release(run.work.id)
        self._touch(run, -1, now)
        self._allocate(side, -run.work.gpu_milli, now)
        self.dirty[side] = True
        if self.regime != "static":
            self.dirty[_other(side)] = True

    def _allocate(self, side: str, milli: int, now: float) -> None:
        self.held[side] += milli
        _step(self.result.alloc[side], now, self.held[side])

    def _keep(self, side: str, node: str, holding: Job | None, now: float) -> None:
        devices = () if holding is None else holding.placement.replicas[0].devices
        milli = sum(d.milli for d in devices)
        self.kept[side] += milli - self.kept_at[side].get(node, 0)
        self.kept_at[side][node] = milli
        _step(self.result.kept[side], now, self.kept[side])

    def _touch(self, run: Run, sign: int, now: float) -> None:
        """Count what ``run`` holds on its nodes (``sign`` +1 at its start, -1 at its end) and
        bring the other side's view of those nodes up to date."""
        side, req = run.work.side, run.work.request
        assert run.placement is not None
        for rep in run.placement.replicas:
            use = self.use[side].setdefault(rep.node, NodeUse())
            use.jobs += sign
            use.cpu += sign * req.cpu_milli
            use.mem += sign * req.memory_mib
            for d in rep.devices:
                use.milli[d.index] = use.milli.get(d.index, 0) + sign * d.milli
                use.gmem[d.index] = use.gmem.get(d.index, 0) + sign * d.memory_mib
                if not use.milli[d.index]:
                    del use.milli[d.index], use.gmem[d.index]
            if not use.jobs:
                del self.use[side][rep.node]
        if self.regime == "static":
            return
        other = self.base[_other(side)]
        for node in dict.fromkeys(rep.node for rep in run.placement.replicas):
            holding = self._holding(side, node)
            self._keep(side, node, holding, now)
            key = _holding_id(side, node)
            if holding is not None:
                other.hold(holding)
            elif key in other.active:
                other.release(key)

    def _holding(self, side: str, name: str) -> Job | None:
        """What ``side``'s work on node ``name`` holds against the other side, by the regime's
        grain; None when it has nothing there."""
        use = self.use[side].get(name)
        if use is None:
            return None
        node = self.nodes[name]
        if self.regime == "node":
            cpu, mem = node.cpu_milli, node.memory_mib
            devices = tuple(DeviceShare(d.index, MILLI, d.memory_mib) for d in node.devices)
        elif self.regime == "gpu":
            cpu, mem = use.cpu, use.mem
            devices = tuple(DeviceShare(d.index, MILLI, d.memory_mib) for d in node.devices
                            if d.index in use.milli)
        else:
            cpu, mem = use.cpu, use.mem
            devices = tuple(DeviceShare(i, use.milli[i], use.gmem[i]) for i in sorted(use.milli))
        return Job(JobId(_holding_id(side, name)), f"({side})", f"({side})",
                   ReplicaRequest(cpu, mem), preemptible=False, state=JobState.RUNNING,
                   placement=Placement((ReplicaPlacement(name, devices),)))


def _job(w: Work) -> Job:
    """The pending job of a pod or gang: Slurm gangs carry their run time as walltime (used
    only by a policy with backfill), pods none."""
    return Job(JobId(w.id), w.side, w.side, w.request, replicas=w.replicas,
               walltime_s=w.run if w.side == SLURM else None, submit_time=w.arrival,
               grace_s=0.0)


def _step(series: list[tuple[float, int]], now: float, value: int) -> None:
    """Append ``(now, value)`` to a step function, replacing a point of the same time."""
    if series[-1][0] == now:
        series[-1] = (now, value)
    else:
        series.append((now, value))


def _other(side: str) -> str:
    return SLURM if side == KUBE else KUBE


def _holding_id(side: str, node: str) -> str:
    return f"held-by-{side}@{node}"
