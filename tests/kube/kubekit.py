"""Builders of Kubernetes objects for the tests: Node objects as the API server returns them
(plain dicts, camelCase), with GPU Feature Discovery labels and HAMi's register annotation."""

from __future__ import annotations

import threading
from typing import Any

from rota.backends.kube import hami
from rota.backends.kube.hami import HamiDevice

KWOK_NODE = {"kwok.x-k8s.io/node": "fake"}  # the annotation kwok's controller manages
A100 = "NVIDIA-A100-SXM4-80GB"  # GFD writes the model with '-' for spaces
A100_MIB = 81920


def hami_devices(count: int, model: str = "NVIDIA A100-SXM4-80GB", memory_mib: int = A100_MIB,
                 prefix: str = "GPU-a100") -> list[HamiDevice]:
    """``count`` devices as HAMi's device plugin registers them (10 slots each, full cores)."""
    return [HamiDevice(uuid=f"{prefix}-{i}", index=i, count=10, memory_mib=memory_mib,
                       cores=100, type=model, numa=i // 4, mode=hami.MODE_HAMI_CORE,
                       health=True)
            for i in range(count)]


def node_object(name: str = "gpu-1", *, cpu: str = "64", memory: str = "512Gi", gpus: int = 8,
                gfd: bool = True, hami_register: str | None = None,
                labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
                unschedulable: bool = False, ready: str | None = "True",
                ready_reason: str = "KubeletReady") -> dict[str, Any]:
    """A Node object; ``gpus`` is the ``nvidia.com/gpu`` allocatable count."""
    all_labels = {"kubernetes.io/hostname": name}
    if gfd:
        all_labels |= {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.memory": str(A100_MIB)}
    all_labels |= labels or {}
    all_annotations = dict(annotations or {})
    if hami_register is not None:
        all_annotations[hami.REGISTER] = hami_register
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    conditions = [] if ready is None else [
        {"type": "Ready", "status": ready, "reason": ready_reason, "message": "kubelet says so"}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": all_annotations},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "conditions": conditions},
    }


# -- a cluster of kwok GPU nodes, through rota's own API client ---------------------------------

def kwok_node(name: str, *, gpus: int = 8, hami_gpus: int = 0, group: str = "",
              labels: dict[str, str] | None = None, taints: list[dict] | None = None,
              cpu: str = "64", memory: str = "512Gi") -> dict[str, Any]:
    """A Node kwok plays the kubelet of: ``gpus`` whole devices at node grain, or, with
    ``hami_gpus``, that many devices registered by HAMi's device plugin (10 vGPU slots each)."""
    register = hami.encode_node_devices(hami_devices(hami_gpus, prefix=f"GPU-{name}")) \
        if hami_gpus else None
    all_labels = {"type": "kwok", **({"rota.dev/test-group": group} if group else {}),
                  **(labels or {})}
    node = node_object(name, cpu=cpu, memory=memory, gpus=hami_gpus * 10 if hami_gpus else gpus,
                       hami_register=register, labels=all_labels, annotations=dict(KWOK_NODE))
    del node["status"]["conditions"]  # kwok reports them
    if taints:
        node["spec"]["taints"] = taints
    return node


class HamiPlugin:
    """A stand-in for HAMi's device plugin (which needs real GPUs), doing what it does once a
    kubelet asks it for a Pod's devices: it takes the Pod that holds the node lock in phase
    ``allocating``, empties that Pod's ``hami.io/vgpu-devices-to-allocate`` entries, sets
    ``hami.io/bind-phase: success`` and releases the node lock (HAMi's ``Allocate`` ->
    ``EraseNextDeviceTypeFromAnnotation``, ``PodAllocationTrySuccess``, ``ReleaseNodeLock``).
    It serves the nodes named in ``nodes`` only."""

    def __init__(self, api, nodes: set[str]) -> None:
        self.api, self.nodes = api, nodes
        self.served: list[str] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HamiPlugin":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._halt.wait(0.1):
            for node in list(self.nodes):
                try:
                    self._serve(node)
                except Exception:  # the node or Pod went meanwhile: look again
                    pass

    def _serve(self, node: str) -> None:
        from rota.backends.kube.api import NODES, pods_path
        obj = self.api.get(f"{NODES}/{node}")
        held = (obj["metadata"].get("annotations") or {}).get(hami.NODE_LOCK)
        if not held:
            return
        _, namespace, name = hami.parse_node_lock(held)
        pod = self.api.get(f"{pods_path(namespace)}/{name}")
        annotations = pod["metadata"].get("annotations") or {}
        if pod["spec"].get("nodeName") != node or \
                annotations.get(hami.BIND_PHASE) != hami.PHASE_ALLOCATING:
            return
        self.api.merge_patch(f"{pods_path(namespace)}/{name}", {"metadata": {"annotations": {
            hami.TO_ALLOCATE: _erase_next(annotations.get(hami.TO_ALLOCATE, "")),
            hami.BIND_PHASE: hami.PHASE_SUCCESS}}})
        self.api.merge_patch(f"{NODES}/{node}", {"metadata": {
            "annotations": {hami.NODE_LOCK: None},
            "resourceVersion": obj["metadata"]["resourceVersion"]}})
        self.served.append(f"{namespace}/{name}")


def _erase_next(text: str) -> str:
    """HAMi's ``EraseNextDeviceTypeFromAnnotation`` for one container: the first container
    with devices is emptied (the trailing empty container stays, as HAMi decodes it)."""
    containers = [list(c) for c in hami.decode_pod_devices(text)]
    first = next((k for k, c in enumerate(containers) if c), None)
    if first is not None:
        containers[first] = []
    return hami.encode_pod_devices(containers)


def watch_deletion(cluster, name: str, act, timeout_s: int = 30) -> int:
    """The grace period of the deletion of Pod ``name`` that ``act`` causes, as watched."""
    from rota.backends.kube.api import pods_path
    found: list[int] = []
    start = cluster.api.list(pods_path(cluster.namespace)).resource_version

    def look() -> None:
        for event in cluster.api.watch(pods_path(cluster.namespace), start, timeout_s):
            meta = event["object"]["metadata"]
            if meta["name"] == name and meta.get("deletionGracePeriodSeconds") is not None:
                found.append(meta["deletionGracePeriodSeconds"])
                return
    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    act()
    watcher.join(timeout_s + 5)
    assert found, f"no deletion of {name} was seen"
    return found[0]


def found(api, path: str) -> dict | None:
    """The object at ``path``; None when the API server says it does not exist."""
    from rota.backends.kube.api import KubeError
    try:
        return api.get(path)
    except KubeError as exc:
        if exc.not_found:
            return None
        raise
