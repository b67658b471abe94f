"""The Pod of one replica: its name, scheduler, labels, environment, resources and, on a HAMi
node, HAMi's annotations as HAMi's scheduler writes them; the real API server accepts it
(server-side dry run), and refuses nothing rota writes."""

from __future__ import annotations

import pytest

from kubekit import hami_devices, node_object
from rota.backends.kube import hami
from rota.backends.kube.nodes import node_from_kube
from rota.backends.kube.podinfo import pod_info
from rota.backends.kube.pods import ReplicaPod, headless_service, replica_pod, service_name
from rota.core import (
    DeviceShare, GpuRequest, InvalidSpec, Job, JobId, ReplicaPlacement, ReplicaRequest,
)

HAMI_NODE = node_from_kube(node_object(
    "gpu-h", gpus=80, hami_register=hami.encode_node_devices(hami_devices(8))))
PLAIN_NODE = node_from_kube(node_object("gpu-p", gpus=8))


def a_job(gpu: GpuRequest = GpuRequest(1), replicas: int = 1, grace_s: float = 30.0) -> Job:
    return Job(id=JobId("17"), project="vision", queue="research", replicas=replicas,
               request=ReplicaRequest(cpu_milli=4500, memory_mib=16384, gpu=gpu), grace_s=grace_s)


def a_pod(job: Job, node=PLAIN_NODE, devices=(DeviceShare(0, 1000, 81920),), rank: int = 0,
          env=None, **more) -> dict:
    spec = ReplicaPod(job=job, attempt=2, rank=rank,
                      placement=ReplicaPlacement(node.node.name, tuple(devices)), node=node,
                      image="python:3.12", command=("python", "train.py"), namespace="team-a",
                      master_port=29500, env={"LR": "0.1"} if env is None else env,
                      now_s=1_780_000_000.5, **more)
    return replica_pod(spec)


def test_a_whole_gpu_replica_on_a_plain_node():
    pod = a_pod(a_job(), workdir="/work")
    assert pod["metadata"]["name"] == "rota-17-2-0"
    assert pod["metadata"]["labels"] == {
        "rota.dev/job": "17", "rota.dev/attempt": "2", "rota.dev/rank": "0",
        "rota.dev/queue": "research", "rota.dev/project": "vision"}
    # the cluster autoscaler may evict it (rota requeues the job); no controller given here
    assert pod["metadata"]["annotations"] == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    assert "ownerReferences" not in pod["metadata"]
    spec = pod["spec"]
    assert spec["schedulerName"] == "rota" and "nodeName" not in spec
    assert (spec["restartPolicy"], spec["terminationGracePeriodSeconds"]) == ("Never", 30)
    # one replica: no headless Service to name it, so no subdomain, and itself as rank 0
    assert spec["hostname"] == "rota-17-2-0" and "subdomain" not in spec
    (container,) = spec["containers"]
    assert container["command"] == ["python", "train.py"] and container["workingDir"] == "/work"
    assert container["resources"] == {
        "requests": {"cpu": "4500m", "memory": "16384Mi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"}}
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "LR": "0.1", "ROTA_JOB_ID": "17", "ROTA_REPLICA_RANK": "0", "ROTA_WORLD_SIZE": "1",
        "ROTA_MASTER_ADDR": "127.0.0.1", "ROTA_MASTER_PORT": "29500",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "0",
        "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "0"}


def test_a_half_gpu_on_a_hami_node_carries_hamis_annotations_and_label():
    job = a_job(GpuRequest(1, share=500, memory_mib=40960))
    pod = a_pod(job, node=HAMI_NODE, devices=(DeviceShare(3, 500, 40960),))
    assert pod["metadata"]["annotations"] == {
        "hami.io/vgpu-node": "gpu-h",
        "hami.io/vgpu-time": "1780000000",
        "hami.io/vgpu-devices-to-allocate": "GPU-a100-3,NVIDIA,40960,50:;",
        "hami.io/vgpu-devices-allocated": "GPU-a100-3,NVIDIA,40960,50:;",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
    }
    assert pod["metadata"]["labels"]["hami.io/vgpu-node"] == "gpu-h"
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "1"}  # one device for HAMi's plugin
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert (env["ROTA_GPU_SHARE"], env["ROTA_GPU_MEMORY_MIB"]) == ("0.5", "40960")
    assert not [k for k in env if k.startswith("CUDA_")]


def test_two_whole_gpus_on_a_hami_node_are_two_entries_of_one_container():
    pod = a_pod(a_job(GpuRequest(2)), node=HAMI_NODE,
                devices=(DeviceShare(0, 1000, 81920), DeviceShare(5, 1000, 81920)))
    assert pod["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] == \
        "GPU-a100-0,NVIDIA,81920,100:GPU-a100-5,NVIDIA,81920,100:;"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_a_replica_without_gpus_asks_for_none():
    pod = a_pod(a_job(GpuRequest(0)), devices=())
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "4500m", "memory": "16384Mi"}}


def test_the_gang_rank_and_world_size_and_the_grace_rounded_up():
    pod = a_pod(a_job(replicas=4, grace_s=12.2), rank=3)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert (pod["metadata"]["name"], env["ROTA_REPLICA_RANK"], env["ROTA_WORLD_SIZE"]) == (
        "rota-17-2-3", "3", "4")
    assert env["ROTA_MASTER_ADDR"] == "rota-17-2-0.rota-17-2.team-a.svc"
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("rota-17-2-3", "rota-17-2")
    assert pod["spec"]["terminationGracePeriodSeconds"] == 13
    # torchrun's names, from the same values: each Pod is a node of one process
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == (
        "rota-17-2-0.rota-17-2.team-a.svc", "29500", "3", "4")
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["NODE_RANK"]) == ("0", "1", "3")


def test_rotas_variables_win_over_the_jobs_own():
    pod = a_pod(a_job(), env={"ROTA_JOB_ID": "mine", "HOME": "/h"})
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert (env["ROTA_JOB_ID"], env["HOME"]) == ("17", "/h")


def test_the_jobs_own_torchrun_names_win_over_rotas_defaults():
    pod = a_pod(a_job(), env={"MASTER_PORT": "29999", "ROTA_MASTER_PORT": "1"})
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert (env["MASTER_PORT"], env["ROTA_MASTER_PORT"]) == ("29999", "29500")


def test_the_headless_service_selects_the_attempts_pods():
    service = headless_service(a_job(), 2, "team-a", 29500)
    assert service["metadata"]["name"] == service_name("17", 2) == "rota-17-2"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert service["spec"]["selector"] == {"rota.dev/job": "17", "rota.dev/attempt": "2",
                                           "rota.dev/queue": "research",
                                           "rota.dev/project": "vision"}


@pytest.mark.parametrize("kwargs, field", [
    ({"devices": (DeviceShare(0, 500, 40960),)}, "placement.devices"),  # plain node, a half
    ({"node": HAMI_NODE, "devices": (DeviceShare(9, 1000, 81920),)}, "placement.devices[0]"),
    ({"env": {"BAD-NAME": "x"}}, "env.BAD-NAME"),
])
def test_what_cannot_run_as_written_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(InvalidSpec) as err:
        a_pod(a_job(), **kwargs)
    assert err.value.field == field


def test_the_attempts_secret_is_the_pods_controller():
    # what kubectl drain looks for (a controller), so that it evicts the Pod without --force
    owner = {"apiVersion": "v1", "kind": "Secret", "name": "rota-17-2", "uid": "u-1",
             "controller": True}
    pod = a_pod(a_job(), controller=owner)
    assert pod["metadata"]["ownerReferences"] == [owner]


def test_a_job_id_that_makes_no_pod_name_is_refused():
    job = Job(id=JobId("Train_Big"), project="p", queue="q", request=ReplicaRequest())
    with pytest.raises(InvalidSpec, match="does not make a valid Pod name"):
        a_pod(job, devices=())


def test_the_api_server_accepts_the_pods_and_the_service(core, namespace):
    """Server-side dry run: validation and admission of the real API server, nothing stored."""
    half = a_pod(a_job(GpuRequest(1, share=500)), node=HAMI_NODE,
                 devices=(DeviceShare(3, 500, 40960),))
    for manifest in (a_pod(a_job()), half, a_pod(a_job(GpuRequest(0)), devices=())):
        manifest["metadata"]["namespace"] = namespace
        created = core.create_namespaced_pod(namespace, manifest, dry_run="All")
        assert created.spec.scheduler_name == "rota" and created.spec.node_name is None
        assert created.metadata.annotations == (manifest["metadata"]["annotations"] or None)
    service = headless_service(a_job(), 2, namespace, 29500)
    assert core.create_namespaced_service(namespace, service, dry_run="All").spec.cluster_ip \
        == "None"
    assert core.list_namespaced_pod(namespace).items == []  # a dry run stores nothing


def test_a_service_replica_listens_on_the_port_its_annotation_names():
    pod = a_pod(a_job(), port=8000)
    assert pod["metadata"]["annotations"] == {
        "rota.dev/port": "8000", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["ROTA_PORT"] == "8000"
    info = pod_info({**pod, "status": {"phase": "Running", "podIP": "10.1.2.3"}})
    assert (info.ip, info.annotations["rota.dev/port"]) == ("10.1.2.3", "8000")
    assert "ROTA_PORT" not in {e["name"] for e in a_pod(a_job())["spec"]["containers"][0]["env"]}
