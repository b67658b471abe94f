"""Slurm's nodes as rota's ``Node`` objects, and what jobs outside rota hold on them.

Vocabulary:
- **GPU types.** Slurm knows a GPU by its GRES type (``gpu:h100:4``), not by its model or
  memory, so the site says what each type is: ``parse_gpu_types({"h100": "H100-80GB"})``
  (the same ``MODEL-<n>GB`` or ``MODEL:80Gi`` spelling as ``rota up --gpus``). The key ``""``
  names untyped GPUs (``gpu:4``). A node with a type the table lacks is reported without GPUs
  and unschedulable, with a reason that says which type to declare.
- **Device indices** are Slurm's GRES indices (``IDX``): a node's GPU types in the order of
  its GRES string, each type's devices in turn (a node with one type: 0..count-1).
- **Shards.** A node with ``shard`` GRES splits each GPU into ``shards_per_gpu`` shards (its
  shard count over its GPU count). A rota fraction of a GPU runs as that many shards, rounded
  up; Slurm 22.05 takes a job's shards on one node from a single GPU. A node without shards
  takes no fractional job; ``fractional_refusal`` says what the site must configure. So a
  node's features (``rota.core.nodes``) are ``signals`` (``scancel --signal`` reaches the
  job's steps), and ``gpu-sharing`` where it has shards: the scheduler places a fraction only
  there. Slurm enforces neither GPU memory nor compute shares.
- **Schedulable.** ``states.unschedulable_reason``: drained, down, failing, reserved, ...
  nodes are unschedulable, and ``NodeReport.reason`` carries Slurm's reason; so are nodes a
  Slurm reservation blocks (``reservations.blocked_nodes``, given as ``blocked``). The core
  node carries the reason as its ``problem``.
- **Foreign allocation.** What one Slurm job that rota did not submit (its name and comment
  are not an attempt's, ``states.owner``) holds on one node while it runs: CPUs, memory, and
  device shares (a whole GPU as 1000 milli-GPU; ``k`` shards of a GPU as ``k/shards_per_gpu``
  of it, rounded up, with that part of its memory). The backend adds these to the snapshot
  as capacity in use, so that rota never places work on a GPU that a plain ``sbatch`` job
  holds: ``core_nodes`` gives the nodes with these as ``Node.foreign``.

Labels: every node carries ``slurm.partition.<name>=true`` for each partition it is in and
``slurm.feature.<name>=true`` for each of its features, for job selectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from rota.backends.gpus import parse_virtual_gpus
from rota.backends.slurm.records import NodeAllocation, SlurmJob, SlurmNode
from rota.backends.slurm.states import JobPhase, owner, unschedulable_reason
from rota.backends.slurm.text import Gres, gres_count
from rota.core import (
    MILLI, DEFAULT_GROUP, DeviceShare, Foreign, GpuDevice, InvalidSpec, Node, NodeName,
)
from rota.core.batchopts import partition_label
from rota.core.nodes import GPU_SHARING, SIGNALS

GPU, SHARD = "gpu", "shard"
BATCH_FEATURES = frozenset({SIGNALS})
SHARD_FEATURES = frozenset({SIGNALS, GPU_SHARING})


@dataclass(frozen=True, slots=True)
class GpuType:
    model: str
    memory_mib: int


def parse_gpu_types(table: Mapping[str, object], field: str = "gpu_types") -> dict[str, GpuType]:
    """``{"h100": "H100-80GB", "": "T4:16Gi"}`` -> GPU types by Slurm GRES type."""
    if not isinstance(table, Mapping):
        raise InvalidSpec(field, f"must map Slurm GPU types to models, got {table!r}")
    out = {}
    for key, spec in table.items():
        where = f"{field}.{key or '(untyped)'}"
        if not isinstance(key, str) or not isinstance(spec, str) or not spec.strip():
            raise InvalidSpec(where, f"expected a model such as H100-80GB, got {spec!r}")
        device = parse_virtual_gpus(f"1x{spec}", where)[0]
        out[key] = GpuType(device.model, device.memory_mib)
    return out


@dataclass(frozen=True, slots=True)
class NodeReport:
    """One Slurm node as rota sees it: the core ``node``, why it is unschedulable (``None``
    when it is not), its shards per GPU (0: none) and the Slurm type of each GPU by index."""

    node: Node
    reason: str | None
    shards_per_gpu: int
    gpu_types: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class ForeignAllocation:
    slurm_job: int
    name: str
    user: str
    node: str
    cpu_milli: int
    memory_mib: int
    devices: tuple[DeviceShare, ...]


@dataclass(frozen=True, slots=True)
class Inventory:
    reports: tuple[NodeReport, ...]
    foreign: tuple[ForeignAllocation, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(r.node for r in self.reports)

    @property
    def reasons(self) -> dict[str, str]:
        """Unschedulable node -> why."""
        return {r.node.name: r.reason for r in self.reports if r.reason is not None}

    def report(self, name: str) -> NodeReport:
        for r in self.reports:
            if r.node.name == name:
                return r
        raise KeyError(name)

    def core_nodes(self) -> list[Node]:
        """The nodes as a backend reports them to the control plane: what jobs outside rota
        hold as ``foreign``, why nothing may start as ``problem``, and ``schedulable`` left
        True (that flag is the operator's cordon, which Slurm's state must never set)."""
        held: dict[str, list[Foreign]] = {}
        for f in self.foreign:
            held.setdefault(f.node, []).append(Foreign(
                f.cpu_milli, f.memory_mib, f.devices,
                f"slurm job {f.slurm_job}" + (f" ({f.user})" if f.user else "")))
        return [replace(r.node, schedulable=True, foreign=tuple(held.get(r.node.name, ())))
                for r in self.reports]


def inventory(nodes: Iterable[SlurmNode], jobs: Iterable[SlurmJob],
              gpu_types: Mapping[str, GpuType], resource_group: str = DEFAULT_GROUP,
              blocked: Mapping[str, str] | None = None, instance: str = "") -> Inventory:
    """Nodes from ``sinfo``, foreign allocations from ``squeue``'s jobs (every job but the
    attempts of control plane ``instance``); ``blocked`` names the nodes a reservation closes,
    with why."""
    nodes = tuple(nodes)
    blocked = blocked or {}
    reports = tuple(node_report(n, gpu_types, resource_group, blocked.get(n.name))
                    for n in nodes)
    by_name = {n.name: (r, n) for r, n in zip(reports, nodes)}
    foreign = []
    for job in jobs:
        if job.phase is not JobPhase.RUNNING or owner(job.name, job.comment, instance):
            continue
        for alloc in job.allocations:
            if alloc.node in by_name:
                report, slurm_node = by_name[alloc.node]
                foreign.append(ForeignAllocation(
                    slurm_job=job.id, name=job.name, user=job.user, node=alloc.node,
                    cpu_milli=alloc.cores * slurm_node.threads_per_core * MILLI,
                    memory_mib=alloc.memory_mib, devices=allocated_devices(alloc, report)))
    return Inventory(reports, tuple(foreign))


def node_report(slurm: SlurmNode, gpu_types: Mapping[str, GpuType],
                resource_group: str = DEFAULT_GROUP, blocked: str | None = None) -> NodeReport:
    gpus = [g for g in slurm.gres if g.name == GPU]
    unknown = sorted({g.type or "" for g in gpus} - set(gpu_types))
    reason = unschedulable_reason(slurm.state, slurm.flags, slurm.reason)
    if blocked:
        reason = f"{reason}; {blocked}" if reason else blocked
    devices: list[GpuDevice] = []
    types: list[str | None] = []
    if unknown:
        missing = ", ".join(repr(t) if t else "untyped (key \"\")" for t in unknown)
        reason = (f"{reason}; " if reason else "") + (
            f"GPU type {missing} has no model in rota's Slurm gpu_types")
    else:
        for g in gpus:
            kind = gpu_types[g.type or ""]
            for _ in range(g.count):
                devices.append(GpuDevice(index=len(devices), model=kind.model,
                                         memory_mib=kind.memory_mib))
                types.append(g.type)
    labels = {partition_label(p): "true" for p in slurm.partitions}
    labels.update({f"slurm.feature.{f}": "true" for f in slurm.features})
    shards, count = gres_count(slurm.gres, SHARD), gres_count(slurm.gres, GPU)
    per_gpu = shards // count if count and devices else 0
    node = Node(name=NodeName(slurm.name), cpu_milli=slurm.cpus * MILLI,
                memory_mib=slurm.memory_mib, devices=tuple(devices),
                resource_group=resource_group, labels=labels, schedulable=reason is None,
                problem=reason or "", features=SHARD_FEATURES if per_gpu else BATCH_FEATURES)
    return NodeReport(node, reason, per_gpu, tuple(types))


def allocated_devices(alloc: NodeAllocation, report: NodeReport) -> tuple[DeviceShare, ...]:
    """The device shares a job's GRES on one node amount to (see the module docstring)."""
    devices = {d.index: d for d in report.node.devices}
    shares: dict[int, DeviceShare] = {}
    for g in alloc.gres:
        for index, milli, memory in _shares(g, report.shards_per_gpu, devices):
            held = shares.get(index)
            if held is not None:
                milli, memory = min(MILLI, held.milli + milli), held.memory_mib + memory
            shares[index] = DeviceShare(index, milli, memory)
    return tuple(shares[i] for i in sorted(shares))


def _shares(g: Gres, shards_per_gpu: int, devices: Mapping[int, GpuDevice]
            ) -> list[tuple[int, int, int]]:
    known = [i for i in g.indices if i in devices]
    if g.name == GPU:
        return [(i, MILLI, devices[i].memory_mib) for i in known]
    if g.name != SHARD or not known or shards_per_gpu <= 0:
        return []
    each = math.ceil(g.count / len(known))  # 22.05 reports one GPU; spread evenly otherwise
    return [(i, min(MILLI, math.ceil(each * MILLI / shards_per_gpu)),
             min(devices[i].memory_mib, devices[i].memory_mib * each // shards_per_gpu))
            for i in known]


def shards_for(milli: int, shards_per_gpu: int) -> int:
    """How many shards a fraction of ``milli`` milli-GPU takes: rounded up, at least one."""
    return max(1, math.ceil(milli * shards_per_gpu / MILLI - 1e-9))


def fractional_refusal(reports: Iterable[NodeReport]) -> str | None:
    """``None`` when some schedulable node takes fractional GPUs (has shards), else why none
    does and what the site would configure."""
    if any(r.shards_per_gpu > 0 and r.reason is None for r in reports):
        return None
    return ("no schedulable Slurm node has `shard` GRES, so fractional GPUs cannot run here: "
            "the site would add `shard` to GresTypes in slurm.conf, `shard:<N>` to each GPU "
            "node's Gres, and `Name=shard Count=<per GPU> File=<GPU device>` lines to gres.conf")
