"""This machine's inventory as a ``rota.core.Node``: real GPUs from NVML, or declared ones.

Sources, first match wins (``local_node``):

1. a node file (YAML): ``name``, ``cpu``, ``memory``, ``resource_group``, ``labels`` and ``gpus``,
   either a virtual spec string or a list of ``{model, memory, uuid, numa, nvlink, healthy}``;
   an entry with ``mig: [{profile, start, uuid}, ...]`` is a GPU in MIG mode with those
   instances, which must be a valid geometry of its model (``rota.core.mig``);
2. a virtual spec: ``4xH100-80GB`` (count x model; the memory is read from a ``-<n>GB`` suffix
   of the model, in GiB as GPU vendors mean it), ``4xH100:80Gi`` (explicit memory), several
   groups separated by commas (``2xA100-40GB,1xT4:16Gi``);
3. NVML, when the machine has an NVIDIA driver: index, UUID, name, memory, NUMA node, health,
   and NVLink domains (devices joined by active NVLinks, directly or through each other, share
   a domain named ``nvl<lowest index>``); a GPU in MIG mode is its MIG instances instead
   (``devices_from_nvml``, ``rota.core.mig``): each a device with its profile, memory, UUID
   ``MIG-...``, compute slices and placement, and its GPU's index, model, NUMA node, NVLink
   domain and health;
4. otherwise a node without GPUs.

A device's model is the short name the virtual spec and the docs use, so that a job's
``gpu_model: H100-80GB`` or a flavour's ``*H100*`` means the same on real hardware
(``model_name``): NVML's ``NVIDIA H100 80GB HBM3`` is ``H100-80GB``, ``NVIDIA A100-SXM4-40GB``
is ``A100-40GB``, ``Tesla T4`` is ``T4``, ``NVIDIA GeForce RTX 4090`` is ``RTX-4090``. NVML's
full names stay visible as the node label ``nvidia.com/gpu.product`` (``PRODUCT``, the label
NVIDIA's GPU feature discovery sets; distinct names joined by ``, ``).

CPU and memory are what the operating system reports, unless a node file names them.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any

from rota.backends.nvml import Nvml, NvmlDevice, NvmlMigDevice
from rota.core import (
    DEFAULT_GROUP, GpuDevice, InvalidSpec, Node, NodeName, parse_cpu_milli, parse_memory_mib,
)
from rota.core.mig import (
    MigTable, check_geometry, check_profile, instance_index, profile_compute, table_for,
)
from rota.core.nodelabels import PRODUCT

GiB = 1024
_GROUP = re.compile(r"^\s*(\d+)\s*[xX]\s*(\S.*?)\s*$")
_MODEL_MEMORY = re.compile(r"-(\d+)\s*(GB|G|GiB|Gi)$", re.IGNORECASE)
_BRANDS = frozenset({"nvidia", "tesla", "geforce", "quadro"})
_SERIES = frozenset({"rtx", "gtx", "titan"})  # a word that needs the next one: RTX 4090
_NAME_MEMORY = re.compile(r"(?:^|[\s-])(\d+)\s*GB(?:$|[\s-])", re.IGNORECASE)


def model_name(full: str) -> str:
    """NVML's device name as the short model name (module docstring); a name it cannot read
    is kept as it is."""
    words = [w for w in full.split() if w.lower() not in _BRANDS]
    if not words:
        return full.strip()
    family = words[0].split("-")[0]
    if family.lower() in _SERIES and len(words) > 1:
        family = f"{family}-{words[1].split('-')[0]}"
    memory = _NAME_MEMORY.search(full)
    return f"{family}-{memory.group(1)}GB" if memory else family


def parse_virtual_gpus(spec: str, field: str = "gpus") -> tuple[GpuDevice, ...]:
    devices: list[GpuDevice] = []
    for k, group in enumerate(spec.split(",")):
        where = f"{field}[{k}]" if "," in spec else field
        match = _GROUP.match(group)
        if not match:
            raise InvalidSpec(where, f"expected COUNTxMODEL such as 4xH100-80GB, got {group!r}")
        count, model = int(match.group(1)), match.group(2)
        if count == 0:
            raise InvalidSpec(where, "the count must be at least 1")
        if ":" in model:
            model, memory = (part.strip() for part in model.split(":", 1))
            memory_mib = parse_memory_mib(memory, where)
        elif suffix := _MODEL_MEMORY.search(model):
            memory_mib = int(suffix.group(1)) * GiB
        else:
            raise InvalidSpec(where, f"cannot tell the memory of {model!r}; write it as "
                                     f"{count}x{model}-80GB or {count}x{model}:80Gi")
        if not model or memory_mib <= 0:
            raise InvalidSpec(where, f"needs a model and a positive memory, got {group!r}")
        for _ in range(count):
            index = len(devices)
            devices.append(GpuDevice(index=index, model=model, memory_mib=memory_mib,
                                     uuid=f"VIRTUAL-GPU-{index}"))
    return tuple(devices)


def nvlink_domains(devices: list[NvmlDevice]) -> dict[int, str | None]:
    """Device index -> NVLink domain name, ``None`` for a device without NVLink peers."""
    by_bus = {d.pci_bus_id: d.index for d in devices}
    parent = {d.index: d.index for d in devices}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for d in devices:
        for peer in d.nvlink_peers:
            if peer in by_bus:
                a, b = root(d.index), root(by_bus[peer])
                parent[max(a, b)] = min(a, b)
    sizes: dict[int, int] = {}
    for d in devices:
        sizes[root(d.index)] = sizes.get(root(d.index), 0) + 1
    return {d.index: f"nvl{root(d.index)}" if sizes[root(d.index)] > 1 else None
            for d in devices}


def devices_from_nvml(found: list[NvmlDevice]) -> tuple[GpuDevice, ...]:
    """The node's devices: each GPU, or, for a GPU in MIG mode, each of its MIG instances
    (after every whole GPU, as their indices are: ``rota.core.mig.instance_index``)."""
    domains = nvlink_domains(found)
    whole: list[GpuDevice] = []
    instances: list[GpuDevice] = []
    for d in found:
        model = model_name(d.name)
        if d.mig is None:
            whole.append(GpuDevice(index=d.index, model=model, memory_mib=d.memory_mib,
                                   uuid=d.uuid, numa=d.numa or 0, nvlink=domains[d.index],
                                   healthy=d.healthy))
            continue
        table = table_for(model, d.memory_mib)
        for m in d.mig:
            profile = mig_profile_name(table, m)
            instances.append(GpuDevice(
                index=instance_index(d.index, m.start), model=model, memory_mib=m.memory_mib,
                uuid=m.uuid, numa=d.numa or 0, nvlink=domains[d.index], healthy=d.healthy,
                profile=profile, parent=d.index, start=m.start,
                compute=m.compute or profile_compute(profile)))
    return tuple(whole + instances)


_MIG_NAME = re.compile(r"\bMIG\s+(\d+g\.\d+gb)\b")


def mig_profile_name(table: MigTable | None, device: NvmlMigDevice) -> str:
    """The profile of a MIG device: the one of its GPU's table (``rota.core.mig``) with its
    compute and memory slices, else the one its NVML name ends with (``... MIG 1g.5gb``),
    else its compute slices and memory in GB."""
    if table is not None and (known := table.by_slices(device.compute, device.size)):
        return known.name
    if match := _MIG_NAME.search(device.name):
        return match.group(1)
    return f"{device.compute}g.{round(device.memory_mib / GiB)}gb"


def _gpus_from_entry(entry: object, index: int, field: str) -> list[GpuDevice]:
    """One entry of a node file's ``gpus``: the GPU, or, with ``mig``, its MIG instances."""
    gpu = _gpu_from_entry(entry, index, field)
    if not isinstance(entry, dict) or "mig" not in entry:
        return [gpu]
    return _instances(gpu, entry["mig"], f"{field}.mig")


def _instances(gpu: GpuDevice, entries: object, field: str) -> list[GpuDevice]:
    """``mig: [{profile: 3g.20gb, start: 4, uuid: MIG-...}, ...]`` of GPU ``gpu``: its MIG
    instances, a valid geometry of its model's table (``rota.core.mig``)."""
    table = table_for(gpu.model, gpu.memory_mib)
    if table is None:
        raise InvalidSpec(field, f"rota knows no MIG profiles of {gpu.model} with "
                                 f"{gpu.memory_mib} MiB; known: A100-40GB, A100-80GB, "
                                 "H100-80GB, H200-141GB")
    if not isinstance(entries, list):
        raise InvalidSpec(field, "must be a list of {profile, start} instances")
    geometry = []
    for k, item in enumerate(entries):
        where = f"{field}[{k}]"
        if not isinstance(item, dict) or set(item) - {"profile", "start", "uuid"}:
            raise InvalidSpec(where, "must be a mapping of profile, start and uuid")
        start = item.get("start")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise InvalidSpec(f"{where}.start", f"must be a memory slice, 0 or more, got "
                                                f"{start!r}")
        geometry.append((check_profile(item.get("profile"), f"{where}.profile"), start))
    check_geometry(table, geometry, field)
    return [GpuDevice(index=instance_index(gpu.index, start), model=gpu.model,
                      memory_mib=table.profile(name).memory_gb * GiB,  # type: ignore[union-attr]
                      uuid=str(item.get("uuid") or f"MIG-VIRTUAL-{gpu.index}-{start}"),
                      numa=gpu.numa, nvlink=gpu.nvlink, healthy=gpu.healthy, profile=name,
                      parent=gpu.index, start=start, compute=profile_compute(name))
            for item, (name, start) in zip(entries, geometry)]


def _gpu_from_entry(entry: object, index: int, field: str) -> GpuDevice:
    if not isinstance(entry, dict):
        raise InvalidSpec(field, f"must be a mapping, got {entry!r}")
    unknown = set(entry) - {"model", "memory", "uuid", "numa", "nvlink", "healthy", "mig"}
    if unknown:
        raise InvalidSpec(f"{field}.{sorted(unknown)[0]}", "unknown key")
    model = entry.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidSpec(f"{field}.model", "is required and must be a string")
    if "memory" not in entry:
        raise InvalidSpec(f"{field}.memory", "is required, e.g. 80Gi")
    numa = entry.get("numa", 0)
    if not isinstance(numa, int) or isinstance(numa, bool) or numa < 0:
        raise InvalidSpec(f"{field}.numa", f"must be a non-negative integer, got {numa!r}")
    healthy = entry.get("healthy", True)
    if not isinstance(healthy, bool):
        raise InvalidSpec(f"{field}.healthy", f"must be true or false, got {healthy!r}")
    nvlink = entry.get("nvlink")
    return GpuDevice(index=index, model=model,
                     memory_mib=parse_memory_mib(entry["memory"], f"{field}.memory"),
                     uuid=str(entry.get("uuid", f"VIRTUAL-GPU-{index}")), numa=numa,
                     nvlink=None if nvlink is None else str(nvlink), healthy=healthy)


def node_from_mapping(data: object, field: str = "node") -> Node:
    if not isinstance(data, dict):
        raise InvalidSpec(field, f"must be a mapping, got {type(data).__name__}")
    known = {"name", "cpu", "memory", "resource_group", "labels", "gpus"}
    if unknown := set(data) - known:
        raise InvalidSpec(f"{field}.{sorted(unknown)[0]}", f"unknown key; known: {sorted(known)}")
    gpus: Any = data.get("gpus", [])
    if isinstance(gpus, str):
        devices = parse_virtual_gpus(gpus, f"{field}.gpus")
    elif isinstance(gpus, list):
        found = [d for k, e in enumerate(gpus)
                 for d in _gpus_from_entry(e, k, f"{field}.gpus[{k}]")]
        devices = tuple(sorted(found, key=lambda d: d.index))
    else:
        raise InvalidSpec(f"{field}.gpus", "must be a spec such as 4xH100-80GB or a list")
    labels = data.get("labels", {})
    if not isinstance(labels, dict):
        raise InvalidSpec(f"{field}.labels", "must be a mapping")
    return Node(
        name=NodeName(str(data.get("name") or socket.gethostname())),
        cpu_milli=parse_cpu_milli(data["cpu"], f"{field}.cpu") if "cpu" in data else host_cpu_milli(),
        memory_mib=(parse_memory_mib(data["memory"], f"{field}.memory") if "memory" in data
                    else host_memory_mib()),
        devices=devices, resource_group=str(data.get("resource_group", DEFAULT_GROUP)),
        labels={str(k): str(v) for k, v in labels.items()})


def load_node_file(path: str | Path) -> Node:
    import yaml  # noqa: PLC0415 - only node files need it

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InvalidSpec("node_file", f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InvalidSpec("node_file", f"{path} is not valid YAML: {exc}") from None
    return node_from_mapping(data)


def host_cpu_milli() -> int:
    try:
        return len(os.sched_getaffinity(0)) * 1000
    except AttributeError:
        return (os.cpu_count() or 1) * 1000


def host_memory_mib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def local_node(name: str | None = None, gpus: str | None = None,
               node_file: str | Path | None = None, nvml: Nvml | None = None) -> Node:
    """This machine as a node; see the module docstring for the order of sources. ``nvml`` is
    the NVML to ask (``Nvml.load()`` gives the machine's); ``None`` means no NVIDIA GPUs."""
    if node_file is not None:
        node = load_node_file(node_file)
        return node if name is None else Node(NodeName(name), node.cpu_milli, node.memory_mib,
                                              node.devices, node.resource_group, node.labels)
    labels: dict[str, str] = {}
    if gpus:
        devices = parse_virtual_gpus(gpus)
    elif nvml is not None:
        found = nvml.devices()
        devices = devices_from_nvml(found)
        if found:
            labels[PRODUCT] = ", ".join(dict.fromkeys(d.name for d in found))
    else:
        devices = ()
    return Node(NodeName(name or socket.gethostname()), host_cpu_milli(), host_memory_mib(),
                devices, labels=labels)
