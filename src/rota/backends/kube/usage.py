"""What Pods outside rota hold on a node, as rota's ``Foreign`` holdings: pure, no I/O.

A Pod holds what it asks for (its effective request, ``rota.backends.kube.podinfo``) on the
node it is bound to, from the bind until it ends (phase ``Succeeded`` or ``Failed``) or is
gone: this is how the kubelet admits Pods, so it is what rota must leave free. A Pod is
rota's own when rota created it (its ``rota.dev/job`` label) or launched it; every other bound
Pod is *foreign*, whatever scheduler placed it.

Which devices a foreign Pod holds:
- on a HAMi node, the devices HAMi's scheduler wrote in its ``hami.io/vgpu-devices-allocated``
  annotation, each with the memory and cores written there (cores in percent -> milli-GPU;
  a device given without a core limit, cores 0, is held for its memory only);
- otherwise (a node without HAMi, or a Pod no HAMi scheduler placed) the device plugin chose
  ``nvidia.com/gpu`` whole devices that rota cannot see: rota counts them on the devices its
  own Pods do not hold, highest index first, so that the count of free devices is right.
Holdings are listed in the order of the Pods' names, so that the same Pods give the same
``Node``.
"""

from __future__ import annotations

from typing import Callable, Iterable

from rota.backends.kube import hami
from rota.backends.kube.nodes import KubeNode
from rota.backends.kube.podinfo import PodInfo
from rota.core import MILLI, DeviceShare, Foreign, InvalidSpec

CORE_MILLI = MILLI // hami.FULL_CORES  # milli-GPU per percent of a device's cores


def foreign_usage(kube: KubeNode, pods: Iterable[PodInfo],
                  ours: Callable[[PodInfo], tuple[int, ...] | None]) -> tuple[Foreign, ...]:
    """The holdings of the foreign Pods among ``pods`` (those bound to ``kube``);
    ``ours(pod)`` is the device indices of one of rota's own Pods, None for a foreign one."""
    held: set[int] = set()
    foreign: list[PodInfo] = []
    for pod in pods:
        if pod.terminal or pod.node != kube.node.name:
            continue
        mine = ours(pod)
        if mine is None:
            foreign.append(pod)
        else:
            held.update(mine)
    out = []
    for pod in sorted(foreign, key=lambda p: p.key):
        devices = _hami_devices(kube, pod)
        if devices is None:
            devices = _whole_devices(kube, pod.gpus, held)
        held.update(d.index for d in devices)
        out.append(Foreign(pod.cpu_milli, pod.memory_mib, devices,
                           f"pod {pod.key} ({pod.scheduler or 'no scheduler'})"))
    return tuple(out)


def gpus_held(pod: PodInfo | None) -> tuple | None:
    """What a Pod holds of GPUs where it is bound (None: nothing): a change of it in a Pod
    outside rota is a change of its node's inventory."""
    if pod is None or not pod.node or pod.terminal or not (pod.gpus or pod.gpu_memory_mib):
        return None
    return (pod.node, pod.gpus, pod.gpu_memory_mib, pod.gpu_cores,
            pod.annotations.get(hami.ALLOCATED))


def _hami_devices(kube: KubeNode, pod: PodInfo) -> tuple[DeviceShare, ...] | None:
    """The devices of HAMi's allocation annotation; None when there is none to read."""
    text = pod.annotations.get(hami.ALLOCATED)
    if not text or not kube.hami_devices:
        return None
    try:
        containers = hami.decode_pod_devices(text, hami.ALLOCATED)
    except InvalidSpec:
        return None
    index = {d.uuid: d.index for d in kube.node.devices}
    shares: dict[int, DeviceShare] = {}
    for device in (d for c in containers for d in c):
        if device.uuid not in index:
            continue  # a device this node no longer offers (unhealthy, MIG): nothing to hold
        at = index[device.uuid]
        before = shares.get(at, DeviceShare(at, 0, 0))
        milli = min(MILLI, before.milli + max(0, device.cores) * CORE_MILLI)
        shares[at] = DeviceShare(at, milli, before.memory_mib + max(0, device.memory_mib))
    return tuple(shares[i] for i in sorted(shares))


def _whole_devices(kube: KubeNode, count: int, held: set[int]) -> tuple[DeviceShare, ...]:
    if count <= 0:
        return ()
    devices = sorted(kube.node.devices, key=lambda d: d.index, reverse=True)
    free = [d for d in devices if d.index not in held]
    rest = [d for d in devices if d.index in held]  # overbooked: the kubelet counts them
    chosen = (free + rest)[:count]
    return tuple(DeviceShare(d.index, MILLI, d.memory_mib) for d in sorted(chosen,
                                                                           key=lambda d: d.index))
