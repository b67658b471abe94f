"""The test fixture is a real Kubernetes: through the official client, a kwok node with eight
GPUs (GPU Feature Discovery labels, HAMi's register annotation) becomes Ready; a Pod for the
scheduler ``rota`` waits unbound until it is bound with the Binding subresource, kwok runs it,
and a delete with a grace period reaches a watch as Kubernetes sends it. Nodes read back
from the server translate as rota reads them, cordoned and NotReady ones included."""

from __future__ import annotations

import functools
import json
import uuid

from kubekit import A100, A100_MIB, KWOK_NODE, hami_devices
from rota.backends.kube import hami
from rota.backends.kube.nodes import Grain, NodeProblem, Problem, node_from_kube
from waiting import poll

wait = functools.partial(poll, timeout=60, every=0.1)


def make_gpu_node(core, name: str) -> None:
    from kubernetes import client
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    core.create_node(client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            labels={"nvidia.com/gpu.product": A100, "nvidia.com/gpu.memory": str(A100_MIB),
                    "type": "kwok"},
            annotations={**KWOK_NODE,
                         hami.REGISTER: hami.encode_node_devices(hami_devices(8))}),
        status=client.V1NodeStatus(capacity=resources, allocatable=resources)))


def node_ready(core, name: str) -> bool:
    conditions = core.read_node(name).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def read_kube_node(core, name: str):
    """The Node as the API server sends it, read by rota."""
    return node_from_kube(json.loads(core.read_node(name, _preload_content=False).data))


def bind(core, namespace: str, pod: str, node: str) -> None:
    """POST pods/<pod>/binding. The answer is a Status, which the client's generated method
    cannot read into the Binding it expects, so it is taken unread."""
    from kubernetes import client
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod),
                            target=client.V1ObjectReference(api_version="v1", kind="Node",
                                                            name=node))
    response = core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
    assert response.status == 201


def test_a_pod_of_scheduler_rota_is_bound_run_and_deleted_with_grace(
        core, namespace, kwok_nodes):
    from kubernetes import client, watch
    node = f"kwok-gpu-{uuid.uuid4().hex[:8]}"
    kwok_nodes.append(node)
    make_gpu_node(core, node)
    wait(lambda: node_ready(core, node), f"kwok to make {node} Ready")

    # the Node as the API returns it reads as eight HAMi devices at device grain
    kube = read_kube_node(core, node)
    assert kube.grain is Grain.DEVICE and kube.node.schedulable and kube.gpu_allocatable == 8
    assert [d.uuid for d in kube.node.devices] == [f"GPU-a100-{i}" for i in range(8)]
    assert kube.node.labels["nvidia.com/gpu.product"] == A100

    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="smoke"),
        spec=client.V1PodSpec(scheduler_name="rota", containers=[client.V1Container(
            name="main", image="busybox",
            resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}))])))
    pod = core.read_namespaced_pod("smoke", namespace)
    assert pod.spec.node_name is None and pod.status.phase == "Pending"  # nobody else binds it

    bind(core, namespace, "smoke", node)
    running = wait(lambda: (p := core.read_namespaced_pod("smoke", namespace)).status.phase
                   == "Running" and p, "kwok to run the bound pod")
    assert running.spec.node_name == node

    stream = watch.Watch()
    seen = []
    core.delete_namespaced_pod("smoke", namespace, grace_period_seconds=30)
    for event in stream.stream(core.list_namespaced_pod, namespace,
                               resource_version=running.metadata.resource_version,
                               timeout_seconds=60):
        obj = event["object"]
        seen.append((event["type"], obj.metadata.deletion_grace_period_seconds,
                     obj.metadata.deletion_timestamp is not None))
        if event["type"] == "DELETED":
            stream.stop()
    # the delete is first announced with its grace period, then kwok removes the pod
    assert seen[0] == ("MODIFIED", 30, True)
    assert seen[-1][0] == "DELETED"


def test_cordoned_and_not_ready_nodes_read_as_unschedulable_from_the_server(core, kwok_nodes):
    from datetime import datetime, timezone
    node = f"kwok-gpu-{uuid.uuid4().hex[:8]}"
    kwok_nodes.append(node)
    make_gpu_node(core, node)
    wait(lambda: node_ready(core, node), f"kwok to make {node} Ready")
    assert read_kube_node(core, node).node.schedulable

    core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon
    assert [p.code for p in read_kube_node(core, node).problems] == [Problem.CORDONED]

    # kwok lets go of the node (or it would make it Ready again); then a kubelet's report
    core.patch_node(node, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}},
                           "spec": {"unschedulable": False}})
    now = datetime.now(timezone.utc).isoformat()
    core.patch_node_status(node, {"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "message": "container runtime is down", "lastHeartbeatTime": now,
        "lastTransitionTime": now}]}})
    kube = read_kube_node(core, node)
    assert not kube.node.schedulable
    assert kube.problems == (NodeProblem(
        Problem.NOT_READY, "Ready is False (KubeletNotReady: container runtime is down)"),)
