"""The packing policies of the GPU-sharing literature, as placement plugins that score every
feasible node: ``random``, ``dotprod``, ``gpuclustering``, ``gpupacking``, ``bestfit`` and
``fgd`` (fragmentation gradient descent, Weng et al., USENIX ATC '23).

Vocabulary:
- *device view*: a node's free devices as ``(model, free milli-GPU)`` pairs (with their memory
  and MIG profile), sorted; with the free CPU it is all a score depends on (plus, for
  ``gpuclustering``, the kinds of task the node hosts). Nodes with equal views form a *group*
  and are scored once per request.
- *rank*: a node's place in a random order of the nodes fixed by the plugin's ``seed``. Among
  equally scored nodes the lowest rank wins.
- *kind* of a GPU request: ``share`` (a fraction of one device), or the number of whole devices.

Every plugin implements ``select`` (see ``placement.find_replica``): it scores every feasible
node, takes the best, and picks the devices inside it by its own rule: whole GPUs always take
the lowest-indexed wholly free devices; a fraction goes on the best-fit device (least free that
fits), a random device (``random``), or the device whose use adds the least fragmentation
(``fgd``). Free memory is a hard filter only, checked node by node in rank order.

Invariant: the groups mirror the ``ClusterState`` they were built from. The plugin follows the
state's journal (entries appended since the last call regroup their nodes; an undo or another
state rebuilds everything), so it may place on one state over many requests (the packing
experiment) as well as inside ``run_cycle``. A cycle places with a copy of its own
(``for_cycle``): the groups, score caches and random draws of one cycle never reach another,
and the plugin of the policy is left unchanged. What the copies share is ``fgd``'s memo of
``F`` by node state, and ``F`` depends on nothing else (the target workload is fixed).
"""

from __future__ import annotations

import bisect
import copy
import math
import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rota.core import MILLI
from rota.core.snapshot import Snapshot
from rota.scheduler.placement import PACK, Shape, choose_devices, device_fits
from rota.scheduler.plugins.fragment import Fragmenter, TaskClass
from rota.scheduler.plugins.registry import register
from rota.scheduler.state import SHARE, ClusterState, Entry, Slot, task_kind

MAX_CPU = 128_000  # the largest node's CPU (milli) and GPUs (milli): the scales of the scores
MAX_GPU = 8 * MILLI
_MISS = object()


class PackingArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = Field(0, description="seed of the node order that breaks ties")


class WorkloadClass(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpu: int = Field(ge=0, description="CPU request, milli-cores")
    gpu_milli: int = Field(ge=0, le=MILLI, description="per-device share; 0 for CPU-only")
    num_gpu: int = Field(ge=0, le=64, description="number of devices")
    models: list[str] = Field(default_factory=list, description="allowed GPU models; empty: any")
    weight: float = Field(gt=0, description="popularity; weights are renormalised to sum to 1")


class FgdArgs(PackingArgs):
    workload: list[WorkloadClass] = Field(min_length=1, description="the target workload")


def kind(shape: Shape) -> str | int | None:
    if shape.count == 0:
        return None
    return SHARE if shape.fractional else shape.count


def _entry_kind(e: Entry) -> str | int | None:
    return task_kind(e.devices) if e.devices else None


class _Packing:
    """Shared machinery: groups of equal nodes, the seeded node order, score caching."""

    name = "packing"
    direction = PACK
    sample = 0
    Args = PackingArgs
    tracks_kinds = False  # whether the score depends on the kinds of task a node hosts

    def __init__(self, args: PackingArgs) -> None:
        self.seed = args.seed
        self.rng = random.Random(args.seed)
        self._state: ClusterState | None = None
        self._seen, self._last = 0, None

    def fresh(self) -> _Packing:
        """A copy with this plugin's arguments and none of its state: no groups, no cached
        scores, the random generator at its seed."""
        other = copy.copy(self)
        other._state, other._seen, other._last = None, 0, None
        other.rng = random.Random(self.seed)
        return other

    def for_cycle(self, snapshot: Snapshot, mix: Any) -> _Packing:
        """The copy a cycle places with (see the module docstring)."""
        return self.fresh()

    # -- the extension point -----------------------------------------------------------------

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float:
        value = self.node_score(slot, shape, self._fits(slot, shape))
        return -math.inf if value is None else float(value)

    def select(self, state: ClusterState, shape: Shape, capped: bool
               ) -> tuple[Slot, list[int]] | None:
        self._sync(state)
        request = (shape.cpu, shape.count, shape.share, shape.gpu_mem, shape.models, shape.pools,
                   shape.profile)
        best_score: float | None = None
        best_rank = len(self._rank_slot)
        for gid, members in self._members.items():
            cache = self._scores[gid]
            value = cache.get(request, _MISS)
            if value is _MISS:
                value = cache[request] = self._group_score(gid, shape)
            if value is None or (best_score is not None and (
                    value < best_score or (value == best_score and members[0] > best_rank))):
                continue
            rank = self._first_ok(members, shape, capped)
            if rank is None:
                continue
            if best_score is None or value > best_score or rank < best_rank:
                best_score, best_rank = value, rank
        if best_score is None:
            return None
        slot = state.slots[self._rank_slot[best_rank]]
        return slot, self.devices(slot, shape, self._fits(slot, shape))

    # -- what each policy defines ------------------------------------------------------------

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        raise NotImplementedError

    def devices(self, slot: Slot, shape: Shape, fits: list[int]) -> list[int]:
        """Positions for the request on the chosen node: whole GPUs the lowest-indexed, a
        fraction the best-fit device (ties: the lowest index)."""
        if shape.fractional:
            return [min(fits, key=lambda p: (slot.milli[p], p))]
        return fits[: shape.count]

    # -- feasibility ---------------------------------------------------------------------------

    @staticmethod
    def _fits(slot: Slot, shape: Shape) -> list[int]:
        if shape.count == 0:
            return []
        return [p for p in range(len(slot.milli)) if device_fits(slot, p, shape, False) is not None]

    def _group_score(self, gid: int, shape: Shape) -> float | None:
        """The score of a group's nodes for ``shape`` (None: they cannot hold it; memory and
        caps aside, which are checked node by node)."""
        slot = self._slot_of[gid]
        if slot.cpu < shape.cpu or not any(p.key in shape.pools for p in slot.pools):
            return None
        fits = self._fits(slot, shape)
        if len(fits) < shape.count:
            return None
        return self.node_score(slot, shape, fits)

    def _first_ok(self, members: list[int], shape: Shape, capped: bool) -> int | None:
        slots, order = self._state.slots, self._rank_slot  # type: ignore[union-attr]
        for rank in members:
            slot = slots[order[rank]]
            if slot.mem < shape.mem:
                continue
            if (shape.selector or (capped and slot.cap is not None)) and \
                    choose_devices(slot, shape, PACK, capped) is None:
                continue
            return rank
        return None

    # -- following the state -------------------------------------------------------------------

    def _sync(self, state: ClusterState) -> None:
        journal, seen = state.journal, self._seen
        if state is not self._state or len(journal) < seen or (
                seen and journal[seen - 1] is not self._last):
            self._rebuild(state)
        else:
            dirty = set()
            for e in journal[seen:]:
                self._note(e)
                dirty.add(e.slot)
            for i in dirty:
                self._regroup(state.slots[i])
        self._seen = len(journal)
        self._last = journal[-1] if journal else None

    def _rebuild(self, state: ClusterState) -> None:
        self._state = state
        self.rng = random.Random(self.seed)  # a new cycle draws as the last did: deterministic
        order = list(range(len(state.slots)))
        random.Random(self.seed).shuffle(order)
        self._rank_slot = order
        self._rank = [0] * len(order)
        for rank, i in enumerate(order):
            self._rank[i] = rank
        self._gid: dict[tuple, int] = {}
        self._slot_of: dict[int, Slot] = {}
        self._scores: dict[int, dict[tuple, Any]] = {}
        self._members: dict[int, list[int]] = {}
        self._group = [-1] * len(order)
        loaded = state.loaded_kinds  # what running jobs host, then the cycle's own changes
        self._kinds: list[dict[Any, int]] = [dict(loaded.get(i, ())) for i in range(len(order))]
        for e in state.journal:
            self._note(e)
        for slot in state.slots:
            if slot.pools:  # cordoned nodes are in no pool and take nothing
                self._regroup(slot)

    def _note(self, e: Entry) -> None:
        if not self.tracks_kinds:
            return
        k = _entry_kind(e)
        if k is None:
            return
        kinds = self._kinds[e.slot]
        sign = 1 if e.devices[0][1] > 0 else -1
        kinds[k] = kinds.get(k, 0) + sign
        if kinds[k] <= 0:
            del kinds[k]

    def view_key(self, slot: Slot) -> tuple:
        devs = tuple(sorted(zip(slot.models, slot.milli, slot.gmem, slot.dev_mem, slot.profiles)))
        extra = tuple(sorted(map(str, self._kinds[slot.i]))) if self.tracks_kinds else ()
        return (tuple(p.key for p in slot.pools), slot.cpu, devs, extra)

    def _regroup(self, slot: Slot) -> None:
        rank, old = self._rank[slot.i], self._group[slot.i]
        if old >= 0:
            members = self._members[old]
            at = bisect.bisect_left(members, rank)
            members.pop(at)
            if not members:
                del self._members[old]
            elif at == 0:
                self._slot_of[old] = self._state.slots[self._rank_slot[members[0]]]  # type: ignore[union-attr]
        key = self.view_key(slot)
        gid = self._gid.get(key)
        if gid is None:
            gid = self._gid[key] = len(self._gid)
            self._scores[gid] = {}
        members = self._members.get(gid)
        if members is None:
            members = self._members[gid] = []
        if not members or rank < members[0]:
            self._slot_of[gid] = slot  # the group's representative: its first node
        bisect.insort(members, rank)
        self._group[slot.i] = gid


@register("placement")
class RandomFit(_Packing):
    """Any feasible node, uniformly at random; a fraction goes on a random device that fits."""

    name = "random"

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        return 0.0

    def select(self, state: ClusterState, shape: Shape, capped: bool
               ) -> tuple[Slot, list[int]] | None:
        self._sync(state)
        request = (shape.cpu, shape.count, shape.share, shape.gpu_mem, shape.models, shape.pools,
                   shape.profile)
        groups: list[list[int]] = []
        for gid, members in self._members.items():
            cache = self._scores[gid]
            value = cache.get(request, _MISS)
            if value is _MISS:
                value = cache[request] = self._group_score(gid, shape)
            if value is not None:
                groups.append(members)
        # draw from the members of the groups that fit, and check only the one drawn; if it
        # does not fit after all (a cap), draw among the checked ones: still uniform over
        # the nodes that fit
        k = self.rng.randrange(sum(map(len, groups))) if groups else -1
        for members in groups:
            if k < len(members):
                rank = members[k]
                break
            k -= len(members)
        else:
            return None
        if self._first_ok([rank], shape, capped) is None:
            feasible = sorted(r for members in groups for r in members
                              if self._first_ok([r], shape, capped) is not None)
            if not feasible:
                return None
            rank = self.rng.choice(feasible)
        slot = state.slots[self._rank_slot[rank]]
        return slot, self.devices(slot, shape, self._fits(slot, shape))

    def devices(self, slot: Slot, shape: Shape, fits: list[int]) -> list[int]:
        if shape.fractional:
            return [self.rng.choice(fits)]
        return fits[: shape.count]


def _free(slot: Slot) -> tuple[int, int]:
    return slot.cpu, sum(slot.milli)


@register("placement")
class DotProduct(_Packing):
    """Tetris' alignment: the node whose free (CPU, GPU) vector has the smallest dot product
    with the request, both scaled by the largest node; score ``int(100 * (1 - dot / 2))``."""

    name = "dotprod"

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        cpu, gpu = _free(slot)
        dot = (cpu / MAX_CPU) * (shape.cpu / MAX_CPU) + \
              (gpu / MAX_GPU) * (shape.count * shape.share / MAX_GPU)
        return int(100 * (1 - dot / 2))


@register("placement")
class BestFit(_Packing):
    """The node with the least weighted leftover: ``0.5 (free CPU - cpu) / 128 cores + 0.5
    (free GPU - gpu) / 8 GPUs``; score ``int(100 * (1 - leftover))``."""

    name = "bestfit"

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        cpu, gpu = _free(slot)
        left = (cpu - shape.cpu) / MAX_CPU * 0.5 + (gpu - shape.count * shape.share) / MAX_GPU * 0.5
        return int((1.0 - left) * 100)


@register("placement")
class GpuPacking(_Packing):
    """Fill partly used devices first (50..100, the less free they have the better), then
    whole devices of a partly used node (33..50, the fewer the better), then idle nodes
    (``max(33 - GPUs, GPUs)``). CPU-only requests score 0 everywhere."""

    name = "gpupacking"

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        if shape.count == 0:
            return 0
        gpus = len(slot.milli)
        wholly = sum(1 for m in slot.milli if m == MILLI)
        if wholly == gpus:
            return max(100 // 3 - wholly, wholly)
        use = sorted(fits, key=lambda p: (slot.milli[p], p))[: shape.count]
        whole_used = sum(1 for p in use if slot.milli[p] == MILLI)
        if whole_used:
            return max(100 // 2 - whole_used, 100 // 3)
        ratio = sum(slot.milli[p] * 100 // MILLI for p in use)
        return max(100 - ratio // 10, 100 // 2)


@register("placement")
class GpuClustering(_Packing):
    """Keep kinds of task together (share, 1, 2, 4, 8 GPUs): nodes hosting only this kind
    (75..100), this kind among others (50..75), idle nodes (25..50), only other kinds (0..25);
    within a band, less free GPU is better. CPU-only requests score 0 everywhere."""

    name = "gpuclustering"
    tracks_kinds = True

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        k = kind(shape)
        if k is None:
            return 0
        hosted = self._kinds[slot.i]
        fill = 25 * (MAX_GPU - sum(slot.milli)) // MAX_GPU
        if k in hosted:
            return fill + (75 if len(hosted) == 1 else 50)
        return fill + (25 if not hosted else 0)


@register("placement")
class FragmentationGradient(_Packing):
    """FGD: the node (and device) whose use grows the expected fragmentation of the target
    workload the least; score ``floor(100 / (1 + exp(delta / 1000)))``, delta in milli-GPU."""

    name = "fgd"
    Args = FgdArgs

    def __init__(self, args: FgdArgs) -> None:  # type: ignore[override]
        super().__init__(args)
        classes = [TaskClass(c.cpu, c.gpu_milli if c.num_gpu else 0, c.num_gpu,
                             tuple(c.models), c.weight) for c in args.workload]
        self.frag = Fragmenter(classes)

    def node_score(self, slot: Slot, shape: Shape, fits: list[int]) -> float | None:
        return _sigmoid_score(self._best(slot, shape, fits)[0])

    def devices(self, slot: Slot, shape: Shape, fits: list[int]) -> list[int]:
        if shape.fractional:
            return [self._best(slot, shape, fits)[1]]
        return fits[: shape.count]

    def _best(self, slot: Slot, shape: Shape, fits: list[int]) -> tuple[float, int]:
        """The smallest fragmentation delta over the devices a request may use, and the
        device that gives it (the lowest index among equals; -1 when no device is used)."""
        devs = list(zip(slot.models, slot.milli))
        before = self.frag.node(slot.cpu, tuple(sorted(devs)))
        cpu = slot.cpu - shape.cpu
        if not shape.fractional:
            for p in fits[: shape.count]:
                devs[p] = (devs[p][0], 0)
            return self.frag.node(cpu, tuple(sorted(devs))) - before, -1
        best, where, tried = math.inf, -1, {}
        for p in fits:
            model, free = devs[p]
            delta = tried.get((model, free))
            if delta is None:
                devs[p] = (model, free - shape.share)
                delta = tried[(model, free)] = self.frag.node(cpu, tuple(sorted(devs))) - before
                devs[p] = (model, free)
            if delta < best:
                best, where = delta, p
        return best, where


def _sigmoid_score(delta: float) -> int:
    return math.floor(100 / (1 + math.exp(delta / MILLI)))


__all__ = ["RandomFit", "DotProduct", "BestFit", "GpuPacking", "GpuClustering",
           "FragmentationGradient"]
