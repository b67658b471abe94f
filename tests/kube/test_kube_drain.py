"""``kubectl drain`` against ``rota up --backend kubernetes``, with the real kubectl the fixture
builds: without ``--force`` it cordons the node and evicts a running job's Pod through the
Eviction API (the Pod's controller is its attempt's Secret), rota requeues the job as
preempted without spending its restart budget, and the job runs again on the other node while
the drained one takes nothing new."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

from rota.backends.kube.api import NODES, pods_path
from requires import required_env
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)


def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    """The fixture's kubectl as the cluster's admin."""
    where = required_env("ROTA_KUBE_BIN", "run `eval \"$(.ci/kube)\"`, which builds kubectl "
                                          "with the cluster", "kubectl drain")
    binary = Path(where) / "kubectl"
    if not binary.is_file():
        message = f"{binary} is not built: run tests/kube/fixture/build.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run([str(binary), "--kubeconfig", os.environ["ROTA_TEST_KUBECONFIG"],
                           *args], capture_output=True, text=True, timeout=150)


def job_state(server: KubeServer, job_id: str, *states: str) -> dict | None:
    job = server.json("show", job_id)
    return job if job["state"] in states else None


TRAIN = """
name: train
project: default
queue: default
image: busybox
entrypoint: train
checkpoint: {grace: 20s}
restart: {max_retries: 0}
resources: {gpu: 2}
"""


def test_kubectl_drain_without_force_evicts_a_rota_pod_and_the_job_is_requeued(cluster, up):
    a, b = cluster.add_node("a", gpus=2), cluster.add_node("b", gpus=2)
    server = up()
    job_id = server.submit_file("train", TRAIN)
    first = wait(lambda: job_state(server, job_id, "running"), "the job to run")
    drained = first["placement"][0]["node"]
    name = f"rota-{job_id}-{first['attempts']}-0"
    wait(lambda: cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")["status"].get(
        "phase") == "Running", "kwok to run its Pod")

    done = kubectl("drain", drained, "--timeout=120s")  # neither --force nor anything else
    assert done.returncode == 0, done.stderr
    assert f"evicting pod {cluster.namespace}/{name}" in done.stdout + done.stderr
    assert cluster.api.get(f"{NODES}/{drained}")["spec"]["unschedulable"] is True

    # requeued as preempted (no restart budget: a failure would have ended it), then placed
    # on the node that is not cordoned
    again = wait(lambda: (j := job_state(server, job_id, "running"))
                 and j["attempts"] == first["attempts"] + 1 and j, "the job to run again")
    assert again["placement"][0]["node"] == ({a, b} - {drained}).pop()
    assert again["failures"] == 0
    evicted = again["history"][0]
    assert evicted["end"] == "preempted" and "was evicted" in (evicted.get("reason") or "")
