"""HAMi's annotations, read and written to the letter of HAMi v2.10.0 (Project-HAMi/HAMi).

rota takes the place of HAMi's scheduler extender and keeps its device plugin, so it reads
what the device plugin publishes on a Node and writes on a Pod what HAMi's scheduler would.

On a Node (written by HAMi's device plugin):
- ``hami.io/node-nvidia-register``: the devices, a JSON list of objects ``{"id", "index",
  "count", "devmem", "devcore", "type", "numa", "mode", "migProfiles", "health"}`` (UUID, index,
  concurrent-task slots, memory in MiB, cores in percent of the device, model, NUMA node,
  ``hami-core`` | ``mps`` | ``mig``, health). Read as Go's ``encoding/json`` reads it into
  HAMi's ``DeviceInfo``: keys match case-insensitively, missing keys and ``null`` are zero
  values, unknown keys are ignored, a number must fit its Go type (``int32``, ``uint``, ``int``).
  An empty list means that HAMi sees no GPU on the node.
- ``hami.io/device-cordon``: comma-separated UUIDs that take no new allocations.
- ``hami.io/mutex.lock``: the node lock, ``<RFC 3339 time>,<namespace>,<pod>``, held from a
  Pod's bind until the device plugin has allocated its devices (so that the plugin knows which
  pending Pod a kubelet request is for).

On a Pod (written by the scheduler, read by the device plugin):
- when devices are chosen: ``hami.io/vgpu-node`` (also a label), ``hami.io/vgpu-time`` (Unix
  seconds), and ``hami.io/vgpu-devices-to-allocate`` and ``hami.io/vgpu-devices-allocated``,
  both the same string: for each container, init containers first, each device as
  ``<uuid>,NVIDIA,<memory MiB>,<cores %>:`` and then ``;`` (``GPU-a,NVIDIA,3000,50:;``);
- at bind: ``hami.io/bind-phase: allocating`` and ``hami.io/bind-time`` (Unix seconds). The
  plugin then empties the to-allocate entries it served and sets the phase to ``success`` or
  ``failed``, and releases the node lock.
The device plugin hands a container as many devices as its ``nvidia.com/gpu`` request counts,
and caps each at the memory and cores written for it.

Malformed input raises ``InvalidSpec`` naming the annotation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from rota.core import InvalidSpec

REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
DEVICE_CORDON = "hami.io/device-cordon"
NODE_LOCK = "hami.io/mutex.lock"
ASSIGNED_NODE = "hami.io/vgpu-node"
ASSIGNED_TIME = "hami.io/vgpu-time"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
PHASE_ALLOCATING, PHASE_SUCCESS, PHASE_FAILED = "allocating", "success", "failed"
DEVICE_TYPE = "NVIDIA"  # the vendor type HAMi writes in a Pod's device entries
# what HAMi's NVIDIA device plugin writes before NVML's name in a registered device's type
# (``fmt.Sprintf("%v-%v", "NVIDIA", Model)``: ``NVIDIA-NVIDIA A40``, ``NVIDIA-Tesla P4``)
VENDOR_PREFIX = "NVIDIA-"
MODE_HAMI_CORE, MODE_MPS, MODE_MIG = "hami-core", "mps", "mig"
FULL_CORES = 100  # a device's cores, in percent


@dataclass(frozen=True, slots=True)
class HamiDevice:
    """One GPU as HAMi's device plugin registers it."""

    uuid: str
    index: int
    count: int        # tasks that may share it
    memory_mib: int   # devmem, after the plugin's memory scaling
    cores: int        # devcore, percent (100 unless core scaling is configured)
    type: str         # the model, e.g. "NVIDIA A100-SXM4-80GB" or "NVIDIA-Tesla P4"
    numa: int = 0
    mode: str = ""  # "" when the plugin wrote none (Go's zero value), which is not MIG
    health: bool = False
    mig_profiles: int = 0  # how many MIG profiles a device in mig mode offers


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One device given to one container: HAMi's ``ContainerDevice`` as Pods carry it."""

    uuid: str
    memory_mib: int
    cores: int
    type: str = DEVICE_TYPE


# Go types of DeviceInfo's fields, by JSON name (the struct's field order, as Go writes them)
_FIELDS: dict[str, str] = {
    "id": "string", "index": "uint", "count": "int32", "devmem": "int32", "devcore": "int32",
    "type": "string", "numa": "int", "mode": "string", "migProfiles": "list",
    "migtemplate": "list", "health": "bool", "devicevendor": "string", "custominfo": "object",
}
_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint": (0, 2**64 - 1), "int": (-(2**63), 2**63 - 1)}


class _Number(str):
    """A JSON number's literal, kept as written (Go checks it against the field's type)."""


class _Pairs(list):
    """A JSON object's members in the order written, repeated keys included (Go applies each
    in turn: a later value replaces an earlier one, a later ``null`` leaves it)."""


def decode_node_devices(text: str) -> tuple[HamiDevice, ...]:
    """``hami.io/node-nvidia-register`` -> its devices (``UnMarshalNodeDevices``)."""
    try:
        data = json.loads(text, parse_int=_Number, parse_float=_Number,
                          parse_constant=_refuse_constant, object_pairs_hook=_Pairs)
    except ValueError as exc:
        raise InvalidSpec(REGISTER, f"is not valid JSON: {exc}") from None
    if data is None:
        return ()
    if type(data) is not list:  # noqa: E721 (a JSON object reads as _Pairs, itself a list)
        raise InvalidSpec(REGISTER, f"must be a JSON list of devices, got {_kind(data)}")
    return tuple(_device(item, f"{REGISTER}[{k}]") for k, item in enumerate(data))


def _device(item: object, field: str) -> HamiDevice:
    if not isinstance(item, _Pairs):
        raise InvalidSpec(field, f"must be a JSON object, got {_kind(item)}")
    values: dict[str, Any] = {}
    for key, value in item:
        name = _field_name(key)
        if name is not None and value is not None:
            values[name] = _typed(value, _FIELDS[name], f"{field}.{key}")
    return HamiDevice(
        uuid=values.get("id", ""), index=values.get("index", 0), count=values.get("count", 0),
        memory_mib=values.get("devmem", 0), cores=values.get("devcore", 0),
        type=values.get("type", ""), numa=values.get("numa", 0), mode=values.get("mode", ""),
        health=values.get("health", False), mig_profiles=len(values.get("migProfiles", ())),
    )


def _field_name(key: str) -> str | None:
    """Go's rule: the exact name first, else a case-insensitive match, else ignored."""
    if key in _FIELDS:
        return key
    folded = key.casefold()
    return next((name for name in _FIELDS if name.casefold() == folded), None)


def _typed(value: object, kind: str, field: str) -> Any:
    if kind in _RANGES:
        low, high = _RANGES[kind]
        text = value if isinstance(value, _Number) else ""
        digits = text[1:] if kind != "uint" and text[:1] == "-" else text
        if not (digits.isascii() and digits.isdigit()):
            raise InvalidSpec(field, f"must be an integer that fits a Go {kind}, got "
                                     f"{_kind(value)} {value}")
        number = int(value)
        if not low <= number <= high:
            raise InvalidSpec(field, f"{number} does not fit a Go {kind}")
        return number
    wanted = {"string": str, "bool": bool, "list": list, "object": _Pairs}[kind]
    if type(value) is not wanted:  # noqa: E721 (_Number is a str, _Pairs a list: neither passes)
        raise InvalidSpec(field, f"must be a JSON {kind}, got {_kind(value)}")
    return value


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _kind(value: object) -> str:
    if isinstance(value, _Number):
        return "a number"
    return {_Pairs: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null")


def encode_node_devices(devices: Iterable[HamiDevice]) -> str:
    """The register annotation as HAMi's device plugin writes it (``MarshalNodeDevices``):
    Go's compact JSON, fields in struct order, zero values left out. MIG profiles are not
    carried by ``HamiDevice``, so devices in mig mode are written without them."""
    items = []
    for d in devices:
        fields = [("id", _go_string(d.uuid), d.uuid), ("index", str(d.index), d.index),
                  ("count", str(d.count), d.count), ("devmem", str(d.memory_mib), d.memory_mib),
                  ("devcore", str(d.cores), d.cores), ("type", _go_string(d.type), d.type),
                  ("numa", str(d.numa), d.numa), ("mode", _go_string(d.mode), d.mode),
                  ("health", "true" if d.health else "false", d.health)]
        items.append("{" + ",".join(f'"{k}":{text}' for k, text, v in fields if v) + "}")
    return "[" + ",".join(items) + "]"


def _go_string(text: str) -> str:
    """A JSON string as Go's encoding/json writes it (HTML characters escaped)."""
    out = json.dumps(text, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(char, escape)
    return out


def cordoned_devices(annotations: Mapping[str, str]) -> frozenset[str]:
    """The UUIDs in ``hami.io/device-cordon`` (blanks and empty entries skipped)."""
    raw = annotations.get(DEVICE_CORDON) or ""
    return frozenset(u.strip() for u in raw.split(",") if u.strip())


def encode_pod_devices(containers: Sequence[Sequence[ContainerDevice]]) -> str:
    """The device string of a Pod (``EncodePodSingleDevice``): per container, init containers
    first, ``<uuid>,<type>,<memory>,<cores>:`` for each of its devices, then ``;``."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.memory_mib},{d.cores}:" for d in devices) + ";"
        for devices in containers)


def decode_pod_devices(text: str,
                       field: str = TO_ALLOCATE) -> tuple[tuple[ContainerDevice, ...], ...]:
    """A Pod's device string -> per container its devices (``DecodePodDevices`` for one
    vendor). Like HAMi, the empty entry after the last ``;`` is kept as a container."""
    return tuple(_container_devices(part, field) for part in text.split(";"))


def _container_devices(text: str, field: str) -> tuple[ContainerDevice, ...]:
    devices = []
    for entry in text.split(":"):
        if "," not in entry:
            continue
        parts = entry.split(",")
        if len(parts) < 4:
            raise InvalidSpec(field, f"device entry {entry!r} has {len(parts)} fields, needs "
                                     "4: uuid,type,memory,cores")
        devices.append(ContainerDevice(uuid=parts[0], type=parts[1],
                                       memory_mib=_int32(parts[2], field, "memory"),
                                       cores=_int32(parts[3], field, "cores")))
    return tuple(devices)


def _int32(text: str, field: str, what: str) -> int:
    """Go's ``strconv.ParseInt(text, 10, 32)``."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise InvalidSpec(field, f"invalid {what} field {text!r}: not an integer")
    number = int(text)
    if not -(2**31) <= number < 2**31:
        raise InvalidSpec(field, f"invalid {what} field {text!r}: out of range")
    return number


def allocation_annotations(node: str, containers: Sequence[Sequence[ContainerDevice]],
                           now_s: float) -> dict[str, str]:
    """What HAMi's scheduler writes on a Pod once it has chosen the node and devices."""
    devices = encode_pod_devices(containers)
    return {ASSIGNED_NODE: node, ASSIGNED_TIME: str(int(now_s)), TO_ALLOCATE: devices,
            ALLOCATED: devices}


def allocation_labels(node: str) -> dict[str, str]:
    """The label HAMi's scheduler sets together with ``allocation_annotations``."""
    return {ASSIGNED_NODE: node}


def bind_annotations(now_s: float) -> dict[str, str]:
    """What HAMi's scheduler writes on a Pod right before it binds it."""
    return {BIND_PHASE: PHASE_ALLOCATING, BIND_TIME: str(int(now_s))}


def node_lock_value(now: datetime, namespace: str, pod: str) -> str:
    """The node lock a bind holds: ``<RFC 3339 time>,<namespace>,<pod>`` (``now`` must carry
    its time zone: Go writes the offset, ``Z`` for UTC)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidSpec("now", "must carry a time zone")
    return f"{_rfc3339(now)},{namespace},{pod}"


def _rfc3339(when: datetime) -> str:
    offset = when.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    sign, hours, rest = "+" if minutes > 0 else "-", abs(minutes) // 60, abs(minutes) % 60
    zone = "Z" if minutes == 0 else f"{sign}{hours:02d}:{rest:02d}"
    return when.strftime("%Y-%m-%dT%H:%M:%S") + zone


def parse_node_lock(value: str) -> tuple[datetime, str, str]:
    """``hami.io/mutex.lock`` -> (time, namespace, pod); a bare time (older HAMi) has no pod."""
    if "," not in value:
        return _parse_time(value), "", ""
    parts = value.split(",")
    if len(parts) != 3:
        raise InvalidSpec(NODE_LOCK, f"malformed lock annotation: expected 3 parts, got "
                                     f"{len(parts)} from {value}")
    return _parse_time(parts[0]), parts[1], parts[2]


def _parse_time(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSpec(NODE_LOCK, f"{text!r} is not an RFC 3339 time") from None
    if when.tzinfo is None or "T" not in text:
        raise InvalidSpec(NODE_LOCK, f"{text!r} is not an RFC 3339 time")
    return when
