"""One ``rota up --backend slurm,kubernetes`` (and ``kubernetes,slurm``) over the Slurm
fixture's nodes, ``node1`` of which is also a kwok node of the Kubernetes fixture: ``node1``
is one node in ``rota nodes``; a plain ``sbatch -w node1 --gres=gpu:h100:4`` keeps a job that
asks Kubernetes for four GPUs off ``node1`` until it ends; a job runs through each engine; a
control plane killed with SIGKILL and started again adopts the jobs of both; a Slurm job
runs to its end, its log read through the control plane; and a Pod created with
``schedulerName: rota`` becomes a job that runs through Kubernetes."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from kubekit import kwok_node
from rota.backends.kube.api import NODES, KubeApi, pods_path
from slurmserver import SlurmServer
from waiting import poll

wait = functools.partial(poll, timeout=120, every=0.3)
SHARED = "node1"  # a node of the Slurm fixture, made a kwok node of the test too
KUBE = "rota.dev/engine-kubernetes"
SLURM = "rota.dev/engine-slurm"

ON_KUBE = """
name: on-kube
project: default
queue: default
selector: {rota.dev/engine-kubernetes: "true"}
entrypoint: sleep 3600
resources: {gpu: 4, cpu: 1, memory: 1Gi}
"""


class BothServer(SlurmServer):
    """``rota up --backend slurm,kubernetes``: the Slurm fixture's cluster, and the test's
    namespace and kwok nodes of the Kubernetes fixture."""

    def __init__(self, root: Path, slurm_env: dict[str, str], namespace: str,
                 backends: str) -> None:
        super().__init__(root, slurm_env, "--kubeconfig", os.environ["ROTA_TEST_KUBECONFIG"],
                         "--kube-namespace", namespace, "--kube-default-image", "busybox",
                         "--kube-node-selector", f"rota.dev/test-group={namespace}")
        at = self.flags.index("--backend")
        self.flags = (*self.flags[:at + 1], backends, *self.flags[at + 2:])
        self.backends = backends

    def state(self, job_id: str, *states: str) -> dict | None:
        job = self.job(job_id)
        return job if job["state"] in states else None

    def node(self, name: str) -> dict:
        (found,) = [n for n in self.json("nodes") if n["name"] == name]
        return found


# the first backend named gives a shared node its devices; the other's foreign work counts too
ORDERS = {"slurm,kubernetes": "H100-80GB", "kubernetes,slurm": "NVIDIA-A100-SXM4-80GB"}


@pytest.fixture(params=sorted(ORDERS))
def server(request, slurm_env, kube_api, namespace, kwok_nodes) -> Iterator[BothServer]:
    api = KubeApi(kube_api)
    api.create(NODES, kwok_node(SHARED, gpus=4, group=namespace))
    kwok_nodes.append(SHARED)
    root = Path(tempfile.mkdtemp(prefix="rota-several-"))
    plane = BothServer(root, slurm_env, namespace, request.param)
    plane.api = api  # type: ignore[attr-defined]
    try:
        plane.start()
        yield plane
    finally:
        plane.close()
        shutil.rmtree(root, ignore_errors=True)


def sbatch(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["sbatch", "--parsable", *args], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip().split(";")[0]


def test_one_node_one_inventory_a_job_on_each_engine_and_a_restart(server, slurm_env,
                                                                    namespace):
    def both_reach_node1() -> list[dict] | None:
        nodes = server.json("nodes")
        labels = [n["labels"] for n in nodes if n["name"] == SHARED]
        return nodes if labels and labels[0].get(KUBE) == labels[0].get(SLURM) == "true" \
            else None
    names = [n["name"] for n in wait(both_reach_node1, "node1 reached through both engines")]
    assert names.count(SHARED) == 1  # one node, one GPU inventory: the first one named's
    assert [g["model"] for g in server.node(SHARED)["gpus"]] == [ORDERS[server.backends]] * 4
    assert KUBE not in server.node("node2")["labels"]  # Slurm's only

    foreign = sbatch(slurm_env, "-w", SHARED, "--gres=gpu:h100:4", "--output=/dev/null",
                     "--wrap", "sleep 3600")
    try:
        wait(lambda: [f["gpus"] for f in server.node(SHARED)["foreign"]] == [4],
             "the plain sbatch job's four GPUs seen on node1")
        on_kube = server.json("submit", str(_file(server, "on-kube", ON_KUBE)))["id"]
        # Kubernetes reaches only node1, whose GPUs the sbatch job holds: it waits
        def held_back() -> dict | None:
            job = server.job(on_kube)
            return job if job["state"] == "pending" and job["wait_reasons"] else None
        held = wait(held_back, "the Kubernetes job held back, saying why")
        assert not held.get("placement")
        on_slurm = server.submit("--gpus", "1", "--", "sleep", "3600")
        ran = wait(lambda: server.state(on_slurm, "running"), "the Slurm job to run")
        assert ran["placement"][0]["node"] != SHARED  # node1's GPUs are all held
    finally:
        subprocess.run(["scancel", foreign], env=slurm_env, capture_output=True)
    ran = wait(lambda: server.state(on_kube, "running"), "the Kubernetes job to run on node1")
    assert [r["node"] for r in ran["placement"]] == [SHARED]
    pod = server.api.get(f"{pods_path(namespace)}/rota-{on_kube}-{ran['attempts']}-0")
    assert pod["spec"]["nodeName"] == SHARED
    assert not [j for j in server.slurm_jobs() if j.name.startswith(f"rota-{on_kube}-")]

    server.kill9()
    server.start()
    wait(lambda: all(server.state(j, "running") for j in (on_kube, on_slurm)),
         "both jobs adopted, running")
    uid = server.api.get(f"{pods_path(namespace)}/rota-{on_kube}-{ran['attempts']}-0")
    assert uid["metadata"]["uid"] == pod["metadata"]["uid"]  # the same Pod, not a new one
    # a Slurm job to its end: its batch script's report of the end and its log go back to Slurm
    short = server.submit("--gpus", "1", "--", "echo", "through", "slurm")
    done = wait(lambda: server.state(short, "succeeded", "failed"), "the short job to end")
    assert done["state"] == "succeeded", done
    assert "through slurm" in server.cli("logs", short, "-f")
    for job_id in (on_kube, on_slurm):
        server.cli("cancel", job_id)
    wait(lambda: all(server.state(j, "cancelled") for j in (on_kube, on_slurm)),
         "both jobs cancelled through their own engines")
    wait(lambda: not [j for j in server.slurm_jobs() if not j.phase.ended],
         "the Slurm job gone from Slurm")


def _file(server: BothServer, name: str, text: str) -> Path:
    path = server.work / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("server", ["slurm,kubernetes"], indirect=True)
def test_a_pod_created_for_rota_runs_through_kubernetes_beside_slurm(server, namespace):
    server.cli("project", "create", namespace)
    queues = server.work / "queues.yaml"
    queues.write_text("queues:\n  - name: research\n    quota:\n      any: {nominal: {gpu: 1}}\n")
    server.cli("queue", "apply", str(queues))
    server.api.create(pods_path(namespace), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "train", "labels": {"rota.dev/queue": "research"}},
        "spec": {"schedulerName": "rota", "containers": [{
            "name": "train", "image": "pytorch/pytorch:2.3.0", "command": ["python", "t.py"],
            "resources": {"limits": {"nvidia.com/gpu": "1"},
                          "requests": {"cpu": "1", "memory": "2Gi"}}}]}})

    def offered_job_runs() -> dict | None:
        jobs = [j for j in server.json("ps", "-A") if j["project"] == namespace]
        return jobs[0] if jobs and jobs[0]["state"] == "running" else None
    job = server.job(wait(offered_job_runs, "the Pod's job to run")["id"])
    assert [r["node"] for r in job["placement"]] == [SHARED]  # the one node Kubernetes reaches
    pod = server.api.get(f"{pods_path(namespace)}/train")
    assert pod["spec"]["nodeName"] == SHARED
    assert not [j for j in server.slurm_jobs() if j.name.startswith(f"rota-{job['id']}-")]
