"""A control plane killed at every step of a cross-engine launch leaves no orphaned
placeholder and never two, against the real Slurm and Kubernetes fixtures; and a Pod runs on
the GPU Slurm gave its placeholder.

A control plane in a subprocess (Slurm and Kubernetes as one composite backend) launches one
replica on ``node1``, which both engines report, and kills itself with SIGKILL:
- through Slurm, before one step of the Slurm launch: before ``sbatch`` (the placeholder Pod
  exists, no Slurm job does), before ``handle.json``, before the release, or before the
  handle reaches the caller;
- through Kubernetes, before the Pods are made (the placeholder Slurm job runs) or after.
A fresh composite (the restart) then sweeps and launches the same attempt: a placeholder whose
attempt the other engine does not run is removed; one whose attempt it runs is kept, the same
Pod or Slurm job; the attempt ends with exactly one placeholder, which goes when the attempt
is cancelled.
"""

from __future__ import annotations

import os
import signal
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

import pytest

from kubekit import kwok_node
from rota.backends.base import ReplicaState as R
from rota.backends.kube.api import NODES, KubeApi, pods_path
from rota.backends.several import several
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
from slurmkit import on, rota_job, run_spec, slurm_backend, status_of, wait

pytestmark = pytest.mark.usefixtures("leftovers")
SHARED = "node1"
KUBE = "rota.dev/engine-kubernetes"
RUNNER = "sleep 3600"

DYING_PLANE = """
import os, signal, sys
sys.path.insert(0, sys.argv[5])
from slurmkit import on, rota_job, run_spec, slurm_backend
from rota.backends.kube.backend import KubeBackend, KubeConfig
from rota.backends.several import several
from rota.backends.slurm.backend import SlurmBackend

data_dir, namespace, where, job_id = sys.argv[1:5]

class Dying(SlurmBackend):
    def before(self, step, files):
        if step == where:
            os.kill(os.getpid(), signal.SIGKILL)

plane = several([Dying(data_dir, slurm_backend(data_dir).config), KubeBackend(KubeConfig(
    kubeconfig=os.environ["ROTA_TEST_KUBECONFIG"], namespace=namespace,
    node_selector=f"rota.dev/test-group={namespace}"))])
plane.inventory()
plane.launch(rota_job(job_id), on(("node1", 0)), run_spec(sys.argv[6], "/tmp"), attempt=0)
"""


def kube_backend(namespace: str, **options):
    from rota.backends.kube.backend import KubeBackend, KubeConfig
    return KubeBackend(KubeConfig(kubeconfig=os.environ["ROTA_TEST_KUBECONFIG"],
                                  namespace=namespace,
                                  node_selector=f"rota.dev/test-group={namespace}", **options))


def holds_of(api: KubeApi, namespace: str, job_id: str) -> list[dict]:
    return [p for p in api.list(pods_path(namespace)).items
            if p["metadata"]["name"].startswith(f"rota-hold-{job_id}-")
            and not p["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize("where", ["sbatch", "save", "release", "return"])
def test_a_plane_killed_while_launching_leaves_one_placeholder_or_none(
        kube_api, namespace, kwok_nodes, slurm_env, data_dir, job_id, where):
    api = KubeApi(kube_api)
    api.create(NODES, kwok_node(SHARED, gpus=4, group=namespace))
    kwok_nodes.append(SHARED)
    env = {**slurm_env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    dying = subprocess.run([sys.executable, "-c", DYING_PLANE, str(data_dir), namespace, where,
                            job_id, str(Path(__file__).parents[1] / "slurm"), RUNNER],
                           env=env, timeout=120)
    assert dying.returncode == -signal.SIGKILL
    (left,) = holds_of(api, namespace, job_id)  # made before the launch's first step
    assert left["spec"]["nodeName"] == SHARED
    assert left["metadata"]["annotations"]["rota.dev/devices"] == "0"

    kube = kube_backend(namespace)
    try:
        plane = several([slurm_backend(data_dir), kube])
        job, placement = rota_job(job_id), on((SHARED, 0))
        plane.inventory()  # the restart's first pass sweeps
        if where == "sbatch":  # Slurm never got the attempt: its placeholder goes
            wait(lambda: not holds_of(api, namespace, job_id), "the orphan removed")
        else:  # Slurm has it: the placeholder is kept
            assert [p["metadata"]["uid"] for p in holds_of(api, namespace, job_id)] == \
                [left["metadata"]["uid"]]
        handle = plane.recover(job, placement, 0) or \
            plane.launch(job, placement, run_spec(RUNNER, "/tmp"), attempt=0)
        plane.inventory()
        (held,) = holds_of(api, namespace, job_id)  # one, never two
        if where != "sbatch":
            assert held["metadata"]["uid"] == left["metadata"]["uid"]
        plane.cancel(handle, 0.0)
        status_of(plane, handle, lambda s: s.state is not R.RUNNING, "the attempt to end")
        wait(lambda: not holds_of(api, namespace, job_id), "the placeholder removed at the end")
    finally:
        kube.close()


DYING_KUBE_PLANE = """
import os, signal, sys
from dataclasses import replace
sys.path.insert(0, sys.argv[5])
from slurmkit import on, rota_job, run_spec, slurm_backend
from rota.backends.kube.backend import KubeBackend, KubeConfig
from rota.backends.several import several

data_dir, namespace, where, job_id = sys.argv[1:5]

class Dying(KubeBackend):
    def launch(self, *args, **kwargs):
        if where == "before-pods":
            os.kill(os.getpid(), signal.SIGKILL)
        super().launch(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

plane = several([slurm_backend(data_dir), Dying(KubeConfig(
    kubeconfig=os.environ["ROTA_TEST_KUBECONFIG"], namespace=namespace,
    default_image="busybox", node_selector=f"rota.dev/test-group={namespace}"))])
plane.inventory()
job = replace(rota_job(job_id), selector=(("rota.dev/engine-kubernetes", "true"),))
plane.launch(job, on(("node1", 3)), run_spec(sys.argv[6], "/tmp"), attempt=0)
"""


def placeholders(slurm_env: dict[str, str], job_id: str) -> list:
    listed = subprocess.run(list(SQUEUE_JOBS), env=slurm_env, capture_output=True, text=True)
    return [j for j in parse_squeue(listed.stdout)
            if j.name.startswith(f"rota-hold-{job_id}-") and not j.phase.ended]


@pytest.mark.parametrize("where", ["before-pods", "after-pods"])
def test_a_plane_killed_launching_a_pod_leaves_one_slurm_placeholder_or_none(
        kube_api, namespace, kwok_nodes, slurm_env, data_dir, job_id, where):
    api = KubeApi(kube_api)
    api.create(NODES, kwok_node(SHARED, gpus=4, group=namespace))
    kwok_nodes.append(SHARED)
    env = {**slurm_env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        dying = subprocess.run([sys.executable, "-c", DYING_KUBE_PLANE, str(data_dir), namespace,
                                where, job_id, str(Path(__file__).parents[1] / "slurm"),
                                RUNNER], env=env, timeout=120)
        assert dying.returncode == -signal.SIGKILL
        (left,) = placeholders(slurm_env, job_id)  # Slurm ran it before the Pods were made
        kube = kube_backend(namespace, default_image="busybox")
        try:
            plane = several([slurm_backend(data_dir), kube])
            job = replace(rota_job(job_id), selector=((KUBE, "true"),))
            placement = on((SHARED, 3))
            plane.inventory()  # the restart's first pass sweeps
            if where == "before-pods":  # no Pod runs the attempt: its placeholder goes
                wait(lambda: not placeholders(slurm_env, job_id), "the orphan cancelled")
            else:
                assert [j.id for j in placeholders(slurm_env, job_id)] == [left.id]
            handle = plane.recover(job, placement, 0) or \
                plane.launch(job, placement, run_spec(RUNNER, "/tmp"), attempt=0)
            plane.inventory()
            (held,) = placeholders(slurm_env, job_id)  # one, never two
            if where == "after-pods":
                assert held.id == left.id
            chosen = [i for a in held.allocations for g in a.gres if g.name == "gpu"
                      for i in g.indices]  # where the Pod runs: on Slurm's GPU, found again
            assert [d.index for d in handle.replicas[0].devices] == chosen
            plane.cancel(handle, 0.0)
            status_of(plane, handle, lambda s: s.state is not R.RUNNING, "the Pod to end")
            wait(lambda: not placeholders(slurm_env, job_id), "the placeholder cancelled")
        finally:
            kube.close()
    finally:
        left_over = [str(j.id) for j in placeholders(slurm_env, job_id)]
        if left_over:
            subprocess.run(["scancel", *left_over], env=slurm_env, capture_output=True)


def test_a_pod_placed_on_gpu_3_runs_on_the_gpu_slurm_gave_its_placeholder(
        kube_api, namespace, kwok_nodes, slurm_env, data_dir, job_id):
    api = KubeApi(kube_api)
    api.create(NODES, kwok_node(SHARED, gpus=4, group=namespace))
    kwok_nodes.append(SHARED)
    kube = kube_backend(namespace, default_image="busybox")
    try:
        plane = several([slurm_backend(data_dir), kube])
        job = replace(rota_job(job_id), selector=((KUBE, "true"),))
        plane.inventory()
        handle = plane.launch(job, on((SHARED, 3)), run_spec(RUNNER, "/tmp"), attempt=0)
        (held,) = placeholders(slurm_env, job_id)
        chosen = [i for a in held.allocations for g in a.gres if g.name == "gpu"
                  for i in g.indices]
        assert len(chosen) == 1  # Slurm's pick, GPU 3 or another
        assert [d.index for d in handle.replicas[0].devices] == chosen
        pod = api.get(f"{pods_path(namespace)}/rota-{job_id}-0-0")
        assert pod["metadata"]["annotations"]["rota.dev/devices"] == str(chosen[0])
        status = plane.poll([handle])[0]
        assert [d.index for d in status.placement.replicas[0].devices] == chosen
        plane.cancel(handle, 0.0)
        status_of(plane, handle, lambda s: s.state is not R.RUNNING, "the Pod to end")
        wait(lambda: not placeholders(slurm_env, job_id), "the placeholder cancelled")
    finally:
        kube.close()
        left_over = [str(j.id) for j in placeholders(slurm_env, job_id)]
        if left_over:
            subprocess.run(["scancel", *left_over], env=slurm_env, capture_output=True)
