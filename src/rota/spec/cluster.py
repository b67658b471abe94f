"""The cluster file's models: nodes and their GPUs, flavours, queues, projects, running jobs.

Validated here: types, units, ranges and unknown keys of each entry, and the rules local to one
entry (a GPU shorthand's per-device lists have ``count`` items, a lending limit does not
exceed its nominal quota). Rules across entries (unique names, references, placements that
fit their nodes) are in ``rota.spec.build``.

Vocabulary: a node entry with ``count: N`` *stamps* N identical nodes named ``{name}-0`` ..
``{name}-{N-1}``. A GPU *shorthand* (``{count, model, memory, nvlink, numa}``) stands for
``count`` identical devices with indices 0..count-1; ``nvlink: pairs`` puts devices (0,1),
(2,3), ... in one NVLink domain each, ``nvlink: all`` puts every device in one domain.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from rota.core import (
    BorrowWithinCohort, FlavorQuota, GpuDevice, InvalidSpec, ReclaimWithinCohort, WithinQueue,
)
from rota.core.mig import QUOTA_PREFIX, check_profile
from rota.spec.errors import reason_error
from rota.spec.job import IdleSpec, JobSpec
from rota.spec.slurm import SlurmQueueSpec
from rota.spec.types import (
    CpuMilli, Duration, MemoryMiB, Name, Patterns, QuotaGpu, Share, Strict, Text, Timestamp,
)


class GpuDeviceSpec(Strict):
    index: int = Field(ge=0, le=1023)
    model: str = Field(min_length=1)
    memory: MemoryMiB
    uuid: str = ""
    numa: int = Field(0, ge=0)
    nvlink: str | None = None
    healthy: bool = True

    def device(self) -> GpuDevice:
        return GpuDevice(self.index, self.model, self.memory, self.uuid, self.numa,
                         self.nvlink, self.healthy)


class GpuShorthand(Strict):
    count: int = Field(ge=1, le=1024)
    model: str = Field(min_length=1)
    memory: MemoryMiB
    nvlink: Any = None
    numa: list[int] | None = None
    unhealthy: list[int] = Field(default_factory=list)

    @field_validator("nvlink")
    @classmethod
    def _nvlink(cls, value: Any) -> Any:
        if value is None or value in ("pairs", "all"):
            return value
        if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
            return [str(v) for v in value]
        raise reason_error("expected 'pairs', 'all' or a list with one NVLink domain name per "
                           f"GPU (such as [a, a, b, b]), got {value!r}")

    @model_validator(mode="after")
    def _lengths(self) -> GpuShorthand:
        for key in ("nvlink", "numa"):
            value = getattr(self, key)
            if isinstance(value, list) and len(value) != self.count:
                raise reason_error(f"has {len(value)} entries; expected one per GPU "
                                   f"({self.count})", key)
        if self.numa and min(self.numa) < 0:
            raise reason_error("NUMA node numbers must not be negative", "numa")
        bad = [i for i in self.unhealthy if not 0 <= i < self.count]
        if bad:
            raise reason_error(f"index {bad[0]} is not a GPU of this node (0..{self.count - 1})",
                               "unhealthy")
        return self

    def devices(self, node: str) -> tuple[GpuDevice, ...]:
        links = self.nvlink
        if links == "pairs":
            links = [f"nvl{i // 2}" for i in range(self.count)]
        elif links == "all":
            links = ["nvl0"] * self.count
        return tuple(
            GpuDevice(i, self.model, self.memory, f"GPU-{node}-{i}",
                      self.numa[i] if self.numa else 0, links[i] if links else None,
                      i not in self.unhealthy)
            for i in range(self.count))


def _gpus_kind(value: Any) -> str:
    return "<devices>" if isinstance(value, list) else "<shorthand>"


GpusSpec = Annotated[
    Union[Annotated[GpuShorthand, Tag("<shorthand>")],
          Annotated[list[GpuDeviceSpec], Tag("<devices>")]],
    Discriminator(_gpus_kind),
]


class NodeSpec(Strict):
    name: Name
    count: int | None = Field(None, ge=1, le=10_000)
    cpu: CpuMilli
    memory: MemoryMiB
    resource_group: Name = "default"
    labels: dict[str, Text] = Field(default_factory=dict)
    schedulable: bool = True
    gpus: GpusSpec | None = None

    def devices(self, node: str) -> tuple[GpuDevice, ...]:
        if self.gpus is None:
            return ()
        if isinstance(self.gpus, GpuShorthand):
            return self.gpus.devices(node)
        return tuple(d.device() for d in self.gpus)


class Amounts(Strict):
    """A quota vector: gpu in GPUs (fractions allowed), cpu in cores or milli, memory, and
    instances of MIG profiles (``mig-1g.10gb: 14``, ``rota.core.mig``), kept in ``mig``."""

    gpu: QuotaGpu | None = None
    cpu: CpuMilli | None = None
    memory: MemoryMiB | None = None
    mig: dict[str, int] = Field(default_factory=dict)  # mig-<profile> -> instances

    @model_validator(mode="before")
    @classmethod
    def _mig_keys(cls, data: Any) -> Any:
        """The ``mig-<profile>`` keys, checked and moved into ``mig``; ``mig`` itself is no
        key of a quota."""
        if not isinstance(data, dict):
            return data
        if "mig" in data:
            raise reason_error("unknown key; a MIG quota is written mig-<profile>, such as "
                               "mig-1g.10gb: 14", "mig")
        mig = {}
        for key, value in data.items():
            if not (isinstance(key, str) and key.startswith(QUOTA_PREFIX)):
                continue
            try:
                check_profile(key[len(QUOTA_PREFIX):], key)
            except InvalidSpec as exc:
                raise reason_error(exc.reason, key) from None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise reason_error(f"must be a whole number of MIG instances, 0 or more, got "
                                   f"{value!r}", key)
            mig[key] = value
        if not mig:
            return data
        return {**{k: v for k, v in data.items() if k not in mig}, "mig": mig}

    def vector(self) -> dict[str, int]:
        return {**{k: v for k, v in (("gpu", self.gpu), ("cpu", self.cpu),
                                     ("memory", self.memory)) if v is not None}, **self.mig}


class QuotaSpec(Strict):
    nominal: Amounts
    borrowing_limit: Amounts = Amounts()
    lending_limit: Amounts = Amounts()

    @model_validator(mode="after")
    def _limits(self) -> QuotaSpec:
        nominal = self.nominal.vector()
        for resource, amount in self.lending_limit.vector().items():
            if resource not in nominal:
                raise reason_error(f"there is no nominal {resource} quota to lend",
                                   f"lending_limit.{resource}")
            if amount > nominal[resource]:
                raise reason_error(f"{_amount(resource, amount)} is above the nominal quota "
                                   f"{_amount(resource, nominal[resource])}; a queue can lend "
                                   "at most its nominal quota", f"lending_limit.{resource}")
        for resource in self.borrowing_limit.vector():
            if resource not in nominal:
                raise reason_error(f"there is no nominal {resource} quota; a resource without "
                                   "one is not limited, so there is nothing to cap",
                                   f"borrowing_limit.{resource}")
        return self

    def quota(self) -> FlavorQuota:
        return FlavorQuota(self.nominal.vector(), self.borrowing_limit.vector(),
                           self.lending_limit.vector())


def _amount(resource: str, value: int) -> str:
    if resource.startswith(QUOTA_PREFIX):
        return f"{value} {resource[len(QUOTA_PREFIX):]} instance{'' if value == 1 else 's'}"
    if resource == "gpu":
        return f"{value / 1000:g} GPU"
    if resource == "cpu":
        return f"{value / 1000:g} CPU"
    return f"{value}Mi"


class PreemptionSpec(Strict):
    within_queue: WithinQueue = WithinQueue.LOWER_PRIORITY
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.ANY
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort.NEVER
    max_priority_threshold: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    min_runtime: Duration = 0.0

    @model_validator(mode="after")
    def _threshold_needs_borrowing(self) -> PreemptionSpec:
        if self.max_priority_threshold is not None \
                and self.borrow_within_cohort is BorrowWithinCohort.NEVER:
            raise reason_error("applies only with borrow_within_cohort: lower-priority (whom "
                               "a job may evict while its queue borrows)",
                               "max_priority_threshold")
        return self


class QueueSpec(Strict):
    name: Name
    cohort: Name | None = None
    quota: dict[Name, QuotaSpec] = Field(default_factory=dict)
    preemption: PreemptionSpec = PreemptionSpec()
    strict_priority: bool = False
    weight: float = Field(1.0, ge=0, le=1e6)  # fair sharing of the cohort's lent quota
    resource_groups: list[Name] = Field(default_factory=list)
    projects: list[Name] | None = None  # None: every project; []: none (closed to new jobs)
    idle: IdleSpec | None = None        # the control plane's idle reclamation defaults
    slurm: SlurmQueueSpec | None = None  # partition and QOS of its jobs, and their choices


class UsageSpec(Strict):
    gpu_hours: float = Field(ge=0)
    as_of: Timestamp | None = None


class ProjectSpec(Strict):
    name: Name
    weight: float = Field(1.0, gt=0, le=1e6)
    usage: UsageSpec | None = None


class ReplicaAtSpec(Strict):
    """Where one replica of a running job is: node, GPU indices, and for a fraction its share
    (default: the job's) and GPU memory (default: the job's gpu_memory, else the share of the
    device's memory)."""

    node: Name
    gpus: list[int] = Field(default_factory=list)
    share: Share | None = None
    gpu_memory: MemoryMiB | None = None


class RunningSpec(JobSpec):
    placement: list[ReplicaAtSpec] = Field(min_length=1)
    started_at: Timestamp | None = None


class ClusterFile(Strict):
    nodes: list[NodeSpec] = Field(min_length=1)
    flavors: dict[Name, Patterns] = Field(default_factory=dict)
    queues: list[QueueSpec] = Field(min_length=1)
    projects: list[ProjectSpec] = Field(default_factory=list)
    running: list[RunningSpec] = Field(default_factory=list)
    policy: str | dict[str, Any] | None = None
    now: Timestamp | None = None


class CapSpec(Strict):
    """Fair-use caps of one user or one project (``rota.store.records.Cap``); a key left out
    keeps its default, ``null`` lifts the cap."""

    pending: int | None = Field(None, ge=1, le=10_000_000)
    submits_per_s: float | None = Field(None, gt=0, le=1_000_000)
    burst: int | None = Field(None, ge=1, le=10_000_000)
    storage: MemoryMiB | None = None

    def stored(self) -> dict[str, Any]:
        """The keys written, in the store's units (storage in bytes)."""
        out = {k: getattr(self, k) for k in sorted(self.model_fields_set)}
        if out.get("storage") is not None:
            out["storage"] *= 1024 * 1024
        return out


class FairUseSpec(Strict):
    """Caps per user and per project: pending jobs, submissions per second, storage."""

    user: CapSpec = CapSpec()
    project: CapSpec = CapSpec()

    @model_validator(mode="after")
    def _storage_is_per_project(self) -> FairUseSpec:
        if "storage" in self.user.model_fields_set:
            raise reason_error("storage is a project's (its jobs' directories on disk); "
                               "set it under project", "user.storage")
        return self

    def stored(self) -> dict[str, dict[str, Any]]:
        return {scope: caps for scope, caps in (("user", self.user.stored()),
                                                ("project", self.project.stored())) if caps}


class PricesSpec(Strict):
    """What one GPU-hour of each GPU model costs, in one currency: ``rota usage`` multiplies
    each model's GPU-hours by its price. Models are named as ``rota nodes`` shows them."""

    currency: str
    gpu_hour: dict[str, float]

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if len(value) != 3 or not (value.isascii() and value.isalpha() and value.isupper()):
            raise reason_error(f"expected a three-letter currency code such as EUR or USD, "
                               f"got {value!r}")
        return value

    @field_validator("gpu_hour")
    @classmethod
    def _prices(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise reason_error("name at least one GPU model and its price (such as "
                               "H100-80GB: 2.5), or write prices: null for no prices")
        for model, price in value.items():
            if not model.strip() or len(model) > 255:
                raise reason_error(f"{model!r} is not a GPU model name (as rota nodes shows "
                                   "them, e.g. H100-80GB)")
            if not 0 <= price < float("inf"):
                raise reason_error(f"must be a price of 0 or more, got {price!r}", model)
        return value


class QueuesFile(Strict):
    """What an operator applies to a running control plane: flavours and queues, written as
    in a cluster file, the control plane's defaults (idle reclamation, fair use), and the
    prices of a GPU-hour per model."""

    flavors: dict[Name, Patterns] = Field(default_factory=dict)
    queues: list[QueueSpec] = Field(min_length=1)
    idle: IdleSpec | None = None  # idle reclamation defaults for every queue
    fair_use: FairUseSpec | None = None  # caps per user and per project
    prices: PricesSpec | None = None  # absent: the prices stay; null: no prices


class JobsFile(Strict):
    jobs: list[JobSpec] = Field(default_factory=list)
