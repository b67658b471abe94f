"""Starting one attempt of a job as a gang of Pods, all bound or none, and finding it again.

Steps of ``Launcher.start`` (each one safe to run again after a crash at any point):

0. Put the attempt's Secret (``rota.backends.kube.tokens``): it holds the token
   (``ROTA_TOKEN``), which the Pods read from it (the Pods never hold it), and it is the
   controller of the Pods (so that ``kubectl drain`` evicts them).
1. Create every replica's Pod (``rota.backends.kube.pods``), unbound, named
   ``rota-<job>-<attempt>-<rank>``: a Pod that exists already (the same attempt, created
   before a crash) is taken as it is, so nothing is ever created twice. For an offered job
   (Pods a user created, ``rota.backends.kube.offers``) the Pods are the user's, found again
   by the offer's key; none is created.
2. Create the gang's headless Service (rank 0's address), owned by rank 0's Pod so that
   Kubernetes deletes it with the Pod. (Not for a job of one replica, which needs no address,
   nor for an offered job: its Pods name themselves.)
3. Bind every Pod not bound yet to its node with the Binding subresource. On a HAMi node, a Pod
   that asks for GPUs is bound as HAMi's scheduler binds it (``rota.backends.kube.lock``):
   lock the node (waiting, up to ``lock_wait_s``, while HAMi's device plugin serves another
   Pod), write HAMi's device annotations for an offered Pod and the bind annotations, bind;
   the device plugin releases the lock once it has allocated the devices.
4. A Binding that gets no answer, a server error or 409 (bound already) is read back: the
   server may have bound the Pod and the answer been lost, and a Pod bound where rota placed
   it is bound (so a user's Pod is never left bound to a node while its job waits again).
   If a bind fails, the gang is removed: every Pod of it that was bound is deleted at once
   (and, for rota's own Pods, the unbound ones too, and the attempt's Secret), the lock of a
   failed bind released, and
   ``BackendError`` raised, so that the job is requeued and no part of it runs alone.

``find``: the Pods of an attempt as they are. When a launch asks (it has what the Pods run),
the Pods that exist are kept and the launch completed (steps 1-4), so that nothing is created
twice and no gang is left half bound. When ``recover`` asks (to stop what may run): none of
them bound means that nothing ran, and those that exist are deleted (an unbound Pod goes at
once); some bound, the launch is completed (steps 2-4), or, if some Pods were never created,
the gang removed (step 4). An offered job's Pods, bound in part, are completed the same way.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol

from rota.backends.base import (
    DEFAULT_SERVICE_PORT, BackendError, Handle, LaunchSpec, ReplicaHandle,
)
from rota.backends.kube import hami, lock, tokens
from rota.backends.kube.api import KubeApi, KubeError, pods_path, services_path
from rota.backends.kube.names import (
    ANNOTATION_DEVICES, LABEL_ATTEMPT, LABEL_JOB, pod_name, project_namespace,
)
from rota.backends.kube.nodes import Grain, KubeNode
from rota.backends.kube.offers import OfferKey, gang_of
from rota.backends.kube.podinfo import PodInfo, pod_info
from rota.backends.kube.pods import (
    DEFAULT_UID, ReplicaPod, headless_service, job_labels, replica_pod,
)
from rota.core import MILLI, InvalidSpec, Job, Placement, ReplicaPlacement

log = logging.getLogger("rota.kube")
BACKEND = "kubernetes"


class Cluster(Protocol):
    """What the launcher reads of the backend's caches, and tells it."""

    def node(self, name: str) -> KubeNode | None: ...

    def pod(self, namespace: str, name: str) -> PodInfo | None: ...

    def every_pod(self) -> list[PodInfo]: ...

    def wait_for_change(self, timeout: float) -> None: ...

    def deleting(self, uid: str, why: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str  # a name, or a rule with {project} (``names.project_namespace``)
    default_image: str | None
    tolerations: tuple[str, ...]
    master_port: int
    lock_wait_s: float
    uid: int = DEFAULT_UID  # the uid of jobs without an OS account (or root's)


@dataclass(slots=True)
class Member:
    """One Pod of the gang: its rank, where it goes and, once it exists, what it is."""

    rank: int
    placement: ReplicaPlacement
    pod: PodInfo | None = None


class Launcher:
    def __init__(self, api: KubeApi, cluster: Cluster, settings: Settings,
                 clock: Callable[[], float] = time.time) -> None:
        self.api, self.cluster, self.settings, self.clock = api, cluster, settings, clock

    # -- rota's own Pods ---------------------------------------------------------------------

    def start(self, job: Job, placement: Placement, spec: LaunchSpec, attempt: int) -> Handle:
        members = self._members(placement)
        for m in members:  # refuses before acting
            self._body(job, m, spec, attempt)
        owner = self._put_secret(job, spec, attempt)
        for member in members:
            try:
                member.pod = self._create(self._body(job, member, spec, attempt, owner), job,
                                          attempt)
            except BackendError as exc:
                self._abandon(members, job, attempt, exc)
        return self._finish(job, members, attempt)

    def find(self, job: Job, placement: Placement, attempt: int,
             spec: LaunchSpec | None = None) -> Handle | None:
        """The attempt's handle, its launch completed; None when nothing of it ran. With the
        ``spec`` of a launch, the Pods of the attempt that exist are kept and the rest are
        created (as ``start`` would); without it (nothing is to run, only to be found), Pods
        of which none was bound are deleted (nothing of them ever ran) and None is returned."""
        members = self._members(placement)
        try:
            ns = self._namespace(job)
        except InvalidSpec:  # no namespace for its project: none of its Pods can exist
            return None
        for m in members:
            pod = self.cluster.pod(ns, pod_name(str(job.id), attempt, m.rank))
            if pod is not None and pod.labels.get(LABEL_JOB) == str(job.id) \
                    and pod.labels.get(LABEL_ATTEMPT) == str(attempt) and not pod.deleting:
                m.pod = pod
        found = [m.pod for m in members if m.pod is not None]
        if spec is None and not any(p.node for p in found):
            for pod in found:
                self.cluster.deleting(pod.uid, "never started: its launch was cut short")
                self.api.delete(f"{pods_path(pod.namespace)}/{pod.name}", 0, pod.uid)
            self._drop_secret(job, attempt)  # made before its Pods, if at all
            return None
        if not found:
            return None
        log.info("job %s: attempt %d found with %d of %d Pods, %d bound; completing its "
                 "launch", job.id, attempt, len(found), len(members),
                 sum(1 for p in found if p.node))
        missing = [m for m in members if m.pod is None]
        owner = self._put_secret(job, spec, attempt) if missing and spec is not None else None
        if missing and spec is None:  # cannot be made without the spec: the gang goes
            self._remove(found, job, f"attempt {attempt} was cut short: ranks "
                                     f"{[m.rank for m in missing]} were never created",
                         RuntimeError("the gang is incomplete"), attempt)
        for m in missing:
            assert spec is not None
            try:
                m.pod = self._create(self._body(job, m, spec, attempt, owner), job, attempt)
            except BackendError as exc:
                self._abandon(members, job, attempt, exc)
        return self._finish(job, members, attempt)

    def _finish(self, job: Job, members: list[Member], attempt: int) -> Handle:
        """Steps 2 to 4, once every Pod exists."""
        try:
            self._service(job, attempt, members[0].pod)
        except KubeError as exc:
            self._remove([m.pod for m in members if m.pod], job, "cannot create its Service",
                         exc, attempt)
        return self._bind_all(job, members, attempt, offered=False)

    def _members(self, placement: Placement) -> list[Member]:
        members = [Member(rank, rep) for rank, rep in enumerate(placement.replicas)]
        for m in members:
            node = self.cluster.node(m.placement.node)
            if node is None:
                raise BackendError("unknown_node", f"node {m.placement.node} is not in the "
                                                   "cluster (any more)")
            if node.grain is Grain.NODE and any(s.milli < MILLI for s in m.placement.devices):
                raise BackendError("no_sharing", (
                    f"node {node.node.name} has no HAMi device plugin, so a fractional GPU "
                    "is not enforced there: it takes whole GPUs only (select HAMi nodes with "
                    "selector rota.dev/gpu-sharing: hami)"))
        return members

    def _body(self, job: Job, m: Member, spec: LaunchSpec, attempt: int,
              owner: dict[str, Any] | None = None) -> dict[str, Any]:
        image = spec.image or self.settings.default_image
        if not image:
            raise InvalidSpec("image", "is missing: the kubernetes backend runs jobs in "
                                       "container images; name one in the job file (image: "
                                       "...), or start rota up with --kube-default-image")
        node = self.cluster.node(m.placement.node)
        assert node is not None
        body = replica_pod(ReplicaPod(
            job=job, attempt=attempt, rank=m.rank, placement=m.placement, node=node,
            image=image, command=tuple(spec.command), namespace=self._namespace(job),
            master_port=self.settings.master_port, workdir=spec.workdir or None,
            env=spec.env, now_s=self.clock(), run_as=spec.run_as,
            tolerations=self.settings.tolerations,
            default_uid=self.settings.uid, volumes=tuple(spec.volumes),
            shm_mib=spec.shm_mib, controller=owner,
            token_secret=(tokens.secret_name(str(job.id), attempt)
                          if tokens.TOKEN_ENV in spec.env else None),
            port=None if spec.port is None else spec.port or DEFAULT_SERVICE_PORT))
        body["metadata"]["annotations"][ANNOTATION_DEVICES] = ",".join(
            str(s.index) for s in m.placement.devices)
        return body

    def _put_secret(self, job: Job, spec: LaunchSpec, attempt: int) -> dict[str, Any]:
        """The attempt's Secret with its token, if any (``rota.backends.kube.tokens``), before
        its Pods exist; the ``ownerReferences`` entry that makes it their controller."""
        token = spec.env.get(tokens.TOKEN_ENV)
        try:
            secret = tokens.put(self.api, tokens.token_secret(
                str(job.id), attempt, self._namespace(job), token, job_labels(job, attempt)))
        except KubeError as exc:
            raise BackendError("create_failed", f"cannot create the Secret of job {job.id}'s "
                                                f"attempt: {exc}{self._missing(job, exc)}") \
                from None
        return tokens.controller(secret)

    def _namespace(self, job: Job) -> str:
        """Where the job's Pods go: ``--kube-namespace``, per project with ``{project}``."""
        return project_namespace(self.settings.namespace, job.project)

    def _missing(self, job: Job, exc: KubeError) -> str:
        """The hint for a namespace that does not exist (rota never creates one)."""
        if not exc.not_found:
            return ""
        ns = self._namespace(job)
        return (f" (namespace {ns} of project {job.project} may not exist: rota does not "
                f"create namespaces; kubectl create namespace {ns})")

    def _create(self, body: dict[str, Any], job: Job, attempt: int) -> PodInfo:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return pod_info(self.api.create(pods_path(ns), body))
        except KubeError as exc:
            if not exc.exists:
                raise BackendError("create_failed", f"cannot create Pod {ns}/{name}: "
                                                    f"{exc}{self._missing(job, exc)}") from None
        pod = pod_info(self.api.get(f"{pods_path(ns)}/{name}"))  # made before a crash
        if pod.labels.get(LABEL_JOB) != str(job.id) or pod.labels.get(LABEL_ATTEMPT) != str(
                attempt) or pod.deleting:
            raise BackendError("name_taken", f"Pod {ns}/{name} exists and is not attempt "
                                             f"{attempt} of job {job.id}, or is being deleted")
        return pod

    def _service(self, job: Job, attempt: int, first: PodInfo | None) -> None:
        """The gang's headless Service, owned by rank 0's Pod (one made before a crash is
        kept); none for a job of one replica."""
        assert first is not None
        if job.replicas == 1:
            return
        body = headless_service(job, attempt, first.namespace, self.settings.master_port)
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": first.name, "uid": first.uid}]
        try:
            self.api.create(services_path(first.namespace), body)
        except KubeError as exc:
            if not exc.exists:
                raise

    # -- offered Pods ------------------------------------------------------------------------

    def start_offered(self, job: Job, placement: Placement, key: OfferKey,
                      attempt: int) -> Handle:
        members = self._offered_members(job, placement, key)
        return self._bind_all(job, members, attempt, offered=True)

    def find_offered(self, job: Job, placement: Placement, key: OfferKey,
                     attempt: int) -> Handle | None:
        """The handle of the offered Pods once all are bound; None when none is bound yet
        (or they are gone: ``start_offered`` says so)."""
        pods = self._gang(key)
        if not any(p.node for p in pods):
            return None
        return self._bind_all(job, self._offered_members(job, placement, key), attempt,
                              offered=True)

    def _offered_members(self, job: Job, placement: Placement, key: OfferKey) -> list[Member]:
        members = self._members(placement)
        pods = self._gang(key)
        if len(pods) != len(members):
            raise InvalidSpec("labels.rota.offer", (
                f"the Pods offered as this job ({key.text()}) are gone or no longer waiting: "
                f"{len(pods)} of {len(members)} left (a Pod rota preempted or that was deleted "
                "does not come back; its owner creates a new one, which is a new job)"))
        for m, pod in zip(members, pods):
            m.pod = pod
        return members

    def _gang(self, key: OfferKey) -> list[PodInfo]:
        """``gang_of`` the cached Pods; a single Pod's offer is looked up by its name (a
        launch of one Pod must not read all of a cluster's Pods: thousands per pass)."""
        if key.kind == "pod":
            pod = self.cluster.pod(key.namespace, key.name)
            return [pod] if pod is not None and pod.uid == key.uid else []
        return gang_of(self.cluster.every_pod(), key)

    # -- binding -----------------------------------------------------------------------------

    def _bind_all(self, job: Job, members: list[Member], attempt: int,
                  offered: bool) -> Handle:
        bound: list[PodInfo] = [m.pod for m in members if m.pod and m.pod.node]
        for m in members:
            assert m.pod is not None
            if m.pod.node:
                continue
            try:
                self._bind(m, offered)
            except (KubeError, lock.Locked) as exc:
                doomed = bound if offered else [x.pod for x in members if x.pod]
                self._remove(doomed, job, f"cannot bind Pod {m.pod.key} to "
                                          f"{m.placement.node}", exc,
                             None if offered else attempt)
            m.pod = replace(m.pod, node=m.placement.node)
            bound.append(m.pod)
        return self._handle(job, members, attempt)

    def _bind(self, m: Member, offered: bool) -> None:
        pod, node_name = m.pod, m.placement.node
        assert pod is not None
        node = self.cluster.node(node_name)
        assert node is not None
        hami_bind = node.grain is Grain.DEVICE and bool(m.placement.devices)
        if hami_bind:
            self._lock(node_name, pod)
        try:
            if hami_bind:
                annotations = hami.bind_annotations(self.clock())
                labels = {}
                if offered:
                    annotations |= self._allocation(node, m)
                    labels = hami.allocation_labels(node_name)
                self.api.merge_patch(f"{pods_path(pod.namespace)}/{pod.name}", {"metadata": {
                    "annotations": annotations, "labels": labels}})
            self.api.bind(pod.namespace, pod.name, pod.uid, node_name)
        except KubeError as exc:
            if self._bound_anyway(pod, node_name, exc):
                return
            if hami_bind:
                lock.release(self.api, node_name, pod.namespace, pod.name)
            raise

    def _bound_anyway(self, pod: PodInfo, node_name: str, exc: KubeError) -> bool:
        """Whether a Binding that failed without a refusal (no answer, a server error, or
        409: bound already) bound the Pod all the same: the server may have bound it and the
        answer been lost. Read back, a Pod bound to ``node_name`` is bound; otherwise, or if
        it cannot be read, the Binding failed."""
        if not (exc.status == 0 or exc.status >= 500 or exc.conflict):
            return False
        try:
            now = self.api.get(f"{pods_path(pod.namespace)}/{pod.name}")
        except KubeError:
            return False
        meta, spec = now.get("metadata") or {}, now.get("spec") or {}
        return meta.get("uid") == pod.uid and spec.get("nodeName") == node_name

    def _lock(self, node: str, pod: PodInfo) -> None:
        deadline = time.monotonic() + self.settings.lock_wait_s
        while True:
            try:
                lock.lock(self.api, node, pod.namespace, pod.name)
                return
            except lock.Locked:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                self.cluster.wait_for_change(min(left, 1.0))

    def _allocation(self, node: KubeNode, m: Member) -> dict[str, str]:
        uuids = {d.index: d.uuid for d in node.node.devices}
        devices = [hami.ContainerDevice(uuid=uuids[s.index], memory_mib=s.memory_mib,
                                        cores=-(-s.milli * hami.FULL_CORES // MILLI))
                   for s in m.placement.devices]
        return hami.allocation_annotations(node.node.name, [devices], self.clock())

    def _drop_secret(self, job: Job, attempt: int) -> None:
        """Delete the attempt's Secret, if there is one (``tokens.remove``)."""
        tokens.remove(self.api, self._namespace(job), str(job.id), attempt)

    def _abandon(self, members: list[Member], job: Job, attempt: int,
                 exc: BackendError) -> None:
        """A Pod of the gang cannot be created: the attempt's Secret and the Pods made so far
        are deleted, then ``BackendError`` raised."""
        self._remove([m.pod for m in members if m.pod], job, "cannot create its Pods", exc,
                     attempt)

    def _remove(self, pods: list[PodInfo], job: Job, what: str, exc: Exception,
                attempt: int | None = None) -> None:
        """Delete ``pods`` (of a gang that cannot start) at once, and with ``attempt`` (rota's
        own Pods) the attempt's Secret, then raise."""
        doomed = {p.uid: p for p in pods}
        for pod in doomed.values():
            self.cluster.deleting(pod.uid, "its gang could not be started")
            self.api.delete(f"{pods_path(pod.namespace)}/{pod.name}", 0, pod.uid)
        if attempt is not None:
            self._drop_secret(job, attempt)
        log.warning("job %s: %s: %s; removed %d Pod(s) of the gang", job.id, what, exc,
                    len(doomed))
        raise BackendError("launch_failed", f"{what}: {exc}")

    def _handle(self, job: Job, members: list[Member], attempt: int) -> Handle:
        replicas = []
        for m in members:
            assert m.pod is not None
            replicas.append(ReplicaHandle(m.rank, m.pod.node or m.placement.node,
                                          m.placement.devices,
                                          {"namespace": m.pod.namespace, "name": m.pod.name,
                                           "uid": m.pod.uid}))
        first = members[0].pod
        assert first is not None
        return Handle(BACKEND, str(job.id), f"{first.namespace}/{first.name}@{first.uid}",
                      tuple(replicas), attempt)
