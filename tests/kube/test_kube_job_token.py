"""The attempt's API token reaches its Pods through a Secret of the attempt, never as a value in
the Pod: the Pod as the API server stores it holds no trace of the token, the Secret holds the
attempt's real token (the API accepts it as the job's) and is the Pods' controller, and the
Secret is gone once the job ends, whether it finishes or is cancelled, leaving a finished Pod
for its log."""

from __future__ import annotations

import base64
import functools
import json

import pytest

from kubekit import found
from rota.backends.kube.api import pods_path
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)


def running(server: KubeServer, job_id: str) -> dict | None:
    job = server.json("show", job_id)
    return job if job["state"] == "running" else None


def secret(cluster, name: str) -> dict | None:
    return found(cluster.api, f"/api/v1/namespaces/{cluster.namespace}/secrets/{name}")


def started(server: KubeServer, cluster, *command: str) -> tuple[dict, dict, str]:
    """A job of one GPU, running: its view, its Pod as stored, and the token of its Secret."""
    job_id = server.json("run", "--gpus", "1", "--", *command)["id"]
    job = wait(lambda: running(server, job_id), f"job {job_id} to run")
    name = f"rota-{job_id}-{job['attempts']}"
    pod = cluster.api.get(f"{pods_path(cluster.namespace)}/{name}-0")
    stored = wait(lambda: secret(cluster, name), f"the Secret {name}")
    return job, pod, base64.b64decode(stored["data"]["token"]).decode()


def test_the_token_is_in_the_attempts_secret_and_nowhere_in_its_pod(cluster, up):
    cluster.add_node("plain", gpus=2)
    server = up()
    job, pod, token = started(server, cluster, "sleep", "1000")

    assert len(token) >= 20
    assert token not in json.dumps(pod)
    (container,) = pod["spec"]["containers"]
    (variable,) = [v for v in container["env"] if v["name"] == "ROTA_TOKEN"]
    assert variable == {"name": "ROTA_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": f"rota-{job['id']}-{job['attempts']}", "key": "token"}}}
    with server.client(token) as client:  # the attempt's own token: it may report for the job
        assert client.post(f"/v1/jobs/{job['id']}/checkpoint").status_code == 200
    stored = secret(cluster, f"rota-{job['id']}-{job['attempts']}")["metadata"]
    assert [(o["kind"], o["uid"], o.get("controller")) for o in pod["metadata"][
        "ownerReferences"]] == [("Secret", stored["uid"], True)]
    assert "ownerReferences" not in stored


def test_the_secret_is_deleted_when_the_job_finishes_or_is_cancelled(cluster, up):
    cluster.add_node("plain", gpus=2)
    server = up()
    done, pod, _ = started(server, cluster, "true")
    cancelled, _, _ = started(server, cluster, "sleep", "1000")

    name = pod["metadata"]["name"]  # the kubelet's word that its container exited with 0
    cluster.api.request("PATCH", f"{pods_path(cluster.namespace)}/{name}/status", body={
        "status": {"phase": "Succeeded", "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": False,
            "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        }]}}, content_type="application/merge-patch+json")
    wait(lambda: server.json("show", done["id"])["state"] == "succeeded", "the job to succeed")
    wait(lambda: secret(cluster, f"rota-{done['id']}-{done['attempts']}") is None,
         "the finished job's Secret to be deleted")
    assert cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")  # kept for its log
    wait(lambda: not cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")["metadata"].get(
        "ownerReferences"), "the garbage collector to orphan the finished Pod")

    server.ok("cancel", cancelled["id"])
    wait(lambda: secret(cluster, f"rota-{cancelled['id']}-{cancelled['attempts']}") is None,
         "the cancelled job's Secret to be deleted")


def test_a_gang_whose_pods_cannot_be_made_leaves_no_secret_behind(cluster):
    from rota.backends.base import BackendError, LaunchSpec
    from rota.core import (
        DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
    )
    node = cluster.add_node("plain", gpus=2)
    cluster.api.create(f"/api/v1/namespaces/{cluster.namespace}/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod"},
        "spec": {"hard": {"pods": "1"}}})
    wait(lambda: (found(cluster.api, f"/api/v1/namespaces/{cluster.namespace}/resourcequotas/"
                                     "one-pod") or {}).get("status", {}).get("hard"),
         "the quota to be in force")
    job = Job(JobId("9"), "p", "q", ReplicaRequest(1000, 1024, GpuRequest(1)), replicas=2)
    placement = Placement(tuple(ReplicaPlacement(node, (DeviceShare(k, 1000, 81920),))
                                for k in (0, 1)))
    with pytest.raises(BackendError) as refused:  # the quota admits rank 0's Pod only
        cluster.backend().launch(job, placement, LaunchSpec(("sleep", "1000"), "", {
            "ROTA_TOKEN": "rota_secret"}), attempt=0)
    assert "exceeded quota" in str(refused.value)
    assert secret(cluster, "rota-9-0") is None
