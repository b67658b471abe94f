"""Where a job's replicas go: node and device choice, gang all-or-nothing.

A ``Shape`` is one replica's request resolved against the cluster: which pools (resource group
x GPU model) it may use, and how much of each device. ``place_gang`` places every replica or
none: replicas are tentatively taken in the ``ClusterState`` overlay and undone if one fails;
where nodes say which backends launch jobs on them (``rota.core.nodes.ENGINE_LABEL``), on the
nodes of one backend.

Device choice inside a node:
- a fraction goes on one device that has both the share and the memory free; the scorer's
  direction picks the fullest such device (pack) or the emptiest (spread); among devices
  equally full, the least *crowded* (``crowding``), then the lowest index;
- one whole GPU is a one-device request too: the least crowded wholly free device;
- several whole GPUs take wholly free devices, preferring a set inside one NVLink domain, then
  inside one NUMA node, and among those the domain with the fewest free devices (best fit).

MIG instances (``rota.core.mig``) are devices given whole: a request for a profile takes only
wholly free instances of exactly that profile (as whole GPUs, preferring one NVLink domain,
then one NUMA node), and no other request takes an instance, whole GPUs and shares alike. A
replica's share of an instance is its charge, the instance's compute slices of its GPU (143
milli-GPU for a ``1g`` of 7 slices), with all its memory, so that quota, usage and accounting
count what it holds.

A MIG switch planned on a node (``rota.core.migplan``) marks the devices it will take away
with its time (``GpuDevice.switch_at``). A replica that may not be evicted and would still run
then (``Shape.until``: its start plus its walltime, or for ever without one) takes none of
them; other devices of the node, and the same devices for other jobs, stay as they are.

A device's *neighbours* are the other devices of its NVLink domain (none when it has no
NVLink), and, a grade below, those of its NUMA node. Its *crowding* counts the neighbours that
are wholly free (the devices a multi-GPU replica would take with it), NVLink then NUMA, and
then the neighbours that could take the same request: a one-device request goes where it
splits the fewest free NVLink domains (a device already in use, an unlinked device, or one
in a domain already partly taken), keeping well-linked devices together for multi-GPU
replicas, as HAMi's topology-aware policy picks the device with the lowest link score to the
other candidates. It reads only the node's free state now: the same state gives the same
device whatever the order of nodes, devices or earlier takes and gives.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterator, Protocol

from rota.core import MILLI, DeviceShare, Placement, ReplicaPlacement, model_matches
from rota.scheduler.state import ALL_MODELS, FRAC_LEVELS, NO_GPUS, ClusterState, Pool, Slot

PACK, SPREAD = "pack", "spread"


@dataclass(frozen=True, slots=True)
class Shape:
    cpu: int
    mem: int
    count: int
    share: int
    gpu_mem: int | None
    models: tuple[str, ...]  # patterns every chosen device must match (job's and flavour's)
    selector: tuple[tuple[str, str], ...]
    pools: tuple[tuple[str, str], ...]
    features: frozenset[str] = frozenset()  # the node features it needs (``rota.core.nodes``)
    profile: str = ""  # the MIG profile of the instances it takes; "": whole GPUs or a share
    # until when a replica would run on devices a planned MIG switch takes away
    # (``GpuDevice.switch_at``); None: it may take them (it can be evicted with its grace)
    until: float | None = None
    # the datasets a replica reads, (name, cache key, bytes or None), and when its job was
    # submitted: placement by time to first batch (``rota.scheduler.data``); () for none
    data: tuple[tuple[str, str, int | None], ...] = ()
    since: float = 0.0

    @property
    def fractional(self) -> bool:
        return self.count == 1 and self.share < MILLI


class Scorer(Protocol):
    """What the placement extension point asks of a scoring plugin."""

    direction: str  # PACK: fullest candidates first; SPREAD: emptiest first
    sample: int  # how many feasible nodes to score before choosing; 0 scores every feasible node

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float: ...

    # Optional: ``select(state, shape, capped) -> (slot, positions) | None`` replaces the
    # candidate scan of ``find_replica`` (a plugin that scores every feasible node, or picks
    # the device inside a node by its own rule).


@lru_cache(maxsize=4096)
def accepts(patterns: tuple[str, ...], model: str) -> bool:
    """``model_matches``, remembered: a cluster has a few models and jobs a few patterns, and
    every device of every candidate node asks again."""
    return model_matches(model, patterns)


def device_fits(slot: Slot, p: int, shape: Shape, capped: bool) -> int | None:
    """Memory to take on device ``p`` for one share of ``shape``, or None if it does not fit."""
    if shape.models and not accepts(shape.models, slot.models[p]):
        return None
    if slot.profiles[p] != shape.profile:
        return None
    if shape.until is not None and slot.switching and not outlasts(slot, p, shape.until):
        return None
    free_m, free_g = slot.milli[p], slot.gmem[p]
    if capped and slot.cap is not None:
        free_m, free_g = min(free_m, slot.cap.milli[p]), min(free_g, slot.cap.gmem[p])
    full = slot.dev_mem[p]
    if shape.share == MILLI:
        if free_m != MILLI or free_g != full:
            return None
        if shape.gpu_mem is not None and shape.gpu_mem > full:
            return None
        return full
    need = shape.gpu_mem if shape.gpu_mem is not None else shape.share * full // MILLI
    if free_m < shape.share or free_g < need:
        return None
    return need


def fitting_devices(slot: Slot, shape: Shape, capped: bool) -> list[int]:
    """Positions of the devices ``device_fits`` accepts, in order; inlined for the uncapped
    case, since it runs for every device of every candidate node."""
    milli, gmem, full = slot.milli, slot.gmem, slot.dev_mem
    if capped and slot.cap is not None:
        return [p for p in range(len(milli)) if device_fits(slot, p, shape, True) is not None]
    g = shape.gpu_mem
    if shape.share == MILLI:
        fits = [p for p in range(len(milli)) if milli[p] == MILLI and gmem[p] == full[p]
                and (g is None or g <= full[p])]
    else:
        share = shape.share
        fits = [p for p in range(len(milli)) if milli[p] >= share
                and gmem[p] >= (share * full[p] // MILLI if g is None else g)]
    if shape.models:
        fits = [p for p in fits if accepts(shape.models, slot.models[p])]
    if slot.mig or shape.profile:
        profiles, profile = slot.profiles, shape.profile
        fits = [p for p in fits if profiles[p] == profile]
    if shape.until is not None and slot.switching:
        fits = [p for p in fits if outlasts(slot, p, shape.until)]
    return fits


def outlasts(slot: Slot, p: int, until: float) -> bool:
    """Whether device ``p`` is still there at ``until`` (no planned switch takes it before)."""
    end = slot.ends[p]
    return end is None or end >= until


def holds(slot: Slot, shape: Shape) -> bool:
    """Whether ``slot``'s node could hold one replica of ``shape`` when empty."""
    node = slot.node
    if shape.cpu > node.cpu_milli or shape.mem > node.memory_mib:
        return False
    if any(node.labels.get(k) != v for k, v in shape.selector):
        return False
    if shape.features and not shape.features <= node.features:
        return False
    if shape.count == 0:
        return True
    usable = [d for d in node.devices if d.healthy and (not shape.models
                                                       or accepts(shape.models, d.model))
              and (shape.gpu_mem is None or shape.gpu_mem <= d.memory_mib)
              and d.profile == shape.profile]
    return len(usable) >= shape.count


def choose_devices(slot: Slot, shape: Shape, direction: str, capped: bool) -> list[int] | None:
    """Device positions for one replica on ``slot``, or None if the node cannot hold it."""
    cpu, mem = slot.cpu, slot.mem
    if capped and slot.cap is not None:
        cpu, mem = min(cpu, slot.cap.cpu), min(mem, slot.cap.mem)
    if shape.cpu > cpu or shape.mem > mem:
        return None
    if shape.selector:
        labels = slot.node.labels
        if any(labels.get(k) != v for k, v in shape.selector):
            return None
    if shape.features and not shape.features <= slot.node.features:
        return None
    if shape.count == 0:
        return []
    fits = fitting_devices(slot, shape, capped)
    if len(fits) < shape.count:
        return None
    if len(fits) == shape.count:
        return fits
    if shape.count == 1:
        return [one_device(slot, fits, direction if shape.fractional else PACK)]
    for domain_of in (slot.nvlink, slot.numa):
        groups: dict[object, list[int]] = {}
        for p in fits:
            if domain_of[p] is not None:
                groups.setdefault(domain_of[p], []).append(p)
        enough = [g for g in groups.values() if len(g) >= shape.count]
        if enough:
            return min(enough, key=len)[: shape.count]
    return fits[: shape.count]


def one_device(slot: Slot, fits: list[int], direction: str) -> int:
    """The device for a one-device request among ``fits`` (two or more): the direction's level
    (pack: the least free share; spread: the most), then the least crowded, then the lowest
    index."""
    milli = slot.milli
    level = min(milli[p] for p in fits) if direction == PACK else max(milli[p] for p in fits)
    tied = [p for p in fits if milli[p] == level]
    if len(tied) == 1:
        return tied[0]
    if flat(slot.nvlink, slot.numa):  # no topology: crowding differs only by the device itself
        return min(tied, key=lambda p: (not slot.wholly_free(p), p))
    crowded = crowding(slot, fits)
    return min(tied, key=lambda p: (crowded(p), p))


@lru_cache(maxsize=1024)
def flat(links: tuple, numa: tuple) -> bool:
    """Whether a node's devices share no NVLink domain and one NUMA node."""
    return all(link is None for link in links) and len(set(numa)) <= 1


def crowding(slot: Slot, fits: list[int]):
    """A function giving, for a device of ``fits``, its crowding (see the module docstring):
    ``(wholly free NVLink neighbours, wholly free NUMA neighbours, NVLink neighbours in
    fits, NUMA neighbours in fits)``. Fewer is a better place for a one-device request."""
    links, numa = slot.nvlink, slot.numa
    free = [p for p in range(len(links)) if slot.wholly_free(p)]
    free_link = Counter(links[p] for p in free)
    free_numa = Counter(numa[p] for p in free)
    fit_link = Counter(links[p] for p in fits)
    fit_numa = Counter(numa[p] for p in fits)

    def crowded(p: int) -> tuple[int, int, int, int]:
        own = 1 if slot.wholly_free(p) else 0
        link = links[p]
        if link is None:
            return 0, free_numa[numa[p]] - own, 0, fit_numa[numa[p]] - 1
        return (free_link[link] - own, free_numa[numa[p]] - own,
                fit_link[link] - 1, fit_numa[numa[p]] - 1)

    return crowded


def free_link_neighbours(slot: Slot, p: int) -> int:
    """How many other wholly free devices share device ``p``'s NVLink domain, if ``p`` is
    wholly free itself (0 otherwise, and for a device without NVLink): how much a request
    that takes ``p`` splits a free domain."""
    link = slot.nvlink[p]
    if link is None or not slot.wholly_free(p):
        return 0
    return sum(1 for q, other in enumerate(slot.nvlink)
               if other == link and q != p and slot.wholly_free(q))


def shares(slot: Slot, shape: Shape, positions: list[int]) -> list[DeviceShare]:
    """The device shares of one replica at ``positions``: a MIG instance's share is what it
    is charged (its compute slices, ``GpuDevice.milli``) with all its memory; taking that
    leaves it neither wholly free nor fit for any other request."""
    out = []
    for p in positions:
        need = device_fits(slot, p, shape, False)
        device = slot.node.devices[p]
        milli = device.milli if shape.profile else shape.share
        out.append(device_share(device.index, milli, need or 0))
    return out


@lru_cache(maxsize=8192)
def device_set(shares: tuple[DeviceShare, ...]) -> tuple[DeviceShare, ...]:
    """One shared tuple per set of shares, for the same reason as ``device_share``."""
    return shares


@lru_cache(maxsize=8192)
def device_share(index: int, milli: int, memory_mib: int) -> DeviceShare:
    """One shared value per share: placements of a big cycle repeat a few hundred of them."""
    return DeviceShare(index, milli, memory_mib)


def candidates(state: ClusterState, shape: Shape, direction: str) -> Iterator[Slot]:
    """Nodes whose bucket can hold ``shape``, best first on every resource the shape asks for
    (pack: the fullest; spread: the emptiest), ties to the lowest index (name order):

    - whole GPUs: fewest (pack) or most (spread) wholly free GPUs, then free cpu, then free
      memory;
    - a fraction: the device level that best fits (pack: the least free share that holds it;
      spread: the most), then the node's free GPU (milli), then free cpu, then free memory;
    - no GPU: nodes without GPUs first, then the others; within each, by free cpu, then
      free memory.

    The caller changes nothing while iterating."""
    pools = [state.pools[k] for k in shape.pools if k in state.pools]
    spread = direction == SPREAD
    slots = state.slots
    seen: set[int] = set()
    for entries in _runs(state, shape, pools, spread):
        for entry in entries:
            i = entry[-1]
            if i in seen:
                continue
            seen.add(i)
            yield slots[i]


def _runs(state: ClusterState, shape: Shape, pools: list[Pool], spread: bool
          ) -> Iterator[Iterator[tuple]]:
    """The ordered entries to walk, one iterator per bucket level, in the direction's order."""
    if shape.count == 0:
        for group in dict.fromkeys(rg for rg, _ in shape.pools):
            bare = state.pools.get((group, NO_GPUS))
            if bare is not None:
                yield _walk([bare.ordered_whole[0]], shape.cpu, spread, True)
            every = state.pools.get((group, ALL_MODELS))
            if every is not None:
                yield _walk(every.ordered_whole, shape.cpu, spread, True)
        return
    if shape.fractional:
        levels: range = range(shape.share * (FRAC_LEVELS - 1) // MILLI, FRAC_LEVELS)
        for level in (levels[::-1] if spread else levels):
            yield _walk([p.ordered_frac[level] for p in pools], 0, spread, False)
        return
    top = max((len(p.whole) for p in pools), default=0)
    levels = range(shape.count, top)
    for level in (levels[::-1] if spread else levels):
        yield _walk([p.ordered_whole[level] for p in pools if level < len(p.ordered_whole)],
                    shape.cpu, spread, True)


def _walk(lists: list[list[tuple]], cpu: int, spread: bool, cpu_first: bool) -> Iterator[tuple]:
    """The entries of ``lists`` merged, ascending (pack) or descending with ties to the lowest
    index (spread). With ``cpu_first`` (entries ``(cpu, memory, index)``), those with less cpu
    than ``cpu`` are skipped without being looked at."""
    if not spread:
        starts = [bisect_left(x, (cpu,)) if cpu_first else 0 for x in lists]
        parts = [x[k:] if k else x for x, k in zip(lists, starts) if k < len(x)]
        yield from parts[0] if len(parts) == 1 else heapq.merge(*parts)
        return
    parts = [reversed(x) for x in lists if x]
    merged = parts[0] if len(parts) == 1 else heapq.merge(*parts, reverse=True)
    run: list[tuple] = []
    for entry in merged:
        if cpu_first and entry[0] < cpu:
            break
        if run and entry[:-1] != run[0][:-1]:
            yield from reversed(run)
            run = []
        run.append(entry)
    yield from reversed(run)


def find_replica(state: ClusterState, shape: Shape, scorer: Scorer, capped: bool
                 ) -> tuple[Slot, list[int]] | None:
    """The best node and device positions for one replica, per ``scorer``. A scorer that
    defines ``select(state, shape, capped)`` makes the whole choice itself (node and devices)."""
    select = getattr(scorer, "select", None)
    if select is not None:
        return select(state, shape, capped)
    best: tuple[float, Slot, list[int]] | None = None
    found = 0
    scan = candidates(state, shape, scorer.direction)
    try:
        for slot in scan:
            positions = choose_devices(slot, shape, scorer.direction, capped)
            if positions is None:
                continue
            if scorer.sample == 1:
                return slot, positions
            score = scorer.score(slot, shape, positions)
            if best is None or score > best[0]:
                best = (score, slot, positions)
            found += 1
            if found == scorer.sample:
                break
    finally:
        scan.close()
    return None if best is None else (best[1], best[2])


def place_gang(state: ClusterState, shape: Shape, replicas: int, scorer: Scorer,
               capped: bool = False) -> tuple[Placement | None, int]:
    """Place all ``replicas`` or none. Returns (placement, replicas that fitted).

    Where nodes name the backends that launch jobs on them (``ClusterState.engines``), a gang
    whose selector names none goes to nodes that one backend launches on: each backend's
    nodes are tried in turn, in name order, and the first that take every replica win."""
    if replicas > 1 and len(state.engines) > 1 and not any(
            k in state.engines for k, _ in shape.selector):
        most = 0
        for engine in state.engines:
            within = replace(shape, selector=(*shape.selector, (engine, "true")))
            placement, fitted = _place_all(state, within, replicas, scorer, capped)
            if placement is not None:
                return placement, fitted
            most = max(most, fitted)
        return None, most
    return _place_all(state, shape, replicas, scorer, capped)


def _place_all(state: ClusterState, shape: Shape, replicas: int, scorer: Scorer,
               capped: bool) -> tuple[Placement | None, int]:
    mark = state.mark()
    placed: list[ReplicaPlacement] = []
    for _ in range(replicas):
        hit = find_replica(state, shape, scorer, capped)
        if hit is None:
            state.undo(mark)
            return None, len(placed)
        slot, positions = hit
        devs = shares(slot, shape, positions)
        state.take(slot, shape.cpu, shape.mem, devs, positions, capped)
        placed.append(ReplicaPlacement(slot.name, device_set(tuple(devs))))
    return Placement(tuple(placed)), replicas
