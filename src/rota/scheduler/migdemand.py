"""Demand-driven MIG repartitioning: which GPUs should take which geometry, from the queue,
the forecast of arrivals and the cost of a switch.

Vocabulary:

- A *shape* is what a job asks for and an instance offers: a MIG profile (``1g.10gb``) or
  ``whole`` (a GPU with MIG mode off). A job of one shape runs only on that shape, as rota's
  placement does (``rota.core.nodes.GpuDevice.mig``). A shape's *size* is the share of a GPU
  it is charged: its compute slices of 7, a whole GPU 1.
- The *horizon* ``H`` (``SwitchCost.horizon_s``) is the time ahead the planner weighs.
- The *need* of a shape is the number of its instances the work expected over the horizon
  keeps busy on average: each running job ``min(1, remaining / H)`` (1 without an expected
  end), each pending job 1, and the forecast's arrivals by Little's law, their mean rate over
  the horizon times their mean run time. Its *supply* is the number of its instances the
  GPUs have (busy or not).
- A shape's *weight* is the priority of its work (``Pending.priority``,
  ``Forecast.priority``; the largest of the two) times ``1 + waiting / H`` for the mean waiting
  time of its pending jobs, so that work that has waited long counts more.

The objective ``plan_geometries`` minimises, in GPU-seconds over the horizon:

    sum over shapes of weight x size x max(0, need - supply) x H      (waiting work)
  + sum over switched GPUs of downtime_s x (share of the GPU made anew)  (downtime)
  + sum over evicted jobs of priority x size x checkpoint age          (work lost)

It starts from the current geometries and, greedily, switches the one GPU whose switch lowers
the objective most, until no switch lowers it; a GPU switches at most once per plan.

Rules a target obeys:

- A GPU changed less than ``min_interval_s`` ago keeps its geometry (``too-soon``).
- A switch never destroys an instance that a job that may not be preempted holds: such a
  GPU may only take geometries that keep that instance (same profile at the same start).
- Every target is a geometry of the candidates, resolved on the GPU's table and checked with
  ``rota.core.mig.check_geometry``; a candidate not valid on a GPU is not offered to it.

Pure: the caller passes the time and every fact; nothing here reads a clock or a device.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping

from rota.core.errors import InvalidSpec
from rota.core.mig import COMPUTE_SLICES, MigTable, check_geometry, profile_compute
from rota.core.migplan import WHOLE, Geometry, Instance, diff, resolve

WHOLE_SLOT: Instance = (WHOLE, 0)   # the one "instance" of a GPU with MIG mode off
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Occupant:
    """The job on one instance: when it is expected to end (None: not known), how long ago
    it saved its last checkpoint (what an eviction loses), whether it may be preempted."""

    end: float | None
    checkpoint_age_s: float = 0.0
    preemptible: bool = False
    priority: float = 1.0


@dataclass(frozen=True, slots=True)
class GpuNow:
    """One GPU as it is: its table, its instances (None: MIG mode off), the jobs on them
    (by instance; ``WHOLE_SLOT`` for a whole GPU) and when its geometry last changed."""

    node: str
    gpu: int
    table: MigTable
    instances: tuple[Instance, ...] | None
    busy: Mapping[Instance, Occupant] = field(default_factory=dict)
    last_change: float | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """The jobs waiting for one shape: how many, their mean waiting time, their priority."""

    shape: str
    count: int
    waiting_s: float = 0.0
    priority: float = 1.0


@dataclass(frozen=True, slots=True)
class Forecast:
    """Expected arrivals of one shape in each coming hour (index 0: the hour from now),
    their mean run time and priority."""

    shape: str
    per_hour: tuple[float, ...]
    mean_run_s: float
    priority: float = 1.0


@dataclass(frozen=True, slots=True)
class SwitchCost:
    downtime_s: float          # a new instance is usable this long after a switch
    min_interval_s: float      # the least time between two changes of one GPU
    horizon_s: float = 4 * HOUR

    def __post_init__(self) -> None:
        for name in ("downtime_s", "min_interval_s"):
            if not getattr(self, name) >= 0:
                raise InvalidSpec(name, f"must be 0 or more, got {getattr(self, name)!r}")
        if not self.horizon_s > 0:
            raise InvalidSpec("horizon_s", f"must be positive, got {self.horizon_s!r}")


@dataclass(frozen=True, slots=True)
class GpuTarget:
    """What the plan says of one GPU: ``geometry`` (a candidate's name) and its instances,
    or None to keep it; ``why``: ``switch``, ``keep`` (no switch pays) or ``too-soon``;
    ``evict``: the instances whose jobs the switch evicts."""

    node: str
    gpu: int
    geometry: str | None
    instances: tuple[Instance, ...] | None = None
    why: str = "keep"
    evict: tuple[Instance, ...] = ()


def shape_size(shape: str) -> float:
    """The share of a GPU an instance of ``shape`` is: ``1g.10gb`` 1/7, ``whole`` 1."""
    return 1.0 if shape == WHOLE else profile_compute(shape) / COMPUTE_SLICES


def shapes_of(instances: tuple[Instance, ...] | None) -> dict[str, int]:
    """How many instances of each shape a geometry offers."""
    out: dict[str, int] = defaultdict(int)
    for name, _ in instances if instances is not None else (WHOLE_SLOT,):
        out[name] += 1
    return out


def need_and_weight(gpus: list[GpuNow], pending: list[Pending], forecast: list[Forecast],
                    horizon: float, now: float) -> tuple[dict[str, float], dict[str, float]]:
    """Each shape's need and weight (module docstring)."""
    need: dict[str, float] = defaultdict(float)
    weight: dict[str, float] = defaultdict(float)
    for g in gpus:
        for (name, _), job in g.busy.items():
            left = math.inf if job.end is None else max(0.0, job.end - now)
            need[name] += min(1.0, left / horizon)
    for p in pending:
        need[p.shape] += p.count
        weight[p.shape] = max(weight[p.shape],
                              p.priority * (1.0 + max(0.0, p.waiting_s) / horizon))
    for f in forecast:
        arrivals = _arrivals(f.per_hour, horizon)
        need[f.shape] += arrivals / horizon * f.mean_run_s
        weight[f.shape] = max(weight[f.shape], f.priority)
    return dict(need), dict(weight)


def _arrivals(per_hour: tuple[float, ...], horizon: float) -> float:
    """Expected arrivals within the horizon, the last hour counted in part."""
    total, left = 0.0, horizon
    for rate in per_hour:
        if left <= 0:
            break
        total += rate * min(1.0, left / HOUR)
        left -= HOUR
    return total


@dataclass(frozen=True, slots=True)
class _Option:
    name: str
    instances: tuple[Instance, ...] | None
    cost: float                    # downtime and work lost, GPU-seconds
    evict: tuple[Instance, ...]


def options(g: GpuNow, candidates: Mapping[str, Geometry], cost: SwitchCost
            ) -> list[_Option]:
    """The candidates a GPU may take (valid on its table, destroying no instance held by a
    job that may not be preempted), each with its switch cost; its current one excluded."""
    out = []
    for name in sorted(candidates):
        try:
            target = resolve(candidates[name], g.table, f"geometries.{name}")
        except InvalidSpec:
            continue
        if target is not None:
            check_geometry(g.table, list(target), f"geometries.{name}")
        change = diff(g.instances, target)
        if change.empty:
            continue
        gone = change.destroy if g.instances is not None else (WHOLE_SLOT,)
        held = [i for i in gone if i in g.busy]
        if any(not g.busy[i].preemptible for i in held):
            continue
        made = change.create if target is not None else (WHOLE_SLOT,)
        downtime = cost.downtime_s * min(1.0, sum(shape_size(n) for n, _ in made))
        lost = sum(g.busy[i].priority * shape_size(i[0]) * g.busy[i].checkpoint_age_s
                   for i in held)
        out.append(_Option(name, target, downtime + lost, tuple(held)))
    return out


def plan_geometries(gpus: list[GpuNow], pending: list[Pending], forecast: list[Forecast],
                    candidates: Mapping[str, Geometry], cost: SwitchCost, now: float
                    ) -> tuple[GpuTarget, ...]:
    """A target per GPU (in the order given) minimising the module docstring's objective."""
    horizon = cost.horizon_s
    need, weight = need_and_weight(gpus, pending, forecast, horizon, now)
    supply: dict[str, int] = defaultdict(int)
    for g in gpus:
        for name, count in shapes_of(g.instances).items():
            supply[name] += count

    def waiting(name: str, have: int) -> float:
        short = max(0.0, need.get(name, 0.0) - have)
        return weight.get(name, 1.0) * shape_size(name) * short * horizon

    soon = {k for k, g in enumerate(gpus) if g.last_change is not None
            and now - g.last_change < cost.min_interval_s}
    choices = {k: options(g, candidates, cost) for k, g in enumerate(gpus) if k not in soon}
    chosen: dict[int, _Option] = {}
    while True:
        best: tuple[float, int, _Option] | None = None
        for k, opts in choices.items():
            if k in chosen:
                continue
            before = shapes_of(gpus[k].instances)
            for opt in opts:
                after = shapes_of(opt.instances)
                delta = opt.cost
                for name in set(before) | set(after):
                    have = supply[name]
                    moved = have - before.get(name, 0) + after.get(name, 0)
                    delta += waiting(name, moved) - waiting(name, have)
                if delta < -1e-9 and (best is None or delta < best[0]):
                    best = (delta, k, opt)
        if best is None:
            break
        _, k, opt = best
        for name, count in shapes_of(gpus[k].instances).items():
            supply[name] -= count
        for name, count in shapes_of(opt.instances).items():
            supply[name] += count
        chosen[k] = opt
    return tuple(_target(g, chosen.get(k), k in soon) for k, g in enumerate(gpus))


def _target(g: GpuNow, opt: _Option | None, soon: bool) -> GpuTarget:
    if opt is None:
        return GpuTarget(g.node, g.gpu, None, why="too-soon" if soon else "keep")
    return GpuTarget(g.node, g.gpu, opt.name, opt.instances, "switch", opt.evict)
