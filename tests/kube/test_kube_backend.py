"""The Kubernetes backend against the real API server: jobs become Pods bound where rota placed
them (a gang whole, HAMi's annotations and node lock on a HAMi node), their status comes from
the watched Pods (exit codes, a lost node, an eviction), stopping deletes them with the grace
asked, Pods of other schedulers are counted as used, and the caches follow the cluster."""

from __future__ import annotations

import functools
import signal
import time

import pytest

from kubekit import HamiPlugin, watch_deletion
from rota.backends.base import BackendError, LaunchSpec, ReplicaState
from rota.backends.kube import hami
from rota.backends.kube.api import NODES, KubeApi, KubeError, pods_path, services_path
from rota.backends.kube.backend import KubeBackend, KubeConfig
from rota.core import (
    DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
)
from waiting import poll

wait = functools.partial(poll, timeout=60, every=0.1)
A100_MIB = 81920
SPEC = LaunchSpec(("python", "train.py"), "", {"LR": "0.1"})


def a_job(job_id: str, gpus: float = 1, replicas: int = 1, grace_s: float = 30.0) -> Job:
    gpu = GpuRequest(1, share=int(gpus * 1000)) if gpus < 1 else GpuRequest(int(gpus))
    return Job(id=JobId(job_id), project="vision", queue="research", replicas=replicas,
               request=ReplicaRequest(cpu_milli=2000, memory_mib=4096, gpu=gpu), grace_s=grace_s)


def on(*replicas: tuple[str, tuple[DeviceShare, ...]]) -> Placement:
    return Placement(tuple(ReplicaPlacement(node, devices) for node, devices in replicas))


def whole(*indices: int) -> tuple[DeviceShare, ...]:
    return tuple(DeviceShare(i, 1000, A100_MIB) for i in indices)


def pod(cluster, name: str) -> dict:
    return cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")


def state(backend, handle) -> ReplicaState:
    return backend.poll([handle])[0].state


def test_a_one_gpu_job_is_one_pod_bound_where_rota_placed_it(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    handle = backend.launch(a_job("11"), on((node, whole(3))), SPEC, attempt=0)

    made = pod(cluster, "rota-11-0-0")
    assert made["spec"]["nodeName"] == node and made["spec"]["schedulerName"] == "rota"
    assert made["metadata"]["annotations"]["rota.dev/devices"] == "3"
    assert made["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert made["spec"]["tolerations"][0] == {"key": "nvidia.com/gpu", "operator": "Exists"}
    # one replica needs no headless Service (a gang's is checked below)
    assert not cluster.api.list(services_path(cluster.namespace)).items
    assert (handle.launch_id, handle.attempt) == (
        f"{cluster.namespace}/rota-11-0-0@{made['metadata']['uid']}", 0)
    assert handle.replicas[0].ref == {"namespace": cluster.namespace, "name": "rota-11-0-0",
                                      "uid": made["metadata"]["uid"]}
    wait(lambda: pod(cluster, "rota-11-0-0")["status"].get("phase") == "Running",
         "kwok to run the Pod")
    assert state(backend, handle) is ReplicaState.RUNNING
    # launching the same attempt again creates nothing: the same Pod is the answer
    again = backend.launch(a_job("11"), on((node, whole(3))), SPEC, attempt=0)
    assert again == handle


class LostBindingAnswers(KubeApi):
    """The real API server binds each Pod; the answer to the Binding is lost on the way (a
    timeout on a loaded server), and a second Binding of the same Pod answers 409."""

    def bind(self, namespace: str, pod: str, uid: str, node: str) -> None:
        super().bind(namespace, pod, uid, node)
        raise KubeError(0, "Unreachable", "read timed out")


def test_a_binding_whose_answer_is_lost_is_read_back_and_the_pods_are_kept(cluster):
    a, b = cluster.add_node("a"), cluster.add_node("b")
    backend = KubeBackend(KubeConfig(namespace=cluster.namespace, default_image="busybox",
                                     pod_user="alice", node_selector=cluster.selector),
                          api=LostBindingAnswers(cluster.api.client))
    try:
        handle = backend.launch(a_job("13", replicas=2), on((a, whole(0)), (b, whole(1))),
                                SPEC, attempt=0)
    finally:
        backend.close()
    made = [pod(cluster, f"rota-13-0-{rank}") for rank in (0, 1)]
    assert [p["spec"]["nodeName"] for p in made] == [a, b]  # bound where rota placed them
    assert [r.ref["uid"] for r in handle.replicas] == [p["metadata"]["uid"] for p in made]
    assert not any(p["metadata"].get("deletionTimestamp") for p in made)  # none removed


def test_a_gang_of_two_is_bound_whole_with_rank_0s_address(cluster):
    a, b = cluster.add_node("a"), cluster.add_node("b")
    backend = cluster.backend()
    handle = backend.launch(a_job("12", gpus=2, replicas=2),
                            on((a, whole(0, 1)), (b, whole(4, 5))), SPEC, attempt=1)
    pods = [pod(cluster, f"rota-12-1-{rank}") for rank in (0, 1)]
    assert [p["spec"]["nodeName"] for p in pods] == [a, b]
    envs = [{e["name"]: e["value"] for e in p["spec"]["containers"][0]["env"]} for p in pods]
    master = f"rota-12-1-0.rota-12-1.{cluster.namespace}.svc"
    assert [e["ROTA_MASTER_ADDR"] for e in envs] == [master, master]
    assert [(e["ROTA_REPLICA_RANK"], e["ROTA_WORLD_SIZE"]) for e in envs] == [("0", "2"),
                                                                           ("1", "2")]
    # torchrun's, as the API server holds them: rota's values, each Pod a node of one process
    torch = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
             "LOCAL_WORLD_SIZE", "NODE_RANK")
    assert [tuple(e[k] for k in torch) for e in envs] == [
        (master, e["ROTA_MASTER_PORT"], str(rank), "2", "0", "1", str(rank))
        for rank, e in enumerate(envs)]
    assert [r.node for r in handle.replicas] == [a, b]
    # the address is the gang's headless Service's, which goes with rank 0's Pod
    service = cluster.api.get(f"{services_path(cluster.namespace)}/rota-12-1")
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["ownerReferences"][0]["uid"] == pods[0]["metadata"]["uid"]


def test_a_half_gpu_on_a_hami_node_is_bound_as_hamis_scheduler_binds_it(cluster):
    node = cluster.add_node("h", hami_gpus=8)
    backend = cluster.backend()
    assert backend.capabilities.fractional_gpu and backend.capabilities.memory_enforcement
    half = DeviceShare(2, 500, 40960)
    with HamiPlugin(cluster.api, {node}) as plugin:
        # two halves of the same device, one gang: the second waits for HAMi's device plugin
        # to release the node lock the first one's bind took
        handle = backend.launch(a_job("13", gpus=0.5, replicas=2),
                                on((node, (half,)), (node, (half,))), SPEC, attempt=0)
        wait(lambda: len(plugin.served) == 2, "the device plugin to serve both Pods")
    for rank in (0, 1):
        annotations = pod(cluster, f"rota-13-0-{rank}")["metadata"]["annotations"]
        # as HAMi's scheduler writes them for this device, then its device plugin after
        # allocating: to-allocate emptied, phase success
        assert annotations[hami.ALLOCATED] == f"GPU-{node}-2,NVIDIA,40960,50:;"
        assert annotations[hami.ASSIGNED_NODE] == node
        assert annotations[hami.BIND_PHASE] == hami.PHASE_SUCCESS
        assert annotations[hami.TO_ALLOCATE] == ";;"
        assert annotations[hami.BIND_TIME].isdigit() and annotations[hami.ASSIGNED_TIME].isdigit()
    assert plugin.served == [f"{cluster.namespace}/rota-13-0-0", f"{cluster.namespace}/rota-13-0-1"]
    lock = (cluster.api.get(f"{NODES}/{node}")["metadata"].get("annotations") or {})
    assert hami.NODE_LOCK not in lock
    assert [r.devices for r in handle.replicas] == [(half,), (half,)]


def test_a_fractional_gpu_where_hami_does_not_run_is_refused_before_anything_is_made(cluster):
    node = cluster.add_node("p")
    backend = cluster.backend()
    assert not backend.capabilities.fractional_gpu
    with pytest.raises(BackendError, match="no HAMi device plugin"):
        backend.launch(a_job("14", gpus=0.5), on((node, (DeviceShare(0, 500, 40960),))), SPEC,
                       attempt=0)
    assert cluster.api.list(pods_path(cluster.namespace)).items == []


def test_a_job_without_an_image_is_refused_naming_the_field(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend(default_image=None)
    with pytest.raises(Exception, match="image"):
        backend.launch(a_job("15"), on((node, whole(0))), SPEC, attempt=0)
    assert cluster.api.list(pods_path(cluster.namespace)).items == []


def test_cancel_deletes_the_pods_with_the_grace_given(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    handle = backend.launch(a_job("16"), on((node, whole(0))), SPEC, attempt=0)
    seen = watch_deletion(cluster, "rota-16-0-0", lambda: backend.cancel(handle, 7.5))
    assert seen == 8  # rounded up to whole seconds
    wait(lambda: state(backend, handle) is ReplicaState.EXITED, "the Pod to be gone")
    assert backend.poll([handle])[0].replicas[0].reason == "cancelled"


def test_the_checkpoint_signal_deletes_the_pods_with_their_own_grace_period(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    handle = backend.launch(a_job("17", grace_s=45), on((node, whole(0))), SPEC, attempt=0)
    assert pod(cluster, "rota-17-0-0")["spec"]["terminationGracePeriodSeconds"] == 45
    seen = watch_deletion(cluster, "rota-17-0-0",
                          lambda: backend.signal(handle, signal.SIGUSR1))
    assert seen == 45


def test_a_failed_container_is_a_failed_process_with_its_exit_code(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    handle = backend.launch(a_job("18"), on((node, whole(0))), SPEC, attempt=0)
    wait(lambda: pod(cluster, "rota-18-0-0")["status"].get("phase") == "Running", "Running")
    finish(cluster, "rota-18-0-0", "Failed", 3, "Error")
    status = wait(lambda: (s := backend.poll([handle])[0]).state is ReplicaState.EXITED and s,
                  "the exit to be seen")
    assert status.exit_codes == (3,) and status.finished_at is not None


def finish(cluster, name: str, phase: str, code: int, reason: str) -> None:
    """What a kubelet writes when the container ends (kwok leaves a Pod's status alone once
    it runs, so the test writes it)."""
    cluster.api.request("PATCH", f"{pods_path(cluster.namespace)}/{name}/status", body={
        "status": {"phase": phase, "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": False,
            "restartCount": 0, "state": {"terminated": {
                "exitCode": code, "reason": reason, "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:01:00Z"}}}]}},
        content_type="application/merge-patch+json")


def test_a_node_that_goes_not_ready_loses_its_replicas(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend(node_lost_after_s=0.0)  # no grace (the next test has one)
    handle = backend.launch(a_job("19"), on((node, whole(0))), SPEC, attempt=0)
    make_not_ready(cluster, node)
    status = wait(lambda: (s := backend.poll([handle])[0]).state is ReplicaState.LOST and s,
                  "the replica to be lost")
    assert f"node {node} is not Ready" in status.replicas[0].reason
    problem = wait(lambda: next(n for n in backend.inventory() if n.name == node).problem,
                   "the node's problem")
    assert "Ready is False" in problem


def test_a_node_not_ready_for_less_than_the_grace_keeps_its_replicas_running(cluster):
    # a blip (a kubelet that misses its heartbeats for a minute) does not cost a running job
    # its run: only a node NotReady for node_lost_after_s loses its replicas
    node = cluster.add_node("a")
    backend = cluster.backend(node_lost_after_s=120.0)
    handle = backend.launch(a_job("21"), on((node, whole(0))), SPEC, attempt=0)
    make_not_ready(cluster, node, since=time.time() - 30)
    wait(lambda: next(n for n in backend.inventory() if n.name == node).problem,
         "the node's problem")
    assert state(backend, handle) is ReplicaState.RUNNING
    make_not_ready(cluster, node, since=time.time() - 150)
    status = wait(lambda: (s := backend.poll([handle])[0]).state is ReplicaState.LOST and s,
                  "the replica to be lost once the grace is over")
    assert f"node {node} is not Ready" in status.replicas[0].reason


def make_not_ready(cluster, node: str, since: float | None = None) -> None:
    """Take kwok's annotation off (kwok then leaves the node's status alone) and report the
    Ready condition False, as a kubelet that lost its runtime would (``since``: its
    ``lastTransitionTime``)."""
    cluster.api.merge_patch(f"{NODES}/{node}", {"metadata": {"annotations": {
        "kwok.x-k8s.io/node": None}}})
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                 "message": "container runtime is down"}
    if since is not None:
        condition["lastTransitionTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                        time.gmtime(since))
    cluster.api.request("PATCH", f"{NODES}/{node}/status",
                        body={"status": {"conditions": [condition]}},
                        content_type="application/strategic-merge-patch+json")


def test_a_pod_evicted_by_a_drain_is_lost_with_the_eviction(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    handle = backend.launch(a_job("20"), on((node, whole(0))), SPEC, attempt=0)
    wait(lambda: pod(cluster, "rota-20-0-0")["status"].get("phase") == "Running", "Running")
    cluster.api.merge_patch(f"{NODES}/{node}", {"spec": {"unschedulable": True}})
    cluster.api.create(f"{pods_path(cluster.namespace)}/rota-20-0-0/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "rota-20-0-0", "namespace": cluster.namespace}})
    status = wait(lambda: (s := backend.poll([handle])[0]).state is ReplicaState.LOST and s,
                  "the replica to be lost")
    assert "was evicted" in status.replicas[0].reason
    problem = next(n for n in backend.inventory() if n.name == node).problem
    assert problem == "spec.unschedulable is true"


def test_a_new_backend_adopts_a_running_handle(cluster):
    node = cluster.add_node("a")
    handle = cluster.backend().launch(a_job("21"), on((node, whole(1))), SPEC, attempt=2)
    wait(lambda: pod(cluster, "rota-21-2-0")["status"].get("phase") == "Running", "Running")
    later = cluster.backend()
    assert later.adopt(handle).state is ReplicaState.RUNNING
    with pytest.raises(BackendError, match="foreign_handle|backend 'local'"):
        later.adopt(type(handle)("local", "21", "x", handle.replicas))
