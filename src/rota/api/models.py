"""Request bodies and JSON views.

A job body carries core-level fields in the units people write (``cpu: "500m"``,
``memory: "16Gi"``, ``gpu: 0.5``, ``walltime: "4h"``); quantities are parsed by the core's
parsers, so a bad one is refused naming its field, exactly as in a job file.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rota.core import (
    GpuRequest, JobKind, ReplicaRequest, parse_cpu_milli, parse_duration_s, parse_gpu_request,
    parse_memory_mib,
)
from rota.store import JobEvent, JobRecord, Submission
from rota.store.records import AttemptRecord


class JobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str
    queue: str
    name: str = ""
    priority: int = 0
    kind: JobKind = JobKind.BATCH
    replicas: int = Field(1, ge=1)
    cpu: float | str = 1
    memory: float | str = "4Gi"
    gpu: float | str = 0
    gpu_memory: float | str | None = None
    gpu_model: list[str] = []
    walltime: float | str | None = None
    preemptible: bool = True
    grace: float | str = 30
    resource_group: str | None = None
    selector: dict[str, str] = {}
    labels: dict[str, str] = {}
    run: dict[str, Any] = {}

    def submission(self, user: str) -> Submission:
        count, share, profile = parse_gpu_request(self.gpu, "gpu")
        gpu_mem = None if self.gpu_memory is None else parse_memory_mib(self.gpu_memory, "gpu_memory")
        request = ReplicaRequest(parse_cpu_milli(self.cpu, "cpu"),
                                 parse_memory_mib(self.memory, "memory"),
                                 GpuRequest(count, share, gpu_mem, tuple(self.gpu_model), profile))
        walltime = None if self.walltime is None else parse_duration_s(self.walltime, "walltime")
        return Submission(project=self.project, queue=self.queue, user=user, request=request,
                          name=self.name, replicas=self.replicas, priority=self.priority,
                          kind=self.kind, walltime_s=walltime, preemptible=self.preemptible,
                          grace_s=parse_duration_s(self.grace, "grace"),
                          resource_group=self.resource_group, selector=self.selector,
                          labels=self.labels, run=self.run)


def job_view(rec: JobRecord) -> dict[str, Any]:
    job = rec.job
    placement = None if job.placement is None else [
        {"node": r.node, "devices": [asdict(d) for d in r.devices]} for r in job.placement.replicas]
    return {
        "id": rec.id, "name": rec.name, "project": job.project, "user": job.user,
        "queue": job.queue, "state": str(job.state), "priority": job.priority,
        "kind": str(job.kind), "replicas": job.replicas,
        "request": {"cpu_milli": job.request.cpu_milli, "memory_mib": job.request.memory_mib,
                    "gpu": asdict(job.request.gpu)},
        "walltime_s": job.walltime_s, "submit_time": job.submit_time,
        "started_at": job.started_at, "finished_at": rec.finished_at,
        "placement": placement, "flavor": job.flavor, "reason": rec.reason,
        "wait_reasons": [{k: (str(v) if k == "code" else v) for k, v in asdict(r).items()
                          if k != "holders" or v} for r in rec.wait_reasons],
        "estimated_start": rec.estimated_start, "exit_code": rec.exit_code,
        "attempts": rec.attempts, "cancel_requested": rec.cancel_requested,
        "held": rec.held, "eligible_at": rec.eligible_at, "failures": rec.failures,
        "lost_streak": rec.lost_streak, "last_checkpoint_at": rec.last_checkpoint_at,
        "depends": [list(d) for d in rec.depends], "array_id": rec.array_id,
        "array_index": rec.array_index, "array_limit": rec.array_limit,
        "version": rec.version,
    }


def attempt_view(a: AttemptRecord) -> dict[str, Any]:
    return {"attempt": a.attempt, "bound_at": a.bound_at, "launched_at": a.launched_at,
            "ended_at": a.ended_at, "placement": a.placement, "end": a.end,
            "exit_code": a.exit_code, "reason": a.reason,
            "last_checkpoint_at": a.last_checkpoint_at, "max_rss_kib": a.max_rss_kib}


def event_view(event: JobEvent) -> dict[str, Any]:
    return {"id": event.id, "time": event.time, "kind": event.kind, "message": event.message,
            "data": dict(event.data)}
