"""The base cycles start from, kept between cycles: what the jobs holding resources take.

Vocabulary:
- *active job*: a job that holds resources (scheduled, running or preempting), stored with the
  flavour it is charged to (its own, else one derived from the GPUs it holds, see ``charged``).
- *base*: for nodes, queues and flavours fixed when it is built, the overlay of free capacity
  (``ClusterState``), the quota book and each project's allocation, with every active job
  loaded. The caller keeps it up to date with *deltas*: ``hold(job)`` when a job starts (or
  changes while it holds, e.g. is being preempted), ``release(job_id)`` when a job gives its
  resources back (finished, requeued, preempted and gone).
- *sync*: ``sync(snapshot)`` brings the base to a full snapshot of the same nodes, queues and
  flavours (``stands_on``) in one call: ``hold`` for each active job that is not the very
  object given last time (a caller whose snapshots rebuild only the jobs that changed, as the
  store's job cache does, pays for those alone), ``release`` for each one no longer active.
  It returns the snapshot of the pending jobs to run the cycle on.
- *cycle on a base*: ``run_cycle(snapshot, policy, now, base=base)`` with a snapshot whose jobs
  are only the pending ones. The cycle works on a *view* of the base's overlay (the same nodes,
  a journal of its own) and records every tentative change it makes: binds, nominated
  preemptors, reservation caps and charges, what-ifs. ``Cycle.close`` undoes them all, so the
  base leaves the cycle as it entered it.

Invariants: between cycles a base equals one built afresh from the same nodes, queues,
flavours and active jobs (free capacity per node and device, bucket membership and order, quota
usage, allocations), so a cycle on it decides exactly as ``run_cycle`` on the full snapshot;
deltas are refused while a cycle runs on the base.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Mapping

from rota.core import (
    ANY_FLAVOR, CPU, GPU, MEMORY, Flavor, InvalidSpec, Job, JobState, Node, Queue,
)
from rota.core.decisions import Reason
from rota.scheduler.placement import Shape
from rota.scheduler.quota import QuotaBook
from rota.scheduler.screen import NodeSizes, screen
from rota.core.snapshot import Snapshot
from rota.scheduler.state import ClusterState, Slot


class UndoableBook(QuotaBook):
    """A quota book whose charges, between ``begin`` and ``rollback``, are taken back exactly
    (in reverse order) by ``rollback``; the answer caches follow, as every charge clears them.
    ``version`` names the book's content: each charge gives it a new name, never used before,
    and whoever puts the book back as it was may put back its name (equal versions, equal
    book), so that the answers remembered for it hold again."""

    def __init__(self, queues: Mapping[str, Queue], flavors: Mapping[str, Flavor]) -> None:
        self.log: list[tuple[str, str, Mapping[str, int], int]] | None = None
        self.version = self._names = 0
        super().__init__(queues, flavors, ())

    def charge(self, queue: str, f: str, demand: Mapping[str, int], sign: int) -> None:
        if self.log is not None:
            self.log.append((queue, f, demand, sign))
        self._names += 1
        self.version = self._names
        super().charge(queue, f, demand, sign)

    def begin(self) -> None:
        self.log = []

    def mark(self) -> tuple[int, int]:
        """The book's name and the length of its log now (see ``restore``)."""
        return (self.version, 0 if self.log is None else len(self.log))

    def restore(self, mark: tuple[int, int]) -> None:
        """The book is as it was at ``mark``: the caller charged back whatever it charged
        since. It gets back its name, and those charges leave the log (rolling a charge and
        its reverse back changes nothing), so that ``rollback`` does not replay what-ifs."""
        self.version, length = mark
        if self.log is not None:
            del self.log[length:]

    def rollback(self) -> None:
        log, self.log = self.log or [], None
        for queue, f, demand, sign in reversed(log):
            super().charge(queue, f, demand, -sign)


class Base:
    def __init__(self, nodes: Iterable[Node], queues: Mapping[str, Queue],
                 flavors: Mapping[str, Flavor] | None = None, jobs: Iterable[Job] = ()) -> None:
        self.nodes = tuple(nodes)
        self.queues = queues
        self.flavors = flavors if flavors is not None else {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
        self.state = ClusterState(self.nodes)
        self.book = UndoableBook(queues, self.flavors)
        self.alloc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.active: dict[str, Job] = {}
        self.models = sorted({d.model for n in self.nodes for d in n.devices})
        self.groups = sorted({n.resource_group for n in self.nodes})
        self.capacity = {
            CPU: sum(n.cpu_milli for n in self.nodes if n.schedulable),
            MEMORY: sum(n.memory_mib for n in self.nodes if n.schedulable),
            GPU: sum(d.milli for n in self.nodes if n.schedulable for d in n.devices if d.healthy),
        }
        self.sizes = NodeSizes(self.nodes)  # for screening: the largest eligible node
        # whether a planned MIG switch takes devices away somewhere (``GpuDevice.switch_at``)
        self.switching = any(d.switch_at is not None for n in self.nodes for d in n.devices)
        # answers that depend only on nodes, queues and flavours, kept for every cycle
        self.flavor_answers: dict[tuple, list] = {}
        self.shapes: dict[tuple, Shape] = {}
        self.pool_members: dict[tuple, tuple[list, int]] = {}
        # screening answers per (queue, request, replicas, resource group, selector), all a
        # job's static feasibility depends on; and per pending job id, for the same Job object
        self.screened: dict[tuple, Reason | None] = {}
        self.screened_job: dict[str, tuple[Job, Reason | None]] = {}
        self.busy = False
        self._given: dict[str, Job] = {}  # the job objects of the last ``sync``
        for job in jobs:
            self.hold(job)

    @classmethod
    def of(cls, snapshot: Snapshot) -> Base:
        """The base of a full snapshot: its nodes, queues, flavours and active jobs."""
        return cls(snapshot.nodes, snapshot.queues, snapshot.flavors,
                   (j for j in snapshot.jobs if j.state.holds_resources))

    def stands_on(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot`` has this base's nodes, queues and flavours."""
        return all(getattr(snapshot, name) is getattr(self, name)
                   or getattr(snapshot, name) == getattr(self, name)
                   for name in ("nodes", "queues", "flavors"))

    def sync(self, snapshot: Snapshot) -> Snapshot:
        """Bring the base to the active jobs of the full ``snapshot`` (module docstring:
        *sync*); the snapshot of its pending jobs, for a cycle on the base. The active jobs
        are then listed in the snapshot's order, as in a base built from it afresh, and the
        screening answers of jobs no longer pending are forgotten."""
        if not self.stands_on(snapshot):
            raise InvalidSpec("snapshot", "its nodes, queues or flavours differ from the "
                              "base's; build a new base")
        self._idle("sync")
        active = [j for j in snapshot.jobs if j.state.holds_resources]
        given, self._given = self._given, {j.id: j for j in active}
        for job_id in [j for j in self.active if j not in self._given]:
            self.release(job_id)
        for job in active:
            if given.get(job.id) is not job:
                self.hold(job)
        self.active = {j.id: self.active[j.id] for j in active}
        pending = tuple(j for j in snapshot.jobs if j.state is JobState.PENDING)
        ids = {j.id for j in pending}
        self.screened_job = {k: v for k, v in self.screened_job.items() if k in ids}
        return replace(snapshot, jobs=pending)

    def fits(self, snapshot: Snapshot) -> None:
        """Check that ``snapshot`` may run on this base: same nodes, queues and flavours, and
        only pending jobs (the base supplies the active ones)."""
        for name in ("nodes", "queues", "flavors"):
            if getattr(snapshot, name) is not getattr(self, name) and \
                    getattr(snapshot, name) != getattr(self, name):
                raise InvalidSpec(f"snapshot.{name}", "differs from the base's; build a new base")
        for job in snapshot.jobs:
            if job.state is not JobState.PENDING and job.state.holds_resources:
                raise InvalidSpec("snapshot.jobs", f"job {job.id} holds resources; with a base "
                                  "the snapshot lists only pending jobs")

    def screen(self, cycle, job: Job) -> Reason | None:
        """``screen.screen``, remembered: a job's answer never changes on this base."""
        hit = self.screened_job.get(job.id)
        if hit is not None and hit[0] is job:
            return hit[1]
        key = (job.queue, job.request, job.replicas, job.resource_group, job.selector,
               job.image)  # the image is named in the reason
        if key in self.screened:
            refusal = self.screened[key]
        else:
            refusal = self.screened[key] = screen(cycle, job)
        self.screened_job[job.id] = (job, refusal)
        return refusal

    # -- deltas -------------------------------------------------------------------------------

    def hold(self, job: Job) -> None:
        """``job`` holds resources now: load what it holds, charge its quota, count it. A job
        already held is replaced (what it holds is re-taken only if its placement changed)."""
        self._idle("hold")
        if not job.state.holds_resources:
            raise InvalidSpec("job.state", f"job {job.id} is {job.state.value}, which holds "
                              "no resources")
        old = self.active.get(job.id)
        if old is not None:
            if (old.placement == job.placement and old.request == job.request
                    and old.replicas == job.replicas and old.queue == job.queue
                    and old.project == job.project and (job.flavor in (None, old.flavor))):
                self.active[job.id] = replace(job, flavor=old.flavor)
                return
            self.release(job.id)
        job = charged(job, self.queues, self.flavors, self.state)
        self.active[job.id] = job
        self.screened_job.pop(job.id, None)
        self._apply(job, 1)

    def release(self, job_id: str) -> Job:
        """The job gave its resources back; returns it as it was held."""
        self._idle("release")
        job = self.active.pop(job_id, None)
        if job is None:
            raise InvalidSpec("job_id", f"job {job_id} holds nothing in this base")
        self._apply(job, -1)
        return job

    def _apply(self, job: Job, sign: int) -> None:
        req = job.request
        for rep in job.placement.replicas:
            slot = self.state.by_name.get(rep.node)
            if slot is not None:
                self.state.load(slot, sign * req.cpu_milli, sign * req.memory_mib, [
                    (position(slot, d.index), sign * d.milli, sign * d.memory_mib)
                    for d in rep.devices])
        if job.queue in self.queues:
            self.book.charge(job.queue, job.flavor, job.total(), sign)
        alloc = self.alloc[job.project]
        for r, v in job.total().items():
            alloc[r] += sign * v

    def _idle(self, what: str) -> None:
        if self.busy:
            raise RuntimeError(f"{what} while a cycle runs on the base")

    # -- cycles -------------------------------------------------------------------------------

    def view(self) -> ClusterState:
        """The overlay for one cycle: the base's nodes, buckets and caps, with an empty journal
        of its own. A new object each cycle, so that placement plugins that follow a state's
        journal rebuild from it, as they would from an overlay built afresh."""
        view = object.__new__(ClusterState)
        view.__dict__.update(self.state.__dict__)
        view.journal = []
        view._before = []
        view.epoch = 0
        return view


def charged(job: Job, queues: Mapping[str, Queue], flavors: Mapping[str, Flavor],
            state: ClusterState) -> Job:
    """``job`` with the flavour it is charged to: its own, else the first flavour of its queue
    whose models match the GPUs it holds, else ``any``."""
    if job.flavor is not None:
        return job
    queue = queues.get(job.queue)
    models = set()
    for rep in job.placement.replicas:
        slot = state.by_name.get(rep.node)
        if slot is not None:
            by_index = {d.index: d.model for d in slot.node.devices}
            models.update(by_index[d.index] for d in rep.devices if d.index in by_index)
    for name in (queue.quotas if queue else ()):
        flavor = flavors.get(name)
        if flavor is not None and all(flavor.matches(m) for m in models):
            return replace(job, flavor=name)
    return replace(job, flavor=ANY_FLAVOR)


def position(slot: Slot, index: int) -> int:
    """The position on ``slot`` of the GPU numbered ``index``."""
    devices = slot.node.devices
    if index < len(devices) and devices[index].index == index:
        return index  # the usual numbering: device i at position i
    for p, dev in enumerate(devices):
        if dev.index == index:
            return p
    raise KeyError(f"node {slot.name} has no GPU {index}")
