"""``POST /v1/jobs/{id}/exited``: an attempt's own report of its end, taken only from that
attempt's token and handed to the control plane (``on_exit``)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from fastapi.testclient import TestClient

from apikit import job_file, seed_tenants
from rota.api import create_app
from rota.core import End, JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store


@pytest.fixture
def plane(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    heard: list[tuple] = []

    def on_exit(job_id: str, attempt: int, status: int, replicas=None) -> Future[None]:
        heard.append((job_id, attempt, status) + ((replicas,) if replicas else ()))
        acted: Future[None] = Future()
        acted.set_result(None)  # the control plane acted on it at once
        return acted
    client = TestClient(create_app(store, on_exit=on_exit))
    yield store, client, tokens, heard
    store.close()


def running_job(store: Store, client: TestClient, tokens: dict[str, str]) -> str:
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    job = client.post("/v1/jobs", headers=alice, json=job_file()).json()["id"]
    store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    store.transition(job, JobState.RUNNING, backend_handle={"launch_id": "x", "attempt": 0})
    return job


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_attempts_own_token_reports_its_status_to_the_control_plane(plane):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json={"status": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"job": job, "attempt": 0, "taken": True}
    assert heard == [(job, 0, 3)]


def test_each_replicas_code_is_passed_on_by_rank(plane):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json={"status": 3, "replicas": [143, 3]})
    assert answer.status_code == 200, answer.text
    assert heard == [(job, 0, 3, (143, 3))]


@pytest.mark.parametrize("replicas", [[256], [-1], ["3"], [1.5], [0] * 10_001, "3"],
                         ids=["over-255", "negative", "text", "fraction", "too-many", "not-list"])
def test_a_replicas_code_that_is_not_one_is_refused(plane, replicas):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json={"status": 3, "replicas": replicas})
    assert answer.status_code == 422 and heard == []
    assert answer.json()["error"]["field"].startswith("replicas"), answer.text


def test_any_other_token_is_refused_with_the_reason(plane):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    other = running_job(store, client, tokens)
    for token, code, says in (
            (tokens["alice"], 403, "only the attempt's own token"),      # the owner
            (tokens["root"], 403, "only the attempt's own token"),       # an operator
            (store.issue_job_token(other, 0), 403, f"token of job {other}"),  # another job's
            (tokens["bob"], 404, "")):                                   # not bob's project
        answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(token), json={"status": 0})
        assert answer.status_code == code, (token, answer.text)
        assert says in answer.json()["error"]["message"]
    assert heard == []


def test_a_token_of_an_attempt_that_ended_is_refused(plane):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    old = store.issue_job_token(job, 0)
    store.transition(job, JobState.PENDING, reason="requeued (node-lost): gone",
                     end=End.NODE_LOST)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(old), json={"status": 0})
    assert answer.status_code == 401 and "token" in answer.json()["error"]["message"]
    assert heard == []


@pytest.mark.parametrize("body", [{}, {"status": -1}, {"status": 256}, {"status": "0"},
                                  {"status": 0, "extra": 1}],
                         ids=["missing", "negative", "too-big", "text", "unknown-key"])
def test_a_bad_status_is_refused_naming_the_field(plane, body):
    store, client, tokens, heard = plane
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] in ("status", "extra")
    assert heard == []


def test_without_a_control_plane_to_take_it_the_report_is_not_taken(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    client = TestClient(create_app(store))
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json={"status": 0})
    assert answer.status_code == 200 and answer.json()["taken"] is False
    store.close()


def test_the_answer_waits_for_the_control_plane_at_most_its_bound(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    never: Future[None] = Future()  # a control plane that never gets to it
    client = TestClient(create_app(store, on_exit=lambda *report: never, exit_wait_s=0.2))
    job = running_job(store, client, tokens)
    answer = client.post(f"/v1/jobs/{job}/exited", headers=bearer(store.issue_job_token(job, 0)),
                         json={"status": 0})
    assert answer.status_code == 200 and answer.json()["taken"] is True
    assert not never.cancelled()
    store.close()
