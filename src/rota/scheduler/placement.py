"""Where a job's replicas go: node and device choice, gang all-or-nothing.

A ``Shape`` is one replica's request resolved against the cluster: which pools (resource group
x GPU model) it may use, and how much of each device. ``place_gang`` places every replica or
none: replicas are tentatively taken in the ``ClusterState`` overlay and undone if one fails.

Device choice inside a node:
- a fraction goes on one device that has both the share and the memory free; the scorer's
  direction picks the fullest such device (pack) or the emptiest (spread);
- whole GPUs take wholly free devices, preferring a set inside one NVLink domain, then inside
  one NUMA node, and among those the domain with the fewest free devices (best fit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Protocol

from rota.core import MILLI, DeviceShare, Placement, ReplicaPlacement, model_matches
from rota.scheduler.state import FRAC_LEVELS, ClusterState, Pool, Slot

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
    return fits


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
    if shape.count == 0:
        return []
    fits = fitting_devices(slot, shape, capped)
    if len(fits) < shape.count:
        return None
    if shape.fractional:
        key = (lambda p: (slot.milli[p], p)) if direction == PACK else (lambda p: (-slot.milli[p], p))
        return [min(fits, key=key)]
    if len(fits) == shape.count:
        return fits
    for domain_of in (slot.nvlink, slot.numa):
        groups: dict[object, list[int]] = {}
        for p in fits:
            if domain_of[p] is not None:
                groups.setdefault(domain_of[p], []).append(p)
        enough = [g for g in groups.values() if len(g) >= shape.count]
        if enough:
            return min(enough, key=len)[: shape.count]
    return fits[: shape.count]


def shares(slot: Slot, shape: Shape, positions: list[int]) -> list[DeviceShare]:
    out = []
    for p in positions:
        need = device_fits(slot, p, shape, False)
        out.append(device_share(slot.node.devices[p].index, shape.share, need or 0))
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
    """Nodes whose bucket can hold ``shape``, fullest (pack) or emptiest (spread) first."""
    pools = [state.pools[k] for k in shape.pools if k in state.pools]
    if shape.fractional:
        lo = shape.share * (FRAC_LEVELS - 1) // MILLI
        levels: range = range(lo, FRAC_LEVELS)
        pick = _frac
    else:
        top = max((len(p.whole) for p in pools), default=0)
        levels = range(shape.count, top)
        pick = _whole
    if direction == SPREAD:
        levels = levels[::-1]
    # a node sits in one whole-GPU bucket of a pool but may sit in several pools (mixed models)
    # and in several fraction buckets; the caller changes nothing while iterating
    seen: set[int] | None = set() if len(pools) > 1 or shape.fractional else None
    slots = state.slots
    for level in levels:
        for pool in pools:
            bucket = pick(pool, level)
            if not bucket:
                continue
            for i in bucket:
                if seen is not None:
                    if i in seen:
                        continue
                    seen.add(i)
                yield slots[i]


def _frac(pool: Pool, level: int) -> list[int] | None:
    return pool.frac[level] if level < len(pool.frac) else None


def _whole(pool: Pool, level: int) -> list[int] | None:
    return pool.whole[level] if level < len(pool.whole) else None


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
    """Place all ``replicas`` or none. Returns (placement, replicas that fitted)."""
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
