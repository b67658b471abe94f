"""Operators apply queues and flavours, written as in a cluster file, to the running store."""

from __future__ import annotations


def test_an_operator_applies_queues_and_the_scheduler_reads_them(api):
    body = {"flavors": {"h100": ["*H100*"]},
            "queues": [{"name": "gold", "cohort": "c", "quota": {"h100": {"nominal": {"gpu": 1.5}}}}]}
    done = api.client.put("/v1/queues", headers=api.auth["root"], json=body)
    assert done.status_code == 200 and done.json() == {"flavors": ["h100"], "queues": ["gold"]}
    assert api.store.get_queue("gold").quotas["h100"].nominal == {"gpu": 1500}
    assert api.wakes, "the control loop is woken to apply new quotas"
    listed = {q["name"] for q in api.client.get("/v1/queues", headers=api.auth["alice"]).json()}
    assert "gold" in listed


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
