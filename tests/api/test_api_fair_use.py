"""Idempotent submits and fair use of the control plane: the same ``Idempotency-Key`` gives one
job; members are held to caps on pending jobs and on submissions per second (429 with
``Retry-After``), set by operators in the queues file; operators are not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from apikit import job_file, seed_tenants
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.store import Store
from rota.store.records import DEFAULT_FAIR_USE

JOB = job_file(project="p", queue="q")


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def app(tmp_path):
    """An app over a store whose clock the test moves."""
    clock = Clock()
    store = Store.open(tmp_path / "db", clock=clock)
    tokens = seed_tenants(store)
    client = TestClient(create_app(store, data_dir=tmp_path / "data"),
                        raise_server_exceptions=False)
    yield client, store, {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}, clock
    store.close()


def keyed(auth: dict[str, str], key: str) -> dict[str, str]:
    return {**auth, "Idempotency-Key": key}


def test_the_same_key_twice_gives_one_job(app):
    client, store, auth, _ = app
    first = client.post("/v1/jobs", headers=keyed(auth["alice"], "k-1"), json=JOB)
    again = client.post("/v1/jobs", headers=keyed(auth["alice"], "k-1"), json=JOB)
    assert (first.status_code, again.status_code) == (201, 200), again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(store.list_jobs().items) == 1


def test_a_key_sent_with_another_request_is_refused(app):
    client, store, auth, _ = app
    client.post("/v1/jobs", headers=keyed(auth["alice"], "k-1"), json=JOB)
    other = client.post("/v1/jobs", headers=keyed(auth["alice"], "k-1"),
                        json={**JOB, "name": "other"})
    assert other.status_code == 409
    assert other.json()["error"] | {"message": ""} == {
        "code": "idempotency_key_reused", "field": "Idempotency-Key", "message": ""}
    assert len(store.list_jobs().items) == 1


def test_keys_are_per_user_and_last_a_day(app):
    client, store, auth, clock = app
    bob_job = job_file(project="q", queue="q")
    a = client.post("/v1/jobs", headers=keyed(auth["alice"], "k"), json=JOB).json()["id"]
    b = client.post("/v1/jobs", headers=keyed(auth["bob"], "k"), json=bob_job).json()["id"]
    assert a != b
    clock.now += 86400 + 1
    later = client.post("/v1/jobs", headers=keyed(auth["alice"], "k"), json=JOB)
    assert later.status_code == 201 and later.json()["id"] not in (a, b)
    assert store.forget_keys(clock.now + 86400) == 2  # bob's old one and alice's new one


def test_concurrent_submits_with_one_key_make_one_job(app):
    client, store, auth, _ = app
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda _: client.post(
            "/v1/jobs", headers=keyed(auth["alice"], "burst"), json=JOB), range(32)))
    assert {r.status_code for r in replies} <= {200, 201}, [r.text for r in replies]
    assert len({r.json()["id"] for r in replies}) == 1
    assert len(store.list_jobs().items) == 1


def test_an_array_with_a_key_is_one_array(app):
    client, store, auth, _ = app
    body = {**JOB, "array": "0-4"}
    first = client.post("/v1/jobs", headers=keyed(auth["alice"], "arr"), json=body).json()
    again = client.post("/v1/jobs", headers=keyed(auth["alice"], "arr"), json=body)
    assert again.status_code == 200 and again.json()["array"] == first["array"]
    assert first["array"]["tasks"] == 5 and len(store.list_jobs().items) == 5


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_malformed_key_is_422_naming_the_header(app, key):
    client, store, auth, _ = app
    reply = client.post("/v1/jobs", headers=keyed(auth["alice"], key),
                        json=JOB) if key.isascii() else client.post(
        "/v1/jobs", headers={**auth["alice"], "Idempotency-Key": key.encode()}, json=JOB)
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["field"] == "Idempotency-Key"


def caps(client, auth, **fair_use) -> None:
    reply = client.put("/v1/queues", headers=auth["root"],
                       json={"queues": [{"name": "q"}], "fair_use": fair_use})
    assert reply.status_code == 200, reply.text


def test_the_1001st_pending_job_of_a_capped_user_gets_429(app):
    client, store, auth, _ = app
    caps(client, auth, user={"pending": 1000})
    array = client.post("/v1/jobs", headers=auth["alice"], json={**JOB, "array": "1-1000"})
    assert array.status_code == 201, array.text
    over = client.post("/v1/jobs", headers=auth["alice"], json=JOB)
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "pending_limit"
    assert int(over.headers["Retry-After"]) >= 1
    assert client.post("/v1/jobs", headers=auth["root"], json=JOB).status_code == 201
    client.post(f"/v1/jobs/{array.json()['id']}/cancel", headers=auth["alice"])
    assert client.post("/v1/jobs", headers=auth["alice"], json=JOB).status_code == 201


def test_an_array_that_would_pass_the_cap_is_refused_whole(app):
    client, store, auth, _ = app
    caps(client, auth, project={"pending": 3})
    reply = client.post("/v1/jobs", headers=auth["alice"], json={**JOB, "array": "0-3"})
    assert reply.status_code == 429 and "project p has 3 pending jobs" in reply.text
    assert store.list_jobs().items == ()


def test_concurrent_submitters_never_pass_a_pending_cap_together(app):
    client, store, auth, _ = app
    caps(client, auth, user={"pending": 10, "submits_per_s": None})
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda _: client.post("/v1/jobs", headers=auth["alice"],
                                                      json=JOB), range(40)))
    assert sorted(r.status_code for r in replies) == [201] * 10 + [429] * 30
    assert len(store.list_jobs().items) == 10


def test_submitting_faster_than_the_rate_is_429_with_retry_after(app):
    client, store, auth, _ = app
    caps(client, auth, user={"submits_per_s": 0.01, "burst": 2})
    codes = [client.post("/v1/jobs", headers=auth["alice"], json=JOB).status_code
             for _ in range(3)]
    assert codes == [201, 201, 429]
    over = client.post("/v1/jobs", headers=auth["alice"], json=JOB)
    assert over.json()["error"]["code"] == "rate_limited"
    assert 90 <= int(over.headers["Retry-After"]) <= 100  # a token every 100 s
    assert client.post("/v1/jobs", headers=auth["bob"], json=job_file(
        project="q", queue="q")).status_code == 201  # bob has a bucket of his own


def test_caps_are_read_by_everyone_and_reset_to_the_defaults(app):
    client, store, auth, _ = app
    caps(client, auth, user={"pending": 5, "submits_per_s": None},
         project={"storage": "10Gi"})
    shown = client.get("/v1/fair-use", headers=auth["alice"]).json()
    assert shown["user"]["pending"] == 5 and shown["user"]["submits_per_s"] is None
    assert shown["user"]["burst"] == DEFAULT_FAIR_USE.user.burst
    assert shown["project"]["storage"] == 10 * 1024 ** 3
    reply = client.put("/v1/queues", headers=auth["root"],
                       json={"queues": [{"name": "q"}], "fair_use": None})
    assert reply.status_code == 200
    assert client.get("/v1/fair-use", headers=auth["bob"]).json()["user"]["pending"] == \
        DEFAULT_FAIR_USE.user.pending


def test_a_queues_file_without_fair_use_keeps_the_caps(app):
    client, store, auth, _ = app
    caps(client, auth, user={"pending": 5})
    client.put("/v1/queues", headers=auth["root"], json={"queues": [{"name": "q"}]})
    assert store.fair_use().user.pending == 5


def test_storage_is_a_cap_of_projects_only(app):
    client, _, auth, _ = app
    reply = client.put("/v1/queues", headers=auth["root"], json={
        "queues": [{"name": "q"}], "fair_use": {"user": {"storage": "1Gi"}}})
    assert reply.status_code == 422 and reply.json()["error"]["field"] == \
        "fair_use.user.storage"


def zeros_upload(client, auth, size: int) -> str:
    """An upload of one file of ``size`` zero bytes: its id."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    reply = client.post("/v1/uploads", headers=auth, content=buf.getvalue())
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


def test_a_full_project_storage_quota_refuses_a_job_with_an_upload(app, tmp_path):
    client, store, auth, _ = app
    caps(client, auth, project={"storage": "1Mi"})
    upload = zeros_upload(client, auth["alice"], 300 * 1024)
    first = client.post("/v1/jobs", headers=auth["alice"], json={**JOB, "upload": upload})
    assert first.status_code == 201, first.text
    work = tmp_path / "data" / "jobs" / first.json()["id"] / "work"
    work.mkdir(parents=True)
    (work / "zeros").write_bytes(b"\1" * 800 * 1024)  # what the first job unpacked and wrote
    full = client.post("/v1/jobs", headers=auth["alice"], json={**JOB, "upload": upload})
    assert full.status_code == 507, full.text
    error = full.json()["error"]
    assert (error["code"], error["field"]) == ("storage_full", "upload")
    assert "project p uses" in error["message"] and "of its 1048576 bytes" in error["message"]
    assert len(store.list_jobs().items) == 1
    bare = client.post("/v1/jobs", headers=auth["alice"], json=JOB)
    assert bare.status_code == 201  # a job without an upload adds nothing at once
    other = client.post("/v1/jobs", headers=auth["bob"], json={
        **job_file(project="q", queue="q"), "upload": zeros_upload(client, auth["bob"], 1024)})
    assert other.status_code == 201, other.text  # the quota is per project
