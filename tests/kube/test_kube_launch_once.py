"""No double launch and no half-bound gang, whatever step a control plane is killed at.

A control plane in a subprocess launches a gang of two Pods on two HAMi nodes, and kills
itself with SIGKILL right after its k-th change to the cluster: the attempt's Secret (the
Pods' controller) created, the two Pods created, the Service, the node lock of rank 0, its bind
annotations, its bind, then the same for rank 1 (ten changes; after the tenth, the launch is
complete but its handle was never recorded).
A fresh backend then launches the same attempt (what a restarted control loop does for a job
it finds bound but without a handle): the gang ends bound whole, every Pod the dead process
had created is kept (same uid: nothing is created twice), and there is one Service. Asked only
to find the attempt (``recover``, what a cancel does), a gang of which no Pod was bound is
removed, and one that was bound in part is completed.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys

import pytest

from kubekit import HamiPlugin
from rota.backends.kube.api import pods_path, services_path
from rota.backends.base import LaunchSpec
from rota.core import (
    DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
)
from waiting import poll

wait = functools.partial(poll, timeout=60, every=0.1)
CHANGES = 10

DYING_PLANE = """
import json, os, signal, sys
from rota.backends.base import LaunchSpec
from rota.backends.kube.api import KubeApi, connect
from rota.backends.kube.backend import KubeBackend, KubeConfig
from rota.core import DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest

kubeconfig, namespace, selector, nodes, die_after = sys.argv[1:6]

class Dying(KubeApi):
    changes = 0
    def request(self, method, path, *args, **kwargs):
        answer = super().request(method, path, *args, **kwargs)
        if method != "GET":
            Dying.changes += 1
            if Dying.changes == int(die_after):
                os.kill(os.getpid(), signal.SIGKILL)
        return answer

backend = KubeBackend(KubeConfig(namespace=namespace, default_image="busybox",
                                 node_selector=selector), api=Dying(connect(kubeconfig)))
job = Job(JobId("7"), "p", "q", ReplicaRequest(1000, 1024, GpuRequest(1)), replicas=2)
placement = Placement(tuple(ReplicaPlacement(n, (DeviceShare(0, 1000, 81920),))
                            for n in nodes.split(",")))
backend.launch(job, placement, LaunchSpec(("sleep", "1000"), ""), attempt=0)
"""

JOB = Job(JobId("7"), "p", "q", ReplicaRequest(1000, 1024, GpuRequest(1)), replicas=2)
SPEC = LaunchSpec(("sleep", "1000"), "")


def placement(nodes: list[str]) -> Placement:
    return Placement(tuple(ReplicaPlacement(n, (DeviceShare(0, 1000, 81920),)) for n in nodes))


def die_launching(cluster, nodes: list[str], after: int) -> None:
    plane = subprocess.run([sys.executable, "-c", DYING_PLANE, os.environ["ROTA_TEST_KUBECONFIG"],
                            cluster.namespace, cluster.selector, ",".join(nodes), str(after)],
                           timeout=120)
    assert plane.returncode == -signal.SIGKILL, "the control plane was not killed"


def pods_now(cluster) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in cluster.api.list(pods_path(cluster.namespace)).items}


@pytest.fixture
def two_hami_nodes(cluster):
    nodes = [cluster.add_node("h0", hami_gpus=1), cluster.add_node("h1", hami_gpus=1)]
    with HamiPlugin(cluster.api, set(nodes)):
        yield nodes


@pytest.mark.parametrize("after", range(1, CHANGES + 1))
def test_a_launch_killed_after_any_change_is_completed_without_making_anything_twice(
        cluster, two_hami_nodes, after):
    die_launching(cluster, two_hami_nodes, after)
    before = {name: p["metadata"]["uid"] for name, p in pods_now(cluster).items()}
    assert len(before) == min(after - 1, 2)  # the Secret comes first

    handle = cluster.backend().launch(JOB, placement(two_hami_nodes), SPEC, attempt=0)
    pods = pods_now(cluster)
    assert sorted(pods) == ["rota-7-0-0", "rota-7-0-1"]
    assert [pods[f"rota-7-0-{r}"]["spec"].get("nodeName") for r in (0, 1)] == two_hami_nodes
    for name, uid in before.items():
        assert pods[name]["metadata"]["uid"] == uid, f"{name} was made twice"
    assert [r.ref["uid"] for r in handle.replicas] == [
        pods[f"rota-7-0-{r}"]["metadata"]["uid"] for r in (0, 1)]
    services = cluster.api.list(services_path(cluster.namespace)).items
    assert [s["metadata"]["name"] for s in services] == ["rota-7-0"]


@pytest.mark.parametrize("after, outcome", [
    pytest.param(1, "removed", id="secret-only"),
    pytest.param(3, "removed", id="created-none-bound"),
    pytest.param(6, "removed", id="locked-and-annotated-none-bound"),
    pytest.param(7, "completed", id="rank-0-bound"),
    pytest.param(9, "completed", id="rank-1-annotated"),
])
def test_an_attempt_found_after_a_kill_is_removed_or_completed_never_half_bound(
        cluster, two_hami_nodes, after, outcome):
    die_launching(cluster, two_hami_nodes, after)
    backend = cluster.backend()
    found = backend.recover(JOB, placement(two_hami_nodes), 0)
    if outcome == "removed":
        assert found is None
        wait(lambda: not pods_now(cluster), "the unbound Pods to be gone")
        assert not cluster.api.list(f"/api/v1/namespaces/{cluster.namespace}/secrets").items
    else:
        assert found is not None
        bound = [p["spec"].get("nodeName") for p in pods_now(cluster).values()]
        assert sorted(bound) == sorted(two_hami_nodes)
    json.dumps(found.to_dict() if found else None)  # a handle that can be recorded
