"""Fluent builders for nodes, jobs, queues and snapshots, so tests read as specifications.

    node("n1").gpus(8, "H100-80GB").build()
    job("train").gpus(4).replicas(2).priority(10).build()
    cluster().nodes(...).queue(queue("research").quota(gpu=8).cohort("lab")).jobs(...).build()
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rota.core import (
    ANY_FLAVOR, BorrowWithinCohort, DeviceShare, Flavor, FlavorQuota, Foreign, GpuDevice,
    GpuRequest, Job, JobState, Node, Placement, Project, Queue, ReclaimWithinCohort,
    ReplicaPlacement, ReplicaRequest, WithinQueue,
)
from rota.scheduler import (
    Bind, Decisions, Policy, Reject, Snapshot, Usage, Wait, apply_decisions, build_policy,
    run_cycle,
)

GiB = 1024


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._name, self._cpu, self._mem = name, 64_000, 512 * GiB
        self._devices: list[GpuDevice] = []
        self._group, self._labels, self._schedulable = "default", {}, True
        self._foreign: list[Foreign] = []
        self._problem = ""
        self._features: frozenset[str] | None = None
        self._physical = 0  # GPUs declared so far, whole or cut into MIG instances

    def features(self, *names: str) -> NodeBuilder:
        """What the node can do (``rota.core.nodes``); unset: ``HOST_FEATURES``."""
        self._features = frozenset(names)
        return self

    def gpus(self, count: int, model: str = "H100-80GB", memory_gib: int = 80,
             nvlink: list[str | None] | None = None, numa: list[int] | None = None) -> NodeBuilder:
        start = self._physical
        self._physical += count
        for k in range(count):
            self._devices.append(GpuDevice(
                index=start + k, model=model, memory_mib=memory_gib * GiB,
                uuid=f"GPU-{self._name}-{start + k}",
                numa=numa[k] if numa else 0, nvlink=nvlink[k] if nvlink else None))
        return self

    def mig(self, *instances: tuple[str, int], model: str = "A100-40GB", memory_gib: int = 40,
            nvlink: str | None = None, numa: int = 0) -> NodeBuilder:
        """One more GPU, in MIG mode, cut into ``instances`` (profile, start): each a device
        (index ``(gpu + 1) * 1000 + start``) with its profile's memory."""
        from rota.core.mig import check_geometry, instance_index, profile_compute, table_for
        parent = self._physical
        self._physical += 1
        table = table_for(model, memory_gib * GiB)
        check_geometry(table, list(instances), "mig")
        for profile, start in instances:
            self._devices.append(GpuDevice(
                index=instance_index(parent, start), model=model,
                memory_mib=table.profile(profile).memory_gb * GiB,
                uuid=f"MIG-{self._name}-{parent}-{start}", numa=numa, nvlink=nvlink,
                profile=profile, parent=parent, start=start, compute=profile_compute(profile)))
        return self

    def unhealthy(self, index: int) -> NodeBuilder:
        self._devices[index] = replace(self._devices[index], healthy=False)
        return self

    def cpu(self, cores: float) -> NodeBuilder:
        self._cpu = int(cores * 1000)
        return self

    def memory(self, gib: int) -> NodeBuilder:
        self._mem = gib * GiB
        return self

    def group(self, name: str) -> NodeBuilder:
        self._group = name
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._labels[key] = value
        return self

    def cordoned(self) -> NodeBuilder:
        self._schedulable = False
        return self

    def held_by(self, holder: str, gpus: list[int] = (), cpu: float = 0, memory_gib: float = 0,
                share: tuple[int, int, int] | None = None) -> NodeBuilder:
        """Work outside rota holds whole ``gpus``, a ``share`` (index, milli, MiB), CPU, memory."""
        shares = [DeviceShare(i, 1000, self._devices[i].memory_mib) for i in gpus]
        if share is not None:
            shares.append(DeviceShare(*share))
        self._foreign.append(Foreign(int(cpu * 1000), int(memory_gib * GiB), tuple(shares),
                                     holder))
        return self

    def problem(self, reason: str) -> NodeBuilder:
        """The backend says nothing may start here (drained in Slurm, NotReady, ...)."""
        self._problem, self._schedulable = reason, False
        return self

    def build(self) -> Node:
        devices = tuple(sorted(self._devices, key=lambda d: d.index))
        node = Node(self._name, self._cpu, self._mem, devices, self._group,
                    dict(self._labels), self._schedulable, tuple(self._foreign), self._problem)
        return node if self._features is None else replace(node, features=self._features)


class JobBuilder:
    def __init__(self, id: str) -> None:
        self._f: dict[str, Any] = {"id": id, "project": "p", "queue": "q"}
        self._cpu, self._mem = 1000, 4 * GiB
        self._gpu = GpuRequest(0)

    def __getattr__(self, name: str):
        def setter(value):
            self._f[name] = value
            return self
        return setter

    def gpus(self, count: float, memory_gib: float | None = None, models: tuple[str, ...] = ()) -> JobBuilder:
        mem = None if memory_gib is None else int(memory_gib * GiB)
        if count and count < 1:
            self._gpu = GpuRequest(1, round(count * 1000), mem, models)
        else:
            self._gpu = GpuRequest(int(count), 1000, mem, models)
        return self

    def mig(self, profile: str, count: int = 1, models: tuple[str, ...] = ()) -> JobBuilder:
        """``count`` MIG instances of ``profile`` per replica."""
        self._gpu = GpuRequest(count, 1000, None, models, profile)
        return self

    def cpu(self, cores: float) -> JobBuilder:
        self._cpu = int(cores * 1000)
        return self

    def memory(self, gib: float) -> JobBuilder:
        self._mem = int(gib * GiB)
        return self

    def walltime(self, seconds: float) -> JobBuilder:
        self._f["walltime_s"] = seconds
        return self

    def submitted(self, t: float) -> JobBuilder:
        self._f["submit_time"] = t
        return self

    def running_on(self, *replicas: tuple[str, list[int]] | tuple[str, list[int], int],
                   since: float = 0.0, flavor: str = ANY_FLAVOR,
                   device_memory_gib: int = 80) -> JobBuilder:
        """Make the job running: each replica is (node, device indices[, milli per device]).

        Each device share books ``milli / 1000`` of a ``device_memory_gib`` device's memory."""
        reps = []
        for rep in replicas:
            node_name, indices = rep[0], rep[1]
            milli = rep[2] if len(rep) > 2 else 1000
            mem = device_memory_gib * GiB * milli // 1000
            reps.append(ReplicaPlacement(node_name, tuple(DeviceShare(i, milli, mem) for i in indices)))
        self._f.update(state=JobState.RUNNING, placement=Placement(tuple(reps)),
                       started_at=since, flavor=flavor, replicas=len(reps))
        return self

    def running_with(self, *replicas: tuple[str, list[tuple[int, int, int]]],
                     since: float = 0.0, flavor: str = ANY_FLAVOR) -> JobBuilder:
        """Make the job running: each replica is (node, its device shares as (index, milli,
        MiB))."""
        reps = tuple(ReplicaPlacement(n, tuple(DeviceShare(*d) for d in shares))
                     for n, shares in replicas)
        self._f.update(state=JobState.RUNNING, placement=Placement(reps), started_at=since,
                       flavor=flavor, replicas=len(reps))
        return self

    def build(self) -> Job:
        return Job(request=ReplicaRequest(self._cpu, self._mem, self._gpu), **self._f)


class QueueBuilder:
    def __init__(self, name: str) -> None:
        self._name, self._cohort = name, None
        self._quotas: dict[str, FlavorQuota] = {}
        self._within, self._reclaim = WithinQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY
        self._groups: tuple[str, ...] = ()
        self._extra: dict[str, Any] = {}

    def quota(self, flavor: str = ANY_FLAVOR, gpu: float | None = None, borrow: float | None = None,
              lend: float | None = None, cpu: float | None = None) -> QueueBuilder:
        nominal = {} if gpu is None else {"gpu": int(gpu * 1000)}
        if cpu is not None:
            nominal["cpu"] = int(cpu * 1000)
        self._quotas[flavor] = FlavorQuota(
            nominal,
            {} if borrow is None else {"gpu": int(borrow * 1000)},
            {} if lend is None else {"gpu": int(lend * 1000)})
        return self

    def limits(self, flavor: str = ANY_FLAVOR, nominal: dict[str, int] | None = None,
               borrowing: dict[str, int] | None = None,
               lending: dict[str, int] | None = None) -> QueueBuilder:
        """Quota in raw units (gpu and cpu in milli, memory in MiB), any resource."""
        self._quotas[flavor] = FlavorQuota(dict(nominal or {}), dict(borrowing or {}),
                                           dict(lending or {}))
        return self

    def groups(self, *names: str) -> QueueBuilder:
        self._groups = tuple(names)
        return self

    def cohort(self, name: str) -> QueueBuilder:
        self._cohort = name
        return self

    def preemption(self, within: str = "lower-priority", reclaim: str = "any") -> QueueBuilder:
        self._within, self._reclaim = WithinQueue(within), ReclaimWithinCohort(reclaim)
        return self

    def borrow_within_cohort(self, policy: str = "lower-priority",
                             max_priority_threshold: int | None = None) -> QueueBuilder:
        self._extra["borrow_within_cohort"] = BorrowWithinCohort(policy)
        self._extra["max_priority_threshold"] = max_priority_threshold
        return self

    def weight(self, w: float) -> QueueBuilder:
        self._extra["weight"] = w
        return self

    def strict_priority(self, on: bool = True) -> QueueBuilder:
        self._extra["strict_priority"] = on
        return self

    def min_runtime(self, seconds: float) -> QueueBuilder:
        self._extra["min_runtime_s"] = seconds
        return self

    def build(self) -> Queue:
        return Queue(self._name, dict(self._quotas), self._cohort, self._within, self._reclaim,
                     self._groups, **self._extra)


class ClusterBuilder:
    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._queues: dict[str, Queue] = {}
        self._jobs: list[Job] = []
        self._projects: dict[str, Project] = {}
        self._flavors: dict[str, Flavor] = {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
        self._usage: dict[str, Usage] = {}

    def nodes(self, *nodes: NodeBuilder | Node) -> ClusterBuilder:
        self._nodes += [n.build() if isinstance(n, NodeBuilder) else n for n in nodes]
        return self

    def queue(self, *queues: QueueBuilder | Queue) -> ClusterBuilder:
        for q in queues:
            q = q.build() if isinstance(q, QueueBuilder) else q
            self._queues[q.name] = q
        return self

    def flavor(self, name: str, *models: str) -> ClusterBuilder:
        self._flavors[name] = Flavor(name, tuple(models))
        return self

    def project(self, name: str, weight: float = 1.0, used_gpu_hours: float = 0.0,
                as_of: float = 0.0) -> ClusterBuilder:
        self._projects[name] = Project(name, weight)
        if used_gpu_hours:
            self._usage[name] = Usage(used_gpu_hours * 3600, as_of)
        return self

    def jobs(self, *jobs: JobBuilder | Job) -> ClusterBuilder:
        self._jobs += [j.build() if isinstance(j, JobBuilder) else j for j in jobs]
        return self

    def build(self) -> Snapshot:
        queues = dict(self._queues) or {"q": Queue("q")}
        return Snapshot(tuple(self._nodes), queues, tuple(self._jobs), dict(self._projects),
                        dict(self._flavors), dict(self._usage))


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def job(id: str) -> JobBuilder:
    return JobBuilder(id)


def queue(name: str) -> QueueBuilder:
    return QueueBuilder(name)


def cluster() -> ClusterBuilder:
    return ClusterBuilder()


# -- running a cycle and reading its outcome ----------------------------------------------------


def decide(snapshot: Snapshot, policy: str | dict | Policy = "default", now: float = 0.0) -> Decisions:
    """One cycle with a preset name, a policy spec or a built policy."""
    built = policy if isinstance(policy, Policy) else build_policy(policy)
    return run_cycle(snapshot, built, now)


def bound(decisions: Decisions) -> dict[str, Bind]:
    return {b.job: b for b in decisions.binds}


def waiting(decisions: Decisions) -> dict[str, Wait]:
    return {w.job: w for w in decisions.waits}


def rejected(decisions: Decisions) -> dict[str, Reject]:
    return {r.job: r for r in decisions.rejects}


def codes(decisions: Decisions, job_id: str) -> list[str]:
    """Reason codes of a waiting or rejected job."""
    found = waiting(decisions).get(job_id) or rejected(decisions).get(job_id)
    assert found is not None, f"{job_id} neither waits nor is rejected"
    return [r.code.value for r in found.reasons]


def devices_of(b: Bind) -> list[tuple[str, tuple[int, ...]]]:
    """(node, device indices) of each replica of a bind."""
    return [(r.node, tuple(d.index for d in r.devices)) for r in b.placement.replicas]


def apply_all(snapshot: Snapshot, decisions: Decisions, now: float, evict_now: bool = True) -> SnapshotView:
    """``apply_decisions``, wrapped so a test can add jobs to the result."""
    return SnapshotView(apply_decisions(snapshot, decisions, now, evict_now))


class SnapshotView:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def with_jobs(self, *jobs: JobBuilder | Job) -> Snapshot:
        extra = tuple(j.build() if isinstance(j, JobBuilder) else j for j in jobs)
        return replace(self.snapshot, jobs=self.snapshot.jobs + extra)


# -- placement shapes and overlays, for plugin tests ------------------------------------------

ANY_POOL = (("default", "*"),)


def shape(cpu=1000, gpus=0, share=1000, models=(), mem=0):
    """One replica's placement shape in resource group ``default``."""
    from rota.scheduler.placement import Shape
    pools = tuple(("default", m) for m in models) if models else ANY_POOL
    return Shape(cpu, mem, gpus, share, None, models, (), pools)


def state_with(*nodes, used=()):
    """A state of ``nodes`` where ``used`` lists (node index, cpu, {device: milli}) taken; the
    index is the node's place in ``nodes`` (the state orders its slots by name)."""
    from rota.scheduler.state import ClusterState
    built = tuple(n.build() for n in nodes)
    st = ClusterState(built)
    for i, cpu, devs in used:
        slot = st.by_name[built[i].name]
        shares = [DeviceShare(p, m, m * slot.dev_mem[p] // 1000) for p, m in devs.items()]
        st.take(slot, cpu, 0, shares, list(devs))
    return st
