"""The names rota reads and writes on Kubernetes objects, in one place.

- rota's own labels and annotations live under the ``rota.dev/`` prefix; Pods rota schedules
  carry ``schedulerName: rota``.
- ``nvidia.com/gpu`` is the NVIDIA device plugin's extended resource (HAMi's device plugin
  registers the same name, counting vGPU slots; a Pod asks HAMi for part of a device with
  ``nvidia.com/gpumem`` and ``nvidia.com/gpucores``); ``nvidia.com/gpu.product`` and
  ``nvidia.com/gpu.memory`` (MiB) are GPU Feature Discovery's node labels.
- A gang of Pods a user created is named by the coscheduling plugin's labels
  ``pod-group.scheduling.sigs.k8s.io/name`` and ``.../min-available`` (its size).
- rota's own Pods carry the cluster autoscaler's ``cluster-autoscaler.kubernetes.io/safe-to-evict:
  "true"`` (their controller is no workload kind the autoscaler knows, which would otherwise keep
  it from removing their node): rota requeues the job of an evicted Pod.
- A Pod's name is derived from (job, attempt, rank), so that an attempt's Pod cannot be created
  twice: ``rota-<job>-<attempt>-<rank>``.
- The namespace of a job's Pods is ``--kube-namespace``, a name or a rule with ``{project}``
  in it (``rota-{project}``): each project's Pods in a namespace of its own.
"""

from __future__ import annotations

import re

from rota.core import InvalidSpec

SCHEDULER_NAME = "rota"
PREFIX = "rota.dev/"

LABEL_JOB = PREFIX + "job"
LABEL_ATTEMPT = PREFIX + "attempt"
LABEL_RANK = PREFIX + "rank"
LABEL_QUEUE = PREFIX + "queue"
LABEL_PROJECT = PREFIX + "project"
LABEL_RESOURCE_GROUP = PREFIX + "resource-group"  # on a Node: the resource group it serves
LABEL_USER = PREFIX + "user"  # on a Pod a user created: the rota user it runs for
LABEL_GPU_SHARING = PREFIX + "gpu-sharing"  # in rota's view of a Node: "hami" where shared
ANNOTATION_DEVICES = PREFIX + "devices"  # on rota's Pods: the device indices of the placement
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"  # "true" on rota's Pods

# the coscheduling plugin's gang of Pods (scheduler-plugins, lightweight coscheduling): its
# name and how many Pods it has (they are bound together or not at all)
LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_POD_GROUP_SIZE = "pod-group.scheduling.sigs.k8s.io/min-available"

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_RESOURCE = "nvidia.com/gpumem"  # HAMi: MiB of each device a container asks for
GPU_CORES_RESOURCE = "nvidia.com/gpucores"  # HAMi: percent of each device's cores
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"

# a DNS-1123 label: what a Pod name (a subdomain) allows, kept to one label so that the name
# also serves as a hostname
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_LABEL = 63


def pod_name(job_id: str, attempt: int, rank: int) -> str:
    """``rota-<job>-<attempt>-<rank>``; the job id must be lower-case letters, digits and
    ``-``, and the whole name at most 63 characters."""
    if attempt < 0 or rank < 0:
        raise InvalidSpec("attempt" if attempt < 0 else "rank",
                          f"must not be negative, got {min(attempt, rank)}")
    name = f"rota-{job_id}-{attempt}-{rank}"
    if not _DNS_LABEL.match(name) or len(name) > _MAX_LABEL:
        raise InvalidSpec("id", f"job id {job_id!r} does not make a valid Pod name ({name!r}: "
                                f"lower-case letters, digits and '-', at most {_MAX_LABEL})")
    return name


PROJECT = "{project}"


def check_namespace_rule(rule: str) -> str:
    """``rule`` if it is a namespace name, or one once ``{project}`` (at most once) is
    replaced; ``InvalidSpec`` naming ``namespace`` otherwise."""
    sample = rule.replace(PROJECT, "p", 1)
    if "{" in sample or "}" in sample or not _DNS_LABEL.match(sample) or len(sample) > _MAX_LABEL:
        raise InvalidSpec("namespace", f"{rule!r} is neither a namespace name nor a rule that "
                                       f"makes one with {PROJECT} (e.g. rota-{PROJECT}): "
                                       "lower-case letters, digits and '-', at most "
                                       f"{_MAX_LABEL}")
    return rule


def project_namespace(rule: str, project: str) -> str:
    """The namespace of ``project``'s Pods under ``rule`` (``check_namespace_rule``);
    ``InvalidSpec`` naming ``project`` when the name it makes is not one."""
    name = rule.replace(PROJECT, project)
    if not _DNS_LABEL.match(name) or len(name) > _MAX_LABEL:
        raise InvalidSpec("project", f"project {project!r} makes namespace {name!r} under "
                                     f"--kube-namespace {rule}, which is not a namespace name "
                                     f"(lower-case letters, digits and '-', at most "
                                     f"{_MAX_LABEL})")
    return name


def label_value(value: str, field: str) -> str:
    """``value`` if Kubernetes accepts it as a label value, else ``InvalidSpec`` naming
    ``field``: at most 63 characters, alphanumerics and ``-_.`` inside, alphanumeric ends."""
    if len(value) > _MAX_LABEL or not re.match(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$",
                                               value):
        raise InvalidSpec(field, f"{value!r} is not a valid Kubernetes label value (at most 63 "
                                 "characters: letters, digits, '-', '_', '.', alphanumeric ends)")
    return value
