"""What rota reads of a Pod, as one small frozen value (``PodInfo``): pure, no I/O.

A Pod object is large; rota keeps, for each Pod of the cluster, only what it decides with:

- identity: namespace, name, uid, and the node it is bound to (``""``: not bound yet), its
  ``schedulerName``, labels, and the annotations of rota (``rota.dev/``) and HAMi (``hami.io/``);
- what it asks for, as the kubelet counts it (the *effective request*): for CPU, memory and
  ``nvidia.com/gpu``, the larger of the sum over its containers and the largest init
  container; HAMi's per-device ``nvidia.com/gpumem`` (MiB) and ``nvidia.com/gpucores`` (%)
  of its first container that asks for a GPU;
- how it runs: ``phase``, ``status.reason`` and ``message`` (``Evicted``, a kubelet's
  ``OutOfnvidia.com/gpu``), the ``DisruptionTarget`` condition (an eviction, a preemption),
  whether it is being deleted and with which grace period, and the state of its first
  container (``ContainerEnd``: the exit code of a terminated one, or why a waiting one waits);
- its first container's image and command (what an offered Pod runs, for people);
- where it may run: its ``nodeSelector`` (label pairs, sorted) and whether it has a required
  node affinity (``requiredDuringSchedulingIgnoredDuringExecution``), which rota does not
  evaluate.

A Pod in phase ``Succeeded`` or ``Failed`` holds nothing on its node (``terminal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from rota.backends.kube.names import GPU_CORES_RESOURCE, GPU_MEMORY_RESOURCE, GPU_RESOURCE
from rota.backends.kube.quantity import milli_value, parse_quantity, value
from rota.core import InvalidSpec

MIB = 1 << 20
KEPT_ANNOTATIONS = ("rota.dev/", "hami.io/")
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class ContainerEnd:
    """The state of a Pod's first container: ``exit_code`` once terminated, else ``waiting``
    (the kubelet's reason, e.g. ``ErrImagePull``) with its message."""

    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    finished_at: float | None = None
    waiting: str = ""
    started: bool = False


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node: str = ""
    scheduler: str = ""
    phase: str = "Pending"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0
    gpu_memory_mib: int | None = None
    gpu_cores: int | None = None
    deleting: bool = False
    deletion_grace_s: int | None = None
    grace_s: int = 30
    reason: str = ""
    message: str = ""
    disruption: str = ""
    container: ContainerEnd = ContainerEnd()
    image: str = ""
    command: tuple[str, ...] = ()
    created: str = ""
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: bool = False
    ip: str = ""  # status.podIP, once the Pod has one

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    """Read one Pod object as the API server sends it (see the module docstring)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers = spec.get("containers") or []
    first = containers[0] if containers else {}
    cpu, memory, gpus = (_effective(spec, name, unit) for name, unit in
                         (("cpu", milli_value), ("memory", value), (GPU_RESOURCE, value)))
    gpu_memory, gpu_cores = _hami_request(containers)
    annotations = meta.get("annotations") or {}
    return PodInfo(
        namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
        node=spec.get("nodeName") or "", scheduler=spec.get("schedulerName") or "",
        phase=status.get("phase") or "Pending", labels=dict(meta.get("labels") or {}),
        annotations={k: v for k, v in annotations.items() if k.startswith(KEPT_ANNOTATIONS)},
        cpu_milli=cpu, memory_mib=memory // MIB, gpus=gpus, gpu_memory_mib=gpu_memory,
        gpu_cores=gpu_cores, deleting=bool(meta.get("deletionTimestamp")),
        deletion_grace_s=meta.get("deletionGracePeriodSeconds"),
        grace_s=int(spec.get("terminationGracePeriodSeconds", 30) or 0),
        reason=status.get("reason") or "", message=status.get("message") or "",
        disruption=_disruption(status), container=_first_container(status),
        image=first.get("image") or "",
        command=tuple(first.get("command") or ()) + tuple(first.get("args") or ()),
        created=meta.get("creationTimestamp") or "",
        node_selector=tuple(sorted((str(k), str(v)) for k, v in
                                   (spec.get("nodeSelector") or {}).items())),
        required_affinity=bool(((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")),
        ip=status.get("podIP") or "")


def _quantity(resources: Mapping[str, Any], name: str, unit: Any, field: str) -> int:
    text = ((resources.get("requests") or {}).get(name)
            or (resources.get("limits") or {}).get(name))  # a limit alone is the request
    return unit(parse_quantity(text, field)) if text else 0


def _effective(spec: Mapping[str, Any], name: str, unit: Any) -> int:
    total = sum(_quantity(c.get("resources") or {}, name, unit, f"containers.{name}")
                for c in spec.get("containers") or [])
    init = max((_quantity(c.get("resources") or {}, name, unit, f"initContainers.{name}")
                for c in spec.get("initContainers") or []), default=0)
    return max(total, init)


def _hami_request(containers: list[Mapping[str, Any]]) -> tuple[int | None, int | None]:
    """HAMi's ``nvidia.com/gpumem`` and ``nvidia.com/gpucores`` of the first container that
    asks for a GPU; None where it does not say."""
    for c in containers:
        resources = c.get("resources") or {}
        if _quantity(resources, GPU_RESOURCE, value, GPU_RESOURCE):
            memory = _quantity(resources, GPU_MEMORY_RESOURCE, value, GPU_MEMORY_RESOURCE)
            cores = _quantity(resources, GPU_CORES_RESOURCE, value, GPU_CORES_RESOURCE)
            return memory or None, cores or None
    return None, None


def _disruption(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return ": ".join(str(condition[k]) for k in ("reason", "message") if condition.get(k))
    return ""


def _first_container(status: Mapping[str, Any]) -> ContainerEnd:
    statuses = status.get("containerStatuses") or []
    if not statuses:
        return ContainerEnd()
    state = statuses[0].get("state") or {}
    started = bool(statuses[0].get("started")) or "running" in state
    if "terminated" in state:
        done = state["terminated"] or {}
        return ContainerEnd(exit_code=int(done.get("exitCode", 0)), reason=done.get("reason") or "",
                            message=done.get("message") or "",
                            finished_at=parse_time(done.get("finishedAt")), started=True)
    waiting = state.get("waiting") or {}
    return ContainerEnd(waiting=waiting.get("reason") or "", message=waiting.get("message") or "",
                        started=started)


def parse_time(text: object) -> float | None:
    """An RFC 3339 time (``2026-01-02T03:04:05Z``) -> seconds since the epoch."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidSpec("finishedAt", f"{text!r} is not an RFC 3339 time") from None
