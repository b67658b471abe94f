"""Submitting a job over HTTP: the job-file format, and the ``run`` mapping persisted with it.

The body of ``POST /v1/jobs`` is the JSON form of a job file, validated by the same model as
``rota submit`` validates the YAML locally (``rota.spec.JobSpec``: keys, units, ranges, unknown
keys, each error naming its dotted field such as ``resources.gpu``). Over HTTP:

- ``name`` may be left out (the job is then known by its id alone);
- ``upload`` (extra key) is the id ``POST /v1/uploads`` returned for the working directory;
- ``entrypoint`` is required: something has to run;
- ``workdir`` must be an absolute path on the server (``rota submit`` uploads a local one);
- ``user`` is the token's user (another user is refused), ``submit_time`` is for plan files only;
- ``start_at``, ``depends`` (``after_ok``, ``after_any``, ``after_failed``: job ids it waits
  for) and ``array`` (``0-99%10``: one task per index, at most 10 at once) are kept for the
  control plane (``rota.control.eligibility``);
- amounts above ``LIMITS`` are refused, so no request is too large to store, and so are an
  environment, selector, labels, GPU model patterns, walltime or grace period over the limits
  of ``rota.spec.limits``, and a checkpoint signal a job cannot catch.

A body carrying the core-level keys (``cpu``, ``memory``, ``gpu``, ... at the top level; see
``rota.api.models.JobBody``) is the compact core-level form and keeps working; its ``run``, if
given, must follow the same contract.

``run`` (what the control loop reads when it launches the job) is checked against
``RunContract`` (the limits above), read into the typed launch spec and stored in its
versioned form, ``rota.core.runspec.RunSpec.stored()``::

    {"version": 2, "command": [argv...], "workdir": str | null, "image": str | null,
     "env": {str: str}, "upload": str | null,
     "checkpoint": {"dir": str | null, "signal": "SIGTERM", "grace_s": float},
     "restart": {"max_retries": int, "backoff_s": float},
     "idle": {"gpu_util_below": float | null, "for_s": float | null,
              "inactive_for_s": float | null, "max_lifetime_s": float | null,
              "warn_before_s": float | null} | null,
     "port": int,                         # only a service replica's
     "disk_mib": int,                     # only when resources.disk names a limit
     "slurm": {"partition": str, ...},    # only when the job file's slurm: names some
     "datasets": [str, ...]}              # only when the job names datasets

``slurm`` holds what the job asks for; the store checks it against the queue's ``slurm``
section and fills in the queue's partition and QOS (``rota.core.batchopts``) when it accepts
the job.

An ``entrypoint`` string becomes ``["/bin/sh", "-c", entrypoint]``; a list is the argv.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rota.api.models import JobBody
from rota.core.serving import ServiceSettings
from rota.core import MILLI, InvalidSpec, Job, ReplicaRequest
from rota.core.runspec import read_run
from rota.spec import JobSpec, limits, to_job
from rota.spec.errors import from_validation
from rota.spec.types import Image, Name, parse_array
from rota.store import Submission

CORE_KEYS = frozenset({"cpu", "memory", "gpu", "gpu_memory", "gpu_model", "grace", "labels",
                       "run"})
UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
# the largest amount one replica may ask for: milli-CPU, MiB, GPUs, MiB of GPU memory
LIMITS = {"cpu": 100_000 * MILLI, "memory": 1024 ** 3, "gpu": 1024, "gpu_memory": 1024 ** 2}
MAX_REPLICAS = 10_000
MAX_PRIORITY = 1_000_000
MAX_ARGS = 4096
MAX_TEXT = 128 * 1024


class JobRequest(JobSpec):
    """A job file as a request body: ``name`` optional, ``upload`` added."""

    name: Name | None = None  # type: ignore[assignment]
    upload: str | None = None


def parse_body(data: Any, user: str, upload_exists: Callable[[str], bool]) -> Submission:
    """The submission of one request body, for ``user``; ``InvalidSpec`` naming the field."""
    if not isinstance(data, dict):
        raise InvalidSpec("", "expected a job: a JSON object with name, project, queue, "
                          "entrypoint, resources, ...")
    if CORE_KEYS & data.keys():
        return _core_form(data, user, upload_exists)
    spec = _validated(data)
    if spec.service is not None:
        raise InvalidSpec("service", "a service is created with POST /v1/services (rota serve "
                          "FILE), not as a job: its replicas are jobs rota starts on demand")
    return _submission(spec, user, upload_exists)


def parse_service(data: Any, user: str,
                  upload_exists: Callable[[str], bool]) -> tuple[str, ServiceSettings, Submission]:
    """The name, settings and replica template of a service file sent as JSON (a job file of
    kind service with a ``service`` section; ``rota.spec.service``)."""
    if not isinstance(data, dict):
        raise InvalidSpec("", "expected a service: a JSON object with name, project, queue, "
                          "kind: service, entrypoint, resources and service")
    spec = _validated(data)
    if spec.service is None:
        raise InvalidSpec("service", "is required: the models the service serves, its "
                          "replicas and readiness path (see docs/serving.md)")
    if not spec.name:
        raise InvalidSpec("name", "is required for a service: its replicas are named after it")
    return spec.name, spec.service.settings(), _submission(spec, user, upload_exists)


def _validated(data: dict[str, Any]) -> JobRequest:
    try:
        return JobRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def _submission(spec: JobRequest, user: str, upload_exists: Callable[[str], bool]) -> Submission:
    _check_request(spec, user)
    try:
        run = check_run(run_of(spec, spec.upload), upload_exists)
    except InvalidSpec as exc:  # name the key as the job file spells it
        field = exc.field
        if field.startswith("command"):
            field = "entrypoint" + (field[len("command"):] if isinstance(spec.entrypoint, list)
                                    else "")
        raise InvalidSpec(field, exc.reason) from None
    job = to_job(spec.model_copy(update={"name": spec.name or "job"}), 0.0)
    return replace(Submission.from_job(job, name=spec.name or "", run=run), user=user,
                   start_at=spec.start_at,
                   depends=spec.depends.pairs() if spec.depends is not None else ())


def array_tasks(data: Any, sub: Submission) -> list[Submission]:
    """One submission per task of the body's ``array`` (``0-99%10``), or none without one."""
    text = data.get("array") if isinstance(data, dict) else None
    if text is None:
        return []
    indices, limit = parse_array(text)
    return [replace(sub, array_index=i, array_limit=limit) for i in indices]


def _check_request(spec: JobRequest, user: str) -> None:
    if spec.user and spec.user != user:
        raise InvalidSpec("user", f"jobs are submitted as the token's user ({user}); drop "
                          "user or set it to that")
    if spec.submit_time is not None:
        raise InvalidSpec("submit_time", "is for rota plan files; the server stamps the time "
                          "a job is submitted")
    if spec.entrypoint is None:
        raise InvalidSpec("entrypoint", "is required: the command to run, as a string "
                          "(run by /bin/sh -c) or a list of arguments")
    check_limits(spec.resources.request(), "resources.")


def check_limits(request: ReplicaRequest, prefix: str) -> None:
    """Refuse a replica larger than any machine could be (and than a column can hold)."""
    gpu = request.gpu
    for name, value in (("cpu", request.cpu_milli), ("memory", request.memory_mib),
                        ("gpu", gpu.count), ("gpu_memory", gpu.memory_mib)):
        if value is not None and value > LIMITS[name]:
            raise InvalidSpec(prefix + name, "is larger than any machine rota can schedule "
                              "on; ask for less")


def run_of(spec: JobSpec, upload: str | None) -> dict[str, Any]:
    """The ``run`` mapping of a validated job spec (see the module docstring)."""
    entry = spec.entrypoint
    command = ["/bin/sh", "-c", entry] if isinstance(entry, str) else list(entry or [])
    idle = None if spec.idle is None else spec.idle.stored()
    serving = {} if spec.service is None else {"port": spec.service.port or 0}
    if spec.resources.disk is not None:
        serving["disk_mib"] = spec.resources.disk
    if spec.volumes:
        serving["volumes"] = [v.volume().stored() for v in spec.volumes]
    if spec.shm is not None:
        serving["shm_mib"] = spec.shm
    if spec.slurm is not None and spec.slurm.options():
        serving["slurm"] = spec.slurm.options()
    if spec.datasets:
        serving["datasets"] = list(spec.datasets)
    return {**serving,
        "command": command, "workdir": spec.workdir, "image": spec.image, "env": dict(spec.env),
        "upload": upload,
        "checkpoint": {"dir": spec.checkpoint.dir, "signal": spec.checkpoint.signal,
                       "grace_s": spec.checkpoint.grace},
        "restart": {"max_retries": spec.restart.max_retries,
                    "backoff_s": spec.restart.backoff}, "idle": idle,
    }


class _Checkpoint(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    dir: str | None = None
    signal: str = "SIGTERM"
    grace_s: float = Field(30.0, ge=0, le=86400 * 7)


class _Restart(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    max_retries: int = Field(0, ge=0, le=1000)
    backoff_s: float = Field(10.0, ge=0, le=600)


class _Idle(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    gpu_util_below: float | None = Field(None, ge=0, le=100)
    for_s: float | None = Field(None, gt=0)
    inactive_for_s: float | None = Field(None, gt=0)
    max_lifetime_s: float | None = Field(None, gt=0)
    warn_before_s: float | None = Field(None, gt=0)


class _Volume(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    claim: str
    path: str
    read_only: bool = False


class RunContract(BaseModel):
    """The shape of ``run``; ``check_run`` adds the rules a type cannot say."""

    model_config = ConfigDict(extra="forbid", strict=True)
    command: list[str] = Field(min_length=1, max_length=MAX_ARGS)
    workdir: str | None = None
    image: Image | None = None
    env: dict[str, str] = {}
    upload: str | None = None
    checkpoint: _Checkpoint = _Checkpoint()
    restart: _Restart = _Restart()
    idle: _Idle | None = None
    port: int | None = Field(None, ge=0, le=65535)
    disk_mib: int | None = Field(None, ge=1, le=LIMITS["memory"])  # the workdir's disk limit
    volumes: list[_Volume] | None = None  # claims mounted in the container (rota.core.mounts)
    shm_mib: int | None = Field(None, ge=1, le=LIMITS["memory"])  # /dev/shm's size
    slurm: dict[str, str] | None = None  # partition, qos, ... (rota.core.batchopts)
    datasets: list[str] | None = None  # the datasets the job reads (rota.core.datasets)


def check_run(run: Mapping[str, Any], upload_exists: Callable[[str], bool],
              prefix: str = "") -> dict[str, Any]:
    """``run`` checked against the contract, completed with its defaults and read into the
    typed launch spec, in the versioned form the store keeps (``rota.core.runspec``)."""
    try:
        model = RunContract.model_validate(dict(run))
    except ValidationError as exc:
        raise from_validation(exc, prefix) from None
    where = (lambda f: f"{prefix}.{f}" if prefix else f)
    if sum(len(a) for a in model.command) > MAX_TEXT or not model.command[0]:
        raise InvalidSpec(where("command"), "must be a non-empty program and arguments under "
                          f"{MAX_TEXT} characters in all")
    limits.check_env(model.env, where("env"))
    try:
        limits.catchable_signal(model.checkpoint.signal)
    except InvalidSpec as exc:
        raise InvalidSpec(where("checkpoint.signal"), exc.reason) from None
    texts = [(f"command[{k}]", a) for k, a in enumerate(model.command)]
    texts += [(f"env.{k}", v) for k, v in model.env.items()]
    for field, text in texts:
        if "\0" in text:
            raise InvalidSpec(where(field), "must not contain a NUL character")
    if model.workdir is not None and not model.workdir.startswith("/"):
        raise InvalidSpec(where("workdir"), f"must be an absolute path on the server, got "
                          f"{model.workdir!r}; rota submit uploads a local directory")
    if model.upload is not None:
        if not UPLOAD_ID.match(model.upload) or not upload_exists(model.upload):
            raise InvalidSpec(where("upload"), f"no upload {model.upload!r}: send the "
                              "directory to POST /v1/uploads first and pass the id it returns")
    try:  # the typed launch spec, in the versioned form the store keeps
        return read_run(model.model_dump()).stored()
    except InvalidSpec as exc:
        raise InvalidSpec(where(exc.field.removeprefix("run.")), exc.reason) from None


def _core_form(data: dict[str, Any], user: str,
               upload_exists: Callable[[str], bool]) -> Submission:
    try:
        body = JobBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None
    sub = body.submission(user)
    if body.run:
        sub = replace(sub, run=check_run(body.run, upload_exists, "run"))
    check_limits(sub.request, "")
    limits.check_patterns(sub.request.gpu.models, "gpu_model")
    limits.check_labels(sub.selector, "selector")
    limits.check_labels(sub.labels, "labels")
    limits.check_duration(sub.walltime_s, "walltime", limits.MAX_WALLTIME_S)
    limits.check_duration(sub.grace_s, "grace", limits.MAX_GRACE_S)
    if abs(sub.priority) > MAX_PRIORITY:
        raise InvalidSpec("priority", f"must be between -{MAX_PRIORITY} and {MAX_PRIORITY}")
    if sub.replicas > MAX_REPLICAS:
        raise InvalidSpec("replicas", f"must be at most {MAX_REPLICAS}")
    Job(id="0", project=sub.project, queue=sub.queue, request=sub.request,  # type: ignore[arg-type]
        replicas=sub.replicas, walltime_s=sub.walltime_s, grace_s=sub.grace_s)
    return sub
