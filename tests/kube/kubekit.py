"""Builders of Kubernetes objects for the tests: Node objects as the API server returns them
(plain dicts, camelCase), with GPU Feature Discovery labels and HAMi's register annotation."""

from __future__ import annotations

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
