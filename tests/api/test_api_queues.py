"""Operators apply queues and flavours, written as in a cluster file, to the running store."""

from __future__ import annotations

from apikit import job_file
from rota.core import GpuRequest, JobKind, ReplicaRequest
from rota.core.serving import ServiceSettings
from rota.store import Submission


def test_an_operator_applies_queues_and_the_scheduler_reads_them(api):
    body = {"flavors": {"h100": ["*H100*"]},
            "queues": [{"name": "gold", "cohort": "c", "quota": {"h100": {"nominal": {"gpu": 1.5}}}}]}
    done = api.client.put("/v1/queues", headers=api.auth["root"], json=body)
    assert done.status_code == 200 and done.json() == {
        "flavors": ["h100"], "queues": ["gold"],
        # q (no quota, every project) would bypass gold's quota, holds no job: deleted
        "open_unlimited": [{"name": "q", "action": "deleted", "why": "not_listed", "jobs": {}}],
        "default_queues": [{"project": "p", "queue": "gold", "usable": ["gold"]},
                           {"project": "q", "queue": "gold", "usable": ["gold"]}]}
    assert api.store.get_queue("gold").quotas["h100"].nominal == {"gpu": 1500}
    assert api.wakes, "the control loop is woken to apply new quotas"
    listed = {q["name"] for q in api.client.get("/v1/queues", headers=api.auth["alice"]).json()}
    assert "gold" in listed


def test_applying_quotas_closes_the_open_queue_jobs_hold_and_says_where_jobs_go(api):
    held = api.post_job(job_file(project="p", queue="q")).json()["id"]
    body = {"flavors": {"h100": ["*H100*"]},
            "queues": [{"name": "gold", "projects": ["p"],
                        "quota": {"h100": {"nominal": {"gpu": 1}}}}]}
    done = api.client.put("/v1/queues", headers=api.auth["root"], json=body)
    assert done.status_code == 200, done.text
    assert done.json()["open_unlimited"] == [
        {"name": "q", "action": "closed", "why": "not_listed", "jobs": {"pending": 1}}]
    # p may use gold only; q no queue: its members must wait until a queue admits it
    assert done.json()["default_queues"] == [
        {"project": "p", "queue": "gold", "usable": ["gold"]},
        {"project": "q", "queue": None, "usable": []}]
    assert api.client.get(f"/v1/jobs/{held}", headers=api.auth["alice"]).json()["state"] \
        == "pending"
    refused = api.post_job(job_file(project="p", queue="q"))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "queue_not_allowed"
    unnamed = {k: v for k, v in job_file(project="p").items() if k != "queue"}
    assert api.post_job(unnamed).json()["queue"] == "gold"


def test_a_queue_a_service_uses_makes_the_file_a_conflict(api):
    template = Submission(project="p", queue="q", user="alice", name="tiny", kind=JobKind.SERVICE,
                          request=ReplicaRequest(1000, 1024, GpuRequest(1)),
                          run={"command": ["python", "serve.py"], "port": 0})
    api.store.services.create("tiny", ServiceSettings(models=("tiny",)), template)
    body = {"queues": [{"name": "gold", "quota": {"any": {"nominal": {"gpu": 1}}}}]}
    reply = api.client.put("/v1/queues", headers=api.auth["root"], json=body)
    assert reply.status_code == 409 and reply.json()["error"]["code"] == "queue_in_use"
    assert "service tiny (queue q)" in reply.json()["error"]["message"]
    assert [q.name for q in api.store.list_queues()] == ["q"]


def test_the_schema_documents_what_an_apply_answers(api):
    schema = api.client.get("/openapi.json").json()
    answer = schema["paths"]["/v1/queues"]["put"]["responses"]["200"]["content"]
    assert answer["application/json"]["schema"] == {"$ref": "#/components/schemas/QueuesApplied"}
    fields = schema["components"]["schemas"]["QueuesApplied"]["properties"]
    assert set(fields) == {"flavors", "queues", "open_unlimited", "default_queues"}
    action = schema["components"]["schemas"]["OpenQueueView"]["properties"]["action"]
    assert action["enum"] == ["deleted", "closed", "kept"]


def test_bad_queue_files_are_refused_whole_naming_the_field(api):
    root = api.auth["root"]
    cases = [
        ({"queues": [{"name": "a", "quota": {"nope": {"nominal": {"gpu": 1}}}}]},
         "queues[0].quota.nope"),
        ({"queues": [{"name": "a", "colour": "red"}]}, "queues[0].colour"),
        ({"queues": [{"name": "a", "resource_groups": ["mars"]}]}, "queues[0].resource_groups[0]"),
        ({"queues": [{"name": "a", "quota": {"any": {"nominal": {"gpu": -1}}}}]},
         "queues[0].quota.any.nominal.gpu"),
        ({"queues": []}, "queues"),
    ]
    for body, field in cases:
        reply = api.client.put("/v1/queues", headers=root, json=body)
        assert reply.status_code == 422, (body, reply.text)
        assert reply.json()["error"]["field"] == field, reply.json()
    assert "a" not in {q.name for q in api.store.list_queues()}
    assert api.client.put("/v1/queues", headers=root, json=[1, 2]).status_code == 422
    assert api.client.put("/v1/queues", headers=api.auth["alice"],
                          json={"queues": [{"name": "b"}]}).status_code == 403


def test_an_operator_cordons_a_node_and_members_may_not(api):
    root, alice = api.auth["root"], api.auth["alice"]
    assert api.client.post("/v1/nodes/n1/cordon", headers=alice).status_code == 403
    done = api.client.post("/v1/nodes/n1/cordon", headers=root)
    assert done.status_code == 200
    assert done.json() == {"name": "n1", "schedulable": False, "drain": False, "reason": "",
                           "evicted": [], "not_evicted": []}
    assert not api.store.snapshot(100.0).nodes[0].schedulable
    assert api.client.post("/v1/nodes/n1/uncordon", headers=root).json()["schedulable"]
    assert api.store.snapshot(100.0).nodes[0].schedulable
    assert api.client.post("/v1/nodes/nope/cordon", headers=root).status_code == 404
    assert api.client.post("/v1/nodes/n1/explode", headers=root).status_code == 404
