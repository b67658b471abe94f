"""A Kubernetes Node object -> rota's ``Node``, with what Kubernetes says about it.

Input: a Node as the API returns it (a plain dict, camelCase), or the official client's model
through ``to_dict()`` (snake_case; ``None`` for what is absent): the keys read here are spelled
the same both ways.

How each part is read:
- CPU and memory: ``status.allocatable`` (``status.capacity`` when a resource is missing
  there), parsed as Kubernetes parses quantities; CPU in milli-cores rounded up as
  ``MilliValue()`` does, memory in whole MiB, rounded down (a node offers no partial MiB).
- GPUs, at device grain where HAMi's device plugin runs: every device of its register
  annotation (UUID, index, model, memory, NUMA node; healthy unless HAMi reports it
  unhealthy or cordons it with ``hami.io/device-cordon``). Devices keep HAMi's indices when
  these are distinct, else their order in the annotation. Devices in MIG mode are not offered.
- GPUs at node grain elsewhere: ``nvidia.com/gpu`` allocatable devices of the model and memory
  of GPU Feature Discovery's labels ``nvidia.com/gpu.product`` and ``nvidia.com/gpu.memory``;
  without those labels rota cannot tell what the GPUs are and offers none.
- One spelling of a model, GPU Feature Discovery's: NVML's name with ``-`` for each space
  (``NVIDIA-A100-SXM4-80GB``, ``Tesla-P4``). HAMi registers ``NVIDIA-`` and NVML's name
  (``NVIDIA-NVIDIA A100-SXM4-80GB``, ``NVIDIA-Tesla P4``): ``model_of_hami`` drops that
  prefix and spells the rest so, so that a job's ``gpu_model`` matches the same GPUs on
  either kind of node.
- Schedulable unless cordoned (``spec.unschedulable``), not Ready (the ``Ready`` condition
  missing, ``False`` or ``Unknown``; since its ``lastTransitionTime``, when given), or tainted ``NoSchedule`` or ``NoExecute`` with a key
  rota's Pods do not tolerate (``tolerated``: the keys rota's Pods carry a toleration for; the
  taints Kubernetes itself puts on cordoned and NotReady nodes are reported as those);
  ``problems`` says why, with Kubernetes' own reason.
- Features (``rota.core.nodes``): containers everywhere; sharing a GPU, with its memory and
  compute limits enforced, only where HAMi runs and registered devices (device grain); no
  signals but SIGTERM anywhere (the kubelet sends no other).
- Resource group: the value of the ``rota.dev/resource-group`` label (or another label
  named by the caller), ``default`` without it. Labels are carried over as they are.

Everything that keeps GPUs from being offered is a ``gpu_problems`` entry; the node itself
stays usable for work without GPUs. Malformed resource quantities raise ``InvalidSpec``
naming the field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.backends.kube import hami
from rota.backends.kube.names import GFD_MEMORY, GFD_PRODUCT, GPU_RESOURCE, LABEL_RESOURCE_GROUP
from rota.backends.kube.podinfo import parse_time
from rota.backends.kube.quantity import milli_value, parse_quantity, value
from rota.core import DEFAULT_GROUP, GpuDevice, InvalidSpec, Node, NodeName
from rota.core.nodes import CONTAINERS, GPU_COMPUTE_LIMIT, GPU_MEMORY_LIMIT, GPU_SHARING

POD_FEATURES = frozenset({CONTAINERS})
HAMI_FEATURES = POD_FEATURES | {GPU_SHARING, GPU_MEMORY_LIMIT, GPU_COMPUTE_LIMIT}

MIB = 1 << 20


class Grain(enum.StrEnum):
    DEVICE = "device"  # HAMi: rota picks devices and writes HAMi's annotations
    NODE = "node"      # the device plugin picks `nvidia.com/gpu: N` devices on the node


class Problem(enum.StrEnum):
    CORDONED = "cordoned"
    NOT_READY = "not_ready"
    HAMI_UNREADABLE = "hami_unreadable"   # the register annotation cannot be decoded
    HAMI_NO_DEVICES = "hami_no_devices"   # HAMi registered none (or only MIG-mode ones)
    GPUS_UNDESCRIBED = "gpus_undescribed"  # nvidia.com/gpu without GFD's model and memory
    TAINTED = "tainted"  # a NoSchedule or NoExecute taint rota's Pods do not tolerate


@dataclass(frozen=True, slots=True)
class NodeProblem:
    """Why a node, or its GPUs, cannot be used: a stable code and Kubernetes' own words."""

    code: Problem
    detail: str
    since: float | None = field(default=None, compare=False)  # when it began, if Kubernetes said


@dataclass(frozen=True, slots=True)
class KubeNode:
    """One Node as rota sees it: the core ``node`` and the Kubernetes facts behind it.

    ``gpu_allocatable`` is the ``nvidia.com/gpu`` allocatable count (vGPU slots on a HAMi
    node); ``hami_devices`` are HAMi's records of the devices in ``node.devices``, same order;
    ``hami_lock`` is HAMi's node lock as written (``""``: not locked).
    """

    node: Node
    grain: Grain
    gpu_allocatable: int
    problems: tuple[NodeProblem, ...] = ()
    gpu_problems: tuple[NodeProblem, ...] = ()
    hami_devices: tuple[hami.HamiDevice, ...] = ()
    hami_lock: str = ""


def node_from_kube(obj: Mapping[str, Any], group_label: str = LABEL_RESOURCE_GROUP,
                   tolerated: frozenset[str] = frozenset()) -> KubeNode:
    """Read one Node object (see the module docstring)."""
    metadata = _section(obj, "metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSpec("metadata.name", "must be a non-empty string")
    labels = _strings(metadata.get("labels"), "metadata.labels")
    annotations = _strings(metadata.get("annotations"), "metadata.annotations")
    status = _section(obj, "status")
    resources = {**_resources(status, "capacity"), **_resources(status, "allocatable")}
    gpu_allocatable = _amount(resources, GPU_RESOURCE, value)
    if hami.REGISTER in annotations:
        grain = Grain.DEVICE
        devices, records, gpu_problems = _hami_devices(annotations)
    else:
        grain, records = Grain.NODE, ()
        devices, gpu_problems = _node_grain_devices(labels, gpu_allocatable)
    problems = _problems(_section(obj, "spec"), status, tolerated)
    node = Node(
        name=NodeName(name), cpu_milli=_amount(resources, "cpu", milli_value),
        memory_mib=_amount(resources, "memory", value) // MIB, devices=devices,
        resource_group=labels.get(group_label) or DEFAULT_GROUP, labels=labels,
        schedulable=not problems,
        features=HAMI_FEATURES if grain is Grain.DEVICE and devices else POD_FEATURES,
    )
    return KubeNode(node=node, grain=grain, gpu_allocatable=gpu_allocatable, problems=problems,
                    gpu_problems=gpu_problems, hami_devices=records,
                    hami_lock=annotations.get(hami.NODE_LOCK, "") if grain is Grain.DEVICE
                    else "")


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = obj.get(key)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise InvalidSpec(key, f"must be a mapping, got {type(section).__name__}")
    return section


def _strings(data: object, field: str) -> dict[str, str]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidSpec(field, f"must be a mapping, got {type(data).__name__}")
    for key, item in data.items():
        if not isinstance(item, str):
            raise InvalidSpec(f"{field}.{key}", f"must be a string, got {item!r}")
    return dict(data)


def _resources(status: Mapping[str, Any], key: str) -> dict[str, tuple[str, str]]:
    """Resource name -> (quantity, the field it came from)."""
    field = f"status.{key}"
    return {name: (text, f"{field}.{name}")
            for name, text in _strings(status.get(key), field).items()}


def _amount(resources: Mapping[str, tuple[str, str]], name: str, unit: Any) -> int:
    if name not in resources:
        return 0
    text, field = resources[name]
    amount = parse_quantity(text, field)
    if amount < 0:
        raise InvalidSpec(field, f"must not be negative, got {text!r}")
    return unit(amount)


# the taints Kubernetes puts on a node for its cordon and its Ready condition: said as those
_STATE_TAINTS = frozenset({"node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                           "node.kubernetes.io/unreachable"})
_KEEP_OUT = frozenset({"NoSchedule", "NoExecute"})


def _problems(spec: Mapping[str, Any], status: Mapping[str, Any],
              tolerated: frozenset[str]) -> tuple[NodeProblem, ...]:
    problems = []
    for taint in spec.get("taints") or []:
        if not isinstance(taint, Mapping):
            continue
        key = taint.get("key") or ""
        if taint.get("effect") in _KEEP_OUT and key not in _STATE_TAINTS | tolerated:
            text = f"{key}={taint['value']}" if taint.get("value") else key
            problems.append(NodeProblem(Problem.TAINTED, f"tainted {text}:{taint['effect']}, "
                                                         "which rota's Pods do not tolerate"))
    if spec.get("unschedulable"):
        problems.append(NodeProblem(Problem.CORDONED, "spec.unschedulable is true"))
    conditions = status.get("conditions") or []
    ready = next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"),
                 None)
    if ready is None:
        problems.append(NodeProblem(Problem.NOT_READY, "no Ready condition reported"))
    elif ready.get("status") != "True":
        words = ": ".join(str(ready.get(k)) for k in ("reason", "message") if ready.get(k))
        detail = f"Ready is {ready.get('status')}" + (f" ({words})" if words else "")
        problems.append(NodeProblem(Problem.NOT_READY, detail, _since(ready)))
    return tuple(problems)


def _since(condition: Mapping[str, Any]) -> float | None:
    """A condition's ``lastTransitionTime`` in seconds (None: absent or unreadable)."""
    when = condition.get("lastTransitionTime", condition.get("last_transition_time"))
    if hasattr(when, "timestamp"):
        return when.timestamp()
    try:
        return parse_time(when)
    except InvalidSpec:
        return None


def _hami_devices(annotations: Mapping[str, str]) -> tuple[
        tuple[GpuDevice, ...], tuple[hami.HamiDevice, ...], tuple[NodeProblem, ...]]:
    try:
        registered = hami.decode_node_devices(annotations[hami.REGISTER])
    except InvalidSpec as exc:
        return (), (), (NodeProblem(Problem.HAMI_UNREADABLE, str(exc)),)
    for k, d in enumerate(registered):
        if d.memory_mib <= 0 or not d.type:
            return (), (), (NodeProblem(
                Problem.HAMI_UNREADABLE,
                f"{hami.REGISTER}[{k}]: device {d.uuid!r} needs a positive devmem and a type, "
                f"got {d.memory_mib} and {d.type!r}"),)
    usable = [d for d in registered if d.mode != hami.MODE_MIG]
    if not usable:
        what = "only GPUs in MIG mode" if registered else "no GPU"
        return (), (), (NodeProblem(Problem.HAMI_NO_DEVICES, f"HAMi registered {what}"),)
    indices = [d.index for d in usable]
    if len(set(indices)) != len(indices):
        indices = list(range(len(usable)))
    cordoned = hami.cordoned_devices(annotations)
    pairs = sorted(zip(indices, usable), key=lambda pair: pair[0])
    devices = tuple(
        GpuDevice(index=index, model=model_of_hami(d.type), memory_mib=d.memory_mib, uuid=d.uuid, numa=d.numa,
                  healthy=d.health and d.uuid not in cordoned)
        for index, d in pairs)
    return devices, tuple(d for _, d in pairs), ()


def model_of_hami(device_type: str) -> str:
    """HAMi's device ``type`` (``NVIDIA-`` and NVML's name) in GPU Feature Discovery's
    spelling of the model (NVML's name, ``-`` for spaces)."""
    name = device_type.removeprefix(hami.VENDOR_PREFIX)
    return "-".join(name.split(" "))


def _node_grain_devices(labels: Mapping[str, str], count: int) -> tuple[
        tuple[GpuDevice, ...], tuple[NodeProblem, ...]]:
    if count == 0:
        return (), ()
    model = labels.get(GFD_PRODUCT, "")
    memory = labels.get(GFD_MEMORY, "")
    if not model or not memory.isascii() or not memory.isdigit() or int(memory) <= 0:
        return (), (NodeProblem(
            Problem.GPUS_UNDESCRIBED,
            f"{count} {GPU_RESOURCE} but no model and memory from the labels {GFD_PRODUCT} and "
            f"{GFD_MEMORY} (GPU Feature Discovery): got {model!r} and {memory!r}"),)
    return tuple(GpuDevice(index=i, model=model, memory_mib=int(memory))
                 for i in range(count)), ()
