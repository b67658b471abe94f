"""A deterministic, mixed cluster and workload for the scheduler benchmark.

Everything is drawn from one ``random.Random(seed)``: the same seed and sizes give the same
snapshot, byte for byte.

The cluster: nodes of 8 GPUs of one of three models (H100-80GB, A100-80GB, L40S-48GB), two
NUMA nodes of four GPUs each, NVLink domains of four GPUs on the H100 and A100 nodes (the L40S
nodes have PCIe only), spread over three resource groups (``train``, ``research``, ``serve``).

The tenants: 10 projects with fair-share weights and past usage; 20 queues, two per project
(``pK-train`` and ``pK-dev``). Queues 0-11 share cohort ``lab``, 12-15 cohort ``prod``, 16-19
stand alone. Each queue has a nominal GPU quota per flavour (``h100``, ``a100``, ``l40s``) that
adds up to about the cluster's capacity, so quota matters; some queues have borrowing limits,
some lending limits, some are restricted to resource groups.

The jobs: ``running`` jobs fill part of the cluster (whole nodes, halves, single GPUs and
fractions), most with walltimes, so that preemption and backfill have something to work with;
``pending`` jobs are a mix of fractions (0.25, and 0.5 with a GPU-memory amount), 1, 2, 4 and 8
GPUs, gangs of 2..16 replicas, a few CPU-only jobs, GPU model patterns on part of them,
priorities and walltimes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rota.core import (
    DeviceShare, Flavor, FlavorQuota, GpuDevice, GpuRequest, Job, JobId, JobState, Node,
    Placement, Project, Queue, ReplicaPlacement, ReplicaRequest,
)
from rota.scheduler import Snapshot, Usage

GiB = 1024
GPUS_PER_NODE = 8
# model, memory (GiB), flavour, pattern, NVLink, share of the nodes
MODELS = (
    ("H100-80GB", 80, "h100", "*H100*", True, 0.40),
    ("A100-80GB", 80, "a100", "*A100*", True, 0.35),
    ("L40S-48GB", 48, "l40s", "*L40S*", False, 0.25),
)
GROUPS = (("train", 0.6), ("research", 0.3), ("serve", 0.1))
PROJECTS = 10
QUEUES = 20
NOW = 1_000_000.0

# (weight, gpus per replica, replicas range); gpus below 1 are fractions
REQUEST_MIX = (
    (10, 0.25, (1, 1)),
    (10, 0.5, (1, 1)),
    (28, 1, (1, 1)),
    (14, 2, (1, 1)),
    (12, 4, (1, 1)),
    (10, 8, (1, 1)),
    (6, 8, (2, 16)),
    (4, 4, (2, 8)),
    (3, 0, (1, 1)),
)
PATTERNS = (("*H100*",), ("*A100*", "*H100*"), ("*L40S*",), ("*A100*",))


@dataclass(frozen=True)
class Sizes:
    nodes: int
    pending: int
    running_fraction: float = 0.5  # share of the nodes that start with running jobs


def build_snapshot(sizes: Sizes, seed: int) -> Snapshot:
    rng = random.Random(seed)
    nodes = _nodes(rng, sizes.nodes)
    queues = _queues(rng, nodes)
    projects = {f"p{k}": Project(f"p{k}", weight=rng.choice((1.0, 1.0, 2.0, 3.0)))
                for k in range(PROJECTS)}
    usage = {p: Usage(rng.uniform(0, 5e6), NOW - rng.uniform(0, 86400)) for p in projects}
    flavors = {"any": Flavor("any")} | {f: Flavor(f, (pat,)) for _, _, f, pat, _, _ in MODELS}
    running = _running(rng, nodes, queues, sizes.running_fraction)
    pending = [_pending(rng, k, queues) for k in range(sizes.pending)]
    return Snapshot(tuple(nodes), queues, tuple(running + pending), projects, flavors, usage)


def _pick(rng: random.Random, weighted) -> object:
    total = sum(w for w, *_ in weighted)
    x = rng.uniform(0, total)
    for entry in weighted:
        x -= entry[0]
        if x <= 0:
            return entry
    return weighted[-1]


def _nodes(rng: random.Random, count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        model, mem, _, _, nvlink, _ = _pick(rng, [(m[5], *m) for m in MODELS])[1:]
        group = _pick(rng, [(w, g) for g, w in GROUPS])[1]
        name = f"n{i:05d}"
        devices = tuple(
            GpuDevice(index=d, model=model, memory_mib=mem * GiB, uuid=f"GPU-{name}-{d}",
                      numa=d // 4, nvlink=f"{name}-nvl{d // 4}" if nvlink else None)
            for d in range(GPUS_PER_NODE))
        nodes.append(Node(name, cpu_milli=128_000, memory_mib=1024 * GiB, devices=devices,
                          resource_group=group, labels={"rack": f"r{i // 32}"}))
    return nodes


def _queues(rng: random.Random, nodes: list[Node]) -> dict[str, Queue]:
    gpus = {f: 0 for _, _, f, _, _, _ in MODELS}
    flavor_of = {m: f for m, _, f, _, _, _ in MODELS}
    for n in nodes:
        gpus[flavor_of[n.devices[0].model]] += len(n.devices)
    queues = {}
    for k in range(QUEUES):
        name = f"p{k // 2}-{'train' if k % 2 == 0 else 'dev'}"
        cohort = "lab" if k < 12 else "prod" if k < 16 else None
        quotas = {}
        for f, total in gpus.items():
            nominal = max(1, round(total / QUEUES * rng.uniform(0.6, 1.4))) * 1000
            borrow = {"gpu": nominal // 2} if cohort and k % 3 == 0 else {}
            lend = {"gpu": nominal // 2} if cohort and k % 4 == 1 else {}
            quotas[f] = FlavorQuota({"gpu": nominal}, borrow, lend)
        groups = ("train", "research") if k % 5 == 4 else ()
        queues[name] = Queue(name, quotas, cohort, resource_groups=groups)
    return queues


def _flavor_queues(queues: dict[str, Queue], group: str) -> list[str]:
    return [q.name for q in queues.values() if not q.resource_groups or group in q.resource_groups]


def _running(rng: random.Random, nodes: list[Node], queues: dict[str, Queue],
             fraction: float) -> list[Job]:
    """Jobs already running on a ``fraction`` of the nodes: whole nodes, halves, singles, shares."""
    flavor_of = {m: f for m, _, f, _, _, _ in MODELS}
    jobs: list[Job] = []
    for node in nodes:
        if rng.random() >= fraction:
            continue
        layout = rng.choice(((8,), (4, 4), (4, 2, 1, 1), (1,) * 6, (0.5, 0.5, 0.25, 1, 4)))
        flavor = flavor_of[node.devices[0].model]
        candidates = _flavor_queues(queues, node.resource_group)
        position = 0
        for gpus in layout:
            count = 1 if gpus < 1 else int(gpus)
            if position + count > GPUS_PER_NODE:
                break
            share = round(gpus * 1000) if gpus < 1 else 1000
            mem = node.devices[position].memory_mib * share // 1000
            devices = tuple(DeviceShare(position + d, share, mem) for d in range(count))
            queue = rng.choice(candidates)
            walltime = rng.choice((None, 3600.0, 4 * 3600.0, 12 * 3600.0, 24 * 3600.0))
            started = NOW - rng.uniform(0, (walltime or 86400) * 0.9)
            jobs.append(Job(
                id=JobId(f"run-{len(jobs):06d}"), project=queue.split("-")[0], queue=queue,
                request=ReplicaRequest(4000 * count, 32 * GiB * count,
                                       GpuRequest(count, share, None if gpus >= 1 else mem)),
                priority=rng.choice((0, 0, 10, 50)), walltime_s=walltime,
                submit_time=started - 60, state=JobState.RUNNING, started_at=started,
                flavor=flavor, placement=Placement((ReplicaPlacement(node.name, devices),))))
            position += count
    return jobs


def _pending(rng: random.Random, k: int, queues: dict[str, Queue]) -> Job:
    _, gpus, (lo, hi) = _pick(rng, REQUEST_MIX)
    replicas = rng.randint(lo, hi)
    models = rng.choice(PATTERNS) if gpus and rng.random() < 0.3 else ()
    if gpus == 0:
        gpu = GpuRequest(0)
    elif gpus < 1:
        memory = 20 * GiB if gpus == 0.5 else None
        gpu = GpuRequest(1, round(gpus * 1000), memory, models)
    else:
        gpu = GpuRequest(int(gpus), 1000, None, models)
    count = max(1, gpu.count)
    queue = rng.choice(list(queues))
    return Job(
        id=JobId(f"job-{k:06d}"), project=queue.split("-")[0], queue=queue,
        request=ReplicaRequest(4000 * count, 32 * GiB * count, gpu),
        user=f"u{rng.randrange(50)}", priority=rng.choice((0, 0, 0, 10, 10, 50, 100)),
        replicas=replicas, submit_time=NOW - 86400 + k,
        walltime_s=None if rng.random() < 0.15 else rng.choice((600.0, 1800.0, 3600.0, 4 * 3600.0,
                                                               12 * 3600.0)))
