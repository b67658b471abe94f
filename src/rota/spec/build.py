"""From validated file models to a ``Snapshot``: the rules that span entries.

Checked here, each with the field path of the entry at fault:
- names are unique: nodes (after stamping), queues, projects, jobs (running and pending);
- references exist: a queue's flavours, resource groups and bound projects (when the cluster
  lists projects), a job's queue, project (when the cluster lists projects) and resource group;
- a pending job's queue is open to its project (a queue's ``projects``; running jobs were
  accepted before and are never refused for it);
- a job's ``gpu_model`` patterns match some GPU of the cluster;
- a running job's placement has one entry per replica, names existing nodes and devices,
  matches the job's GPU request and models, and no node or device is booked beyond capacity.

A job may leave out its project and queue; they are chosen as ``rota run`` chooses them
(``_filled``). Every mistake of a jobs file's entries is reported at once.

What is not a file error: a job larger than every node, a selector no node has. The
scheduler rejects those with a reason (``never-fits``), and ``rota plan`` shows it.

Time: ``now`` defaults to the latest time the cluster file mentions (a running job's
``started_at``, a usage ``as_of``), else 0. A running job without ``started_at`` started at
``now``. A pending job without ``submit_time`` counts as submitted just before ``now``, one
millisecond after the job before it in the file, so file order is submission order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from rota.core import (
    ANY_FLAVOR, MILLI, DeviceShare, Flavor, InvalidSpec, Job, JobState, Node, NodeName,
    Placement, Project, Queue, ReplicaPlacement, UnknownPlugin, model_matches,
)
from rota.scheduler import Snapshot, Usage, build_policy
from rota.spec.cluster import ClusterFile, JobsFile, QueuesFile, RunningSpec
from rota.spec.errors import at, combined, every, from_validation, validate_all
from rota.spec.job import JobSpec, check_export, to_job


Binding = tuple[str, ...] | None
"""The projects whose jobs a queue admits; ``None``: every project, ``()``: none."""


@dataclass(frozen=True)
class Cluster:
    """A loaded cluster file: the snapshot without pending jobs, the plan's clock and the
    policy spec the file names (``None``: the ``default`` preset)."""

    snapshot: Snapshot
    now: float
    policy: str | Mapping[str, Any] | None = None
    models: tuple[str, ...] = field(default=())
    bindings: Mapping[str, Binding] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueSet:
    """A queues file (what ``rota queue apply`` sends): the flavours it defines, its queues,
    and each queue's binding to projects."""

    flavors: dict[str, Flavor]
    queues: dict[str, Queue]
    bindings: dict[str, Binding]
    idle: dict[str, dict[str, float | None] | None] = field(default_factory=dict)
    # idle reclamation defaults as stored: per queue, and "*" for the file's top-level ones
    # (only when the file has that key: applying a file without it keeps them)
    fair_use: dict[str, dict[str, Any]] | None = None  # the caps as stored (None: defaults)
    fair_use_given: bool = False  # the file has fair_use: (without it, the caps stay)
    prices: tuple[str, dict[str, float]] | None = None  # (currency, model -> GPU-hour price)
    prices_given: bool = False  # the file has prices: (without it, the prices stay)
    # per queue, its batch options as stored (``rota.core.batchopts.QueueBatch``; None: none)
    slurm: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def build_cluster(data: Any) -> Cluster:
    try:
        spec = ClusterFile.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None
    nodes = _nodes(spec)
    groups = {n.resource_group for n in nodes}
    flavors = _flavors(spec)
    queues = _queues(spec, flavors, groups)
    projects = _projects(spec)
    bindings = _bindings(spec, projects or None)
    now = spec.now if spec.now is not None else _latest(spec)
    usage = {p.name: Usage(p.usage.gpu_hours * 3600, p.usage.as_of if p.usage.as_of is not None
                           else now) for p in spec.projects if p.usage is not None}
    if spec.policy is not None:
        check_policy(spec.policy)
    base = Snapshot(tuple(nodes), queues, (), projects, flavors, usage)
    running = _running(spec, base, now)
    models = tuple(sorted({d.model for n in nodes for d in n.devices}))
    snapshot = Snapshot(tuple(nodes), queues, tuple(running), projects, flavors, usage)
    return Cluster(snapshot, now, spec.policy, models, bindings)


def build_queues(data: Any, groups: Iterable[str], known_flavors: Mapping[str, Flavor] | None = None,
                 known_projects: Iterable[str] | None = None) -> QueueSet:
    """A queues file (``flavors:`` and ``queues:`` as in a cluster file) -> the flavours it
    defines, its queues and their bindings, checked against the resource groups, flavours and
    projects that exist (``known_projects`` None: any project name)."""
    try:
        spec = QueuesFile.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None
    flavors = {**(known_flavors or {}), **_flavors(spec)}
    queues = _queues(spec, flavors, set(groups))
    bindings = _bindings(spec, None if known_projects is None else set(known_projects))
    idle = {q.name: q.idle.stored() if q.idle is not None else None for q in spec.queues}
    if "idle" in spec.model_fields_set:  # absent: the global defaults stay as they are
        idle["*"] = spec.idle.stored() if spec.idle is not None else None
    caps = spec.fair_use.stored() if spec.fair_use is not None else None
    prices = None if spec.prices is None else (spec.prices.currency, dict(spec.prices.gpu_hour))
    slurm = {q.name: q.slurm.batch().stored() if q.slurm is not None else None
             for q in spec.queues}
    return QueueSet({n: f for n, f in flavors.items() if n in spec.flavors}, queues, bindings,
                    idle, caps, "fair_use" in spec.model_fields_set, prices,
                    "prices" in spec.model_fields_set, slurm)


def build_jobs(cluster: Cluster, data: Any) -> tuple[Job, ...]:
    """Pending jobs of a jobs file, checked against ``cluster``. A file with one job at its top
    level (a single-job file, as ``rota submit`` takes: no ``jobs`` key, and keys of a job) is
    read as a list of that one job, and its errors name its keys without ``jobs[0]``; its
    ``export`` (the submitter's variables, ``JobFileSpec``) is checked and left out."""
    single = isinstance(data, dict) and "jobs" not in data and \
        bool(set(map(str, data)) & set(JobSpec.model_fields))
    if single and "export" in data:
        check_export(data["export"])
        data = {k: v for k, v in data.items() if k != "export"}
    try:
        return _jobs(cluster, {"jobs": [data]} if single else data)
    except InvalidSpec as exc:
        if not single:
            raise
        raise combined([InvalidSpec(_unlisted(e.field), e.reason) for e in every(exc)]) \
            from None


def _unlisted(field: str) -> str:
    for lead in ("jobs[0].", "jobs[0]"):
        if field.startswith(lead):
            return field[len(lead):]
    return field


def _jobs(cluster: Cluster, data: Any) -> tuple[Job, ...]:
    if isinstance(data, dict) and isinstance(data.get("jobs"), list):
        data = {**data, "jobs": [_filled(j, cluster) for j in data["jobs"]]}
    spec = validate_all(JobsFile, data)
    taken = {j.id: "the cluster file's running jobs" for j in cluster.snapshot.jobs}
    out = []
    n = len(spec.jobs)
    for i, job in enumerate(spec.jobs):
        where = f"jobs[{i}]"
        _check_refs(job, where, cluster.snapshot, cluster.models)
        _check_open(cluster.bindings.get(job.queue), job, where)
        if job.name in taken:
            raise InvalidSpec(f"{where}.name", f"job {job.name} is already defined by {taken[job.name]}")
        taken[job.name] = where
        with at(where):
            out.append(to_job(job, cluster.now - (n - i) / 1000))
    return tuple(out)


def _filled(entry: Any, cluster: Cluster) -> Any:
    """A job entry with the project and queue it leaves out chosen as ``rota run`` chooses
    them: the cluster's only project (else ``default``), then the queue named ``default`` if
    it admits that project, else the only queue that does. Left out when there is no choice:
    validation then says the key is required."""
    if not isinstance(entry, dict) or ("project" in entry and "queue" in entry):
        return entry
    entry = dict(entry)
    projects = list(cluster.snapshot.projects)
    if "project" not in entry and (len(projects) <= 1 or "default" in projects):
        entry["project"] = projects[0] if len(projects) == 1 else "default"
    project = entry.get("project")
    usable = [q for q in cluster.snapshot.queues
              if (b := cluster.bindings.get(q)) is None or project in b]
    if "queue" not in entry and ("default" in usable or len(usable) == 1):
        entry["queue"] = "default" if "default" in usable else usable[0]
    return entry


def check_policy(spec: str | Mapping[str, Any]) -> None:
    """Build the policy once to validate it; plugin errors name ``policy.<point>``."""
    try:
        build_policy(spec)
    except UnknownPlugin as exc:
        point, _, reason = exc.message.partition(": ")
        raise InvalidSpec(f"policy.{point}" if reason else "policy", reason or exc.message) from None
    except InvalidSpec as exc:
        field = exc.field if exc.field.startswith("policy") else f"policy.{exc.field}"
        raise InvalidSpec(field, exc.reason) from None


# -- inventory, flavours, queues, projects ---------------------------------------------------


def _nodes(spec: ClusterFile) -> list[Node]:
    out: list[Node] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(spec.nodes):
        names = [entry.name] if entry.count is None else [
            f"{entry.name}-{k}" for k in range(entry.count)]
        for name in names:
            if name in seen:
                raise InvalidSpec(f"nodes[{i}].name", f"node {name} is already defined by {seen[name]}")
            seen[name] = f"nodes[{i}]"
            with at(f"nodes[{i}]"):
                out.append(Node(NodeName(name), entry.cpu, entry.memory, entry.devices(name),
                                entry.resource_group, dict(entry.labels), entry.schedulable))
    return out


def _flavors(spec: ClusterFile | QueuesFile) -> dict[str, Flavor]:
    if ANY_FLAVOR in spec.flavors:
        raise InvalidSpec(f"flavors.{ANY_FLAVOR}", "the flavour 'any' is built in (every GPU "
                          "model and CPU-only jobs); choose another name")
    out = {ANY_FLAVOR: Flavor(ANY_FLAVOR)}
    out.update({name: Flavor(name, patterns) for name, patterns in spec.flavors.items()})
    return out


def _queues(spec: ClusterFile | QueuesFile, flavors: Mapping[str, Flavor], groups: set[str]
            ) -> dict[str, Queue]:
    out: dict[str, Queue] = {}
    for i, q in enumerate(spec.queues):
        where = f"queues[{i}]"
        if q.name in out:
            raise InvalidSpec(f"{where}.name", f"queue {q.name} is already defined")
        for name in q.quota:
            if name not in flavors:
                defined = ", ".join(f for f in flavors if f != ANY_FLAVOR) or "none"
                raise InvalidSpec(f"{where}.quota.{name}", f"unknown flavour; flavours defined: "
                                  f"{defined} (and the built-in 'any')")
        for k, group in enumerate(q.resource_groups):
            if group not in groups:
                raise InvalidSpec(f"{where}.resource_groups[{k}]", f"no node is in resource "
                                  f"group {group!r}; groups: {', '.join(sorted(groups))}")
        with at(f"{where}.quota"):
            quotas = {name: quota.quota() for name, quota in q.quota.items()}
        out[q.name] = Queue(q.name, quotas, q.cohort, q.preemption.within_queue,
                            q.preemption.reclaim_within_cohort, tuple(q.resource_groups),
                            q.preemption.borrow_within_cohort, q.strict_priority,
                            q.preemption.min_runtime, q.preemption.max_priority_threshold,
                            q.weight)
    return out


def _bindings(spec: ClusterFile | QueuesFile, projects: Iterable[str] | None
              ) -> dict[str, Binding]:
    """Each queue's ``projects``, each checked against ``projects`` (None: any name)."""
    out: dict[str, Binding] = {}
    for i, q in enumerate(spec.queues):
        if q.projects is None:
            out[q.name] = None
            continue
        for j, name in enumerate(q.projects):
            if projects is not None and name not in projects:
                raise InvalidSpec(f"queues[{i}].projects[{j}]", f"unknown project {name!r}; "
                                  f"projects: {', '.join(sorted(projects)) or 'none'}")
            if name in q.projects[:j]:
                raise InvalidSpec(f"queues[{i}].projects[{j}]", f"project {name} is listed twice")
        out[q.name] = tuple(q.projects)
    return out


def _check_open(binding: Binding, job: JobSpec, where: str) -> None:
    if binding is not None and job.project not in binding:
        allowed = ", ".join(binding) if binding else "no project (it is closed to new jobs)"
        raise InvalidSpec(f"{where}.queue", f"queue {job.queue} does not admit project "
                          f"{job.project}; it admits {allowed}")


def _projects(spec: ClusterFile) -> dict[str, Project]:
    out: dict[str, Project] = {}
    for i, p in enumerate(spec.projects):
        if p.name in out:
            raise InvalidSpec(f"projects[{i}].name", f"project {p.name} is already defined")
        out[p.name] = Project(p.name, p.weight)
    return out


def _latest(spec: ClusterFile) -> float:
    times = [r.started_at for r in spec.running if r.started_at is not None]
    times += [p.usage.as_of for p in spec.projects if p.usage and p.usage.as_of is not None]
    return max(times, default=0.0)


def _check_refs(job: JobSpec, where: str, snapshot: Snapshot, models: Iterable[str]) -> None:
    if job.queue not in snapshot.queues:
        raise InvalidSpec(f"{where}.queue", f"unknown queue {job.queue!r}; queues: "
                          f"{', '.join(snapshot.queues)}")
    if snapshot.projects and job.project not in snapshot.projects:
        raise InvalidSpec(f"{where}.project", f"unknown project {job.project!r}; projects: "
                          f"{', '.join(snapshot.projects)}")
    groups = sorted({n.resource_group for n in snapshot.nodes})
    if job.resource_group is not None and job.resource_group not in groups:
        raise InvalidSpec(f"{where}.resource_group", f"unknown resource group "
                          f"{job.resource_group!r}; groups: {', '.join(groups)}")
    patterns = job.resources.gpu_model
    models = list(models)
    if patterns and not any(model_matches(m, patterns) for m in models):
        raise InvalidSpec(f"{where}.resources.gpu_model", f"no GPU of the cluster matches "
                          f"{', '.join(patterns)}; models present: {', '.join(models) or 'none'}")


# -- running jobs ----------------------------------------------------------------------------


class _Ledger:
    """What running jobs have booked so far, per node and per device, to catch over-booking."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.cpu: dict[str, int] = {}
        self.mem: dict[str, int] = {}
        self.milli: dict[tuple[str, int], int] = {}
        self.gmem: dict[tuple[str, int], int] = {}

    def book(self, where: str, node: Node, job: Job, devices: tuple[DeviceShare, ...]) -> None:
        req = job.request
        for key, book, need, cap, unit in (
                ("cpu", self.cpu, req.cpu_milli, node.cpu_milli, "milli-CPU"),
                ("memory", self.mem, req.memory_mib, node.memory_mib, "MiB of memory")):
            total = book.get(node.name, 0) + need
            if total > cap:
                raise InvalidSpec(f"{where}.node", f"node {node.name} is over-booked: running "
                                  f"jobs need {total} {unit}, it has {cap}")
            book[node.name] = total
        by_index = {d.index: d for d in node.devices}
        for d in devices:
            dev = by_index[d.index]
            milli = self.milli.get((node.name, d.index), 0) + d.milli
            gmem = self.gmem.get((node.name, d.index), 0) + d.memory_mib
            if milli > MILLI or gmem > dev.memory_mib:
                raise InvalidSpec(f"{where}.gpus", f"GPU {d.index} of node {node.name} is "
                                  f"over-booked: running jobs hold {milli / MILLI:g} of it and "
                                  f"{gmem} of its {dev.memory_mib} MiB")
            self.milli[(node.name, d.index)], self.gmem[(node.name, d.index)] = milli, gmem


def _running(spec: ClusterFile, base: Snapshot, now: float) -> list[Job]:
    ledger = _Ledger(base.nodes)
    out: list[Job] = []
    seen: set[str] = set()
    models = sorted({d.model for n in base.nodes for d in n.devices})
    for i, r in enumerate(spec.running):
        where = f"running[{i}]"
        if r.name in seen:
            raise InvalidSpec(f"{where}.name", f"job {r.name} is already defined")
        seen.add(r.name)
        _check_refs(r, where, base, models)
        with at(where):
            job = to_job(r, r.started_at if r.started_at is not None else now)
        placement = _placement(r, where, job, ledger)
        flavor = _flavor_of(r, where, base, placement)
        started = r.started_at if r.started_at is not None else now
        with at(where):
            out.append(job.move_to(JobState.SCHEDULED, placement=placement, flavor=flavor,
                                   started_at=started).move_to(JobState.RUNNING))
    return out


def _placement(r: RunningSpec, where: str, job: Job, ledger: _Ledger) -> Placement:
    if len(r.placement) != job.replicas:
        raise InvalidSpec(f"{where}.placement", f"has {len(r.placement)} entries; the job has "
                          f"{job.replicas} replicas (one entry per replica)")
    g = job.request.gpu
    replicas = []
    for k, rep in enumerate(r.placement):
        at_k = f"{where}.placement[{k}]"
        node = ledger.nodes.get(rep.node)
        if node is None:
            raise InvalidSpec(f"{at_k}.node", f"unknown node {rep.node!r}")
        if len(rep.gpus) != g.count:
            raise InvalidSpec(f"{at_k}.gpus", f"lists {len(rep.gpus)} GPUs; the job asks for "
                              f"{g.count} per replica")
        if len(set(rep.gpus)) != len(rep.gpus):
            raise InvalidSpec(f"{at_k}.gpus", f"a GPU is listed twice: {rep.gpus}")
        if rep.share is not None and not g.fractional:
            raise InvalidSpec(f"{at_k}.share", "only a job with a fractional gpu has a share")
        devices = tuple(_share_of(rep, at_k, node, g, i) for i in rep.gpus)
        ledger.book(at_k, node, job, devices)
        replicas.append(ReplicaPlacement(node.name, devices))
    return Placement(tuple(replicas))


def _share_of(rep, where: str, node: Node, g, index: int) -> DeviceShare:
    dev = next((d for d in node.devices if d.index == index), None)
    if dev is None:
        have = ", ".join(str(d.index) for d in node.devices) or "none"
        raise InvalidSpec(f"{where}.gpus", f"node {node.name} has no GPU {index}; its GPUs: {have}")
    if not model_matches(dev.model, g.models):
        raise InvalidSpec(f"{where}.gpus", f"GPU {index} of node {node.name} is a {dev.model}, "
                          f"which the job's gpu_model {', '.join(g.models)} does not match")
    if not g.fractional:
        return DeviceShare(index, MILLI, dev.memory_mib)
    share = rep.share if rep.share is not None else g.share
    memory = rep.gpu_memory if rep.gpu_memory is not None else (
        g.memory_mib if g.memory_mib is not None else share * dev.memory_mib // MILLI)
    return DeviceShare(index, share, memory)


def _flavor_of(r: RunningSpec, where: str, base: Snapshot, placement: Placement) -> str:
    """The first flavour of the job's queue that covers every GPU model it runs on."""
    queue = base.queues[r.queue]
    if not queue.quotas:
        return ANY_FLAVOR
    nodes = {n.name: n for n in base.nodes}
    models = {d.model for rep in placement.replicas for n in [nodes[rep.node]]
              for d in n.devices if d.index in {s.index for s in rep.devices}}
    for name in queue.quotas:
        flavor = base.flavor(name)
        if all(flavor.matches(m) for m in models):
            return name
    raise InvalidSpec(f"{where}.placement", f"no flavour of queue {queue.name} covers the GPU "
                      f"models it runs on ({', '.join(sorted(models))})")
