"""Submit refuses a job no registered node can ever run for want of a node feature
(``rota.core.nodes``), naming the field and why; a node that can, even cordoned, is enough."""

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
