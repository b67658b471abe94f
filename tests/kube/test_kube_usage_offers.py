"""Pure translations of Pods: what Pods outside rota hold on a node (foreign usage), which
Pods users offer as jobs (one Pod, or a coscheduling gang), and a replica's status from its
Pod. Tables of cases, no server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kubekit import hami_devices, node_object
from rota.backends.base import ReplicaState
from rota.backends.kube import hami
from rota.backends.kube.nodes import node_from_kube
from rota.backends.kube.offers import find_offers, gang_of, parse_key
from rota.backends.kube.podinfo import ContainerEnd, PodInfo, pod_info
from rota.backends.kube.status import Gone, replica_status
from rota.backends.kube.usage import foreign_usage
from rota.core import DeviceShare, End, GpuRequest

PLAIN = node_from_kube(node_object("gpu-p", gpus=8))
HAMI = node_from_kube(node_object("gpu-h", gpus=80,
                                  hami_register=hami.encode_node_devices(hami_devices(8))))


def a_pod(name: str, node: str = "", scheduler: str = "default-scheduler", **kw) -> PodInfo:
    return PodInfo(namespace="ml", name=name, uid=f"uid-{name}", node=node, scheduler=scheduler,
                   **kw)


def rota_devices(pod: PodInfo):
    text = pod.annotations.get("rota.dev/devices")
    return None if text is None else tuple(int(i) for i in text.split(",") if i)


# -- foreign usage ---------------------------------------------------------------------------

def test_whole_gpus_of_another_scheduler_take_the_highest_devices_rota_does_not_hold():
    ours = a_pod("rota-1-0-0", "gpu-p", "rota", gpus=2, annotations={"rota.dev/devices": "6,7"})
    theirs = a_pod("infer-0", "gpu-p", gpus=3, cpu_milli=4000, memory_mib=8192)
    (held,) = foreign_usage(PLAIN, [ours, theirs], rota_devices)
    # 8 devices, 6 and 7 are rota's: the three highest others are 5, 4, 3
    assert [d.index for d in held.devices] == [3, 4, 5]
    assert (held.cpu_milli, held.memory_mib, held.holder) == (
        4000, 8192, "pod ml/infer-0 (default-scheduler)")


def test_a_pod_hamis_scheduler_placed_holds_the_devices_of_its_annotation():
    allocated = "GPU-a100-2,NVIDIA,20000,30:GPU-a100-5,NVIDIA,81920,100:;"
    theirs = a_pod("hami-0", "gpu-h", "hami-scheduler", gpus=2,
                   annotations={hami.ALLOCATED: allocated})
    (held,) = foreign_usage(HAMI, [theirs], rota_devices)
    # cores in percent -> milli-GPU: 30 % = 300, 100 % = 1000
    assert held.devices == (DeviceShare(2, 300, 20000), DeviceShare(5, 1000, 81920))


@pytest.mark.parametrize("pod", [
    pytest.param(a_pod("done", "gpu-p", gpus=1, phase="Succeeded"), id="ended"),
    pytest.param(a_pod("elsewhere", "gpu-x", gpus=1), id="other-node"),
    pytest.param(a_pod("rota-2-0-0", "gpu-p", "rota", gpus=1,
                       annotations={"rota.dev/devices": "0"}), id="rotas-own"),
])
def test_what_holds_nothing_foreign_here(pod):
    assert foreign_usage(PLAIN, [pod], rota_devices) == ()


# -- offers ----------------------------------------------------------------------------------

def waiting_pod(name: str, uid: str = "", **labels: str) -> PodInfo:
    return PodInfo(namespace="vision", name=name, uid=uid or f"uid-{name}", scheduler="rota",
                   labels={"rota.dev/queue": "research", **labels}, cpu_milli=2000,
                   memory_mib=4096, gpus=1, grace_s=60, image="pytorch:2", command=("train",))


GROUP = {"pod-group.scheduling.sigs.k8s.io/name": "ddp",
         "pod-group.scheduling.sigs.k8s.io/min-available": "2"}


def test_a_waiting_pod_is_offered_as_one_job_of_its_namespace_and_queue():
    (offer,), refused = find_offers([waiting_pod("train-0")], "alice")
    assert refused == []
    job = offer.job
    assert (job.project, job.queue, job.user, job.replicas, job.grace_s) == (
        "vision", "research", "alice", 1, 60.0)
    assert (job.request.cpu_milli, job.request.memory_mib, job.request.gpu) == (
        2000, 4096, GpuRequest(1))
    assert offer.key == "pod:vision/train-0@uid-train-0"
    assert offer.run["command"] == ["train"] and offer.run["image"] == "pytorch:2"


def test_a_pods_node_selector_is_its_jobs_selector_and_a_required_affinity_is_refused():
    obj = {"metadata": {"namespace": "vision", "name": "p", "uid": "u",
                        "labels": {"rota.dev/queue": "research"}},
           "spec": {"schedulerName": "rota", "nodeSelector": {"pool": "a100", "zone": "b"},
                    "containers": [{"name": "c", "resources": {"limits": {
                        "nvidia.com/gpu": "1"}}}]}}
    (offer,), _ = find_offers([pod_info(obj)], "alice")
    assert offer.job.selector == (("pool", "a100"), ("zone", "b"))
    obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                {"nodeSelectorTerms": []}}}
    offers, (refusal,) = find_offers([pod_info(obj)], "alice")
    assert offers == [] and refusal.reason.startswith("spec.affinity.nodeAffinity: rota does")


def test_a_coscheduling_group_is_one_gang_once_min_available_pods_wait():
    assert find_offers([waiting_pod("w-1", **GROUP)], "alice") == ([], [])  # 1 of 2
    pods = [waiting_pod("w-1", **GROUP), waiting_pod("w-0", **GROUP)]
    (offer,), _ = find_offers(pods, "alice")
    assert offer.job.replicas == 2 and offer.key == "group:vision/ddp@uid-w-0"  # ranked by name
    assert [p.name for p in gang_of(pods, parse_key(offer.key))] == ["w-0", "w-1"]


def test_hamis_fraction_resources_make_a_fractional_job():
    pod = waiting_pod("half")
    half = PodInfo(**{**{f: getattr(pod, f) for f in PodInfo.__slots__},
                      "gpu_cores": 50, "gpu_memory_mib": 20000})
    (offer,), _ = find_offers([half], "alice")
    assert offer.job.request.gpu == GpuRequest(1, share=500, memory_mib=20000)


@pytest.mark.parametrize("pods, reason", [
    pytest.param([PodInfo(namespace="v", name="q", uid="u", scheduler="rota", gpus=1)],
                 "rota.dev/queue", id="no-queue-label"),
    pytest.param([waiting_pod("w-0", **GROUP),
                  waiting_pod("w-1", **{**GROUP, "pod-group.scheduling.sigs.k8s.io/min-available": "3"})],
                 "disagree", id="sizes-disagree"),
    pytest.param([waiting_pod("w-0", **{**GROUP, "pod-group.scheduling.sigs.k8s.io/min-available": "two"})],
                 "number of Pods", id="size-not-a-number"),
])
def test_what_cannot_be_a_job_is_refused_with_a_reason(pods, reason):
    offers, (refusal,) = find_offers(pods, "alice")
    assert offers == [] and reason in refusal.reason


def test_bound_pods_and_rotas_own_are_not_offered():
    bound = PodInfo(namespace="v", name="b", uid="u1", scheduler="rota", node="n",
                    labels={"rota.dev/queue": "q"})
    own = PodInfo(namespace="v", name="rota-1-0-0", uid="u2", scheduler="rota",
                  labels={"rota.dev/queue": "q", "rota.dev/job": "1"})
    other = PodInfo(namespace="v", name="o", uid="u3", scheduler="default-scheduler",
                    labels={"rota.dev/queue": "q"})
    assert find_offers([bound, own, other], "alice") == ([], [])


# -- status ----------------------------------------------------------------------------------

RUNNING = a_pod("p", "gpu-p", phase="Running")


@pytest.mark.parametrize("pod, gone, trouble, expected", [
    pytest.param(RUNNING, None, None, (ReplicaState.RUNNING, None, ""), id="running"),
    pytest.param(a_pod("p", phase="Succeeded", container=ContainerEnd(exit_code=0)), None, None,
                 (ReplicaState.EXITED, 0, ""), id="succeeded"),
    pytest.param(a_pod("p", phase="Failed", container=ContainerEnd(exit_code=137,
                                                                   reason="OOMKilled")),
                 None, None, (ReplicaState.EXITED, 137, "OOMKilled"), id="oom-killed"),
    pytest.param(a_pod("p", phase="Failed", reason="OutOfnvidia.com/gpu",
                       message="Node didn't have enough resource"), None, None,
                 (ReplicaState.LOST, None, "its Pod ml/p failed before its container ran "
                                           "(OutOfnvidia.com/gpu: Node didn't have enough "
                                           "resource)"),
                 id="refused-by-the-kubelet"),
    pytest.param(a_pod("p", "gpu-p", container=ContainerEnd(waiting="InvalidImageName",
                                                           message="bad")), None, None,
                 (ReplicaState.EXITED, 127, "cannot start: InvalidImageName (bad)"),
                 id="cannot-start"),
    pytest.param(RUNNING, None, "is not Ready (Ready is False)",
                 (ReplicaState.LOST, None, "node gpu-p is not Ready (Ready is False)"),
                 id="node-not-ready"),
    pytest.param(None, Gone(RUNNING, "cancelled"), None, (ReplicaState.EXITED, None, "cancelled"),
                 id="deleted-by-rota"),
    pytest.param(None, Gone(a_pod("p", "gpu-p", disruption="EvictionByEvictionAPI: drain")),
                 None, (ReplicaState.LOST, None, "its Pod ml/p was evicted "
                                                 "(EvictionByEvictionAPI: drain)"), id="evicted"),
    pytest.param(None, Gone(RUNNING), None,
                 (ReplicaState.LOST, None, "its Pod ml/p was deleted outside rota"),
                 id="deleted-by-someone"),
    pytest.param(None, None, None, (ReplicaState.LOST, None, "its Pod is gone"), id="unknown"),
])
def test_a_replicas_status_from_its_pod(pod, gone, trouble, expected):
    status = replica_status(0, pod, gone, trouble)
    assert (status.state, status.exit_code, status.reason) == expected


EVICTION = "EvictionByEvictionAPI: Eviction API: evicting"


@pytest.mark.parametrize("pod, gone, expected", [
    # kubectl drain, gone at once (kwok), or ended by SIGTERM first (a kubelet)
    pytest.param(None, Gone(a_pod("p", "gpu-p", disruption=EVICTION)),
                 (ReplicaState.LOST, None, End.PREEMPTED), id="evicted"),
    pytest.param(a_pod("p", "gpu-p", phase="Failed", disruption=EVICTION,
                       container=ContainerEnd(exit_code=143)), None,
                 (ReplicaState.LOST, None, End.PREEMPTED), id="evicted-after-sigterm"),
    pytest.param(None, Gone(a_pod("p", "gpu-p", phase="Failed", disruption=EVICTION,
                                  container=ContainerEnd(exit_code=143))),
                 (ReplicaState.LOST, None, End.PREEMPTED), id="evicted-ended-and-gone"),
    pytest.param(None, Gone(a_pod("p", "gpu-p", disruption="PreemptionByScheduler: x")),
                 (ReplicaState.LOST, None, End.PREEMPTED), id="preempted-by-another"),
    # it had finished its work when the drain came: a success
    pytest.param(a_pod("p", "gpu-p", phase="Succeeded", disruption=EVICTION,
                       container=ContainerEnd(exit_code=0)), None,
                 (ReplicaState.EXITED, 0, None), id="evicted-after-finishing"),
    # a NoExecute taint's eviction means the node is in trouble: lost as a fault
    pytest.param(None, Gone(a_pod("p", "gpu-p", disruption="DeletionByTaintManager: taint")),
                 (ReplicaState.LOST, None, None), id="taint-eviction-is-a-fault"),
])
def test_an_eviction_is_a_preemption_by_the_site(pod, gone, expected):
    status = replica_status(0, pod, gone, None)
    assert (status.state, status.exit_code, status.cause) == expected


def test_a_pod_object_reads_as_the_kubelet_counts_its_request():
    obj = {"metadata": {"name": "p", "namespace": "ml", "uid": "u",
                        "annotations": {"hami.io/vgpu-node": "n", "other/x": "y"}},
           "spec": {"schedulerName": "rota", "terminationGracePeriodSeconds": 10,
                    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}],
                    "containers": [
                        {"name": "a", "image": "img", "command": ["run"], "args": ["--x"],
                         "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                       "limits": {"nvidia.com/gpu": "1",
                                                  "nvidia.com/gpucores": "40",
                                                  "nvidia.com/gpumem": "10000"}}},
                        {"name": "b", "resources": {"requests": {"cpu": "1500m",
                                                                 "memory": "512Mi"}}}]},
           "status": {"phase": "Pending"}}
    info = pod_info(obj)
    # cpu: max(0.5 + 1.5, 8 of the init container) = 8 cores; memory 1Gi + 512Mi
    assert (info.cpu_milli, info.memory_mib, info.gpus) == (8000, 1536, 1)
    assert (info.gpu_cores, info.gpu_memory_mib, info.grace_s) == (40, 10000, 10)
    assert info.annotations == {"hami.io/vgpu-node": "n"}
    assert info.command == ("run", "--x")


def test_offers_remembered_from_the_last_look_follow_every_change_of_their_pods():
    memo: dict = {}
    a, b = waiting_pod("a"), waiting_pod("b", **{"rota.dev/queue": ""})
    group = [waiting_pod(f"w-{i}", **GROUP) for i in range(2)]
    offers, refused = find_offers([a, b, *group], "alice", memo)
    assert [o.key for o in offers] == ["pod:vision/a@uid-a", "group:vision/ddp@uid-w-0"]
    assert [r.pods[0].name for r in refused] == ["b"]

    again, refused_again = find_offers([a, b, *group], "alice", memo)
    assert again == offers and refused_again == refused
    assert all(x is y for x, y in zip(again, offers))  # made once, not again

    bigger = replace(a, gpus=2)  # the same Pod, changed (a new PodInfo from the watch)
    fixed = replace(b, labels={"rota.dev/queue": "research"})
    changed, refused_now = find_offers([bigger, fixed, group[0]], "alice", memo)
    assert [(o.key, o.job.request.gpu.count) for o in changed] == [
        ("pod:vision/a@uid-a", 2), ("pod:vision/b@uid-b", 1)]  # the group lost a member
    assert refused_now == []
    assert sorted(memo) == ["pod:vision/a@uid-a", "pod:vision/b@uid-b"]  # only what is there
