"""The job spec: one job as a user writes it, in a jobs file or alone in a job file.

A job spec is validated in isolation (types, units, ranges, unknown keys); references to the
cluster (queue, project, GPU models) are checked by ``rota.spec.build`` against a cluster.
``to_job`` turns a spec into a pending ``rota.core.Job``; the same spec is what a single-job
file holds at its top level (``parse_job``).

Defaults: priority 0, kind batch, 1 replica, 1 CPU, 1Gi of memory (``DEFAULT_MEMORY``, also
``rota run --memory``'s default, which ``tests/client`` holds equal), no GPU, no walltime,
checkpoint grace 30s with SIGTERM, no restarts, preemptible, no container image (``image``
names one for a backend that runs containers; a backend that runs commands on its hosts
refuses a job that names one).

``JobFileSpec`` is a single-job file as ``rota submit`` reads it: ``project`` and ``queue`` may
be left out there, and the command fills them in as ``rota run`` does.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from pydantic import Field, StrictBool, field_validator, model_validator

from rota.core import (
    MILLI, GpuRequest, InvalidSpec, Job, JobId, JobKind, ReplicaRequest,
)
from rota.core.datasets import check_names
from rota.core.mounts import Volume, check_mounts, check_volume
from rota.spec import limits
from rota.spec.errors import reason_error, validate_all
from rota.spec.service import ServiceSpec
from rota.spec.slurm import SlurmJobSpec
from rota.spec.types import (
    ArraySpec, CpuMilli, Duration, GpuAmount, Image, JobRef, MemoryMiB, Name, Patterns,
    PositiveDuration, Strict, Text, Timestamp,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


DEFAULT_MEMORY = "1Gi"
DEFAULT_MEMORY_MIB = 1024


@contextmanager
def _limit(within: str | None = None) -> Iterator[None]:
    """A ``rota.spec.limits`` error as a validator's error; its field is taken relative to
    ``within``, the field being validated (None: the model's own fields)."""
    try:
        yield
    except InvalidSpec as exc:
        field = exc.field
        if within is not None:
            field = field[len(within):].lstrip(".") if field.startswith(within) else field
        raise reason_error(exc.reason, field or None) from None


class ResourcesSpec(Strict):
    """Per-replica resources. ``gpu`` is ``(count, share, MIG profile)``: 2 -> (2, 1000, ""),
    0.5 -> (1, 500, ""), "2x1g.10gb" -> (2, 1000, "1g.10gb")."""

    cpu: CpuMilli = MILLI
    memory: MemoryMiB = DEFAULT_MEMORY_MIB
    gpu: GpuAmount = (0, MILLI, "")
    gpu_memory: MemoryMiB | None = None
    gpu_model: Patterns = ()
    disk: MemoryMiB | None = None  # the working directory's limit; not scheduled, only watched

    @model_validator(mode="after")
    def _gpu_memory_needs_gpu(self) -> ResourcesSpec:
        if self.gpu_memory is not None and self.gpu[0] == 0:
            raise reason_error("is set but gpu is 0; ask for a GPU or drop gpu_memory",
                               "gpu_memory")
        if self.gpu_memory is not None and self.gpu[2]:
            raise reason_error(f"is set but gpu asks for MIG profile {self.gpu[2]}, whose "
                               "memory the profile says; drop gpu_memory", "gpu_memory")
        with _limit():
            limits.check_patterns(self.gpu_model, "gpu_model")
        if self.disk is not None and self.disk <= 0:
            raise reason_error("must be more than 0 (leave it out for no limit)", "disk")
        return self

    def request(self) -> ReplicaRequest:
        count, share, profile = self.gpu
        return ReplicaRequest(self.cpu, self.memory,
                              GpuRequest(count, share, self.gpu_memory, self.gpu_model, profile))


class CheckpointSpec(Strict):
    dir: str | None = None
    signal: str = "SIGTERM"
    grace: Duration = 30.0

    @field_validator("signal", mode="before")
    @classmethod
    def _signal(cls, value: Any) -> str:
        try:
            return limits.catchable_signal(value)
        except InvalidSpec as exc:
            raise reason_error(exc.reason) from None

    @field_validator("grace")
    @classmethod
    def _grace(cls, value: float) -> float:
        with _limit(""):
            limits.check_duration(value, "", limits.MAX_GRACE_S)
        return value


class RestartSpec(Strict):
    """Retries after a failed run: at most ``max_retries``, the first after ``backoff``, each
    further one after twice the wait before it (at most 10 minutes)."""

    max_retries: int = Field(0, ge=0, le=1000)
    backoff: Duration = Field(10.0, ge=0, le=600)


class IdleSpec(Strict):
    """Idle reclamation (``rota.scheduler.idle``): GPU utilisation (percent) below
    ``gpu_util_below`` for ``for``; no output and no API call for ``inactive_for``; running for
    ``max_lifetime``. ``warn_before``: the notice an interactive job gets (default 5m). In a job
    file these may only make an operator's defaults stricter."""

    gpu_util_below: float | None = Field(None, ge=0, le=100)
    for_: PositiveDuration | None = Field(None, alias="for")
    inactive_for: PositiveDuration | None = None
    max_lifetime: PositiveDuration | None = None
    warn_before: PositiveDuration | None = None

    def stored(self) -> dict[str, float | None]:
        """The form the store keeps (``rota.scheduler.idle.IdlePolicy.of`` reads it)."""
        return {"gpu_util_below": self.gpu_util_below, "for_s": self.for_,
                "inactive_for_s": self.inactive_for, "max_lifetime_s": self.max_lifetime,
                "warn_before_s": self.warn_before}

    @model_validator(mode="after")
    def _pair(self) -> IdleSpec:
        if (self.gpu_util_below is None) != (self.for_ is None):
            missing = "for" if self.for_ is None else "gpu_util_below"
            raise reason_error("gpu_util_below and for go together; give both", missing)
        return self


class DependsSpec(Strict):
    """Jobs to wait for, by id: ``after_ok`` (succeeded), ``after_any`` (ended), ``after_failed``
    (failed or cancelled)."""

    after_ok: list[JobRef] = Field(default_factory=list, max_length=1000)
    after_any: list[JobRef] = Field(default_factory=list, max_length=1000)
    after_failed: list[JobRef] = Field(default_factory=list, max_length=1000)

    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((kind, str(job)) for kind in ("after_ok", "after_any", "after_failed")
                     for job in getattr(self, kind))


class VolumeSpec(Strict):
    """A volume claim mounted in the job's container (``rota.core.mounts``)."""

    claim: str
    path: str
    read_only: StrictBool = False

    @model_validator(mode="after")
    def _valid(self) -> VolumeSpec:
        with _limit():
            check_volume(self.claim, self.path, self.read_only)
        return self

    def volume(self) -> Volume:
        return check_volume(self.claim, self.path, self.read_only)


class JobSpec(Strict):
    name: Name
    project: Name
    queue: Name
    user: str = ""
    priority: int = Field(0, ge=-1_000_000, le=1_000_000)
    kind: JobKind = JobKind.BATCH
    entrypoint: str | list[str] | None = None
    workdir: str | None = None
    image: Image | None = None
    env: dict[str, Text] = Field(default_factory=dict)
    replicas: int = Field(1, ge=1, le=10_000)
    resources: ResourcesSpec = ResourcesSpec()
    walltime: PositiveDuration | None = None
    checkpoint: CheckpointSpec = CheckpointSpec()
    restart: RestartSpec = RestartSpec()
    idle: IdleSpec | None = None
    preemptible: bool = True
    resource_group: Name | None = None
    selector: dict[str, Text] = Field(default_factory=dict)
    submit_time: Timestamp | None = None
    start_at: Timestamp | None = None          # control plane: not before then
    depends: DependsSpec | None = None         # control plane: jobs to wait for
    array: ArraySpec | None = None             # control plane: one task per index
    service: ServiceSpec | None = None         # kind service: models, port, replicas, ...
    volumes: list[VolumeSpec] = Field(default_factory=list)  # container backends
    shm: MemoryMiB | None = None               # container backends: /dev/shm's size
    slurm: SlurmJobSpec | None = None          # batch backends: partition, qos, ... (queue's)
    datasets: list[str] = Field(default_factory=list)  # read at $ROTA_DATASETS/<name>

    @model_validator(mode="after")
    def _mounts(self) -> JobSpec:
        with _limit():
            check_mounts([v.volume() for v in self.volumes], self.shm)
        return self

    @model_validator(mode="after")
    def _service(self) -> JobSpec:
        if self.service is None:
            return self
        if self.kind is not JobKind.SERVICE:
            raise reason_error("must be service for a job with a service section", "kind")
        if self.replicas != 1:
            raise reason_error("is the gang size, 1 for a service; the number of its replicas "
                               "is service.replicas (min and max)", "replicas")
        for key in ("array", "depends", "start_at"):
            if getattr(self, key) is not None:
                raise reason_error("is for batch jobs; a service's replicas start on demand", key)
        return self

    @field_validator("replicas", mode="before")
    @classmethod
    def _replicas_not_range(cls, value: Any) -> Any:
        if isinstance(value, dict):
            raise reason_error("is the gang size (a number); a service's range of replicas "
                               "goes under service.replicas: {min: 0, max: 2}")
        return value

    @field_validator("datasets")
    @classmethod
    def _datasets(cls, names: list[str]) -> list[str]:
        try:
            check_names(names, "")
        except InvalidSpec as exc:  # ".1": the item, as pydantic names it (datasets.1)
            raise reason_error(exc.reason, exc.field.lstrip(".") or None) from None
        return names

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        with _limit("env"):
            limits.check_env(env)
        for key in env:
            if not _ENV_NAME.match(key):
                raise reason_error("is not a variable name (letters, digits and _, "
                                   "not starting with a digit)", key)
        return env

    @field_validator("selector")
    @classmethod
    def _selector(cls, selector: dict[str, str]) -> dict[str, str]:
        with _limit("selector"):
            limits.check_labels(selector, "selector")
        return selector

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value: float | None) -> float | None:
        with _limit(""):
            limits.check_duration(value, "", limits.MAX_WALLTIME_S)
        return value

    @field_validator("entrypoint", mode="before")
    @classmethod
    def _entrypoint_type(cls, value: Any) -> Any:
        # checked here so that an error names entrypoint, not a member of its union type
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise reason_error(f"expected a command string or a list of arguments, got {value!r}")
        for k, arg in enumerate(value):
            if not isinstance(arg, str):
                raise reason_error(f"argument {k} must be a string, got {arg!r}")
        return value

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None and not (value.strip() if isinstance(value, str) else value):
            raise reason_error("must not be empty")
        return value


class JobFileSpec(JobSpec):
    """A single-job file for ``rota submit``: project and queue may be left to the command, and
    ``export`` (``all``, ``none`` or a list of names) says which of the caller's variables the
    command adds under the file's ``env`` (``rota.cli.environ``); the server never sees it."""

    project: Name | None = None  # type: ignore[assignment]
    queue: Name | None = None  # type: ignore[assignment]
    export: str | list[str] | None = None

    @field_validator("export", mode="before")
    @classmethod
    def _export(cls, value: Any) -> Any:
        with _limit("export"):
            check_export(value)
        return value


def check_export(value: Any) -> None:
    """A job file's ``export``: None, ``all``, ``none`` or a list of variable names."""
    if value is None or (isinstance(value, str) and value.lower() in ("all", "none")):
        return
    if not isinstance(value, list):
        raise InvalidSpec("export", f"expected all, none or a list of variable names, got "
                          f"{value!r}")
    for k, name in enumerate(value):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise InvalidSpec("export", f"item {k}: {name!r} is not a variable name (letters, "
                              "digits and _, not starting with a digit)")


def to_job(spec: JobSpec, submit_time: float) -> Job:
    """A pending ``Job`` from ``spec``; ``spec.submit_time`` wins over ``submit_time``."""
    return Job(
        id=JobId(spec.name), project=spec.project, queue=spec.queue,
        request=spec.resources.request(), user=spec.user, priority=spec.priority,
        kind=spec.kind, replicas=spec.replicas, walltime_s=spec.walltime,
        submit_time=spec.submit_time if spec.submit_time is not None else submit_time,
        preemptible=spec.preemptible, resource_group=spec.resource_group,
        selector=tuple(sorted(spec.selector.items())), grace_s=spec.checkpoint.grace,
    )


def parse_job(data: Any, prefix: str = "", model: type[JobSpec] = JobSpec) -> JobSpec:
    """One job spec from parsed YAML (a single-job file holds one at its top level); every
    mistake of it at once (``rota.spec.errors.SpecErrors``)."""
    if not isinstance(data, dict):
        raise InvalidSpec(prefix, "expected a job: a mapping with name, project, queue, ...")
    return validate_all(model, data, prefix)

