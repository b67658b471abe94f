"""Static feasibility: may a pending job ever run on this cluster as it is specified?

A job is rejected (not left waiting) when its queue does not exist, when its GPU model patterns
match no GPU in the inventory, when no flavour of its queue covers those models, or when one
replica is larger than the largest eligible node in some resource, or when a gang has more
replicas than the eligible nodes would hold even when empty, or when it needs a node feature
(``rota.core.nodes``: a GPU share needs ``gpu-sharing``, a container image ``containers``) that
no node has, cordoned or not (a backend that runs on Kubernetes nodes without HAMi cannot share
a GPU; the local and Slurm backends run commands, not images). A missing feature is a reason on
``gpu`` for a share and on ``image`` for an image, the fields a user would change. Usage and
quota never make a job infeasible: those only make it wait.

MIG: a job asking for a MIG profile (``gpu: 1g.10gb``) is rejected when no GPU of the models
it accepts has an instance of that profile; its count is checked against the instances of
that profile a node has (a reason on resource ``mig-<profile>``), and a whole-GPU job's against
the node's GPUs that are not cut into instances (``rota.core.mig``).
"""

from __future__ import annotations

from rota.core import CPU, GPU, MEMORY, MILLI, Job, Node, ReplicaRequest
from rota.core.decisions import Reason, ReasonCode
from rota.core.mig import quota_resource
from rota.core.nodes import CONTAINERS, GPU_SHARING, features_needed
from rota.scheduler.placement import accepts


def screen(cycle, job: Job) -> Reason | None:
    snapshot = cycle.snapshot
    if job.queue not in snapshot.queues:
        return Reason(ReasonCode.UNKNOWN_QUEUE, detail=f"queue {job.queue!r} does not exist")
    g = job.request.gpu
    if g.count and not any(accepts(g.models, m) for m in cycle.models):
        if not cycle.models:
            detail = "it asks for GPUs and no node here has any"
        else:
            detail = (f"none of the GPU models here ({', '.join(cycle.models)}) matches "
                      f"{', '.join(g.models)}")
        return Reason(ReasonCode.NO_MATCHING_GPU, GPU, detail=detail)
    if g.profile and not any(p == g.profile and accepts(g.models, m)
                             for m, p in cycle.sizes.profiles()):
        kinds = sorted({p for _, p in cycle.sizes.profiles()})
        return Reason(ReasonCode.NO_MATCHING_GPU, GPU, detail=(
            f"no GPU here has MIG instances of profile {g.profile}" + (
                f" (the profiles here: {', '.join(kinds)})" if kinds else
                " (no GPU here is MIG-enabled)")))
    flavors = cycle.flavors(job)
    if not flavors:
        return Reason(ReasonCode.NO_FLAVOR, GPU, detail=(
            f"no flavour of queue {job.queue} covers the GPU models the job accepts"))
    missing = cycle.sizes.missing(features_needed(job))
    if missing:
        return _lacking(job, missing)
    return _never_fits(cycle, job, flavors)


def _lacking(job: Job, missing: frozenset[str]) -> Reason:
    """Why no node can run ``job``: it needs ``missing``, which no node has."""
    if GPU_SHARING in missing:
        return Reason(ReasonCode.NEVER_FITS, GPU, detail=(
            f"{job.request.gpu.share / MILLI:g} GPU shares need a node that can share a GPU "
            "(feature gpu-sharing); none of this cluster's nodes can"))
    if CONTAINERS in missing:
        return Reason(ReasonCode.NEVER_FITS, "image", detail=(
            f"it names the container image {job.image!r}, which needs a node that runs "
            "container images (feature containers); none of this cluster's nodes does"))
    return Reason(ReasonCode.NEVER_FITS, "node", detail=(
        f"needs a node with {', '.join(sorted(missing))}; none of this cluster's nodes has it"))


def _never_fits(cycle, job: Job, flavors) -> Reason | None:
    """The first resource in which a replica exceeds every eligible node's capacity."""
    req, g = job.request, job.request.gpu
    models = frozenset(m for _, ms in flavors for m in ms) if g.count else None
    queue = cycle.snapshot.queues[job.queue]
    groups = frozenset({job.resource_group} if job.resource_group else queue.resource_groups) or None
    largest = cycle.sizes.largest(groups, job.selector, models, g.profile)
    if largest is None:
        return Reason(ReasonCode.NEVER_FITS, "node", detail="no node matches the "
                      "job's resource group and selector")
    cpu, memory, gpus, gpu_memory = largest
    devices = quota_resource(g.profile) if g.profile else GPU  # instances are counted as such
    checks = [(CPU, req.cpu_milli, cpu), (MEMORY, req.memory_mib, memory),
              (devices, g.count, gpus)]
    if g.count and g.memory_mib is not None:
        checks.append(("gpu_memory", g.memory_mib, gpu_memory))
    for resource, need, cap in checks:
        if need > cap:
            return Reason(ReasonCode.NEVER_FITS, resource, need, None, cap,
                          "larger than any eligible node")
    if job.replicas > 1:
        room = cycle.sizes.room(groups, job.selector, models, req)
        if room < job.replicas:
            return Reason(ReasonCode.NEVER_FITS, "replicas", job.replicas, None, room,
                          "more replicas than the eligible nodes hold even when empty")
    return None


class NodeSizes:
    """The largest node for each (resource groups, selector, GPU models) a job may ask about:
    its cpu, memory, number of GPUs of those models and their largest memory. Cordoned nodes
    count: a cordon is temporary.

    Thousands of jobs share a few such keys, and thousands of nodes a few *kinds* (resource
    group, cpu, memory, GPU models and memories): answers are computed once per key, over kinds
    when the selector is empty (labels do not matter then), else over the nodes themselves.
    """

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self._kinds: list[Node] | None = None
        self._answers: dict[tuple, tuple[int, int, int, int] | None] = {}
        self._offered: frozenset[str] | None = None
        self._profiles: frozenset[tuple[str, str]] | None = None

    def profiles(self) -> frozenset[tuple[str, str]]:
        """The (GPU model, MIG profile) of every MIG instance of the cluster."""
        if self._profiles is None:
            self._profiles = frozenset((d.model, d.profile) for n in self.nodes
                                       for d in n.devices if d.profile)
        return self._profiles

    def missing(self, needed: frozenset[str]) -> frozenset[str]:
        """The features in ``needed`` that no node has."""
        if not needed:
            return needed
        if self._offered is None:
            self._offered = frozenset().union(*(n.features for n in self.nodes))
        return needed - self._offered

    def largest(self, groups: frozenset[str] | None, selector: tuple[tuple[str, str], ...],
                models: frozenset[str] | None, profile: str = ""
                ) -> tuple[int, int, int, int] | None:
        """The largest eligible node; its GPUs are those of ``models`` that are MIG instances
        of ``profile`` (``""``: whole GPUs)."""
        key = (groups, selector, models, profile)
        if key not in self._answers:
            self._answers[key] = self._compute(groups, selector, models, profile)
        return self._answers[key]

    def kinds(self) -> list[Node]:
        if self._kinds is None:
            by_kind: dict[tuple, Node] = {}
            self._counts: dict[str, int] = {}
            for n in self.nodes:
                kind = (n.resource_group, n.cpu_milli, n.memory_mib,
                        tuple((d.model, d.memory_mib, d.healthy, d.profile) for d in n.devices))
                first = by_kind.setdefault(kind, n)
                self._counts[first.name] = self._counts.get(first.name, 0) + 1
            self._kinds = list(by_kind.values())
        return self._kinds

    def room(self, groups: frozenset[str] | None, selector: tuple[tuple[str, str], ...],
             models: frozenset[str] | None, req: ReplicaRequest) -> int:
        """How many replicas of ``req`` the eligible nodes would hold if they were empty."""
        key = (groups, selector, models, req)
        if key not in self._answers:
            kinds = self.kinds()
            nodes = [(n, 1) for n in self.nodes] if selector else [
                (n, self._counts[n.name]) for n in kinds]
            self._answers[key] = sum(
                count * _replicas_on(n, models, req) for n, count in nodes
                if (groups is None or n.resource_group in groups)
                and all(n.labels.get(k) == v for k, v in selector))
        return self._answers[key]  # type: ignore[return-value]

    def _compute(self, groups, selector, models, profile) -> tuple[int, int, int, int] | None:
        eligible = [n for n in (self.nodes if selector else self.kinds())
                    if (groups is None or n.resource_group in groups)
                    and all(n.labels.get(k) == v for k, v in selector)]
        if not eligible:
            return None

        def devices(n):
            return [d for d in n.devices if (models is None or d.model in models)
                    and d.profile == profile]

        return (max(n.cpu_milli for n in eligible), max(n.memory_mib for n in eligible),
                max(len(devices(n)) for n in eligible),
                max((d.memory_mib for n in eligible for d in devices(n)), default=0))


def _replicas_on(node: Node, models: frozenset[str] | None, req: ReplicaRequest) -> int:
    """Replicas of ``req`` that fit on ``node`` when it is empty (healthy GPUs only)."""
    g = req.gpu
    fits = [node.cpu_milli // req.cpu_milli if req.cpu_milli else 1 << 30,
            node.memory_mib // req.memory_mib if req.memory_mib else 1 << 30]
    if g.count:
        devs = [d for d in node.devices if d.healthy and (models is None or d.model in models)
                and (g.memory_mib is None or d.memory_mib >= g.memory_mib)
                and d.profile == g.profile]
        if g.fractional:
            fits.append(sum(min(MILLI // g.share,
                                d.memory_mib // g.memory_mib if g.memory_mib else 1 << 30)
                            for d in devs))
        else:
            fits.append(len(devs) // g.count)
    return min(fits)
