"""Conversions between rows (JSON columns included) and core values. Pure: no connection.

The job ``spec`` column holds the core-level request, version 1::

    {"v": 1,
     "request": {"cpu_milli": 4000, "memory_mib": 16384,
                 "gpu": {"count": 1, "share": 500, "memory_mib": 20480, "models": ["*A100*"]}},
     "walltime_s": 3600.0, "preemptible": true, "grace_s": 30.0, "resource_group": null,
     "selector": {"zone": "a"}, "labels": {}, "run": {...}}

A request for MIG instances adds ``"profile": "1g.10gb"`` to its ``gpu`` (a spec without it
asks for no profile).

Identity and ordering fields (name, project, user, queue, priority, kind, replicas) are columns,
not spec keys: the store filters and orders on them. ``run`` is what the backend needs; the
scheduler reads only its ``image`` (a job in a container image needs a node that runs them),
which ``job_from_row`` copies to the core job. A placement is ``[{"node": "n1", "devices":
[[index, milli, memory_mib], ...]}, ...]`` in replica rank order; queue quotas are a list of
``[flavor, quota]`` pairs, because flavour order matters and not every JSON column keeps key
order.

A control plane keeps a core job for every queued one, so ``job_from_row`` shares what jobs
have in common: equal requests are one object, and names (project, queue, user, flavour,
resource group) are interned strings.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from functools import lru_cache
from typing import Any, Mapping

from rota.core import (
    BorrowWithinCohort, DeviceShare, Flavor, FlavorQuota, Foreign, GpuDevice, GpuRequest, Job,
    JobId, JobKind, JobState, Node, NodeName, Placement, Queue, ReclaimWithinCohort,
    ReplicaPlacement, ReplicaRequest, WithinQueue,
)
from rota.core import Reason, ReasonCode
from rota.core.decisions import Holder
from rota.store.records import JobRecord, Submission

SPEC_VERSION = 1


def spec_json(sub: Submission) -> dict[str, Any]:
    gpu = sub.request.gpu
    return {
        "v": SPEC_VERSION,
        "request": {"cpu_milli": sub.request.cpu_milli, "memory_mib": sub.request.memory_mib,
                    "gpu": {"count": gpu.count, "share": gpu.share, "memory_mib": gpu.memory_mib,
                            "models": list(gpu.models),
                            **({"profile": gpu.profile} if gpu.profile else {})}},
        "walltime_s": sub.walltime_s, "preemptible": sub.preemptible, "grace_s": sub.grace_s,
        "resource_group": sub.resource_group, "selector": dict(sub.selector),
        "labels": dict(sub.labels), "run": dict(sub.run),
    }


def request_from_spec(spec: Mapping[str, Any]) -> ReplicaRequest:
    req, gpu = spec["request"], spec["request"]["gpu"]
    return _request(req["cpu_milli"], req["memory_mib"], gpu["count"], gpu["share"],
                    gpu["memory_mib"], tuple(gpu["models"]), gpu.get("profile", ""))


@lru_cache(maxsize=4096)
def _request(cpu_milli: int, memory_mib: int, count: int, share: int, gpu_memory_mib: int | None,
             models: tuple[str, ...], profile: str = "") -> ReplicaRequest:
    """One object for every equal request: most queued jobs ask for one of a few shapes."""
    return ReplicaRequest(cpu_milli, memory_mib,
                          GpuRequest(count, share, gpu_memory_mib, models, profile))


def _name(value: str | None) -> str | None:
    return None if value is None else sys.intern(value)


def placement_json(placement: Placement | None) -> list[dict[str, Any]] | None:
    if placement is None:
        return None
    return [{"node": r.node, "devices": [[d.index, d.milli, d.memory_mib] for d in r.devices]}
            for r in placement.replicas]


def placement_from_json(data: list[dict[str, Any]] | None) -> Placement | None:
    if data is None:
        return None
    return Placement(tuple(ReplicaPlacement(r["node"], tuple(DeviceShare(*d) for d in r["devices"]))
                           for r in data))


def reasons_json(reasons: tuple[Reason, ...]) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in asdict(r).items() if v not in (None, "", ())}
            for r in reasons]


def _plain(value: Any) -> Any:
    """A reason's value as JSON reads back (lists, not tuples), so that a stored reason
    compares equal to the one that wrote it."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def reasons_from_json(data: list[dict[str, Any]] | None) -> tuple[Reason, ...]:
    return tuple(Reason(**{**r, "code": ReasonCode(r["code"]),
                            "holders": holders_from_json(r.get("holders"))}) for r in data or ())


def holders_from_json(data: list[dict[str, Any]] | None) -> tuple[Holder, ...]:
    """An ``estimate`` reason's holders, as ``reasons_json`` stored them."""
    return tuple(Holder(str(h["job"]), tuple(h.get("nodes") or ()), h.get("end"),
                        bool(h.get("running"))) for h in data or ())


def job_from_row(row: Any) -> Job:
    """The core ``Job`` of a ``jobs`` row: what ``run_cycle`` sees."""
    spec = row.spec
    return Job(
        id=JobId(str(row.id)), project=_name(row.project), queue=_name(row.queue),
        request=request_from_spec(spec), user=_name(row.user), priority=row.priority,
        kind=JobKind(row.kind), replicas=row.replicas, walltime_s=spec["walltime_s"],
        submit_time=row.submit_time, preemptible=spec["preemptible"], grace_s=spec["grace_s"],
        resource_group=_name(spec["resource_group"]),
        selector=tuple(sorted(spec["selector"].items())),
        state=JobState(row.state), placement=placement_from_json(row.placement),
        flavor=_name(row.flavor), started_at=row.started_at,
        labels=tuple(sorted(spec["labels"].items())), last_checkpoint_at=row.last_checkpoint_at,
        image=_name((spec.get("run") or {}).get("image")),
        datasets=tuple((spec.get("run") or {}).get("datasets") or ()),
    )


def record_from_row(row: Any) -> JobRecord:
    return JobRecord(
        job=job_from_row(row), name=row.name, reason=row.reason,
        wait_reasons=reasons_from_json(row.wait_reasons), estimated_start=row.estimated_start,
        finished_at=row.finished_at, exit_code=row.exit_code, attempts=row.attempts,
        cancel_requested=bool(row.cancel_requested), preempt_deadline=row.preempt_deadline,
        backend_handle=row.backend_handle, run=row.spec.get("run", {}), version=row.version,
        updated_at=row.updated_at, billed_until=row.billed_until,
        failures=row.failures, held=row.held, lost_streak=row.lost_streak,
        eligible_at=row.eligible_at, last_checkpoint_at=row.last_checkpoint_at,
        depends=tuple((k, str(j)) for k, j in row.depends or ()),
        array_id=None if row.array_id is None else str(row.array_id),
        array_index=row.array_index, array_limit=row.array_limit,
    )


def node_values(node: Node) -> dict[str, Any]:
    """The columns a backend reports of a node (not ``schedulable``, ``drain``, ``reason``:
    the operator's; nor ``backend``, ``last_seen``)."""
    return {"resource_group": node.resource_group, "cpu_milli": node.cpu_milli,
            "memory_mib": node.memory_mib, "labels": dict(node.labels),
            "devices": [asdict(d) for d in node.devices], "problem": node.problem,
            "foreign": [asdict(f) for f in node.foreign], "features": sorted(node.features)}


def node_from_row(row: Any) -> Node:
    """The node as the scheduler sees it: not schedulable when the operator took it out or
    its backend reports a problem."""
    return Node(NodeName(row.name), row.cpu_milli, row.memory_mib,
                tuple(GpuDevice(**d) for d in row.devices), row.resource_group,
                dict(row.labels), bool(row.schedulable) and not row.problem,
                tuple(Foreign(f["cpu_milli"], f["memory_mib"],
                              tuple(DeviceShare(**d) for d in f["devices"]), f["holder"])
                      for f in row.foreign), row.problem, _features(row.features))


_FEATURE_SETS: dict[tuple[str, ...], frozenset[str]] = {}


def _features(names: list[str]) -> frozenset[str]:
    """One frozenset per distinct list: thousands of nodes share a few."""
    key = tuple(names)
    hit = _FEATURE_SETS.get(key)
    if hit is None:
        hit = _FEATURE_SETS[key] = frozenset(key)
    return hit


def queue_values(queue: Queue) -> dict[str, Any]:
    return {
        "cohort": queue.cohort,
        "quotas": [[flavor, {"nominal": dict(q.nominal), "borrowing_limit": dict(q.borrowing_limit),
                             "lending_limit": dict(q.lending_limit)}]
                   for flavor, q in queue.quotas.items()],
        # the scheduling settings, read whole: strict_priority rides with the preemption ones
        "preemption": {"within_queue": str(queue.within_queue),
                       "reclaim_within_cohort": str(queue.reclaim_within_cohort),
                       "borrow_within_cohort": str(queue.borrow_within_cohort),
                       "strict_priority": queue.strict_priority,
                       "min_runtime_s": queue.min_runtime_s,
                       "max_priority_threshold": queue.max_priority_threshold,
                       "weight": queue.weight},
        "resource_groups": list(queue.resource_groups),
    }


def queue_from_row(row: Any) -> Queue:
    return Queue(
        name=row.name,
        quotas={flavor: FlavorQuota(q["nominal"], q["borrowing_limit"], q["lending_limit"])
                for flavor, q in row.quotas},
        cohort=row.cohort,
        within_queue=WithinQueue(row.preemption["within_queue"]),
        reclaim_within_cohort=ReclaimWithinCohort(row.preemption["reclaim_within_cohort"]),
        resource_groups=tuple(row.resource_groups),
        borrow_within_cohort=BorrowWithinCohort(row.preemption.get("borrow_within_cohort", "never")),
        strict_priority=bool(row.preemption.get("strict_priority", False)),
        min_runtime_s=float(row.preemption.get("min_runtime_s", 0.0)),
        max_priority_threshold=row.preemption.get("max_priority_threshold"),
        weight=float(row.preemption.get("weight", 1.0)),
    )


def flavor_from_row(row: Any) -> Flavor:
    return Flavor(row.name, tuple(row.models))
