"""rota's Pods meet Pod Security's ``restricted`` profile: a namespace labelled
``pod-security.kubernetes.io/enforce=restricted`` admits them (the API server's PodSecurity
admission, on by default, refuses in the same namespace a Pod without that security context),
each running as its owner's account, or as ``--kube-uid`` when it has none or it is root's."""

from __future__ import annotations

import functools

import pytest

from rota.backends.base import LaunchSpec, RunAs
from rota.backends.kube.api import KubeError, pods_path
from rota.core import DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest
from rotaup import up_once
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)
ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture
def restricted(cluster) -> str:
    """The test's namespace, enforcing the restricted profile."""
    cluster.api.merge_patch(f"/api/v1/namespaces/{cluster.namespace}",
                            {"metadata": {"labels": {ENFORCE: "restricted"}}})
    return cluster.namespace


def plain_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "1"]}]}}


def a_job(job_id: str) -> Job:
    return Job(JobId(job_id), "vision", "research", ReplicaRequest(1000, 1024, GpuRequest(1)))


@pytest.mark.parametrize("run_as, ids", [
    pytest.param(None, (1000, 1000, None), id="no-account"),
    pytest.param(RunAs("root", 0, 0), (1000, 1000, None), id="root"),
    pytest.param(RunAs("alice", 1500, 1600, (1700,)), (1500, 1600, [1700]), id="alice"),
])
def test_a_restricted_namespace_admits_rotas_pods_and_refuses_a_plain_one(
        cluster, restricted, run_as, ids):
    with pytest.raises(KubeError) as refused:  # the admission is on: this one is not admitted
        cluster.api.create(pods_path(restricted), plain_pod("plain"))
    assert refused.value.status == 403 and "PodSecurity" in refused.value.message

    node = cluster.add_node("plain", gpus=2)
    handle = cluster.backend().launch(
        a_job("5"), Placement((ReplicaPlacement(node, (DeviceShare(0, 1000, 81920),)),)),
        LaunchSpec(("sleep", "1000"), "", run_as=run_as), attempt=0)
    pod = cluster.api.get(f"{pods_path(restricted)}/{handle.replicas[0].ref['name']}")
    assert pod["spec"]["nodeName"] == node
    security = pod["spec"]["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"],
            security.get("supplementalGroups")) == ids
    assert security["runAsNonRoot"] is True


def test_rota_up_runs_roots_jobs_as_the_uid_it_is_given(cluster, restricted, up):
    cluster.add_node("plain", gpus=2)
    server = up("--kube-uid", "4242")
    job_id = server.json("run", "--gpus", "1", "--", "sleep", "1000")["id"]
    job = wait(lambda: (j := server.json("show", job_id))["state"] == "running" and j,
               f"job {job_id} to run")
    pod = cluster.api.get(f"{pods_path(restricted)}/rota-{job_id}-{job['attempts']}-0")
    security = pod["spec"]["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (4242, 4242)


def test_a_uid_of_root_for_the_pods_is_refused_naming_the_option(cluster, tmp_path):
    server = KubeServer(tmp_path, cluster, "--kube-uid", "0")
    done = up_once(server.env, *server.argv()[server.argv().index("up") + 1:])
    assert done.returncode != 0
    assert "--kube-uid" in done.stderr and "uid 0" in done.stderr
