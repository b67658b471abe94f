"""How a replica's Pod is doing, as rota's ``ReplicaStatus``: pure, no I/O.

Rules, first match wins (``pod`` is the Pod as last seen; ``gone`` says it was deleted, and
whether rota deleted it):

1. Deleted by rota (a cancel, a preemption, a stop): exited, with its container's exit code if
   it was seen ending, and the reason rota deleted it.
2. Evicted (the ``DisruptionTarget`` condition with reason ``EvictionByEvictionAPI``, as
   ``kubectl drain`` and the cluster autoscaler leave it, or ``PreemptionByScheduler``: another
   scheduler preempted it), gone or ended, unless its container exited with 0: lost with the
   cause ``End.PREEMPTED``, so that the job is requeued as a preempted one (the site took the
   node back; neither the job nor the node failed), whatever code SIGTERM left.
3. Gone otherwise: a container seen ending is an exit with its code; any other disruption (a
   taint's eviction, the Pod garbage collector) or deletion is a lost replica, with what
   Kubernetes said.
4. ``Succeeded`` or ``Failed`` with its container terminated: exited with that code (a code
   above 128 is a kill by signal ``code - 128``; the kubelet's reason, e.g. ``OOMKilled``).
   ``Failed`` without a terminated container (the kubelet refused it: ``OutOfnvidia.com/gpu``,
   HAMi could not allocate) is lost, with the kubelet's reason.
5. Waiting to start for a reason retrying cannot mend (``HOPELESS``: a malformed image name,
   a missing secret or config map, a container that cannot be created): exited with code 127
   and a reason that starts with ``cannot start``, as a command that could not start.
6. Bound to a node that is gone, NotReady, or that Kubernetes took away by its taints: lost,
   naming the node and why. (A cordoned node keeps its running Pods: it is not a loss.)
7. Anything else (not bound yet, starting, running, terminating): running.
"""

from __future__ import annotations

from dataclasses import dataclass

from rota.backends.base import ReplicaState, ReplicaStatus
from rota.backends.kube.podinfo import PodInfo
from rota.core import End

HOPELESS = frozenset({"InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError",
                      "CreateContainerError", "RunContainerError"})
EXIT_CANNOT_START = 127
# the DisruptionTarget reasons of an eviction through the API (kubectl drain, the cluster
# autoscaler) and of a preemption by another scheduler
EVICTIONS = frozenset({"EvictionByEvictionAPI", "PreemptionByScheduler"})


@dataclass(frozen=True, slots=True)
class Gone:
    """A deleted Pod: how it looked last, and why rota deleted it ("" if rota did not)."""

    last: PodInfo
    deleted_by_rota: str = ""


def replica_status(rank: int, pod: PodInfo | None, gone: Gone | None,
                   node_trouble: str | None) -> ReplicaStatus:
    """``node_trouble``: why the Pod's node cannot run it (None: it can, or not bound)."""
    if pod is None:
        if gone is None:
            return ReplicaStatus(rank, ReplicaState.LOST, reason="its Pod is gone")
        return _gone(rank, gone)
    end = pod.container
    if pod.terminal and _evicted(pod):
        return _eviction(rank, pod)
    if pod.terminal:
        if end.exit_code is not None:
            return _exited(rank, pod, "")
        return ReplicaStatus(rank, ReplicaState.LOST, reason=_said(
            f"its Pod {pod.key} failed before its container ran", pod.reason, pod.message))
    if end.waiting in HOPELESS:
        return ReplicaStatus(rank, ReplicaState.EXITED, EXIT_CANNOT_START, reason=_said(
            f"cannot start: {end.waiting}", end.message))
    if pod.node and node_trouble:
        return ReplicaStatus(rank, ReplicaState.LOST, reason=f"node {pod.node} {node_trouble}")
    return ReplicaStatus(rank, ReplicaState.RUNNING)


def _gone(rank: int, gone: Gone) -> ReplicaStatus:
    pod = gone.last
    if gone.deleted_by_rota:
        if pod.container.exit_code is not None:
            return _exited(rank, pod, gone.deleted_by_rota)
        return ReplicaStatus(rank, ReplicaState.EXITED, reason=gone.deleted_by_rota)
    if _evicted(pod):
        return _eviction(rank, pod)
    if pod.container.exit_code is not None and (pod.terminal or not pod.disruption):
        return _exited(rank, pod, "")
    if pod.disruption:
        return ReplicaStatus(rank, ReplicaState.LOST, reason=f"its Pod {pod.key} was evicted "
                                                             f"({pod.disruption})")
    return ReplicaStatus(rank, ReplicaState.LOST, reason=_said(
        f"its Pod {pod.key} was deleted outside rota", pod.reason, pod.message))


def _evicted(pod: PodInfo) -> bool:
    """Evicted (``EVICTIONS``) and not ended by its own success."""
    return pod.disruption.partition(":")[0] in EVICTIONS and pod.container.exit_code != 0


def _eviction(rank: int, pod: PodInfo) -> ReplicaStatus:
    return ReplicaStatus(rank, ReplicaState.LOST, reason=f"its Pod {pod.key} was evicted "
                                                         f"({pod.disruption})",
                         cause=End.PREEMPTED)


def _exited(rank: int, pod: PodInfo, reason: str) -> ReplicaStatus:
    end = pod.container
    code = end.exit_code
    signal = code - 128 if code is not None and 128 < code < 160 else None
    why = reason or (end.reason if end.reason not in ("", "Completed", "Error") else "")
    return ReplicaStatus(rank, ReplicaState.EXITED, code, signal, why, end.finished_at)


def _said(what: str, reason: str, message: str = "") -> str:
    words = ": ".join(w for w in (reason, message) if w)
    return f"{what} ({words})" if words else what
