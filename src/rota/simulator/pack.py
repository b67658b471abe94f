"""The packing experiment of "Beware of Fragmentation" (ATC '23) on rota's placement core.

One *run* (a pod list, a policy, a seed):
1. the pods, sorted by name, are shuffled with ``random.Random(seed)``;
2. *tuning* scales the workload to ``tune`` x the cluster's GPUs: copies of pods drawn with
   replacement from the original list are appended until the next copy's per-GPU share would
   pass the target (the reference's quirk: the check uses the per-GPU share, the total adds all
   of the copy's GPUs, so a multi-GPU copy may overshoot a little); a list above the target
   loses random pods until it is at or below it;
3. the pods arrive one at a time, never leave; each is placed by the policy's placement plugin
   through ``place_gang`` on one persistent ``ClusterState`` (the code ``run_cycle`` places
   with), or dropped as failed; for a policy that learns the mix of arriving work (``capgd``),
   each pod with a GPU model of the cluster is observed into the mix before it is placed;
4. after every arrival: arrived workload, allocated GPU and cluster fragmentation (``F`` of
   ``rota.scheduler.plugins.fragment`` under the target workload), as percentages;
5. the series is discretised by arrived % (``bins``).

The *target workload* is estimated from the original pods (before tuning): the most frequent
(cpu, gpu share, GPU count, GPU models) tuples covering ``threshold`` of the pods, reweighted.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

from rota.core import MILLI, InvalidSpec
from rota.scheduler.placement import Shape, place_gang
from rota.scheduler.plugins.capacity import class_of
from rota.scheduler.plugins.fragment import Fragmenter, TaskClass
from rota.scheduler.plugins.registry import arguments, create
from rota.scheduler.state import ALL_MODELS, ClusterState
from rota.simulator.alibaba import TraceNode, TracePod, to_nodes

POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "capgd")
MAX_BIN = 130
GROUP = "default"


def target_workload(pods: list[TracePod], threshold: float = 0.95) -> list[dict]:
    """Task classes with popularity, as FGD's ``workload`` argument."""
    if not 0 < threshold <= 1:
        raise InvalidSpec("threshold", f"must be in (0, 1], got {threshold}")
    counts = Counter((p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec) for p in pods)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept, covered = [], 0
    for (cpu, milli, count, spec), n in ranked:
        kept.append({"cpu": cpu, "gpu_milli": milli, "num_gpu": count, "models": list(spec),
                     "weight": n})
        covered += n
        if covered >= threshold * len(pods):
            break
    total = sum(c["weight"] for c in kept)
    for c in kept:
        c["weight"] = c["weight"] / total
    return kept


def tune(pods: list[TracePod], capacity_milli: int, ratio: float, rng: random.Random
         ) -> list[TracePod]:
    """Shuffle, then grow or shrink the list to ``ratio`` x ``capacity_milli`` of GPU."""
    if ratio <= 0:
        raise InvalidSpec("tune", f"must be positive, got {ratio}")
    original = sorted(pods, key=lambda p: p.name)
    out = list(original)
    rng.shuffle(out)
    target = ratio * capacity_milli
    total = sum(p.gpu_total for p in out)
    copies = 0
    if total < target:
        while True:
            pick = original[rng.randrange(len(original))]
            if total + pick.gpu_milli > target:
                break
            copies += 1
            out.append(TracePod(f"{pick.name}-copy{copies}", pick.cpu_milli, pick.memory_mib,
                                pick.num_gpu, pick.gpu_milli, pick.gpu_spec))
            total += pick.gpu_total
    else:
        while total > target and out:
            gone = out.pop(rng.randrange(len(out)))
            total -= gone.gpu_total
    return out


def shape_of(pod: TracePod, models: frozenset[str]) -> Shape | None:
    """The placement request of a pod; None when no GPU of the cluster is of its models."""
    count, share = (pod.num_gpu, pod.gpu_milli) if pod.num_gpu else (0, MILLI)
    if count and pod.gpu_spec:
        allowed = tuple(m for m in pod.gpu_spec if m in models)
        if not allowed:
            return None
        pools = tuple((GROUP, m) for m in allowed)
    else:
        allowed, pools = (), ((GROUP, ALL_MODELS),)
    return Shape(pod.cpu_milli, pod.memory_mib, count, share, None, allowed, (), pools)


@dataclass(frozen=True, slots=True)
class Point:
    """Cluster measures at an arrived workload, all in percent."""

    arrived: float
    unallocated: float
    frag_amount: float
    frag_rate: float


@dataclass(frozen=True, slots=True)
class PackRun:
    policy: str
    seed: int
    pods: int
    failed: int
    curve: tuple[Point | None, ...]  # index = arrived % bin, 0..MAX_BIN; None: no data near

    def at(self, arrived: int) -> Point | None:
        return self.curve[arrived] if 0 <= arrived < len(self.curve) else None


class Meter:
    """Allocated GPU and fragmentation of the whole cluster, updated node by node."""

    def __init__(self, state: ClusterState, frag: Fragmenter) -> None:
        self.state, self.frag = state, frag
        self.total = sum(len(s.milli) for s in state.slots) * MILLI
        self.node_frag = [self._frag(s) for s in state.slots]
        self.frag_sum = sum(self.node_frag)
        self.idle = sum(sum(s.milli) for s in state.slots)

    def _frag(self, slot) -> float:
        return self.frag.node(slot.cpu, tuple(sorted(zip(slot.models, slot.milli))))

    def changed(self, slot, gpu_taken: int) -> None:
        new = self._frag(slot)
        self.frag_sum += new - self.node_frag[slot.i]
        self.node_frag[slot.i] = new
        self.idle -= gpu_taken

    def point(self, arrived_milli: int) -> Point:
        idle = max(self.idle, 0)
        return Point(100 * arrived_milli / self.total, 100 * idle / self.total,
                     100 * self.frag_sum / self.total,
                     100 * self.frag_sum / idle if idle else 0.0)


def run(nodes: list[TraceNode], pods: list[TracePod], policy: str, seed: int,
        ratio: float = 1.3, threshold: float = 0.95) -> PackRun:
    """One packing run; see the module docstring."""
    if policy not in POLICIES:
        raise InvalidSpec("policy", f"unknown packing policy {policy!r}; known: {', '.join(POLICIES)}")
    gpu_nodes = [n for n in nodes if n.gpus]
    state = ClusterState(to_nodes(gpu_nodes))
    workload = target_workload(pods, threshold)
    args: dict = {"seed": seed}
    if "workload" in arguments("placement", policy):  # a policy that takes the trace's prior
        args["workload"] = workload
    plugin = create("placement", policy, args)
    new_mix = getattr(plugin, "new_mix", None)  # a policy that learns the mix as pods arrive
    mix = None if new_mix is None else new_mix()
    if mix is not None:
        plugin = plugin.following(mix)
    meter = Meter(state, Fragmenter([TaskClass(c["cpu"], c["gpu_milli"], c["num_gpu"],
                                               tuple(c["models"]), c["weight"]) for c in workload]))
    if meter.total == 0:
        raise InvalidSpec("nodes", "the cluster has no GPU")
    arrivals = tune(pods, meter.total, ratio, random.Random(seed))
    models = frozenset(n.model for n in gpu_nodes)
    arrived, failed, points = 0, 0, []
    shapes: dict[tuple, Shape | None] = {}
    for pod in arrivals:
        arrived += pod.gpu_total
        key = (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)
        shape = shapes[key] if key in shapes else shapes.setdefault(key, shape_of(pod, models))
        if shape is not None and mix is not None:
            mix.observe(class_of(shape))
        placement = None if shape is None else place_gang(state, shape, 1, plugin)[0]
        if placement is None:
            failed += 1
        else:
            rep = placement.replicas[0]
            meter.changed(state.by_name[rep.node], sum(d.milli for d in rep.devices))
        points.append(meter.point(arrived))
    return PackRun(policy, seed, len(arrivals), failed, bins(points))


def bins(points: list[Point]) -> tuple[Point | None, ...]:
    """Average the points whose arrived % rounds to each integer 0..MAX_BIN; an empty bin takes
    the average of its +-1 neighbourhood, or None if that is empty too."""
    sums: list[list[float]] = [[0.0, 0.0, 0.0, 0.0, 0] for _ in range(MAX_BIN + 1)]
    for p in points:
        b = math.floor(p.arrived + 0.5)
        if 0 <= b <= MAX_BIN:
            acc = sums[b]
            acc[0] += p.unallocated
            acc[1] += p.frag_amount
            acc[2] += p.frag_rate
            acc[4] += 1
    out: list[Point | None] = []
    for b in range(MAX_BIN + 1):
        near = [sums[b]] if sums[b][4] else [sums[k] for k in (b - 1, b + 1) if 0 <= k <= MAX_BIN]
        n = sum(a[4] for a in near)
        if not n:
            out.append(None)
            continue
        out.append(Point(float(b), sum(a[0] for a in near) / n, sum(a[1] for a in near) / n,
                         sum(a[2] for a in near) / n))
    return tuple(out)
