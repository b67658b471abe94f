"""Placement by time to first batch: a job that reads datasets goes where its data already is.

Vocabulary:
- a job's **data** (``Shape.data``) is, per dataset it names that the snapshot knows
  (``Snapshot.datasets``), its name, its cache key (``imagenet@1``) and its size (None: not
  known);
- a node's **time to first batch** for that data is the bytes its cache still lacks
  (``Node.cache``) over the bandwidth it copies from a source at (``Node.data_bandwidth``, else
  the policy's ``bandwidth``): 0 where every dataset is cached whole. A dataset of unknown
  size counts only as missing or not (it breaks ties);
- a **warm** node is one whose time to first batch is lower than that of the best node free
  now.

``DataAware`` wraps the policy's placement plugin for the cycle (``aware``). A replica of a job
without data is placed by that plugin exactly as without the wrapper. A replica with data goes,
among the nodes that fit it now, to the one with the lowest time to first batch (``mode:
ttfb``), ties to the plugin's own candidate order (binpack: fullest first; spread: emptiest).
A gang's replicas each choose so, and so go to the nodes that share its cache first.

The delay bound (``delay: true``, delay scheduling): when the best node free now is cold (a
copy of ``c`` seconds) while a warm node could hold the replica once it is free, the job waits,
but only while it has waited (since it was submitted) less than ``c``: a job never waits for a
warm node longer than starting cold would cost. While it waits, it carries the reason
``data-locality`` (``requested``: ``c``; ``free``: how much longer it may wait; ``detail``:
the warm node and the datasets it holds). A job that waits so does not preempt for room.

Two comparison modes, as Fluid's dataset affinity places pods: ``soft`` prefers nodes that hold
a copy of every dataset of the job, whatever its size and without waiting (a preferred node
affinity); ``required`` places the job only on such nodes while any node that could hold it
holds the data, and waits for one otherwise (a required node affinity; the first job of a
dataset goes anywhere).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rota.core import Job, Reason, ReasonCode
from rota.core.datasets import cache_key
from rota.core.nodes import Node
from rota.core.snapshot import Snapshot
from rota.scheduler.placement import PACK, Shape, candidates, choose_devices, find_replica, holds
from rota.scheduler.state import ClusterState, Slot

Need = tuple[str, str, "int | None"]  # dataset name, cache key, size in bytes (None: unknown)
DEFAULT_BANDWIDTH = 1e9  # bytes/s from a dataset's source where a node reports none


class DataArgs(BaseModel):
    """A policy's ``data:`` settings (``none`` turns data placement off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["ttfb", "soft", "required"] = "ttfb"
    bandwidth: float = Field(DEFAULT_BANDWIDTH, gt=0,
                             description="bytes/s from a source where a node reports none")
    delay: bool = True


def needs(snapshot: Snapshot, job: Job) -> tuple[Need, ...]:
    """The data of ``job`` the snapshot knows (a dataset removed since submit is left out)."""
    found = (snapshot.datasets.get(name) for name in job.datasets)
    return tuple((d.name, cache_key(d.name, d.version), d.size_bytes) for d in found if d)


def with_data(shape: Shape, job: Job, snapshot: Snapshot, policy) -> Shape:
    """``shape`` carrying the job's data, when it reads any, and its submission time where the
    delay bound reads it (else 0: jobs alike that read the same data share a shape, and so
    the cycle's answer for a placement that failed)."""
    data = needs(snapshot, job) if job.datasets else ()
    if not data:
        return shape
    args = getattr(policy, "data", None)
    bounded = args is not None and args.mode == "ttfb" and args.delay
    return replace(shape, data=data, since=job.submit_time if bounded else 0.0)


def cost(node: Node, data: tuple[Need, ...], bandwidth: float) -> tuple[float, int]:
    """(seconds to copy what the node's cache lacks, datasets of unknown size it lacks)."""
    missing, unknown = 0, 0
    for _, key, size in data:
        held = node.cache.get(key, 0)
        if size is None:
            unknown += held == 0
        else:
            missing += max(0, size - held)
    return missing / (node.data_bandwidth or bandwidth), unknown


def holds_all(node: Node, data: tuple[Need, ...]) -> bool:
    """Whether the node's cache has a copy (whole or partial) of every dataset."""
    return all(node.cache.get(key, 0) > 0 for _, key, _ in data)


def could_hold(slot: Slot, shape: Shape) -> bool:
    """Whether the node may take a replica of ``shape`` once free: schedulable, in one of the
    shape's pools (resource group and GPU model), large enough, with its labels and features."""
    return slot.node.schedulable and any(p.key in shape.pools for p in slot.pools) \
        and holds(slot, shape)


def aware(plugin, policy, now: float):
    """The cycle's placement: ``plugin`` wrapped by ``DataAware`` where the policy places by
    data (``policy.data``), else ``plugin`` itself."""
    args = getattr(policy, "data", None)
    return plugin if args is None else DataAware(plugin, args, now)


class DataAware:
    """The placement plugin ``inner``, with data placement for replicas that read datasets
    (module docstring). ``data_waits``: per shape, why its latest replica waited for data."""

    def __init__(self, inner, args: DataArgs, now: float) -> None:
        self.inner, self.args, self.now = inner, args, now
        self.direction = getattr(inner, "direction", PACK)
        self.sample = getattr(inner, "sample", 1)
        self.data_waits: dict[Shape, Reason] = {}
        self._holding: dict[Shape, frozenset[str] | None] = {}  # ``_cached_nodes``, per shape

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float:
        return self.inner.score(slot, shape, positions)

    def bound(self, placement) -> None:
        follow = getattr(self.inner, "bound", None)
        if follow is not None:
            follow(placement)

    def select(self, state: ClusterState, shape: Shape, capped: bool
               ) -> tuple[Slot, list[int]] | None:
        if not shape.data:
            return find_replica(state, shape, self.inner, capped)
        self.data_waits.pop(shape, None)
        only = self._cached_nodes(state, shape) if self.args.mode == "required" else None
        best = self._best_free(state, shape, capped, only)
        if only and (best is None or best[1].name not in only):
            self._wait(shape, state.by_name[min(only)].node, None, None)
            return None
        if best is None:
            return None
        seconds = best[0][0]
        if self.args.mode == "ttfb" and self.args.delay and seconds > 0:
            waited = self.now - shape.since
            if waited < seconds:
                warm = self._warmest(state, shape, best[0])
                if warm is not None:
                    self._wait(shape, warm, seconds, seconds - waited)
                    return None
        return best[1], best[2]

    def _key(self, node: Node, shape: Shape) -> tuple[float, int]:
        if self.args.mode == "soft":
            return (0.0 if holds_all(node, shape.data) else 1.0, 0)
        return cost(node, shape.data, self.args.bandwidth)

    def _best_free(self, state: ClusterState, shape: Shape, capped: bool,
                   only: frozenset[str] | None):
        """(key, slot, positions) of the node free now with the lowest time to first batch,
        ties to the first in the plugin's candidate order; only among ``only`` if given."""
        best = None
        scan = candidates(state, shape, self.direction)
        try:
            for slot in scan:
                if only and slot.name not in only:
                    continue
                positions = choose_devices(slot, shape, self.direction, capped)
                if positions is None:
                    continue
                key = self._key(slot.node, shape)
                if best is None or key < best[0]:
                    best = (key, slot, positions)
                    if key == (0.0, 0):
                        break
        finally:
            scan.close()
        return best

    def _warmest(self, state: ClusterState, shape: Shape, than: tuple[float, int]
                 ) -> Node | None:
        """The node, busy now, that could hold the replica once free and is warmer than
        ``than`` (the warmest; ties to the name)."""
        found = None
        for slot in state.slots:
            if not could_hold(slot, shape):
                continue
            key = self._key(slot.node, shape)
            if key < than and (found is None or (key, slot.name) < found[:2]):
                found = (key, slot.name, slot.node)
        return None if found is None else found[2]

    def _cached_nodes(self, state: ClusterState, shape: Shape) -> frozenset[str] | None:
        """Nodes that could hold the replica and hold all of its data (None: no such node);
        neither changes during a cycle."""
        if shape not in self._holding:
            names = frozenset(s.name for s in state.slots
                              if holds_all(s.node, shape.data) and could_hold(s, shape))
            self._holding[shape] = names or None
        return self._holding[shape]

    def _wait(self, shape: Shape, node: Node, cold: float | None, left: float | None) -> None:
        names = ",".join(name for name, key, _ in shape.data if node.cache.get(key, 0) > 0)
        self.data_waits[shape] = Reason(ReasonCode.DATA_LOCALITY, "dataset", cold, left,
                                        detail=f"{node.name}:{names or shape.data[0][0]}")
