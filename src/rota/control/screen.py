"""Refusing at submit a job that can never run, rather than accepting it to reject it later.

The test is the scheduler's own static screening (``rota.scheduler.screen``), run on the
inventory, queues and flavours as stored now, with no job: a job whose GPU models no GPU here
has, whose queue has no flavour covering them, with one replica larger than every eligible
node (CPUs, memory, GPUs, GPU memory) or more replicas than those nodes hold even when empty,
or that needs a node feature no node has (a GPU share where no node shares a GPU, a container
``image`` where no node runs container images: a control plane of the Slurm backend, or of
the local backend without a working podman, whose reason the node's label
``rota.dev/containers`` gives and the refusal repeats), is refused with the sentence ``rota
show`` would give for its rejection, and what could be
done about it where there is something to say (``rota.core.wording``: ``sentence``,
``hint``). The API asks this before it accepts a job.

Not refused here: a job submitted before any node is reported (a backend may register its
nodes later), and anything that only makes a job wait (usage, quota, cordons and drains: a
cordoned node still counts, as in the screening). An unknown queue is the submit path's own
error, with its field.

Submits come in bursts, and reading every node to build the screening's indexes costs far more
than screening one job (at 10,000 nodes, tens of milliseconds), so a ``Screen`` keeps what it
built for ``REUSE_S`` seconds. Only an acceptance is ever taken from it: before a job is refused
the inventory, queues and flavours are read again, so a node or queue added a moment ago is
never missed (and a job accepted on a view a few seconds old is rejected later with the same
sentence, as before this check existed).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rota.core import ANY_FLAVOR, Flavor, InvalidSpec, Job, JobId
from rota.core.decisions import ReasonCode
from rota.core.mig import QUOTA_PREFIX
from rota.core.nodelabels import CONTAINER_IMAGES
from rota.core.snapshot import Snapshot
from rota.core.wording import hint, sentence
from rota.store import Store
from rota.store.records import Submission

NEVER = (ReasonCode.NO_MATCHING_GPU, ReasonCode.NO_FLAVOR, ReasonCode.NEVER_FITS)
FIELDS = {"gpu": "resources.gpu", "cpu": "resources.cpu", "memory": "resources.memory",
          "gpu_memory": "resources.gpu_memory", "replicas": "replicas",
          "node": "resources", "image": "image"}


REUSE_S = 5.0


class Screen:
    """The scheduler's static screening of one submitted job, on a view of the inventory,
    queues and flavours at most ``REUSE_S`` old (fresh for a refusal)."""

    def __init__(self, store: Store, clock=time.monotonic) -> None:
        self.store, self.clock = store, clock
        self._lock = threading.Lock()
        self._cycle: Any = None
        self._built_at = float("-inf")

    def refuse_if_never_runs(self, sub: Submission, image_field: str = "image") -> None:
        """Raise ``InvalidSpec`` naming the field at fault when ``sub`` can never run here
        (``image_field``: how the job file named its image, ``image`` or ``run.image``)."""
        job = Job(id=JobId("0"), project=sub.project, queue=sub.queue, request=sub.request,
                  user=sub.user, replicas=sub.replicas, resource_group=sub.resource_group,
                  selector=tuple(sorted(sub.selector.items())), image=sub.run.get("image"))
        with self._lock:
            reason = self._screen(job, fresh=False)
            if reason is not None:
                reason = self._screen(job, fresh=True)
        if reason is not None:
            field = FIELDS.get(reason.resource or "", "resources")
            if (reason.resource or "").startswith(QUOTA_PREFIX):  # instances of a MIG profile
                field = FIELDS["gpu"]
            advice = hint(reason)
            why = self._no_images() if field == "image" else ""
            raise InvalidSpec(image_field if field == "image" else field, sentence(reason) + why
                              + (f" To run it: {advice}." if advice else ""))

    def _no_images(self) -> str:
        """Why the nodes run no container images, as their backends said (the label
        ``rota.dev/containers``: the local backend's podman), or ""."""
        cycle = self._cycle
        nodes = cycle.snapshot.nodes if cycle is not None else ()
        said = sorted({(n.labels.get(CONTAINER_IMAGES) or "").removeprefix("not available: ")
                       for n in nodes if (n.labels.get(CONTAINER_IMAGES) or "").startswith(
                           "not available")})
        return "".join(f" {why[0].upper()}{why[1:]}." for why in said)

    def _screen(self, job: Job, fresh: bool):
        """The reason ``job`` can never run, or None."""
        if fresh or self.clock() - self._built_at > REUSE_S:
            self._rebuild()
        cycle = self._cycle
        if cycle is None or job.queue not in cycle.snapshot.queues:
            return None
        reason = cycle.base.screen(cycle, job)
        return reason if reason is not None and reason.code in NEVER else None

    def _rebuild(self) -> None:
        from rota.scheduler import build_policy
        from rota.scheduler.context import Cycle

        if self._cycle is not None:
            self._cycle.close()
        self._cycle, self._built_at = None, self.clock()
        nodes = tuple(node for node, _, _ in self.store.list_nodes())
        if not nodes:
            return
        queues = {q.name: q for q in self.store.list_queues()}
        flavors: dict[str, Flavor] = {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
        flavors.update({f.name: f for f in self.store.list_flavors()})
        self._cycle = Cycle(Snapshot(nodes, queues, (), flavors=flavors),
                            build_policy("default"), 0.0)
