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
