"""Placeholder Pods: Kubernetes told which GPUs of a node rota runs a job of another engine on.

A rota attempt that runs through another engine (Slurm) on a node that is also a Kubernetes
node holds its GPUs there with one placeholder Pod per replica (``rota.backends.holds``):

- named ``rota-hold-<job>-<attempt>-<rank>`` (``hold_name``): a second create of the same
  replica's hold fails, and the existing one is kept, so a hold is never doubled;
- created with ``nodeName`` set, i.e. bound by rota at creation: kube-scheduler never places
  it, and it counts against the node at once for kube-scheduler and for the kubelet's
  admission (both add up the requests of the Pods bound to a node);
- requesting, as request and limit, the node's GPU extended resource (``nvidia.com/gpu``) as
  many as the replica's whole GPUs: a Pod of another scheduler that needs them stays Pending;
- labelled as rota's (``rota.dev/job``, ``attempt``, ``rank``) and with the engine that runs
  the attempt (``rota.dev/hold-for``), and annotated with the exact device indices
  (``rota.dev/devices``): rota's own inventory counts it as rota's, on those devices, and
  never as foreign work (``KubeBackend._held_by_rota``), so the GPUs are not counted twice;
- one container of the ``pause`` image that does nothing, under Pod Security's
  ``restricted`` profile, with the tolerations of rota's own Pods and no grace period.

Where the engine that runs the attempt gives it other devices than rota placed it on (Slurm
picks the indices of ``--gres=gpu:N``), the annotation is changed to those (``moved``). The
device plugin cannot be told which device indices to give a Pod; a placeholder only makes
the count of free GPUs right for Kubernetes. A HAMi node is told the same count: HAMi's
scheduler is not told the indices either (fractions are not held).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from rota.backends.base import BackendError
from rota.backends.holds import Held, ToHold
from rota.backends.kube import hami
from rota.backends.kube.api import KubeApi, KubeError, pods_path
from rota.backends.kube.names import (
    ANNOTATION_DEVICES, GPU_RESOURCE, LABEL_ATTEMPT, LABEL_JOB, LABEL_RANK, PREFIX,
    SCHEDULER_NAME, label_value, project_namespace,
)
from rota.backends.kube.nodes import Grain, KubeNode
from rota.backends.kube.podinfo import PodInfo
from rota.core import InvalidSpec, Job

log = logging.getLogger("rota.kube")
LABEL_HOLD_FOR = PREFIX + "hold-for"  # on a placeholder Pod: the engine that runs the attempt
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
PAUSE_UID = 65535  # the pause image's own user


def hold_name(job_id: str, attempt: int, rank: int) -> str:
    """``rota-hold-<job>-<attempt>-<rank>``; ``InvalidSpec`` when that is not a Pod name."""
    name = f"rota-hold-{job_id}-{attempt}-{rank}"
    label_value(name, "id")
    if name != name.lower():
        raise InvalidSpec("id", f"job {job_id!r} makes Pod name {name!r}, which is not one "
                                f"(lower-case letters, digits and '-')")
    return name


def hold_pod(job: Job, attempt: int, launcher: str, replica: ToHold, namespace: str,
             tolerations: Sequence[str], node: KubeNode | None = None,
             now_s: float = 0.0) -> dict[str, Any]:
    """The placeholder Pod of one replica (module docstring); on a HAMi ``node``, with HAMi's
    record of a finished allocation of those devices instead of ``nvidia.com/gpu``."""
    gpus = str(len(replica.devices))
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": hold_name(str(job.id), attempt, replica.rank), "namespace": namespace,
            "labels": {LABEL_JOB: label_value(str(job.id), "id"), LABEL_ATTEMPT: str(attempt),
                       LABEL_RANK: str(replica.rank),
                       LABEL_HOLD_FOR: label_value(launcher, "backend")},
            "annotations": {ANNOTATION_DEVICES: ",".join(str(i) for i in replica.devices)}},
        "spec": {
            "nodeName": replica.node, "schedulerName": SCHEDULER_NAME,
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False, "enableServiceLinks": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": PAUSE_UID,
                                "runAsGroup": PAUSE_UID,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"key": k, "operator": "Exists"} for k in tolerations],
            "containers": [{
                "name": "hold", "image": PAUSE_IMAGE,
                "resources": {"requests": {GPU_RESOURCE: gpus}, "limits": {GPU_RESOURCE: gpus}},
                "securityContext": {"allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}}]}}
    if node is not None and node.grain is Grain.DEVICE:
        _on_hami(body, node, replica, now_s)
    return body


def _on_hami(body: dict[str, Any], node: KubeNode, replica: ToHold, now_s: float) -> None:
    """HAMi counts a node's devices from its Pods' allocation annotations, and its device
    plugin serves only Pods its own scheduler placed: the placeholder carries a finished
    allocation of the whole devices (all their memory, all their cores) and asks for no
    ``nvidia.com/gpu``, which HAMi counts in slots of a device, not in devices."""
    by_index = {d.index: d for d in node.node.devices}
    missing = [i for i in replica.devices if i not in by_index]
    if missing:
        raise InvalidSpec("placement.devices", f"node {node.node.name} has no device "
                                               f"{missing[0]}")
    chosen = [hami.ContainerDevice(uuid=by_index[i].uuid, memory_mib=by_index[i].memory_mib,
                                   cores=hami.FULL_CORES) for i in replica.devices]
    annotations = hami.allocation_annotations(node.node.name, [chosen], now_s)
    annotations[hami.TO_ALLOCATE] = hami.encode_pod_devices([[]])  # allocated, as HAMi leaves it
    annotations[hami.BIND_PHASE] = hami.PHASE_SUCCESS
    body["metadata"]["annotations"].update(annotations)
    body["metadata"]["labels"].update(hami.allocation_labels(node.node.name))
    del body["spec"]["containers"][0]["resources"]


def held(pod: PodInfo) -> Held | None:
    """The hold a cached Pod is; None for any other Pod."""
    launcher = pod.labels.get(LABEL_HOLD_FOR)
    job, attempt, rank = (pod.labels.get(k) for k in (LABEL_JOB, LABEL_ATTEMPT, LABEL_RANK))
    if not launcher or not job or not (attempt or "").isdigit() or not (rank or "").isdigit():
        return None
    devices = tuple(int(i) for i in pod.annotations.get(ANNOTATION_DEVICES, "").split(",")
                    if i.isdigit())
    return Held(job, int(attempt or 0), int(rank or 0), pod.node, devices, launcher)


class KubeHolds:
    """``Holding`` for ``KubeBackend`` (which has ``api``, ``pods`` and ``config``, and calls
    ``_start_holds`` when it is made). The holds made here are remembered until removed, so
    that ``unhold`` removes one the Pods' cache does not show yet."""

    chooses_devices = False
    api: KubeApi
    pods: Any  # the Pods' informer
    config: Any
    clock: Callable[[], float]

    def node(self, name: str) -> KubeNode | None: ...

    def _start_holds(self) -> None:
        self._holds_lock = threading.Lock()
        self._holds_made: dict[tuple[str, int], set[tuple[str, str]]] = {}

    def hold(self, job: Job, attempt: int, launcher: str, replicas: Sequence[ToHold]) -> None:
        """Create each replica's placeholder Pod (an existing one is kept); the devices are
        rota's (the device plugin cannot be told them): None."""
        namespace = project_namespace(self.config.namespace, job.project)
        for replica in replicas:
            body = hold_pod(job, attempt, launcher, replica, namespace, self.config.tolerate,
                            self.node(replica.node), self.clock())
            name = body["metadata"]["name"]
            with self._holds_lock:
                self._holds_made.setdefault((str(job.id), attempt), set()).add((namespace, name))
            try:
                self.api.create(pods_path(namespace), body)
            except KubeError as exc:
                if not exc.exists:
                    raise BackendError("hold_failed", f"cannot create placeholder Pod "
                                                      f"{namespace}/{name}: {exc}") from None
                log.info("placeholder Pod %s/%s exists: kept", namespace, name)

    def unhold(self, job_id: str, attempt: int) -> None:
        with self._holds_lock:
            names = self._holds_made.pop((job_id, attempt), set())
        for pod in self.pods.items():
            h = held(pod)
            if h is not None and (h.job_id, h.attempt) == (job_id, attempt) \
                    and not pod.deleting:
                names.add((pod.namespace, pod.name))
        for namespace, name in sorted(names):
            try:
                self.api.delete(f"{pods_path(namespace)}/{name}", 0)
            except KubeError as exc:  # a later pass's sweep removes it
                log.warning("cannot delete placeholder Pod %s/%s: %s", namespace, name, exc)

    def moved(self, job_id: str, attempt: int, replicas: Sequence[ToHold]) -> None:
        """Each hold of the attempt on its replica's node annotated with that replica's
        devices (a request only where the cached Pod says otherwise)."""
        at = {r.rank: r for r in replicas}
        for pod in self.pods.items():
            h = held(pod)
            if h is None or (h.job_id, h.attempt) != (job_id, attempt) or pod.deleting:
                continue
            r = at.get(h.rank)
            if r is None or r.node != h.node or r.devices == h.devices:
                continue
            try:
                self.api.merge_patch(f"{pods_path(pod.namespace)}/{pod.name}", {"metadata": {
                    "annotations": {ANNOTATION_DEVICES: ",".join(str(i) for i in r.devices)}}})
            except KubeError as exc:  # told again at the next poll
                log.info("cannot annotate placeholder Pod %s: %s", pod.key, exc)

    def live_attempts(self, attempts: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
        """Those of ``attempts`` that one of rota's Pods (not a placeholder) of the cache
        runs: not ended, not being deleted."""
        live = set()
        for pod in self.pods.items():
            job, attempt = pod.labels.get(LABEL_JOB), pod.labels.get(LABEL_ATTEMPT) or ""
            if job and attempt.isdigit() and LABEL_HOLD_FOR not in pod.labels \
                    and not pod.terminal and not pod.deleting:
                live.add((job, int(attempt)))
        return live & set(attempts)

    def holds(self) -> list[Held]:
        return [h for pod in self.pods.items() if not pod.deleting and not pod.terminal
                and (h := held(pod)) is not None]
