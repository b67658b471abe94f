"""Submit refuses a job no registered node can ever run for want of a node feature
(``rota.core.nodes``: a GPU share, a container image), naming the field and why; a node that
can, even cordoned, is enough."""

from __future__ import annotations

from dataclasses import replace

from apikit import job_file
from rota.core.nodes import CONTAINERS, GPU_SHARING


def test_a_gpu_share_is_refused_where_no_node_can_share_a_gpu(api):
    (n1, _, _), = api.store.list_nodes()
    api.store.upsert_nodes([replace(n1, features=frozenset({CONTAINERS}))], "kube")
    reply = api.post_job(job_file(resources={"gpu": 0.5, "cpu": 1, "memory": "1Gi"}))
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["field"] == "resources.gpu"
    assert "0.5 GPU shares need a node that can share a GPU" in error["message"]
    assert api.store.list_jobs().items == ()
    whole = api.post_job(job_file(resources={"gpu": 1, "cpu": 1, "memory": "1Gi"}))
    assert whole.status_code == 201, whole.text


def test_a_cordoned_node_that_can_share_is_enough_to_accept_a_share(api):
    (n1, _, _), = api.store.list_nodes()
    api.store.upsert_nodes([replace(n1, features=frozenset({CONTAINERS})),
                            replace(n1, name="n2", features=frozenset({GPU_SHARING}))], "kube")
    api.store.set_schedulable("n2", False)
    reply = api.post_job(job_file(resources={"gpu": 0.5, "cpu": 1, "memory": "1Gi"}))
    assert reply.status_code == 201, reply.text


def test_an_image_is_refused_where_no_node_runs_container_images(api):
    # n1 is the local backend's machine: it runs commands, not images
    reply = api.post_job(job_file(image="python:3.12"))
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["field"] == "image"
    assert "container image 'python:3.12'" in error["message"]
    assert "runs container images (feature containers)" in error["message"]
    assert "To run it: drop image" in error["message"]
    assert api.store.list_jobs().items == ()
    in_run = api.post_job({"project": "p", "queue": "q", "run": {
        "command": ["python", "train.py"], "image": "python:3.12"}})
    assert in_run.status_code == 422, in_run.text
    assert in_run.json()["error"]["field"] == "run.image"
    plain = api.post_job(job_file())
    assert plain.status_code == 201, plain.text


def test_a_cordoned_node_that_runs_containers_is_enough_to_accept_an_image(api):
    (n1, _, _), = api.store.list_nodes()
    api.store.upsert_nodes([replace(n1, name="n2", features=frozenset({CONTAINERS}))], "kube")
    api.store.set_schedulable("n2", False)
    reply = api.post_job(job_file(image="python:3.12"))
    assert reply.status_code == 201, reply.text
    (rec,) = api.store.list_jobs().items
    assert rec.job.image == "python:3.12"  # the scheduler's job knows it needs containers
