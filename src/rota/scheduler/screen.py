"""Static feasibility: may a pending job ever run on this cluster as it is specified?

A job is rejected (not left waiting) when its queue does not exist, when its GPU model patterns
match no GPU in the inventory, when no flavour of its queue covers those models, or when one
replica is larger than the largest eligible node in some resource. Usage and quota never make
a job infeasible: those only make it wait.
"""

from __future__ import annotations

from rota.core import CPU, GPU, MEMORY, Job, model_matches
from rota.scheduler.decisions import Reason, ReasonCode


def screen(cycle, job: Job) -> Reason | None:
    snapshot = cycle.snapshot
    if job.queue not in snapshot.queues:
        return Reason(ReasonCode.UNKNOWN_QUEUE, detail=f"queue {job.queue!r} does not exist")
    g = job.request.gpu
    if g.count and not any(model_matches(m, g.models) for m in cycle.models):
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
    models = {m for _, ms in flavors for m in ms} if g.count else None
    queue = cycle.snapshot.queues[job.queue]
    groups = {job.resource_group} if job.resource_group else set(queue.resource_groups) or None
    nodes = [n for n in cycle.snapshot.nodes  # cordoned nodes count: a cordon is temporary
             if (groups is None or n.resource_group in groups)
             and all(n.labels.get(k) == v for k, v in job.selector)]
    if not nodes:
        return Reason(ReasonCode.NEVER_FITS, "node", detail="no node matches the "
                      "job's resource group and selector")

    def devices(n):
        return [d for d in n.devices if models is None or d.model in models]

    checks = [
        (CPU, req.cpu_milli, max(n.cpu_milli for n in nodes)),
        (MEMORY, req.memory_mib, max(n.memory_mib for n in nodes)),
        (GPU, g.count, max(len(devices(n)) for n in nodes)),
    ]
    if g.count and g.memory_mib is not None:
        best = max((d.memory_mib for n in nodes for d in devices(n)), default=0)
        checks.append(("gpu_memory", g.memory_mib, best))
    for resource, need, cap in checks:
        if need > cap:
            return Reason(ReasonCode.NEVER_FITS, resource, need, None, cap,
                          "larger than any eligible node")
    return None
