"""The Kubernetes backend: rota schedules Pods on a real cluster, as a scheduler of its own.

Vocabulary and what each part is:
- rota's jobs become Pods it creates with ``schedulerName: rota`` and binds itself
  (``rota.backends.kube.launch``: a gang is bound whole or not at all); Pods that users create
  with ``schedulerName: rota`` and a queue label are offered as jobs (``Offering``,
  ``rota.backends.kube.offers``) and bound the same way once rota places them.
- Two informers (``rota.backends.kube.informer``: list, then watch; list again on 410 Gone)
  keep every Node and every Pod of the cluster current, so that ``inventory``, ``poll`` and
  ``offers`` read memory (``poll`` makes one request per attempt it sees ended: deleting its
  Secret, ``rota.backends.kube.tokens``, the token's holder and the Pods' controller). Pods of other schedulers count as used on
  their nodes (``rota.backends.kube.usage``); nodes are read by ``rota.backends.kube.nodes``.
- A replica handle's ``ref`` is its Pod's ``namespace``, ``name`` and ``uid``; the launch id is
  ``<namespace>/<rank 0's Pod>@<its uid>``.
- Status (``rota.backends.kube.status``) comes from the cached Pods, and from the last state
  of Pods deleted since (kept for the Pods of handles this backend knows); a change to one of
  those Pods, or to a node's state, wakes the control loop (``watch``); so does a Pod
  outside rota taking or freeing GPUs, with ``inventory=True``.
- Stopping: Kubernetes stops a container with SIGTERM, then SIGKILL after the Pod's grace
  period, and sends no other signal. So ``signal`` with SIGKILL deletes the Pods at once, and
  any other signal (the job's checkpoint signal, SIGTERM or another) deletes them with their
  grace period (the job's): SIGTERM is what the job gets, whatever checkpoint signal it asked
  for (the control plane's log says so when it asked for another). ``cancel`` deletes them
  with the grace given.
- Logs: Kubernetes keeps one log per container, stdout and stderr together: ``read_log``
  gives it as ``stdout``; ``stderr`` is empty.
- Streams: ``open_exec`` and ``open_port`` reach a replica whose Pod the cache knows Running
  through ``pods/exec`` and ``pods/portforward`` (``rota.backends.kube.streams``).

HAMi's node lock: a lock HAMi's device plugin has kept longer than ``lock_wait_s`` for a Pod
that still exists (``rota.backends.kube.lock.stuck``) makes every GPU of the node unhealthy in
``inventory``, with the reason, until it is released or expires: the scheduler then places
GPU work, fractional or whole, on other nodes instead of binds that would wait for it in vain.

Capabilities: fractional GPUs (with memory and compute limits, HAMi's) where some node runs
HAMi's device plugin; gangs; no signals but SIGTERM; jobs in container images; interactive
(``open_exec``, ``open_port``: rota exec, shell, attach and forward).
"""

from __future__ import annotations

import logging
import math
import signal as signals
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

from rota.backends.base import (
    BackendError, Capabilities, Handle, LaunchSpec, Offer, ReplicaHandle, ReplicaState,
    Status, offer_key,
)
from rota.backends.kube.api import NODES, KubeApi, KubeError, connect, pods_path
from rota.backends.kube import lock, streams, tokens
from rota.backends.kube.holds import KubeHolds
from rota.backends.kube.informer import Informer
from rota.backends.kube.launch import BACKEND, Launcher, Settings
from rota.backends.kube.names import (
    ANNOTATION_DEVICES, GPU_RESOURCE, LABEL_GPU_SHARING, LABEL_JOB, LABEL_RESOURCE_GROUP,
    PROJECT, check_namespace_rule, pod_name,
)
from rota.backends.kube.nodes import Grain, KubeNode, Problem, node_from_kube
from rota.backends.kube.offers import (
    Made, Refusal, find_offers, gang_of, parse_key, waiting,
)
from rota.backends.kube.podinfo import PodInfo, pod_info
from rota.backends.kube.pods import DEFAULT_UID, PORT_ANNOTATION
from rota.backends.kube.status import Gone, replica_status
from rota.backends.kube.usage import foreign_usage, gpus_held
from rota.core import InvalidSpec, Job, Node, Placement

log = logging.getLogger("rota.kube")
SYNC_TIMEOUT_S = 60.0
LOG_CHUNK = 64 * 1024
MAX_GONE = 100_000  # last states of deleted Pods kept for status
CONTAINER = "main"
@dataclass(frozen=True, slots=True)
class KubeConfig:
    """How ``rota up --backend kubernetes`` reaches and uses the cluster."""

    kubeconfig: str | None = None     # None: KUBECONFIG, ~/.kube/config, then in-cluster
    namespace: str = "rota"           # where rota creates its Pods (it must exist), or a
                                      # rule with {project}: each project's own namespace
    default_image: str | None = None  # for jobs that name no image
    pod_user: str = "admin"           # the rota user of the jobs offered Pods become
    group_label: str = LABEL_RESOURCE_GROUP
    tolerate: tuple[str, ...] = (GPU_RESOURCE,)
    master_port: int = 29500
    lock_wait_s: float = 60.0
    node_lost_after_s: float = 300.0  # a NotReady node's replicas are lost after this long
    node_selector: str | None = None  # a label selector: the nodes rota may use (None: all)
    uid: int = DEFAULT_UID            # the uid of jobs without an OS account, or root's


class KubeBackend(KubeHolds):
    name = BACKEND

    def __init__(self, config: KubeConfig, api: KubeApi | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config, self.clock = config, clock
        self.api = api or KubeApi(connect(config.kubeconfig))
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake: Callable[..., None] | None = None
        self._mine: dict[str, str] = {}        # uid of a Pod of a known handle -> its job
        self._deleting: dict[str, str] = {}    # uid -> why rota deleted it
        self._gone: dict[str, Gone] = {}       # uid -> its last state, deleted since
        self._offered: dict[str, Made] = {}    # what the waiting Pods made last time
        self._waiting: dict[str, PodInfo] = {}  # the cached Pods that wait for rota, by key
        self._refused: dict[str, str] = {}     # uid -> the refusal last written on it
        self._secrets: set[tuple[str, str, int]] = set()  # (namespace, job, attempt) running
        self._check()
        self._start_holds()  # placeholder Pods for other engines' attempts (``holds``)
        self.nodes: Informer[KubeNode] = Informer(self.api, NODES, self._parse_node,
                                                  self._node_changed, name="nodes",
                                                  selector=config.node_selector)
        self.pods: Informer[PodInfo] = Informer(self.api, pods_path(), pod_info,
                                                self._pod_changed, name="pods")
        self.launcher = Launcher(self.api, self, Settings(
            config.namespace, config.default_image, config.tolerate, config.master_port,
            config.lock_wait_s, config.uid), clock)
        self.nodes.start()
        self.pods.start()
        for informer in (self.nodes, self.pods):
            if not informer.synced.wait(SYNC_TIMEOUT_S):
                self.close()
                raise BackendError("unreachable", f"could not list {informer.name} from the "
                                                  f"API server in {SYNC_TIMEOUT_S:.0f} s")

    def close(self) -> None:
        self.nodes.stop()
        self.pods.stop()

    def _check(self) -> None:
        """The namespace exists and the node selector is one; ``InvalidSpec`` naming the
        option otherwise, ``BackendError`` when the API server does not answer."""
        rule = check_namespace_rule(self.config.namespace)
        try:
            if PROJECT not in rule:  # a rule's namespaces are looked for at each launch
                self.api.get(f"/api/v1/namespaces/{rule}")
            self.api.list(NODES, limit=1, selector=self.config.node_selector)
        except KubeError as exc:
            if exc.not_found:
                raise InvalidSpec("namespace", f"namespace {self.config.namespace} does not "
                                  "exist: create it (kubectl create namespace "
                                  f"{self.config.namespace}) or name another") from None
            if exc.status == 400:
                raise InvalidSpec("node_selector", f"{self.config.node_selector!r} is not a "
                                  f"label selector: {exc.message}") from None
            raise BackendError("unreachable", f"cannot reach the API server: {exc}") from None

    @property
    def capabilities(self) -> Capabilities:
        hami = any(n.grain is Grain.DEVICE and n.node.devices for n in self.nodes.items())
        return Capabilities(fractional_gpu=hami, memory_enforcement=hami,
                            compute_enforcement=hami, gang=True, signals=False,
                            run_as_owner=True, containers=True, interactive=True)

    # -- the caches --------------------------------------------------------------------------

    def _parse_node(self, obj: Any) -> KubeNode | None:
        try:
            return node_from_kube(obj, self.config.group_label, frozenset(self.config.tolerate))
        except InvalidSpec as exc:
            log.warning("node %s cannot be read, left out: %s",
                        (obj.get("metadata") or {}).get("name"), exc)
            return None

    def _node_changed(self, key: str, old: KubeNode | None, new: KubeNode | None) -> None:
        if (old and old.problems) != (new and new.problems) or (old is None) != (new is None):
            self._notify()

    def _pod_changed(self, key: str, old: PodInfo | None, new: PodInfo | None) -> None:
        uid = (new or old).uid  # type: ignore[union-attr]
        waits = new is not None and waiting(new)
        with self._lock:
            ours = uid in self._mine
            if new is None and ours and old is not None:
                self._gone[uid] = Gone(old, self._deleting.get(uid, ""))
                while len(self._gone) > MAX_GONE:
                    self._gone.pop(next(iter(self._gone)))
            if waits:
                self._waiting[key] = new  # type: ignore[assignment]
            else:
                self._waiting.pop(key, None)
        arrived = waits and (old is None or not waiting(old))
        if ours or arrived or (new is not None and new.scheduler == "rota" and not new.node):
            self._notify(arrived)
        elif gpus_held(old) != gpus_held(new) and (wake := self._wake) is not None:
            wake(inventory=True)  # work outside rota took or freed GPUs

    def _notify(self, arrived: bool = False) -> None:
        with self._changed:
            self._changed.notify_all()
        wake = self._wake
        if wake is not None:
            if arrived:  # a Pod newly waits for rota: work offered (``Backend.watch``)
                wake(arrived=True)
            else:
                wake()

    # what the launcher reads (``launch.Cluster``)
    def node(self, name: str) -> KubeNode | None:
        return self.nodes.get(name)

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pods.get(f"{namespace}/{name}")

    def every_pod(self) -> list[PodInfo]:
        return self.pods.items()

    def wait_for_change(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def deleting(self, uid: str, why: str) -> None:
        with self._lock:
            self._deleting.setdefault(uid, why)

    def watch(self, wake: Callable[..., None]) -> None:
        self._wake = wake

    def unwatch(self) -> None:
        self._wake = None

    # -- inventory ---------------------------------------------------------------------------

    def inventory(self) -> list[Node]:
        """Every Node as rota's ``Node``, with what Pods outside rota hold there."""
        by_node: dict[str, list[PodInfo]] = {}
        for pod in self.pods.items():
            if pod.node and not pod.terminal:
                by_node.setdefault(pod.node, []).append(pod)
        out = []
        for kube in sorted(self.nodes.items(), key=lambda k: k.node.name):
            node = kube.node
            labels = dict(node.labels)
            if kube.grain is Grain.DEVICE and node.devices:
                labels[LABEL_GPU_SHARING] = "hami"
            why = lock.stuck_reason(kube.hami_lock, self.clock(), self.config.lock_wait_s,
                                    lambda key: self.pods.get(key) is not None)
            if why:
                node = replace(node, devices=tuple(replace(d, healthy=False, problem=why)
                                                   for d in node.devices))
            out.append(replace(node, labels=labels, schedulable=True,
                               problem="; ".join(p.detail for p in kube.problems),
                               foreign=foreign_usage(kube, by_node.get(node.name, ()),
                                                     self._held_by_rota)))
        return out

    def _held_by_rota(self, pod: PodInfo) -> tuple[int, ...] | None:
        """The device indices one of rota's own Pods holds; None for a foreign Pod."""
        text = pod.annotations.get(ANNOTATION_DEVICES)
        if LABEL_JOB in pod.labels or text is not None:
            return tuple(int(i) for i in (text or "").split(",") if i.isdigit())
        with self._lock:
            if pod.uid not in self._mine:
                return None
        return ()

    # -- launch ------------------------------------------------------------------------------

    def launch(self, job: Job, placement: Placement, spec: LaunchSpec,
               attempt: int | None = None) -> Handle:
        """Start attempt ``attempt`` of ``job`` (see ``rota.backends.kube.launch``): a job
        offered by Pods binds those; an attempt begun before is completed, never doubled."""
        attempt = self._attempt(attempt)
        if len(placement.replicas) != job.replicas:
            raise InvalidSpec("placement.replicas", f"has {len(placement.replicas)} replicas, "
                                                    f"job {job.id} has {job.replicas}")
        key = offer_key(job)
        if key is not None:
            offer = parse_key(key)
            handle = (self.launcher.find_offered(job, placement, offer, attempt)
                      or self.launcher.start_offered(job, placement, offer, attempt))
        else:
            handle = (self.launcher.find(job, placement, attempt, spec)
                      or self.launcher.start(job, placement, spec, attempt))
        return self._track(handle)

    def recover(self, job: Job, placement: Placement, attempt: int) -> Handle | None:
        key = offer_key(job)
        if key is not None:
            found = self.launcher.find_offered(job, placement, parse_key(key), attempt)
        else:
            found = self.launcher.find(job, placement, attempt)
        return None if found is None else self._track(found)

    @staticmethod
    def _attempt(attempt: int | None) -> int:
        if attempt is None:
            raise InvalidSpec("attempt", "the kubernetes backend names Pods after the attempt; "
                                         "give its number")
        return attempt

    def _track(self, handle: Handle) -> Handle:
        namespace, name, _ = _ref(handle.replicas[0])
        ours = handle.attempt is not None and name == pod_name(handle.job_id, handle.attempt, 0)
        with self._lock:
            for r in handle.replicas:
                self._mine[r.ref["uid"]] = handle.job_id
            if ours:  # rota's own Pods (not offered ones): their attempt's Secret
                self._secrets.add((namespace, handle.job_id, handle.attempt))
        return handle

    # -- observe -----------------------------------------------------------------------------

    def adopt(self, handle: Handle) -> Status:
        if handle.backend != self.name:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"not {self.name!r}")
        for k, r in enumerate(handle.replicas):
            _ref(r, f"handle.replicas[{k}]")
        self._track(handle)
        return self.poll([handle])[0]

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        """Every handle's status, from the caches; the one request: an attempt seen ended
        has its Secret deleted (once; its Pods stay, for their logs)."""
        statuses = [Status(tuple(self._replica(r) for r in h.replicas)) for h in handles]
        for handle, status in zip(handles, statuses):
            if status.state is not ReplicaState.RUNNING:
                self._drop_secret(handle)
        return statuses

    def _drop_secret(self, handle: Handle) -> None:
        key = (_ref(handle.replicas[0])[0], handle.job_id, handle.attempt or 0)
        with self._lock:
            if key not in self._secrets:
                return
            self._secrets.discard(key)
        tokens.remove(self.api, *key, orphan=True)

    def _replica(self, r: ReplicaHandle):
        namespace, name, uid = _ref(r)
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is not None and pod.uid != uid:
            pod = None  # a newer Pod of the same name: ours is gone
        with self._lock:
            gone = self._gone.get(uid)
        trouble = self._node_trouble(pod.node) if pod is not None and pod.node else None
        return replica_status(r.rank, pod, gone, trouble)

    def _node_trouble(self, name: str) -> str | None:
        kube = self.nodes.get(name)
        if kube is None:
            return "is gone from the cluster"
        for p in kube.problems:
            if p.code is Problem.NOT_READY and (
                    p.since is None or self.clock() - p.since >= self.config.node_lost_after_s):
                return f"is not Ready ({p.detail})"
        return None

    def endpoint(self, handle: Handle) -> str | None:
        """Rank 0's Pod IP and the port its annotation names, once the Pod has an IP."""
        namespace, name, uid = _ref(handle.replicas[0])
        pod = self.pods.get(f"{namespace}/{name}")
        port = None if pod is None else pod.annotations.get(PORT_ANNOTATION)
        if pod is None or pod.uid != uid or not pod.ip or not port:
            return None
        return f"[{pod.ip}]:{port}" if ":" in pod.ip else f"{pod.ip}:{port}"

    def read_log(self, handle: Handle, rank: int, stream: str, offset: int) -> Iterator[bytes]:
        """The Pod's log (stdout and stderr together, as Kubernetes keeps it) as ``stdout``,
        from byte ``offset``; nothing when the Pod or its node cannot give it."""
        if stream not in ("stdout", "stderr"):
            raise InvalidSpec("stream", f"must be stdout or stderr, got {stream!r}")
        if stream == "stderr" or not 0 <= rank < len(handle.replicas):
            return
        namespace, name, _ = _ref(handle.replicas[rank])
        try:
            response = self.api.log(namespace, name, CONTAINER)
        except KubeError:
            return
        try:
            yield from _from_offset(response, offset)
        finally:
            response.release_conn()

    # -- streams ------------------------------------------------------------------------------

    def open_exec(self, handle: Handle, rank: int, argv: Sequence[str],
                  tty: bool) -> streams.KubeChannel:
        """``argv`` in the container of replica ``rank``'s Pod, as the container runs: the
        job's user, environment, devices and working directory (``streams.open_exec``)."""
        namespace, name = self._running(handle, rank)
        return streams.open_exec(self.api, namespace, name, CONTAINER, argv, tty)

    def open_port(self, handle: Handle, rank: int, port: int) -> streams.KubeChannel:
        """A TCP connection to ``port`` of replica ``rank``'s Pod (``streams.open_port``)."""
        namespace, name = self._running(handle, rank)
        return streams.open_port(self.api, namespace, name, port)

    def _running(self, handle: Handle, rank: int) -> tuple[str, str]:
        """Namespace and name of replica ``rank``'s Pod, known Running from the cache."""
        if handle.backend != self.name:
            raise BackendError("foreign_handle", f"handle of backend {handle.backend!r}, "
                                                 f"not {self.name!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or \
                not 0 <= rank < len(handle.replicas):
            raise BackendError("no_replica", f"rank: job {handle.job_id} has no replica "
                                             f"{rank!r} (its ranks are 0 to "
                                             f"{len(handle.replicas) - 1})")
        namespace, name, uid = _ref(handle.replicas[rank], f"handle.replicas[{rank}]")
        pod = self.pods.get(f"{namespace}/{name}")
        what = f"replica {rank} of job {handle.job_id} (Pod {namespace}/{name})"
        if pod is None or pod.uid != uid or pod.deleting:
            raise BackendError("not_running", f"{what} is gone or stopping: see rota show")
        if pod.phase != "Running":
            raise BackendError("not_running", f"{what} is {pod.phase}, not Running: wait "
                                              "until it runs (rota show)")
        return namespace, name

    # -- act ---------------------------------------------------------------------------------

    def signal(self, handle: Handle, sig: int) -> None:
        """SIGKILL: delete the Pods at once; any other signal: delete them with their grace
        period, which Kubernetes gives as SIGTERM then SIGKILL (see the module docstring)."""
        if sig == signals.SIGKILL:
            self._delete(handle, 0, "killed")
            return
        if sig != signals.SIGTERM:
            log.info("job %s asked for %s; Kubernetes stops containers with SIGTERM, so its "
                     "Pods get SIGTERM and their grace period", handle.job_id,
                     signals.Signals(sig).name)
        self._delete(handle, None, "stopped by rota with its grace period")

    def cancel(self, handle: Handle, grace_s: float) -> None:
        if grace_s < 0:
            raise InvalidSpec("grace", f"must not be negative, got {grace_s}")
        self._delete(handle, math.ceil(grace_s), "cancelled")

    def _delete(self, handle: Handle, grace_s: int | None, why: str) -> None:
        for r in handle.replicas:
            namespace, name, uid = _ref(r)
            self.deleting(uid, why)
            self.api.delete(f"{pods_path(namespace)}/{name}", grace_s, uid)

    # -- offers ------------------------------------------------------------------------------

    def offers(self) -> list[Offer]:
        """The offers of the Pods that wait for rota (kept apart from the other cached Pods
        as the watch reports them: thousands of bound Pods are not read each pass)."""
        with self._lock:
            waiting_pods = list(self._waiting.values())
        found, refusals = find_offers(waiting_pods, self.config.pod_user, self._offered)
        for refusal in refusals:
            self._refuse(refusal)
        return found

    def decline(self, offer: Offer, reason: str) -> None:
        pods = gang_of(self.pods.items(), parse_key(offer.key))
        self._refuse(Refusal(tuple(pods), reason))

    def _refuse(self, refusal: Refusal) -> None:
        """Say why on each Pod, as kube-scheduler does: its ``PodScheduled`` condition."""
        for pod in refusal.pods:
            if self._refused.get(pod.uid) == refusal.reason:
                continue
            try:
                self.api.request("PATCH", f"{pods_path(pod.namespace)}/{pod.name}/status",
                                 body={"status": {"conditions": [{
                                     "type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable",
                                     "message": f"rota: {refusal.reason}"}]}},
                                 content_type="application/strategic-merge-patch+json")
            except KubeError as exc:  # told again at the next look
                log.info("cannot write why Pod %s waits: %s", pod.key, exc)
                continue
            self._refused[pod.uid] = refusal.reason


def _ref(r: ReplicaHandle, field: str = "handle.replicas[0]") -> tuple[str, str, str]:
    values = []
    for key in ("namespace", "name", "uid"):
        value = r.ref.get(key)
        if not isinstance(value, str) or not value:
            raise InvalidSpec(f"{field}.ref.{key}", f"must be a non-empty string, got {value!r}")
        values.append(value)
    return values[0], values[1], values[2]


def _from_offset(response: Any, offset: int) -> Iterator[bytes]:
    skip = offset
    while chunk := response.read(LOG_CHUNK):
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        yield chunk[skip:]
        skip = 0
