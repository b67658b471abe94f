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
    assert held.status_code == 200 and held.json()["held"] == "data not ready"
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
