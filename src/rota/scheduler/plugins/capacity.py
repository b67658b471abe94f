"""Capacity gradient descent (``capgd``): FGD's fragmentation gradient, with the task mix
learned online, plus the two costs FGD does not see: GPUs stranded by CPU, and scarce GPU
models spent on tasks that could run elsewhere.

Vocabulary:
- *task class* ``m`` (``fragment.TaskClass``): CPU request, per-device share, device count,
  allowed models, popularity ``p_m``;
- the *mix*: classes and popularity estimated online (``ArrivalMix``) from the requests that
  have arrived so far, with exponentially decaying counts, kept to the most frequent classes
  covering ``coverage`` of the weight (FGD's rule, applied to what has arrived instead of the
  whole trace in advance). The mix is the caller's, not the plugin's: the caller observes each
  arrival (``ArrivalMix.observe``, or ``Arrivals`` for the jobs of successive snapshots) and
  hands the mix to the cycle (``run_cycle(..., mix=)``) or to a scorer that follows it
  (``CapacityGradient.following``); placing never changes it. A cycle given no mix plans for
  the classes of its own pending jobs;
- ``F(n)``: FGD's expected fragment of node ``n`` under the mix (``fragment.Fragmenter``);
- ``stranded(n) = max(0, idle(n) - cpu(n) * G / C)``: the node's idle GPU (milli) beyond what
  its free CPU covers at the node's own CPU-per-GPU ratio (``C`` milli-CPU for ``G`` GPUs).
  Zero on an empty node; it grows when a task takes more CPU than its GPUs' share of the
  node's CPU (a CPU-only task on a GPU node above all);
- ``scarcity(X)`` in [0, 1]: the pressure on GPU model ``X`` of the classes that may only run
  on some models: ``sum`` over such classes accepting ``X`` of (their share of the mix's GPU
  demand) / (the share of the cluster's GPUs they accept), capped at 1. Zero when no class is
  model-constrained;
- a node's *kind* ``k``: its total CPU and its devices' models. ``reserve(k)`` >= 0: the
  pressure on kind ``k`` of the classes that only some kinds can hold at all (a class of eight
  GPUs and 120 cores fits only the 8-GPU nodes with 128 cores): ``sum`` over the classes ``m``
  an empty node of kind ``k`` holds of ``d_m * (M_m / S_m - 1)``, where ``d_m`` is ``m``'s
  share of the mix's GPU demand, ``M_m`` the GPUs of the models ``m`` accepts and ``S_m`` those
  of them on nodes that can hold ``m``. Zero for a class every node of its models can hold;
  it grows without bound as a class's homes become rare;
- the *cost* of placing ``t`` on ``n``: ``dF + d stranded + sum over the devices taken of
  share(t) * min(1, scarcity(model of the device) + reserve(kind of n))``, all in milli-GPU;
  the score is FGD's ``floor(100 / (1 + exp(cost / 1000)))``, ties to the first node of the
  seeded order.

Why: FGD measures whether *one* more task of each class fits, so CPU matters to it only once
a node cannot take even one; nodes end with idle GPUs and no CPU. And a GPU of a model that
constrained tasks need is, to FGD, as good as any other; flexible tasks use up the scarce
models and the constrained ones fail. The same holds for nodes that are the only homes of a
large class: FGD weighs a class by how many tasks it has, not by how much GPU they need, so
a few large tasks that only a few nodes can hold lose those nodes to small ones
(docs/simulator.md has the numbers).

Invariants: the mix's estimate is refreshed after 1, 2, 3, 4, 5, 6, 7, 8, 10, ... arrivals (a
quarter more than at the last refresh, at most ``every``); a scorer's score caches are dropped
whenever the estimate it follows changes, so a score never mixes two estimates, and a score is
a function of the estimate, the node and the request only: the same snapshot and mix give the
same placements, whatever was placed before. Nodes are grouped by their total CPU as well as
their free state, since ``stranded`` depends on it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

from pydantic import Field

from rota.core import MILLI, Job
from rota.scheduler.placement import Shape, accepts
from rota.scheduler.plugins.fragment import Fragmenter, TaskClass
from rota.scheduler.plugins.packing import FragmentationGradient, PackingArgs, _Packing
from rota.scheduler.plugins.registry import register
from rota.core.snapshot import Snapshot
from rota.scheduler.state import ClusterState, Slot


class CapacityArgs(PackingArgs):
    half_life: float = Field(2048, gt=0, description="requests after which a class's count "
                                                     "weighs half (the mix's memory)")
    coverage: float = Field(0.95, gt=0, le=1, description="share of the weight the kept "
                                                          "classes cover")


def class_of(shape: Shape) -> TaskClass:
    """The task class of a request (CPU-only requests have share 0 and count 0)."""
    if shape.count == 0:
        return TaskClass(shape.cpu, 0, 0, ())
    return TaskClass(shape.cpu, shape.share, shape.count, shape.models)


class ArrivalMix:
    """Exponentially decaying counts of the classes of the requests that arrived so far, and
    the estimate drawn from them.

    ``observe`` adds one arrival and, when the counts have moved enough since the last refresh
    (``due``), refreshes ``estimate``: the kept classes (``classes``) with weights summing to 1,
    as a tuple that is replaced, never changed, so that a scorer sees by identity whether the
    estimate it follows moved.
    """

    def __init__(self, half_life: float = 2048, coverage: float = 0.95, every: int = 1024) -> None:
        self.growth = 2 ** (1 / half_life)
        self.coverage, self.every = coverage, every
        self.counts: dict[TaskClass, float] = {}
        self.step = 1.0  # the weight of the next request: it grows instead of the rest decaying
        self.seen = 0
        self.last = 0  # ``seen`` at the last refresh
        self.estimate: tuple[TaskClass, ...] = ()

    def observe(self, m: TaskClass) -> None:
        self.counts[m] = self.counts.get(m, 0.0) + self.step
        self.step *= self.growth
        self.seen += 1
        if self.step > 1e100:  # rescale before floats overflow; proportions are unchanged
            self.counts = {k: v / self.step for k, v in self.counts.items()}
            self.step = 1.0
        if self.due():
            self.estimate = tuple(self.classes())
            self.last = self.seen

    def due(self) -> bool:
        return self.seen > self.last and \
            self.seen - self.last >= min(self.every, max(1, self.last // 4))

    def classes(self) -> list[TaskClass]:
        """The most popular classes covering ``coverage`` of the weight, renormalised."""
        ranked = sorted(self.counts.items(),
                        key=lambda kv: (-kv[1], kv[0].cpu, kv[0].milli, kv[0].count, kv[0].models))
        total = sum(self.counts.values())
        kept, covered = [], 0.0
        for m, w in ranked:
            kept.append((m, w))
            covered += w
            if covered >= self.coverage * total:
                break
        norm = sum(w for _, w in kept)
        return [TaskClass(m.cpu, m.milli, m.count, m.models, w / norm) for m, w in kept]

    def observe_jobs(self, jobs: Iterable[Job]) -> None:
        """Each job's class once per replica, in the given order."""
        for job in jobs:
            m = job_class(job)
            for _ in range(job.replicas):
                self.observe(m)


def job_class(job: Job) -> TaskClass:
    """The task class of one replica of ``job`` (its own GPU model patterns)."""
    g = job.request.gpu
    if g.count == 0:
        return TaskClass(job.request.cpu_milli, 0, 0, ())
    return TaskClass(job.request.cpu_milli, g.share, g.count, g.models)


class Arrivals:
    """The arrival mix of a caller that schedules successive snapshots (the control loop).

    ``update(snapshot)`` observes the pending jobs that were not pending in the snapshot of the
    call before (a job waiting over many cycles arrived once; a requeued job arrives again) and
    returns the mix to run that snapshot's cycle with. ``of(policy)`` is None for a policy whose
    placement plans for no mix.
    """

    def __init__(self, mix: ArrivalMix) -> None:
        self.mix = mix
        self._pending: set[str] = set()

    @classmethod
    def of(cls, policy) -> Arrivals | None:
        new_mix = getattr(policy.placement, "new_mix", None)
        return None if new_mix is None else cls(new_mix())

    def update(self, snapshot: Snapshot) -> ArrivalMix:
        pending = snapshot.pending
        self.mix.observe_jobs(j for j in pending if j.id not in self._pending)
        self._pending = {j.id for j in pending}
        return self.mix


def stranded(idle: int, cpu: int, node_cpu: int, gpus: int) -> float:
    """Idle milli-GPU beyond what ``cpu`` free covers at the node's CPU-per-GPU ratio."""
    if node_cpu <= 0 or gpus == 0:
        return 0.0
    return max(0.0, idle - cpu * gpus * MILLI / node_cpu)


Kind = tuple[int, tuple[str, ...]]  # a node's total CPU (milli) and its devices' models


def fits_kind(m: TaskClass, kind: Kind) -> bool:
    """Whether an empty node of ``kind`` holds one task of class ``m``."""
    cpu, models = kind
    return cpu >= m.cpu and \
        sum(1 for x in models if not m.models or accepts(m.models, x)) >= m.count


def shape_scarcity(classes: list[TaskClass], kinds: dict[Kind, int]) -> dict[Kind, float]:
    """``reserve(k)`` for every node kind, from the number of nodes of each kind (see the
    module docstring)."""
    demand = sum(m.weight * m.milli * m.count for m in classes if m.count)
    out = {k: 0.0 for k in kinds}
    if not demand:
        return out
    for m in classes:
        if not m.count:
            continue
        modelled = sum(n * sum(1 for x in k[1] if not m.models or accepts(m.models, x))
                       for k, n in kinds.items())
        homes = [k for k in kinds if fits_kind(m, k)]
        supply = sum(kinds[k] * len(k[1]) for k in homes)
        if not supply or supply >= modelled:
            continue
        pressure = (m.weight * m.milli * m.count / demand) * (modelled / supply - 1)
        for k in homes:
            out[k] += pressure
    return out


def scarcity(classes: list[TaskClass], gpus_by_model: dict[str, int]) -> dict[str, float]:
    """``scarcity(X)`` for every model of the cluster (see the module docstring)."""
    total = sum(gpus_by_model.values())
    demand = sum(m.weight * m.milli * m.count for m in classes if m.count)
    out = {x: 0.0 for x in gpus_by_model}
    if not total or not demand:
        return out
    for m in classes:
        if not m.count or not m.models:
            continue
        accepted = [x for x in gpus_by_model if accepts(m.models, x)]
        supply = sum(gpus_by_model[x] for x in accepted) / total
        if not supply:
            continue
        pressure = (m.weight * m.milli * m.count / demand) / supply
        for x in accepted:
            out[x] += pressure
    return {x: min(1.0, v) for x, v in out.items()}


@register("placement")
class CapacityGradient(_Packing):
    """The node (and device) of least cost: FGD's fragmentation gradient under the arrival mix,
    plus the GPU the placement strands by CPU, plus the scarce-model GPU it spends.

    The plugin of a policy holds only its arguments. It places through a *scorer* that follows
    a mix (``following``; ``for_cycle`` makes the one of a cycle): the scorer reads the mix's
    estimate at each placement and never changes the mix."""

    name = "capgd"
    Args = CapacityArgs

    def __init__(self, args: CapacityArgs) -> None:  # type: ignore[override]
        super().__init__(args)
        self.half_life, self.coverage = args.half_life, args.coverage
        self.mix: ArrivalMix | None = None  # the mix a scorer follows; None on the plugin
        self.estimate: tuple[TaskClass, ...] | None = None  # what the cached scores are for
        self.frag: Fragmenter | None = None
        self.scarce: dict[str, float] = {}
        self.reserve: dict[Kind, float] = {}  # node kind -> its reserve (0 when absent)
        # the Fragmenter of the latest estimate, shared by the plugin and its scorers: it
        # remembers F by node state, which depends on the estimate alone
        self._fragmenters: dict[tuple[TaskClass, ...], Fragmenter] = {}

    def new_mix(self) -> ArrivalMix:
        """An empty mix with this plugin's half-life and coverage."""
        return ArrivalMix(self.half_life, self.coverage)

    def following(self, mix: ArrivalMix) -> CapacityGradient:
        """A scorer placing for ``mix`` as it stands at each placement, with caches of its own."""
        scorer = self.fresh()
        scorer.mix, scorer.estimate = mix, None
        return scorer

    def for_cycle(self, snapshot: Snapshot, mix: ArrivalMix | None) -> CapacityGradient:
        """The scorer of a cycle: it follows ``mix``, or, when none is given (or nothing has
        arrived in it), a mix of the snapshot's pending jobs."""
        if mix is None or not mix.estimate:
            mix = self.new_mix()
            mix.observe_jobs(snapshot.pending)
        return self.following(mix)

    def select(self, state: ClusterState, shape: Shape, capped: bool
               ) -> tuple[Slot, list[int]] | None:
        if self.mix is None:
            raise RuntimeError("capgd places for an arrival mix: place with following(mix)")
        if self.mix.estimate is not self.estimate:
            self._refresh(state, self.mix.estimate)
        return super().select(state, shape, capped)

    def _refresh(self, state: ClusterState, classes: tuple[TaskClass, ...]) -> None:
        frag = self._fragmenters.get(classes)
        if frag is None:
            self._fragmenters.clear()
            frag = self._fragmenters[classes] = Fragmenter(list(classes))
        self.estimate, self.frag = classes, frag
        models = Counter(m for s in state.slots if s.pools for m in s.models)
        self.scarce = scarcity(list(classes), dict(models))
        kinds = Counter((s.node.cpu_milli, s.models) for s in state.slots if s.pools)
        self.reserve = shape_scarcity(list(classes), dict(kinds))
        for cache in getattr(self, "_scores", {}).values():
            cache.clear()

    def view_key(self, slot: Slot) -> tuple:
        return super().view_key(slot) + (slot.node.cpu_milli,)

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        return math.floor(100 / (1 + math.exp(self.cost(slot, shape, fits) / MILLI)))

    def cost(self, slot: Slot, shape: Shape, fits: list[int]) -> float:
        """The cost of placing ``shape`` on ``slot``, in milli-GPU (see the module docstring)."""
        delta, where = self._best(slot, shape, fits)
        used = [where] if shape.fractional else fits[: shape.count]
        gpu = shape.share * len(used)
        idle, total, gpus = sum(slot.milli), slot.node.cpu_milli, len(slot.milli)
        strand = stranded(idle - gpu, slot.cpu - shape.cpu, total, gpus) - \
            stranded(idle, slot.cpu, total, gpus)
        reserve = self.reserve.get((slot.node.cpu_milli, slot.models), 0.0)
        spent = sum(shape.share * min(1.0, self.scarce.get(slot.models[p], 0.0) + reserve)
                    for p in used)
        return delta + strand + spent

    def devices(self, slot: Slot, shape: Shape, fits: list[int]) -> list[int]:
        if shape.fractional:
            return [self._best(slot, shape, fits)[1]]
        return fits[: shape.count]

    def _best(self, slot: Slot, shape: Shape, fits: list[int]) -> tuple[float, int]:
        """FGD's: the smallest growth of ``F`` over the devices the request may use, and the
        device that gives it."""
        assert self.frag is not None, "select refreshes the mix before any score"
        return FragmentationGradient._best(self, slot, shape, fits)  # type: ignore[arg-type]


__all__ = ["ArrivalMix", "Arrivals", "CapacityGradient", "class_of", "fits_kind", "job_class",
           "scarcity", "shape_scarcity", "stranded"]
