"""The deployment manifests (deploy/kubernetes) against the real API server: every object
passes server-side dry run, and the ServiceAccount they make, with only the rights they give
it, runs the backend through all it does (a gang on a HAMi node, a Pod offered and bound, a
Pod refused and told why, a cancel) and runs a command in its Pods (an exec through the API
server), while it is refused what it never needs.

The kustomization is kept plain (only ``resources``), so that the files applied here are
exactly what ``kubectl apply -k deploy/kubernetes`` sends. For the real run the objects are
made in the test's namespace instead of ``rota``, the cluster-wide ones named after it."""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from kubekit import HamiPlugin
from rota.backends.base import OFFER_LABEL, BackendError, LaunchSpec, ReplicaState
from rota.backends.kube.api import KubeApi, KubeError, pods_path
from rota.backends.kube.backend import KubeBackend, KubeConfig
from rota.backends.kube.streams import open_exec
from rota.core import DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, \
    ReplicaRequest
from streamkit import CONTAINER, Reader, exec_rule, once_kwok_knows, running_pod
from waiting import poll

wait = functools.partial(poll, timeout=60, every=0.1)
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
APPLY_PATCH = "application/apply-patch+yaml"
PLURALS = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
           "RoleBinding": "rolebindings", "Service": "services", "StatefulSet": "statefulsets",
           "Deployment": "deployments"}


def manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert set(kustomization) == {"apiVersion", "kind", "resources"}, \
        "a kustomization with transformers is not what this test applies"
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    return [doc for name in kustomization["resources"]
            for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def object_path(obj: dict[str, Any]) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    namespace = obj["metadata"].get("namespace")
    where = f"{base}/namespaces/{namespace}" if namespace else base
    return f"{where}/{PLURALS[obj['kind']]}/{obj['metadata']['name']}"


def apply(api: KubeApi, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """``kubectl apply --server-side`` of one object (``--dry-run=server`` with ``dry_run``)."""
    query = {"fieldManager": "rota-deploy-test", "force": "true"}
    if dry_run:
        query["dryRun"] = "All"
    return api.request("PATCH", object_path(obj), body=json.dumps(obj), query=query,
                       content_type=APPLY_PATCH)


def moved(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``obj`` in ``namespace`` instead of rota's, a cluster-wide one named after it."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    if "namespace" in meta:
        meta["namespace"] = namespace
    else:
        meta["name"] = f"{meta['name']}-{namespace}"
    if obj["kind"] == "ClusterRoleBinding":
        obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{namespace}"
    for subject in obj.get("subjects", ()):
        subject["namespace"] = namespace
    return obj


def test_every_manifest_passes_server_side_dry_run(cluster):
    objects = manifests()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                            "RoleBinding", "Service", "StatefulSet", "Service", "Deployment"])
    for obj in objects:  # as written, in the namespace rota (which a dry run needs to exist)
        if "namespace" in obj["metadata"]:
            obj = moved(obj, cluster.namespace)
        answer = apply(cluster.api, obj, dry_run=True)
        assert answer["kind"] == obj["kind"] and answer["metadata"]["name"] == \
            obj["metadata"]["name"]
    with pytest.raises(KubeError):  # the server does check: a Deployment without a selector
        broken = moved(next(o for o in objects if o["kind"] == "Deployment"), cluster.namespace)
        del broken["spec"]["selector"]
        apply(cluster.api, broken, dry_run=True)


@pytest.fixture
def as_rota(cluster, kube_api) -> Iterator[KubeApi]:
    """A client of the manifests' ServiceAccount (impersonated), with their RBAC objects made
    for the test's namespace; the cluster-wide ones deleted afterwards."""
    from kubernetes import config as kube_config
    rbac = [moved(o, cluster.namespace) for o in manifests() if o["kind"] in
            ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")]
    for obj in rbac:
        apply(cluster.api, obj, dry_run=False)
    client = kube_config.new_client_from_config(config_file=os.environ["ROTA_TEST_KUBECONFIG"])
    client.set_default_header("Impersonate-User",
                              f"system:serviceaccount:{cluster.namespace}:rota")
    yield KubeApi(client)
    for obj in rbac:
        if "namespace" not in obj["metadata"]:
            cluster.api.delete(object_path(obj))


def allowed(api: KubeApi, namespace: str, verb: str, resource: str,
            subresource: str = "") -> bool:
    """What a SelfSubjectAccessReview of ``api``'s user says."""
    review = api.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": "",
                                        "resource": resource, "subresource": subresource}}})
    return review["status"]["allowed"]


def test_the_service_account_may_do_what_rota_does_and_no_more(cluster, as_rota):
    ns = cluster.namespace
    node = cluster.add_node("h", hami_gpus=4)
    backend = KubeBackend(KubeConfig(namespace=ns, default_image="busybox", pod_user="alice",
                                     node_selector=cluster.selector, lock_wait_s=30.0),
                          api=as_rota)
    try:
        half = DeviceShare(1, 500, 40960)
        with HamiPlugin(cluster.api, {node}) as plugin:  # node lock, annotations, bind
            handle = backend.launch(a_job("41", 0.5, 2), Placement((
                ReplicaPlacement(node, (half,)), ReplicaPlacement(node, (half,)))),
                LaunchSpec(("python", "train.py"), "", {"ROTA_TOKEN": "rota_secret"}),
                attempt=0)
            wait(lambda: len(plugin.served) == 2, "both Pods served")
        assert cluster.api.get(f"/api/v1/namespaces/{ns}/secrets/rota-41-0")  # the token's
        cluster.api.create(pods_path(ns), user_pod("offered", {"rota.dev/queue": "q"}))
        cluster.api.create(pods_path(ns), user_pod("no-queue", {}))
        offer = wait(lambda: next((o for o in backend.offers() if o.job.project == ns), None),
                     "the Pod to be offered")
        job = a_job("42", 1, 1, labels=((OFFER_LABEL, offer.key),))
        backend.launch(job, Placement((ReplicaPlacement(node, (DeviceShare(3, 1000,
                                                                           81920),)),)),
                       LaunchSpec((), ""), attempt=0)
        assert cluster.api.get(f"{pods_path(ns)}/offered")["spec"]["nodeName"] == node

        def refused() -> bool:
            backend.offers()  # writes the refusals of the Pods it sees
            pod = cluster.api.get(f"{pods_path(ns)}/no-queue")
            return any(c["type"] == "PodScheduled" and c["reason"] == "Unschedulable"
                       for c in pod["status"].get("conditions") or [])
        wait(refused, "the refusal written on the Pod")
        backend.cancel(handle, 5.0)
        wait(lambda: not any(p["metadata"]["name"].startswith("rota-41-")
                             for p in cluster.api.list(pods_path(ns)).items),
             "the gang's Pods deleted")
        # once its watch has seen them go, a poll sees the attempt ended and deletes its
        # Secret, as rota's account
        wait(lambda: backend.poll([handle])[0].state is not ReplicaState.RUNNING,
             "the backend to see the gang ended")
        wait(lambda: not cluster.api.list(f"/api/v1/namespaces/{ns}/secrets").items,
             "the attempt's Secret deleted after them")
    finally:
        backend.close()
    assert allowed(as_rota, ns, "get", "pods", "log")  # rota logs (kwok serves no logs)
    for subresource in ("exec", "portforward"):  # rota exec, rota shell, rota forward
        for verb in ("get", "create"):  # (a WebSocket is a GET, and needs create too)
            assert allowed(as_rota, ns, verb, "pods", subresource)
            assert not allowed(as_rota, "default", verb, "pods", subresource)
    assert not allowed(as_rota, "default", "create", "pods")  # its own namespace only
    assert not allowed(as_rota, ns, "get", "secrets")
    assert not allowed(as_rota, "", "delete", "nodes")


def test_the_service_account_runs_commands_in_its_namespaces_pods_only(cluster, as_rota,
                                                                       tmp_path):
    node = cluster.add_node("x")
    pod = running_pod(cluster, "replica", node)
    exec_rule(cluster, pod, str(tmp_path), {})

    def echo_as_rota() -> bytes:
        channel = open_exec(as_rota, cluster.namespace, pod, CONTAINER, ["echo", "as-rota"],
                            tty=False)
        try:
            return Reader(channel).read_all()
        finally:
            channel.close()
    assert once_kwok_knows(echo_as_rota, "an exec as rota's account") == b"as-rota\n"
    with pytest.raises(BackendError) as refused:  # elsewhere: refused before any Pod is looked up
        open_exec(as_rota, "default", pod, CONTAINER, ["true"], tty=False)
    assert refused.value.code == "forbidden" and "pods/exec" in str(refused.value)


def a_job(job_id: str, gpus: float, replicas: int, labels=()) -> Job:
    gpu = GpuRequest(1, share=int(gpus * 1000)) if gpus < 1 else GpuRequest(int(gpus))
    return Job(id=JobId(job_id), project="vision", queue="research", replicas=replicas,
               request=ReplicaRequest(cpu_milli=1000, memory_mib=1024, gpu=gpu),
               labels=tuple(labels))


def user_pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"schedulerName": "rota", "containers": [{
                "name": "main", "image": "busybox", "command": ["sleep", "1"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
