"""Static feasibility: may a pending job ever run on this cluster as it is specified?

A job is rejected (not left waiting) when its queue does not exist, when its GPU model patterns
match no GPU in the inventory, when no flavour of its queue covers those models, or when one
replica is larger than the largest eligible node in some resource. Usage and quota never make
a job infeasible: those only make it wait.
"""

from __future__ import annotations

from rota.core import CPU, GPU, MEMORY, Job, Node
from rota.scheduler.decisions import Reason, ReasonCode
from rota.scheduler.placement import accepts


def screen(cycle, job: Job) -> Reason | None:
    snapshot = cycle.snapshot
    if job.queue not in snapshot.queues:
        return Reason(ReasonCode.UNKNOWN_QUEUE, detail=f"queue {job.queue!r} does not exist")
    g = job.request.gpu
    if g.count and not any(accepts(g.models, m) for m in cycle.models):
        return Reason(ReasonCode.NO_MATCHING_GPU, GPU, detail=(
            f"no GPU model matches {', '.join(g.models)}; models here: {', '.join(cycle.models) or 'none'}"))
    flavors = cycle.flavors(job)
    if not flavors:
        return Reason(ReasonCode.NO_FLAVOR, GPU, detail=(
            f"no flavour of queue {job.queue} covers the GPU models the job accepts"))
    return _never_fits(cycle, job, flavors)


def _never_fits(cycle, job: Job, flavors) -> Reason | None:
    """The first resource in which a replica exceeds every eligible node's capacity."""
    req, g = job.request, job.request.gpu
    models = frozenset(m for _, ms in flavors for m in ms) if g.count else None
    queue = cycle.snapshot.queues[job.queue]
    groups = frozenset({job.resource_group} if job.resource_group else queue.resource_groups) or None
    largest = cycle.sizes.largest(groups, job.selector, models)
    if largest is None:
        return Reason(ReasonCode.NEVER_FITS, "node", detail="no node matches the "
                      "job's resource group and selector")
    cpu, memory, gpus, gpu_memory = largest
    checks = [(CPU, req.cpu_milli, cpu), (MEMORY, req.memory_mib, memory), (GPU, g.count, gpus)]
    if g.count and g.memory_mib is not None:
        checks.append(("gpu_memory", g.memory_mib, gpu_memory))
    for resource, need, cap in checks:
        if need > cap:
            return Reason(ReasonCode.NEVER_FITS, resource, need, None, cap,
                          "larger than any eligible node")
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

    def largest(self, groups: frozenset[str] | None, selector: tuple[tuple[str, str], ...],
                models: frozenset[str] | None) -> tuple[int, int, int, int] | None:
        key = (groups, selector, models)
        if key not in self._answers:
            self._answers[key] = self._compute(groups, selector, models)
        return self._answers[key]

    def kinds(self) -> list[Node]:
        if self._kinds is None:
            by_kind: dict[tuple, Node] = {}
            for n in self.nodes:
                kind = (n.resource_group, n.cpu_milli, n.memory_mib,
                        tuple((d.model, d.memory_mib) for d in n.devices))
                by_kind.setdefault(kind, n)
            self._kinds = list(by_kind.values())
        return self._kinds

    def _compute(self, groups, selector, models) -> tuple[int, int, int, int] | None:
        eligible = [n for n in (self.nodes if selector else self.kinds())
                    if (groups is None or n.resource_group in groups)
                    and all(n.labels.get(k) == v for k, v in selector)]
        if not eligible:
            return None

        def devices(n):
            return [d for d in n.devices if models is None or d.model in models]

        return (max(n.cpu_milli for n in eligible), max(n.memory_mib for n in eligible),
                max(len(devices(n)) for n in eligible),
                max((d.memory_mib for n in eligible for d in devices(n)), default=0))
