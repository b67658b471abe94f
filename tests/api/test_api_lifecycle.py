"""Holding and releasing a pending job over the API, and the history of its attempts."""

from __future__ import annotations

from apikit import job_file
from rota.core import End, JobState
from rota.scheduler import build_policy, run_cycle


def cycle(api, now: float = 100.0) -> None:
    api.store.apply(run_cycle(api.store.snapshot(now), build_policy("default"), now), now)


def test_a_member_holds_and_releases_its_own_pending_job(api):
    job = api.post_job(job_file()).json()["id"]
    held = api.client.post(f"/v1/jobs/{job}/hold", headers=api.auth["alice"],
                           json={"reason": "data not ready"})
    assert held.status_code == 200 and held.json()["held"] == "data not ready (held by alice)"
    assert api.client.post(f"/v1/jobs/{job}/hold", headers=api.auth["bob"]).status_code == 404
    released = api.client.post(f"/v1/jobs/{job}/release", headers=api.auth["alice"])
    assert released.status_code == 200 and released.json()["held"] == ""
    again = api.client.post(f"/v1/jobs/{job}/release", headers=api.auth["alice"])
    assert again.status_code == 409 and "not held" in again.json()["error"]["message"]


def test_only_a_pending_job_can_be_held(api):
    job = api.post_job(job_file()).json()["id"]
    cycle(api)
    answer = api.client.post(f"/v1/jobs/{job}/hold", headers=api.auth["alice"], json={})
    assert answer.status_code == 409 and "only a pending job" in answer.json()["error"]["message"]


def test_show_lists_every_attempt(api):
    job = api.post_job(job_file()).json()["id"]
    cycle(api)
    api.store.transition(job, JobState.RUNNING, backend_handle={"launch_id": "x"})
    api.store.transition(job, JobState.PENDING, reason="requeued (node-lost): gone",
                         end=End.NODE_LOST)
    cycle(api)
    shown = api.client.get(f"/v1/jobs/{job}", headers=api.auth["alice"]).json()
    assert [(h["attempt"], h["end"]) for h in shown["history"]] == [(0, "node-lost"), (1, None)]
    assert shown["history"][0]["reason"] == "requeued (node-lost): gone"
    assert shown["history"][0]["placement"][0]["node"] == "n1"
    assert (shown["failures"], shown["lost_streak"]) == (0, 1)


def test_idle_defaults_come_from_the_queues_file_and_show_per_queue(api):
    root = api.auth["root"]
    body = {"idle": {"gpu_util_below": 5, "for": "30m"},
            "queues": [{"name": "q", "idle": {"max_lifetime": "8h"}},
                       {"name": "r"}]}
    assert api.client.put("/v1/queues", headers=root, json=body).status_code == 200
    shown = {q["name"]: q["idle"] for q in api.client.get("/v1/queues", headers=root).json()}
    assert shown["q"] == {"gpu_util_below": 5.0, "for_s": 1800.0, "inactive_for_s": None,
                          "max_lifetime_s": 28800.0, "warn_before_s": None}
    assert shown["r"]["max_lifetime_s"] is None and shown["r"]["for_s"] == 1800.0
    # a file without the top-level key keeps the global defaults
    api.client.put("/v1/queues", headers=root, json={"queues": [{"name": "r"}]})
    again = {q["name"]: q["idle"] for q in api.client.get("/v1/queues", headers=root).json()}
    assert again["r"]["for_s"] == 1800.0
    bad = api.client.put("/v1/queues", headers=root,
                         json={"idle": {"gpu_util_below": 5}, "queues": [{"name": "q"}]})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "idle.for"


def test_a_persons_request_about_a_job_counts_as_activity_and_its_own_token_does_not(tmp_path):
    from fastapi.testclient import TestClient
    from apikit import seed_tenants
    from rota.api import create_app
    from rota.store import Store
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    touched: list[str] = []
    client = TestClient(create_app(store, on_touch=touched.append))
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    job = client.post("/v1/jobs", headers=alice, json=job_file()).json()["id"]
    store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    store.transition(job, JobState.RUNNING, backend_handle={"launch_id": "x"})
    client.get(f"/v1/jobs/{job}", headers=alice)
    own = {"Authorization": f"Bearer {store.issue_job_token(job, 0)}"}
    assert client.get(f"/v1/jobs/{job}", headers=own).status_code == 200
    assert touched == [job]
    store.close()


def test_dependencies_name_jobs_that_exist_and_the_owner_can_see(api):
    mine = api.post_job(job_file()).json()["id"]
    theirs = api.post_job(job_file(project="q"), user="bob").json()["id"]
    ok = api.post_job(job_file(depends={"after_ok": [int(mine)], "after_any": [mine]}))
    assert ok.status_code == 201 and ok.json()["depends"] == [["after_ok", mine],
                                                             ["after_any", mine]]
    for refs, field in (({"after_ok": [theirs]}, "depends.after_ok[0]"),
                        ({"after_failed": [99999]}, "depends.after_failed[0]"),
                        ({"after_ok": ["¹"]}, "depends.after_ok[0]"),
                        ({"before": [mine]}, "depends.before")):
        bad = api.post_job(job_file(depends=refs))
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text


def test_an_array_is_one_submission_of_many_tasks(api):
    made = api.post_job(job_file(array="0-9%3"))
    assert made.status_code == 201, made.text
    array = made.json()["array"]
    assert (array["tasks"], array["limit"]) == (10, 3) and array["id"] == made.json()["id"]
    tasks = api.client.get("/v1/jobs?limit=100", headers=api.auth["alice"]).json()["items"]
    assert sorted(t["array_index"] for t in tasks if t["array_id"] == array["id"]) == \
        list(range(10))
    bad = api.post_job(job_file(array="9-0"))
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "array"
