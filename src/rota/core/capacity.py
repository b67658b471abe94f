"""Elastic capacity, as data: the sources capacity can come from, what was taken from them,
and what a planner decides about them (``rota.scheduler.elastic`` decides).

Vocabulary:
- *pool*: a ``GpuPool`` of attachable GPUs behind a fabric (composable infrastructure). Each
  pool GPU has an id; ``reach`` says which nodes the fabric reaches and how many pool GPUs
  each may hold at once (its free slots); attaching takes ``attach_s`` seconds, detaching
  ``detach_s``; a GPU in ``faulty`` failed an attach or a check and is never offered. While
  attached, a pool GPU costs ``cost_per_gpu_h`` an hour.
- *node group*: a ``NodeGroup`` that grows and shrinks between ``min_size`` and ``max_size``
  nodes of one ``NodeShape`` (a cloud instance type, a Slurm cloud node, a kwok node group);
  a node is ready ``start_s`` seconds after it is asked for and costs ``cost_per_node_h`` an
  hour from then until it is removed.
- *attachment*: one pool GPU attached (or being attached) to a node: for which job, when it is
  ready, the device index it has on the node once ready (``None`` before), and since when
  no job uses it (``idle_since``, ``None`` while one does).
- *added node*: one node a group added (or is adding), for which job, when ready, and since
  when it is empty.
- *elastic state* (``ElasticState``): every attachment and added node; the caller keeps it
  and tells the planner of it each time.
- *limits* (``Limits``): a budget per project (cost per hour of the elastic capacity held for
  its jobs), a cap on the elastic GPUs of the whole cluster, the grace period before an idle
  attached GPU is detached and the time after which an empty added node is removed.

Decisions (``CapacityPlan``): per pending job ``Attach`` (``gpus`` pool GPUs to ``node``),
``AddNodes`` (``count`` nodes of ``group``) or ``Hold`` (wait: by its estimated start, or
because no source may serve it, with why); for scale-in ``Detach`` and ``RemoveNode``.

Invariants, checked on construction: a pool GPU is attached at most once (to one node, for
one purpose); an attachment names a GPU of its pool and a node the pool reaches; the GPUs a
node holds from a pool never exceed its slots; an added node belongs to a known group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from rota.core.errors import InvalidSpec


def _positive(value: float, name: str, strict: bool = False) -> None:
    if value != value or value < 0 or (strict and value == 0):
        raise InvalidSpec(name, f"must be {'positive' if strict else 'non-negative'}, "
                                f"got {value!r}")


@dataclass(frozen=True, slots=True)
class GpuPool:
    name: str
    model: str
    memory_mib: int
    gpus: tuple[str, ...]
    reach: Mapping[str, int]  # node -> how many of this pool's GPUs it may hold at once
    attach_s: float
    detach_s: float = 0.0
    cost_per_gpu_h: float = 0.0
    faulty: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpec("pool.name", "must not be empty")
        if not self.model:
            raise InvalidSpec(f"pool {self.name}.model", "must not be empty")
        _positive(self.memory_mib, f"pool {self.name}.memory_mib", strict=True)
        if len(set(self.gpus)) != len(self.gpus):
            raise InvalidSpec(f"pool {self.name}.gpus", "GPU ids repeat")
        for node, slots in self.reach.items():
            if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
                raise InvalidSpec(f"pool {self.name}.reach.{node}",
                                  f"must be a whole number of slots >= 0, got {slots!r}")
        _positive(self.attach_s, f"pool {self.name}.attach_s")
        _positive(self.detach_s, f"pool {self.name}.detach_s")
        _positive(self.cost_per_gpu_h, f"pool {self.name}.cost_per_gpu_h")
        unknown = sorted(self.faulty - set(self.gpus))
        if unknown:
            raise InvalidSpec(f"pool {self.name}.faulty", f"unknown GPU {unknown[0]}")


@dataclass(frozen=True, slots=True)
class NodeShape:
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    gpu_memory_mib: int

    def __post_init__(self) -> None:
        for name in ("cpu_milli", "memory_mib", "gpus"):
            _positive(getattr(self, name), f"shape.{name}")
        _positive(self.gpu_memory_mib, "shape.gpu_memory_mib", strict=True)
        if not self.model:
            raise InvalidSpec("shape.model", "must not be empty")


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    shape: NodeShape
    min_size: int
    max_size: int
    start_s: float
    cost_per_node_h: float = 0.0

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpec("group.name", "must not be empty")
        _positive(self.min_size, f"group {self.name}.min_size")
        if self.max_size < self.min_size:
            raise InvalidSpec(f"group {self.name}.max_size",
                              f"must be >= min_size ({self.min_size}), got {self.max_size}")
        _positive(self.start_s, f"group {self.name}.start_s")
        _positive(self.cost_per_node_h, f"group {self.name}.cost_per_node_h")


@dataclass(frozen=True, slots=True)
class Attachment:
    pool: str
    gpu: str
    node: str
    ready_at: float
    job: str = ""              # the job it was attached for ("" none)
    device: int | None = None  # its device index on the node, once ready
    idle_since: float | None = None


@dataclass(frozen=True, slots=True)
class AddedNode:
    group: str
    node: str
    ready_at: float
    job: str = ""
    idle_since: float | None = None


@dataclass(frozen=True, slots=True)
class ElasticState:
    pools: tuple[GpuPool, ...] = ()
    groups: tuple[NodeGroup, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    added: tuple[AddedNode, ...] = ()
    # nodes of each group that were not added by a plan (its min_size, made elsewhere)
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pools = {p.name: p for p in self.pools}
        if len(pools) != len(self.pools):
            raise InvalidSpec("pools", "pool names repeat")
        groups = {g.name for g in self.groups}
        if len(groups) != len(self.groups):
            raise InvalidSpec("groups", "group names repeat")
        seen: set[tuple[str, str]] = set()
        held: dict[tuple[str, str], int] = {}
        for a in self.attachments:
            pool = pools.get(a.pool)
            if pool is None:
                raise InvalidSpec("attachments", f"unknown pool {a.pool!r}")
            if a.gpu not in pool.gpus:
                raise InvalidSpec("attachments", f"pool {a.pool} has no GPU {a.gpu!r}")
            if (a.pool, a.gpu) in seen:
                raise InvalidSpec("attachments", f"pool GPU {a.pool}/{a.gpu} is attached twice")
            seen.add((a.pool, a.gpu))
            if a.node not in pool.reach:
                raise InvalidSpec("attachments", f"pool {a.pool} does not reach node {a.node}")
            held[a.pool, a.node] = held.get((a.pool, a.node), 0) + 1
            if held[a.pool, a.node] > pool.reach[a.node]:
                raise InvalidSpec("attachments", f"node {a.node} holds more GPUs of pool "
                                  f"{a.pool} than its {pool.reach[a.node]} slots")
        names = [n.node for n in self.added]
        if len(set(names)) != len(names):
            raise InvalidSpec("added", "a node is added twice")
        for n in self.added:
            if n.group not in groups:
                raise InvalidSpec("added", f"unknown group {n.group!r}")

    def pool(self, name: str) -> GpuPool:
        return next(p for p in self.pools if p.name == name)

    def group(self, name: str) -> NodeGroup:
        return next(g for g in self.groups if g.name == name)


@dataclass(frozen=True, slots=True)
class Limits:
    budgets: Mapping[str, float] = field(default_factory=dict)  # project -> cost per hour
    max_elastic_gpus: int | None = None  # attached and added GPUs of the cluster, at once
    detach_grace_s: float = 300.0
    remove_after_s: float = 600.0  # cluster-autoscaler's scale-down-unneeded-time

    def __post_init__(self) -> None:
        for project, budget in self.budgets.items():
            _positive(budget, f"budgets.{project}")
        if self.max_elastic_gpus is not None:
            _positive(self.max_elastic_gpus, "max_elastic_gpus")
        _positive(self.detach_grace_s, "detach_grace_s")
        _positive(self.remove_after_s, "remove_after_s")


# -- decisions ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Attach:
    job: str
    pool: str
    gpus: tuple[str, ...]
    node: str
    ready_at: float
    cost_per_h: float


@dataclass(frozen=True, slots=True)
class AddNodes:
    job: str
    group: str
    count: int
    ready_at: float
    cost_per_h: float


@dataclass(frozen=True, slots=True)
class Hold:
    """The job waits: ``until`` its estimated start (``None``: unknown), because ``why``:
    ``sooner`` (waiting starts it no later than any source would), ``in-flight`` (capacity
    asked for it is on its way), ``not-room`` (it waits for something capacity cannot give:
    quota, its turn, a dependency), ``budget``, ``cap`` or ``no-source``."""

    job: str
    until: float | None
    why: str


@dataclass(frozen=True, slots=True)
class Detach:
    pool: str
    gpu: str
    node: str
    why: str  # "job-ended" (its job is gone) or "idle" (unused past the grace period)


@dataclass(frozen=True, slots=True)
class RemoveNode:
    group: str
    node: str


@dataclass(slots=True)
class CapacityPlan:
    attaches: list[Attach] = field(default_factory=list)
    adds: list[AddNodes] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    detaches: list[Detach] = field(default_factory=list)
    removals: list[RemoveNode] = field(default_factory=list)
