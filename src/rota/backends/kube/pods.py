"""The Pod rota creates for one replica of a placed job, and the headless Service of a gang.

Both are plain dicts, ready for the API server (``create_namespaced_pod(ns, body=...)``).

A replica's Pod:
- name ``rota-<job>-<attempt>-<rank>`` (``names.pod_name``): a second create of the same
  attempt fails, so an attempt never runs twice; ``schedulerName: rota``, no ``nodeName``:
  rota binds it with the Binding subresource to the node of its placement;
- labels ``rota.dev/job``, ``attempt``, ``rank``, ``queue``, ``project``;
- its controller (``ownerReferences``), the attempt's Secret (``rota.backends.kube.tokens``),
  so that ``kubectl drain`` evicts it without ``--force``; and the cluster autoscaler's
  ``safe-to-evict: "true"``, so that the autoscaler may evict it to remove an idle node. An
  eviction stops the job as a preemption does (SIGTERM, then the grace period below) and rota
  requeues it;
- one container running the job's command in its workdir, with torchrun's variables
  (``rota.backends.env.torch_variables``), the job's own ``env`` over them and on top rota's
  ``ROTA_*`` variables, all as values but the attempt's token: ``ROTA_TOKEN`` is
  read from the attempt's Secret (``token_secret``, ``rota.backends.kube.tokens``), never
  written into the Pod (those of the local backend; device visibility and limits
  come from the device plugin here, so no ``CUDA_*`` variable is set); in a gang, rank 0's
  address is its DNS name under the gang's headless Service:
  ``<pod>.<service>.<namespace>.svc`` (the Pod's ``subdomain``); a job of one replica has no
  Service (nothing else needs its address) and its own ``127.0.0.1`` as rank 0's;
- requests: the replica's CPU and memory, and ``nvidia.com/gpu`` as many as its devices
  (limits too, as Kubernetes wants for an extended resource);
- on a HAMi node, HAMi's allocation annotations and label for the devices of the placement
  (UUIDs from the node's register annotation, memory as placed, cores = share x 100 %), so
  that HAMi's device plugin hands over those devices and enforces the limits. Elsewhere a
  fractional share has no enforcement and is refused;
- ``restartPolicy: Never`` (rota restarts a job as a new attempt), the job's grace period as
  ``terminationGracePeriodSeconds`` (rounded up), no service-account token, no service links;
- Pod Security's ``restricted`` profile, so that a namespace that enforces it admits the Pod:
  ``runAsNonRoot``, ``seccompProfile: RuntimeDefault``, and in the container
  ``allowPrivilegeEscalation: false`` and every capability dropped. The uid: with ``run_as``
  (the OS account of the job's owner) that account's ``runAsUser``, ``runAsGroup`` and
  ``supplementalGroups``; without one, or for root's (uid 0, which ``restricted`` refuses),
  ``default_uid`` as user and group (``rota up --kube-uid``);
- each of the job's ``volumes`` as a ``persistentVolumeClaim`` volume of the Pod's namespace
  mounted at its path (read-only where it says so), and with ``shm_mib`` an ``emptyDir`` of
  medium ``Memory`` and that ``sizeLimit`` at ``/dev/shm`` (``rota.core.mounts``);
- a toleration (``operator: Exists``) for each taint key of ``tolerations``, so that the Pod
  may stay on nodes tainted so (GPU nodes often are: ``nvidia.com/gpu``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from rota.backends.base import RunAs
from rota.backends.env import ReplicaContext, check_job_env, rota_variables, torch_variables
from rota.backends.kube import hami
from rota.backends.kube.names import (
    GPU_RESOURCE, LABEL_ATTEMPT, LABEL_JOB, LABEL_PROJECT, LABEL_QUEUE, LABEL_RANK,
    SAFE_TO_EVICT, SCHEDULER_NAME, label_value, pod_name,
)
from rota.backends.kube.nodes import Grain, KubeNode
from rota.backends.kube.tokens import TOKEN_ENV, token_variable
from rota.core import MILLI, InvalidSpec, Job, ReplicaPlacement
from rota.core.mounts import SHM_PATH, Volume

CONTAINER = "main"
DEFAULT_UID = 1000  # the uid of a job that has no OS account but root's (``rota up --kube-uid``)


@dataclass(frozen=True, slots=True)
class ReplicaPod:
    """What the Pod of one replica is made of, besides the job itself."""

    job: Job
    attempt: int
    rank: int
    placement: ReplicaPlacement  # this replica's node and device shares
    node: KubeNode               # that node as read from Kubernetes
    image: str
    command: tuple[str, ...]
    namespace: str
    master_port: int
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    now_s: float = 0.0  # when the devices were chosen (HAMi's vgpu-time)
    run_as: RunAs | None = None
    tolerations: tuple[str, ...] = ()
    port: int | None = None  # ROTA_PORT (a service's replica), None: none
    token_secret: str | None = None  # the Secret that holds ROTA_TOKEN; None: no token
    default_uid: int = DEFAULT_UID  # the uid of a job without an account, or root's
    volumes: tuple[Volume, ...] = ()  # claims mounted in the container
    shm_mib: int | None = None        # /dev/shm's size; None: the runtime's own (64 MiB)
    controller: Mapping[str, Any] | None = None  # the ownerReference of its controller


LOOPBACK = "127.0.0.1"  # rank 0's address for a job of one replica: itself
PORT_ANNOTATION = "rota.dev/port"  # ROTA_PORT of a service's replica


def service_name(job_id: str, attempt: int) -> str:
    """The headless Service of a gang's attempt: ``rota-<job>-<attempt>``."""
    return pod_name(job_id, attempt, 0).rsplit("-", 1)[0]


def job_labels(job: Job, attempt: int) -> dict[str, str]:
    """The labels every Pod of an attempt carries (and its Service selects on)."""
    return {LABEL_JOB: label_value(str(job.id), "id"),
            LABEL_ATTEMPT: str(attempt),
            LABEL_QUEUE: label_value(job.queue, "queue"),
            LABEL_PROJECT: label_value(job.project, "project")}


def headless_service(job: Job, attempt: int, namespace: str, port: int) -> dict[str, Any]:
    """The Service that gives each Pod of the attempt a DNS name (rank 0's is the master
    address), addresses published before the Pods are ready."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(str(job.id), attempt), "namespace": namespace,
                     "labels": job_labels(job, attempt)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": job_labels(job, attempt),
                 "ports": [{"name": "master", "port": port, "protocol": "TCP"}]},
    }


def replica_pod(spec: ReplicaPod) -> dict[str, Any]:
    """The Pod manifest of one replica (see the module docstring)."""
    job = spec.job
    if spec.placement.node != spec.node.node.name:
        raise InvalidSpec("placement.node", f"is {spec.placement.node!r} but the node given "
                                            f"is {spec.node.node.name!r}")
    if not spec.command:
        raise InvalidSpec("command", "must not be empty")
    name = pod_name(str(job.id), spec.attempt, spec.rank)
    service = service_name(str(job.id), spec.attempt)
    labels = {**job_labels(job, spec.attempt), LABEL_RANK: str(spec.rank)}
    annotations, gpu_labels = _device_annotations(spec)
    if spec.port is not None:  # where its server listens (``KubeBackend.endpoint``)
        annotations = {**annotations, PORT_ANNOTATION: str(spec.port)}
    annotations = {**annotations, SAFE_TO_EVICT: "true"}
    gang = job.replicas > 1
    master = (f"{pod_name(str(job.id), spec.attempt, 0)}.{service}.{spec.namespace}.svc"
              if gang else LOOPBACK)
    container: dict[str, Any] = {
        "name": CONTAINER, "image": spec.image, "command": list(spec.command),
        "env": _env(spec, master),
        "resources": _resources(spec),
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
    }
    if spec.workdir:
        container["workingDir"] = spec.workdir
    mounts, volumes = _mounts(spec)
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME, "restartPolicy": "Never",
        "terminationGracePeriodSeconds": math.ceil(job.grace_s),
        "hostname": name, **({"subdomain": service} if gang else {}),
        "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [container], "securityContext": _security(spec),
    }
    if volumes:
        pod_spec["volumes"] = volumes
    if spec.tolerations:
        pod_spec["tolerations"] = [{"key": key, "operator": "Exists"}
                                   for key in spec.tolerations]
    metadata: dict[str, Any] = {"name": name, "namespace": spec.namespace,
                                "labels": {**labels, **gpu_labels}, "annotations": annotations}
    if spec.controller is not None:
        metadata["ownerReferences"] = [dict(spec.controller)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _mounts(spec: ReplicaPod) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The container's ``volumeMounts`` and the Pod's ``volumes``: claims, then /dev/shm."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for k, volume in enumerate(spec.volumes):
        mounts.append({"name": f"claim-{k}", "mountPath": volume.path,
                       "readOnly": volume.read_only})
        volumes.append({"name": f"claim-{k}", "persistentVolumeClaim": {
            "claimName": volume.claim, "readOnly": volume.read_only}})
    if spec.shm_mib is not None:
        mounts.append({"name": "shm", "mountPath": SHM_PATH})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory",
                                                    "sizeLimit": f"{spec.shm_mib}Mi"}})
    return mounts, volumes


def _security(spec: ReplicaPod) -> dict[str, Any]:
    """The Pod's ``securityContext``: restricted, as the job owner's account (not root)."""
    account = spec.run_as
    if account is None or account.uid == 0:
        ids: dict[str, Any] = {"runAsUser": spec.default_uid, "runAsGroup": spec.default_uid}
    else:
        ids = {"runAsUser": account.uid, "runAsGroup": account.gid,
               "supplementalGroups": list(account.groups)}
    return {"runAsNonRoot": True, **ids, "seccompProfile": {"type": "RuntimeDefault"}}


def _env(spec: ReplicaPod, master: str) -> list[dict[str, Any]]:
    """The container's variables: torchrun's (the job's ``env`` may set those), the job's,
    rota's, and ``ROTA_TOKEN`` from its Secret (a token in ``spec.env`` is dropped: a Pod
    never holds it)."""
    ctx = ReplicaContext(job_id=str(spec.job.id), rank=spec.rank,
                         world_size=spec.job.replicas, master_addr=master,
                         master_port=spec.master_port, devices=spec.placement.devices,
                         device_ids=(), port=spec.port)
    ours = {k: v for k, v in rota_variables(ctx).items() if not k.startswith("CUDA_")}
    torch = torch_variables(spec.rank, spec.job.replicas, master, str(spec.master_port))
    values = {**torch, **check_job_env(spec.env), **ours}
    values.pop(TOKEN_ENV, None)
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
    if spec.token_secret is not None:
        env.append(token_variable(spec.token_secret))
    return env


def _resources(spec: ReplicaPod) -> dict[str, dict[str, str]]:
    request = spec.job.request
    requests = {"cpu": f"{request.cpu_milli}m", "memory": f"{request.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if spec.placement.devices:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(len(spec.placement.devices))
    return {"requests": requests, "limits": limits} if limits else {"requests": requests}


def _device_annotations(spec: ReplicaPod) -> tuple[dict[str, str], dict[str, str]]:
    """HAMi's annotations and label for a HAMi node; nothing elsewhere (whole GPUs only)."""
    shares = spec.placement.devices
    node = spec.node
    if node.grain is not Grain.DEVICE:
        fractional = [s for s in shares if s.milli < MILLI]
        if fractional:
            raise InvalidSpec("placement.devices", f"node {node.node.name} has no HAMi device "
                                                   "plugin, so a fractional GPU is not enforced "
                                                   "there; it takes whole GPUs only")
        return {}, {}
    if not shares:
        return {}, {}
    devices = {d.index: d for d in node.node.devices}
    chosen = []
    for k, share in enumerate(shares):
        device = devices.get(share.index)
        if device is None:
            raise InvalidSpec(f"placement.devices[{k}]", f"node {node.node.name} has no device "
                                                         f"{share.index}")
        chosen.append(hami.ContainerDevice(uuid=device.uuid, memory_mib=share.memory_mib,
                                           cores=math.ceil(share.milli * hami.FULL_CORES / MILLI)))
    name = node.node.name
    return (hami.allocation_annotations(name, [chosen], spec.now_s),
            hami.allocation_labels(name))
