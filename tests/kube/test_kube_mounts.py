"""A job file's ``volumes:`` and ``shm:`` become the Pod's volume claims and its /dev/shm, as
the API server stores the Pod (in a namespace enforcing the restricted profile, which allows
both kinds of volume)."""

from __future__ import annotations

import functools

from rota.backends.kube.api import pods_path
from rota.backends.kube.quantity import parse_quantity
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)

MOUNTING = """
name: train
project: default
queue: default
image: pytorch/pytorch:2.3.0
entrypoint: python train.py
resources: {gpu: 1}
shm: 8Gi
volumes:
  - {claim: datasets, path: /data, read_only: true}
  - {claim: checkpoints, path: /ckpt}
"""


def test_a_jobs_claims_and_shm_size_are_the_pods_volumes(cluster, up):
    cluster.api.merge_patch(f"/api/v1/namespaces/{cluster.namespace}", {"metadata": {
        "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    cluster.add_node("plain", gpus=2)
    server = up()
    job_id = server.submit_file("train", MOUNTING)
    job = wait(lambda: (j := server.json("show", job_id))["state"] == "running" and j,
               f"job {job_id} to run")
    pod = cluster.api.get(f"{pods_path(cluster.namespace)}/rota-{job_id}-{job['attempts']}-0")

    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    (container,) = pod["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes[mounts["/data"]["name"]]["persistentVolumeClaim"] == {
        "claimName": "datasets", "readOnly": True}
    assert mounts["/data"]["readOnly"] is True
    assert volumes[mounts["/ckpt"]["name"]]["persistentVolumeClaim"]["claimName"] == \
        "checkpoints"
    assert not mounts["/ckpt"].get("readOnly")
    shm = volumes[mounts["/dev/shm"]["name"]]["emptyDir"]
    assert shm["medium"] == "Memory"
    assert parse_quantity(shm["sizeLimit"], "sizeLimit") == 8 * 2**30
