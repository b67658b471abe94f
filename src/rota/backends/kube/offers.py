"""Pods that users created for rota to schedule, as offers of jobs: pure, no I/O.

A Pod is offered when it waits for rota: ``schedulerName: rota``, not bound, not being
deleted, not one rota created itself (those carry ``rota.dev/job``). It becomes one job:

- queue: its ``rota.dev/queue`` label (required: a Pod without it is refused, with a reason);
  project: its namespace (a project of that name must exist; the namespace is what Kubernetes
  lets a user create Pods in, so a Pod cannot charge another team's project); user: the one
  the backend submits Pods as (``rota up --kube-pod-user``);
- one replica asking for the Pod's effective request (CPU, memory, ``nvidia.com/gpu`` whole
  devices; with HAMi's ``nvidia.com/gpucores`` below 100 on one device, that fraction of it,
  and HAMi's ``nvidia.com/gpumem`` as its GPU memory), its grace period as the job's;
- a gang, as the coscheduling plugin defines one: the Pods of one namespace with the same
  ``pod-group.scheduling.sigs.k8s.io/name`` label are one job once
  ``pod-group.scheduling.sigs.k8s.io/min-available`` of them wait (fewer: no offer yet); its
  replicas are the first ``min-available`` by name, in rank order, and must ask for the same;
- its ``nodeSelector`` as the job's ``selector`` (only nodes with those labels); a Pod with a
  required node affinity is refused (rota does not evaluate affinity: say it with a
  ``nodeSelector``).

The offer's key, ``<kind>:<namespace>/<name>@<uid>`` (kind ``pod`` or ``group``, the uid of
its first Pod), stays the same while those Pods exist and changes when they are made anew.
What cannot become a job is a ``Refusal`` naming its Pods and the reason.

``find_offers`` with a ``memo`` (a dict it keeps for its caller, the backend, from one call to
the next) makes the offer of Pods that did not change since the last call once, not every
call: every pass asks for the offers, and with thousands of Pods waiting, making each one's
job again was most of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rota.backends.base import Offer
from rota.backends.kube.names import (
    LABEL_JOB, LABEL_POD_GROUP, LABEL_POD_GROUP_SIZE, LABEL_QUEUE, SCHEDULER_NAME,
)
from rota.backends.kube.podinfo import PodInfo
from rota.core import MILLI, GpuRequest, InvalidSpec, Job, JobId, ReplicaRequest

MAX_GANG = 10_000


@dataclass(frozen=True, slots=True)
class Refusal:
    pods: tuple[PodInfo, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class OfferKey:
    kind: str       # "pod" or "group"
    namespace: str
    name: str       # the Pod's name, or the group's
    uid: str        # the uid of the first Pod

    def text(self) -> str:
        return f"{self.kind}:{self.namespace}/{self.name}@{self.uid}"


def parse_key(text: str) -> OfferKey:
    kind, _, rest = text.partition(":")
    where, _, uid = rest.rpartition("@")
    namespace, _, name = where.partition("/")
    if kind not in ("pod", "group") or not (namespace and name and uid):
        raise InvalidSpec("labels.rota.offer", f"{text!r} is not an offer of Kubernetes Pods")
    return OfferKey(kind, namespace, name, uid)


def waiting(pod: PodInfo) -> bool:
    """A Pod that waits for rota to schedule it (see the module docstring)."""
    return (pod.scheduler == SCHEDULER_NAME and not pod.node and not pod.deleting
            and not pod.terminal and LABEL_JOB not in pod.labels)


Made = tuple[tuple[PodInfo, ...], "Offer | Refusal"]  # the Pods, and what they made


def find_offers(pods: Iterable[PodInfo], user: str, memo: dict[str, Made] | None = None
                ) -> tuple[list[Offer], list[Refusal]]:
    """The offers of the Pods that wait for rota, and the refusals of those that cannot be
    jobs; with ``memo``, what Pods equal to the last call's made is taken from there, and
    ``memo`` then holds this call's."""
    singles: list[PodInfo] = []
    groups: dict[tuple[str, str], list[PodInfo]] = {}
    for pod in pods:
        if not waiting(pod):
            continue
        group = pod.labels.get(LABEL_POD_GROUP)
        if group:
            groups.setdefault((pod.namespace, group), []).append(pod)
        else:
            singles.append(pod)
    offers: list[Offer] = []
    refusals: list[Refusal] = []
    made: dict[str, Made] = {}
    last = memo or {}
    for pod in sorted(singles, key=lambda p: p.key):
        _add(OfferKey("pod", pod.namespace, pod.name, pod.uid), [pod], user, offers, refusals,
             last, made)
    for (namespace, group), members in sorted(groups.items()):
        members.sort(key=lambda p: p.name)
        size = _group_size(members)
        if isinstance(size, str):
            refusals.append(Refusal(tuple(members), size))
        elif len(members) >= size:
            chosen = members[:size]
            _add(OfferKey("group", namespace, group, chosen[0].uid), chosen, user, offers,
                 refusals, last, made)
    if memo is not None:
        memo.clear()
        memo.update(made)
    return offers, refusals


def gang_of(pods: Iterable[PodInfo], key: OfferKey) -> list[PodInfo]:
    """The Pods an offer was made of, in rank order (bound ones included: a launch that was
    cut short finds them again); empty when they are gone."""
    if key.kind == "pod":
        found = [p for p in pods if p.namespace == key.namespace and p.name == key.name
                 and p.uid == key.uid]
        return found
    members = sorted((p for p in pods if p.namespace == key.namespace
                      and p.labels.get(LABEL_POD_GROUP) == key.name and not p.terminal
                      and (p.node or waiting(p))), key=lambda p: p.name)
    size = _group_size(members) if members else 0
    chosen = members[:size] if isinstance(size, int) else []
    return chosen if chosen and chosen[0].uid == key.uid else []


def _group_size(members: list[PodInfo]) -> int | str:
    texts = {p.labels.get(LABEL_POD_GROUP_SIZE, "") for p in members}
    if len(texts) != 1:
        return f"the Pods of the group disagree on {LABEL_POD_GROUP_SIZE}: {sorted(texts)}"
    text = texts.pop()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_GANG:
        return (f"{LABEL_POD_GROUP_SIZE} must be the number of Pods of the group (1 to "
                f"{MAX_GANG}), got {text!r}")
    return int(text)


def _add(key: OfferKey, pods: list[PodInfo], user: str, offers: list[Offer],
         refusals: list[Refusal], last: dict[str, Made], made: dict[str, Made]) -> None:
    text, these = key.text(), tuple(pods)
    before = last.get(text)
    if before is not None and len(before[0]) == len(these) and all(
            a is b or a == b for a, b in zip(before[0], these)):
        outcome = before[1]
    else:
        try:
            outcome = offer_of(key, pods, user)
        except InvalidSpec as exc:
            outcome = Refusal(these, f"{exc.field}: {exc.reason}" if exc.field else exc.reason)
    made[text] = (these, outcome)
    if isinstance(outcome, Refusal):
        refusals.append(outcome)
    else:
        offers.append(outcome)


def offer_of(key: OfferKey, pods: list[PodInfo], user: str) -> Offer:
    """The job of ``pods`` (see the module docstring); ``InvalidSpec`` when it cannot be one."""
    first = pods[0]
    queue = first.labels.get(LABEL_QUEUE)
    if not queue:
        raise InvalidSpec(f"metadata.labels.{LABEL_QUEUE}", "is missing: it names the rota "
                                                            "queue the Pod waits in")
    if any(p.required_affinity for p in pods):
        raise InvalidSpec("spec.affinity.nodeAffinity", "rota does not evaluate a required "
                          "node affinity: name the node labels in spec.nodeSelector instead")
    requests = {_request(p) for p in pods}
    if len(requests) != 1 or len({(p.labels.get(LABEL_QUEUE), p.node_selector)
                                  for p in pods}) != 1:
        raise InvalidSpec("spec.containers", "the Pods of a group must ask for the same "
                                             "resources on the same nodes in the same queue")
    job = Job(id=JobId("offer"), project=first.namespace, queue=queue, user=user,
              request=requests.pop(), replicas=len(pods), grace_s=float(first.grace_s),
              selector=first.node_selector)
    command = list(first.command) or [f"(the entrypoint of image {first.image})"]
    run = {"command": command, "image": first.image or None,
           "checkpoint": {"grace_s": float(first.grace_s)}}
    return Offer(key=key.text(), job=job, name=key.name[:63], run=run)


def _request(pod: PodInfo) -> ReplicaRequest:
    count, cores = pod.gpus, pod.gpu_cores
    share = MILLI
    if cores is not None and cores < 100:
        if count != 1:
            raise InvalidSpec("nvidia.com/gpucores", f"{cores}% of {count} GPUs: rota shares "
                                                     "out one GPU at a time")
        share = cores * MILLI // 100
    memory = pod.gpu_memory_mib if count else None
    return ReplicaRequest(pod.cpu_milli, pod.memory_mib, GpuRequest(count, share, memory))
