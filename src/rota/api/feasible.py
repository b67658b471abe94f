"""Refusing at submit a job that can never run, rather than accepting it to reject it later.

The test is the scheduler's own static screening (``rota.scheduler.screen``), run on the
inventory, queues and flavours as stored now, with no job: a job whose GPU models no GPU here
has, whose queue has no flavour covering them, or with one replica larger than every eligible
node (CPUs, memory, GPUs, GPU memory) or more replicas than those nodes hold even when empty,
is refused with the sentence ``rota show`` would give for its rejection (``rota.cli.explain``).

Not refused here: a job submitted before any node is reported (a backend may register its
nodes later), and anything that only makes a job wait (usage, quota, cordons and drains: a
cordoned node still counts, as in the screening). An unknown queue is the submit path's own
error, with its field.
"""

from __future__ import annotations

from rota.core import ANY_FLAVOR, Flavor, InvalidSpec, Job, JobId
from rota.core.decisions import ReasonCode
from rota.core.snapshot import Snapshot
from rota.store import Store
from rota.store.records import Submission

NEVER = (ReasonCode.NO_MATCHING_GPU, ReasonCode.NO_FLAVOR, ReasonCode.NEVER_FITS)
FIELDS = {"gpu": "resources.gpu", "cpu": "resources.cpu", "memory": "resources.memory",
          "gpu_memory": "resources.gpu_memory", "replicas": "replicas",
          "node": "resources"}


def refuse_if_never_runs(store: Store, sub: Submission) -> None:
    """Raise ``InvalidSpec`` naming the field at fault when ``sub`` can never run here."""
    from rota.cli.explain import sentence
    from rota.scheduler import build_policy
    from rota.scheduler.context import Cycle

    nodes = tuple(node for node, _, _ in store.list_nodes())
    queues = {q.name: q for q in store.list_queues()}
    if not nodes or sub.queue not in queues:
        return
    flavors: dict[str, Flavor] = {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
    flavors.update({f.name: f for f in store.list_flavors()})
    job = Job(id=JobId("0"), project=sub.project, queue=sub.queue, request=sub.request,
              user=sub.user, replicas=sub.replicas, resource_group=sub.resource_group,
              selector=tuple(sorted(sub.selector.items())))
    cycle = Cycle(Snapshot(nodes, queues, (), flavors=flavors), build_policy("default"), 0.0)
    try:
        reason = cycle.base.screen(cycle, job)
    finally:
        cycle.close()
    if reason is not None and reason.code in NEVER:
        raise InvalidSpec(FIELDS.get(reason.resource or "", "resources"), sentence(reason))
