"""Kubernetes told what a rota Slurm job holds on a node both engines share: a placeholder Pod.

``rota up --backend slurm,kubernetes`` runs a job through Slurm on ``node1``, which is also a
kwok node. A placeholder Pod ``rota-hold-<job>-<attempt>-0`` is bound to ``node1`` asking the
job's four GPUs, annotated with their indices; rota does not count it as foreign work. A real
kube-scheduler (the fixture's binary, started here under a scheduler name of its own, so that
it places only this test's Pod) then keeps a Pod that needs one GPU of ``node1`` Pending. After
SIGKILL and a restart, the placeholder is the same Pod (adopted, not made again) and one left
for an attempt that Slurm does not run is removed. Once the job is cancelled the placeholder
goes and kube-scheduler places the Pod on ``node1``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from rota.backends.kube.api import pods_path
from rota.backends.kube.holds import LABEL_HOLD_FOR
from rota.backends.slurm.attempts import instance
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
from test_slurm_and_kubernetes import SHARED, _file, sbatch, server, wait  # noqa: F401

SCHEDULER = "rota-test-holds"

ON_SLURM = """
name: on-slurm
project: default
queue: default
selector: {rota.dev/engine-slurm: "true"}
entrypoint: sleep 3600
resources: {gpu: 4, gpu_model: "*H100*", cpu: 1, memory: 1Gi}
"""


@pytest.fixture
def kube_scheduler() -> Iterator[None]:
    """kube-scheduler with one profile, ``SCHEDULER``: it places the Pods that name it only."""
    binary = Path(os.environ.get("ROTA_KUBE_BIN", "")) / "kube-scheduler"
    if not binary.exists():
        pytest.fail(f"no kube-scheduler at {binary}: run .ci/kube")
    work = Path(tempfile.mkdtemp(prefix="rota-holds-scheduler-"))
    config = work / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {os.environ['ROTA_TEST_KUBECONFIG']}}}\n"
        "leaderElection: {leaderElect: false}\n"
        f"profiles: [{{schedulerName: {SCHEDULER}}}]\n")
    with open(work / "log", "wb") as log:
        process = subprocess.Popen([str(binary), "--config", str(config), "--secure-port", "0"],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(30)


def _other_pod(name: str) -> dict:
    """A Pod of another scheduler that needs one GPU of ``node1``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "schedulerName": SCHEDULER,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [SHARED]}]}]}}},
        "containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}


def _orphan(job_id: str, attempt: int) -> dict:
    """A placeholder Pod as a control plane killed before its ``sbatch`` leaves it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"rota-hold-{job_id}-{attempt}-0",
        "labels": {"rota.dev/job": job_id, "rota.dev/attempt": str(attempt),
                   "rota.dev/rank": "0", LABEL_HOLD_FOR: "slurm"},
        "annotations": {"rota.dev/devices": "0"}}, "spec": {
        "nodeName": SHARED, "containers": [{"name": "hold", "image": "busybox"}]}}


@pytest.mark.parametrize("server", ["slurm,kubernetes"], indirect=True)
def test_a_slurm_job_on_a_shared_node_holds_its_gpus_from_kubernetes(server, slurm_env,
                                                                     namespace, kube_scheduler):
    pods = pods_path(namespace)
    # node2, the other H100 node, is taken: the job goes to node1
    taken = sbatch(slurm_env, "-w", "node2", "--gres=gpu:h100:4", "--output=/dev/null",
                   "--wrap", "sleep 3600")
    try:
        job_id = server.json("submit", str(_file(server, "on-slurm", ON_SLURM)))["id"]
        ran = wait(lambda: server.state(job_id, "running"), "the Slurm job to run")
    finally:
        subprocess.run(["scancel", taken], env=slurm_env, capture_output=True)
    assert [r["node"] for r in ran["placement"]] == [SHARED]
    name = f"rota-hold-{job_id}-{ran['attempts']}-0"
    hold = server.api.get(f"{pods}/{name}")
    assert hold["spec"]["nodeName"] == SHARED
    assert hold["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert hold["metadata"]["annotations"]["rota.dev/devices"] == ",".join(
        str(d["index"]) for d in ran["placement"][0]["devices"])
    assert hold["metadata"]["labels"][LABEL_HOLD_FOR] == "slurm"
    assert not server.node(SHARED)["foreign"]  # rota's own: not foreign, not counted twice

    server.api.create(pods, _other_pod("other"))

    def unschedulable() -> dict | None:
        pod = server.api.get(f"{pods}/other")
        conditions = (pod.get("status") or {}).get("conditions") or []
        return pod if any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                          for c in conditions) else None
    refused = wait(unschedulable, "kube-scheduler to find no free GPU on node1")
    assert not refused["spec"].get("nodeName")

    server.kill9()
    server.api.create(pods, _orphan(job_id, 99))
    server.start()
    wait(lambda: server.state(job_id, "running"), "the job adopted, running")

    def orphan_gone() -> bool:
        return not [p for p in server.api.list(pods).items
                    if p["metadata"]["name"] == f"rota-hold-{job_id}-99-0"
                    and not p["metadata"].get("deletionTimestamp")]
    wait(orphan_gone, "the placeholder of an attempt Slurm does not run removed")
    again = server.api.get(f"{pods}/{name}")
    assert again["metadata"]["uid"] == hold["metadata"]["uid"]  # adopted, not made again
    assert not server.api.get(f"{pods}/other")["spec"].get("nodeName")

    server.cli("cancel", job_id)
    wait(lambda: server.api.get(f"{pods}/other")["spec"].get("nodeName") == SHARED,
         "the Pod placed on node1 once the job ended and its placeholder went")
    assert not [p for p in server.api.list(pods).items
                if p["metadata"]["name"].startswith("rota-hold-")
                and not p["metadata"].get("deletionTimestamp")]


ON_KUBE = """
name: on-kube
project: default
queue: default
selector: {rota.dev/engine-kubernetes: "true"}
entrypoint: sleep 3600
resources: {gpu: 2, cpu: 1, memory: 1Gi}
"""


def _slurm_job(slurm_env: dict[str, str], slurm_id: str):
    listed = subprocess.run(list(SQUEUE_JOBS), env=slurm_env, capture_output=True, text=True)
    return next(j for j in parse_squeue(listed.stdout) if str(j.id) == slurm_id)


@pytest.mark.parametrize("server", ["slurm,kubernetes"], indirect=True)
def test_a_pod_on_a_shared_node_runs_on_the_gpus_of_its_slurm_placeholder(server, slurm_env,
                                                                          namespace):
    job_id = server.json("submit", str(_file(server, "on-kube", ON_KUBE)))["id"]
    ran = wait(lambda: server.state(job_id, "running"), "the Kubernetes job to run")
    assert [r["node"] for r in ran["placement"]] == [SHARED]
    name = f"rota-hold-{job_id}-{ran['attempts']}-0"
    (hold,) = [j for j in server.slurm_jobs() if j.name == name]
    assert hold.phase.name == "RUNNING" and hold.nodes == (SHARED,)
    assert hold.comment.startswith("rota-hold:kubernetes@")
    indices = sorted(i for a in hold.allocations for g in a.gres if g.name == "gpu"
                     for i in g.indices)
    assert len(indices) == 2
    # the job's placement and its Pod are on exactly the GPUs Slurm gave the placeholder
    assert sorted(d["index"] for d in ran["placement"][0]["devices"]) == indices
    pod = server.api.get(f"{pods_path(namespace)}/rota-{job_id}-{ran['attempts']}-0")
    assert pod["metadata"]["annotations"]["rota.dev/devices"] == ",".join(map(str, indices))
    assert not server.node(SHARED)["foreign"]  # rota's own: not foreign, not counted twice

    plain = sbatch(slurm_env, "-w", SHARED, "--gres=gpu:h100:3", "--output=/dev/null",
                   "--wrap", "sleep 3600")
    try:
        assert wait(lambda: _slurm_job(slurm_env, plain).reason in ("Resources", "Priority"),
                    "Slurm to keep the plain job pending for the held GPUs")

        server.kill9()
        orphan = f"rota-hold-{job_id}-99-0"
        sbatch(slurm_env, "-J", orphan, "-w", SHARED, "--gres=gpu:h100:1", "--mem=1",
               "--comment", f"rota-hold:kubernetes@{instance(server.data_dir)}",
               "--output=/dev/null", "--wrap", "sleep 3600")
        server.start()
        wait(lambda: server.state(job_id, "running"), "the job adopted, running")
        wait(lambda: not [j for j in server.slurm_jobs() if j.name == orphan
                          and not j.phase.ended], "the orphan placeholder cancelled")
        assert [j.id for j in server.slurm_jobs() if j.name == name and not j.phase.ended] \
            == [hold.id]  # adopted, not submitted again
        assert _slurm_job(slurm_env, plain).phase.name == "PENDING"

        server.cli("cancel", job_id)
        wait(lambda: _slurm_job(slurm_env, plain).phase.name == "RUNNING",
             "the plain job to run once the Pod ended and its placeholder went")
        assert not [j for j in server.slurm_jobs() if j.name.startswith("rota-hold-")
                    and not j.phase.ended]
    finally:
        subprocess.run(["scancel", plain], env=slurm_env, capture_output=True)
