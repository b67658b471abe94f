"""Each project's Pods in its own namespace (``--kube-namespace <prefix>-{project}``), so that
the namespace's quotas, policies and Pod Security apply to them: two projects' jobs land in
their two namespaces (both enforcing the restricted profile), are not counted as other
schedulers' Pods, are adopted by a control plane killed with SIGKILL and started again, and
a cancel deletes the Pods where they are."""

from __future__ import annotations

import functools
from typing import Iterator

import pytest

from kubekit import found
from rota.backends.kube.api import pods_path
from rota.backends.kube.names import check_namespace_rule, project_namespace
from rota.core import InvalidSpec
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)
PROJECTS = ("default", "vision")


@pytest.fixture
def project_namespaces(cluster) -> Iterator[dict[str, str]]:
    """``<test namespace>-<project>`` for each project, enforcing the restricted profile;
    deleted afterwards with their Pods."""
    made = {p: f"{cluster.namespace}-{p}" for p in PROJECTS}
    for name in made.values():
        cluster.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name,
                         "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    yield made
    for name in made.values():
        cluster.api.request("DELETE", f"{pods_path(name)}", query={"gracePeriodSeconds": 0})
        cluster.api.delete(f"/api/v1/namespaces/{name}")


def running(server: KubeServer, job_id: str) -> dict | None:
    job = server.json("show", job_id)
    return job if job["state"] == "running" else None


def pod_of(cluster, namespace: str, job: dict) -> dict | None:
    return found(cluster.api, f"{pods_path(namespace)}/rota-{job['id']}-{job['attempts']}-0")


def test_two_projects_run_in_their_namespaces_and_are_adopted_after_a_kill(
        cluster, project_namespaces, up, tmp_path):
    node = cluster.add_node("plain", gpus=4)
    server = up("--kube-namespace", f"{cluster.namespace}-{{project}}")
    server.ok("project", "create", "vision")
    (tmp_path / "queues.yaml").write_text("queues:\n  - name: shared\n"
                                          "    projects: [default, vision]\n")
    server.ok("queue", "apply", str(tmp_path / "queues.yaml"))
    ids = {p: server.json("run", "--project", p, "--queue", "shared", "--gpus", "1", "--",
                          "sleep", "1000")["id"] for p in PROJECTS}
    jobs = {p: wait(lambda j=j: running(server, j), f"job {j} to run") for p, j in ids.items()}
    uids = {}
    for project, job in jobs.items():
        pod = pod_of(cluster, project_namespaces[project], job)
        assert pod is not None and pod["spec"]["nodeName"] == node, project
        uids[project] = pod["metadata"]["uid"]
    assert not pod_of(cluster, cluster.namespace, jobs["default"])  # not in --kube-namespace's

    server.kill9()
    server.start()
    wait(lambda: all(running(server, j) for j in ids.values()), "both jobs adopted, running")
    for project, job in jobs.items():
        assert pod_of(cluster, project_namespaces[project], job)["metadata"]["uid"] == \
            uids[project], f"{project}'s Pod was made again"
    (seen,) = [n for n in server.json("nodes") if n["name"] == node]
    assert not seen["foreign"]  # rota's own Pods, wherever they are, hold nothing foreign
    assert len(seen["gpus"]) == 4

    server.ok("cancel", ids["vision"])
    wait(lambda: pod_of(cluster, project_namespaces["vision"], jobs["vision"]) is None,
         "the cancelled job's Pod deleted in its namespace")
    assert running(server, ids["default"])


@pytest.mark.parametrize("rule, project, field", [
    pytest.param("rota-{proj}", "vision", "namespace", id="unknown-placeholder"),
    pytest.param("Rota", "vision", "namespace", id="upper-case"),
    pytest.param("rota-{project}", "Vision_1", "project", id="project-not-a-name"),
])
def test_a_rule_or_project_that_makes_no_namespace_is_refused_naming_it(rule, project, field):
    with pytest.raises(InvalidSpec) as refused:
        project_namespace(check_namespace_rule(rule), project)
    assert refused.value.field == field


def test_rota_up_refuses_a_rule_that_makes_no_namespace(cluster, tmp_path):
    from rotaup import up_once
    server = KubeServer(tmp_path, cluster, "--kube-namespace", "rota-{proj}")
    done = up_once(server.env, *server.argv()[server.argv().index("up") + 1:])
    assert done.returncode != 0 and "--kube-namespace" in done.stderr
    assert "neither a namespace name nor a rule" in done.stderr


def test_a_launch_where_the_projects_namespace_is_missing_or_no_name_says_so(cluster):
    from rota.backends.base import BackendError, LaunchSpec
    from rota.core import (
        DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
    )
    node = cluster.add_node("plain", gpus=2)
    backend = cluster.backend(namespace=f"{cluster.namespace}-{{project}}")
    placement = Placement((ReplicaPlacement(node, (DeviceShare(0, 1000, 81920),)),))
    spec = LaunchSpec(("sleep", "1000"), "", {"ROTA_TOKEN": "rota_secret"})

    def job(project: str) -> Job:
        return Job(JobId("3"), project, "q", ReplicaRequest(1000, 1024, GpuRequest(1)))
    with pytest.raises(BackendError) as missing:
        backend.launch(job("absent"), placement, spec, attempt=0)
    assert (f"namespace {cluster.namespace}-absent of project absent may not exist: rota does "
            "not create namespaces") in str(missing.value)
    with pytest.raises(InvalidSpec) as no_name:
        backend.launch(job("Vision_1"), placement, spec, attempt=0)
    assert no_name.value.field == "project"
    assert backend.recover(job("Vision_1"), placement, 0) is None
