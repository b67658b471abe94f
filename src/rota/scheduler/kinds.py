"""What a cycle knows of each pending job itself, worked out once per job object: its effective
priority, its kind (what the cycle's rules read of it) and what its start reads of it, so that
the answers a cycle keeps for jobs alike are found without hashing a request each time.

``JobKinds`` is a part of ``rota.scheduler.context.Cycle``: it reads the cycle's snapshot, quota
book, ``now`` and ``flavors``, and keeps its own tables (``start_kinds``).
"""

from __future__ import annotations

from rota.core import Job, WithinQueue


class JobKinds:
    """Numbers for jobs alike, and their priorities (see the module docstring)."""

    def start_kinds(self, policy) -> None:
        """The tables of an empty cycle under ``policy``."""
        # effective priorities (they depend on the job and ``now`` only), per job object
        self._effective = getattr(policy.order, "effective_priority", None)
        self._priorities: dict[str, tuple[Job, float]] = {}
        self._kinds: dict[str, tuple[Job, int]] = {}  # see ``kind_of``
        self._kind_ids: dict[tuple, int] = {}
        self._alike: dict[str, tuple[Job, int]] = {}  # see ``alike``
        self._admissible: dict[int, bool] = {}  # see ``admissible``

    def priority_of(self, job: Job) -> float:
        """The priority preemption compares: the ordering plugin's effective priority of the
        job where the plugin defines one, else the job's own priority."""
        effective = self._effective
        if effective is None:
            return job.priority
        hit = self._priorities.get(job.id)
        if hit is None or hit[0] is not job:  # a bound copy has the id of its pending job
            hit = self._priorities[job.id] = (job, effective(job, self.now))
        return hit[1]

    def kind_of(self, job: Job) -> int:
        """What the cycle's rules read of a pending job itself, besides its id: jobs of one
        kind are answered alike when tried in the same state. Its queue, request, gang size,
        resource group, selector, whether it runs in a container image, priority and whether it
        is preemptible; and its submission (and id) where its queue lets an older equal
        priority evict a newer job, or where it reads datasets."""
        hit = self._kinds.get(job.id)
        if hit is None or hit[0] is not job:
            queue = self.snapshot.queues.get(job.queue)
            newer = queue is not None and \
                queue.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
            kind = (job.queue, job.request, job.replicas, job.resource_group, job.selector,
                    job.image is None, self.priority_of(job), job.preemptible,
                    (job.submit_time, job.id) if newer or job.datasets else None)
            number = self._kind_ids.setdefault(kind, len(self._kind_ids))  # hashes at once
            hit = self._kinds[job.id] = (job, number)
        return hit[1]

    def alike(self, job: Job) -> int:
        """A number for what the start of a pending job reads of it: its queue, request, gang
        size, resource group, selector and whether it runs in a container image (jobs alike
        have the same number; a job that reads datasets is alike with none other), worked out once per job object, so that the answers kept for
        jobs alike are looked up without hashing the request each time."""
        hit = self._alike.get(job.id)
        if hit is None or hit[0] is not job:
            key = (None, job.queue, job.request, job.replicas, job.resource_group, job.selector,
                   job.image is None,  # None first: never equal to a ``kind_of`` key
                   job.datasets and job.id)  # where its data is cached decides: its own
            hit = self._alike[job.id] = (job, self._kind_ids.setdefault(key, len(self._kind_ids)))
        return hit[1]

    def admissible(self, job: Job) -> bool:
        """``QuotaBook.admissible_ever`` for ``job`` in its flavours: fixed by the queues, so
        one answer for jobs alike (``alike``)."""
        key = self.alike(job)
        hit = self._admissible.get(key)
        if hit is None:
            hit = self._admissible[key] = self.book.admissible_ever(
                job.queue, job.total(), [f for f, _ in self.flavors(job)])
        return hit
