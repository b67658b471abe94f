"""A project's storage quota counts everything the project makes the server keep
(``rota.api.storage``): its uploads, what its pending jobs will unpack, and what its running
jobs write. Caps in MiB, archives of zeros; the refusal names the cap and the usage."""

from __future__ import annotations

import io
import tarfile

import pytest
from apikit import job_file, seed_tenants
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store

JOB = job_file(project="p", queue="q")
KIB = 1024


@pytest.fixture
def app(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store, gpus=8)
    client = TestClient(create_app(store, data_dir=tmp_path / "data"),
                        raise_server_exceptions=False)
    auth = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    reply = client.put("/v1/queues", headers=auth["root"], json={
        "queues": [{"name": "q"}],
        "fair_use": {"project": {"storage": "1Mi"}}})
    assert reply.status_code == 200, reply.text
    yield client, store, auth, tmp_path / "data"
    store.close()


def zeros(size: int) -> bytes:
    """A tar.gz of one file of ``size`` zero bytes (a few KiB as sent)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return buf.getvalue()


def upload(client, auth, size: int, **params):
    return client.post("/v1/uploads", headers=auth, content=zeros(size), params=params)


def test_pending_jobs_count_the_upload_they_will_unpack(app):
    """One upload of 300 KiB unpacked, submitted again and again: no job has a directory
    yet, but each will unpack 300 KiB, so the fourth would pass the 1 MiB cap."""
    client, store, auth, _ = app
    made = upload(client, auth["alice"], 300 * KIB)
    assert made.status_code == 201, made.text
    body = {**JOB, "upload": made.json()["id"]}
    for _ in range(3):  # 3 x 300 KiB + the archive's blocks (4 KiB) = 904 KiB <= 1 MiB
        assert client.post("/v1/jobs", headers=auth["alice"], json=body).status_code == 201
    full = client.post("/v1/jobs", headers=auth["alice"], json=body)
    assert full.status_code == 507, full.text
    error = full.json()["error"]
    assert (error["code"], error["field"]) == ("storage_full", "upload")
    assert error["message"].startswith("project p uses 904 KiB of its 1 MiB storage cap")
    assert "pending jobs' uploads to unpack 900 KiB" in error["message"]
    assert "this job would add 300 KiB" in error["message"]
    assert len(store.list_jobs().items) == 3
    array = client.post("/v1/jobs", headers=auth["bob"], json={
        **job_file(project="q", queue="q"), "array": "0-3",
        "upload": upload(client, auth["bob"], 300 * KIB).json()["id"]})
    assert array.status_code == 507, array.text  # 4 tasks x 300 KiB: over, whole array


def test_an_upload_is_refused_while_the_project_is_over_its_cap(app):
    """A job of p wrote 4 MiB under p's 1 MiB cap: p's member may not upload more (the
    upload would be refused before it is read), a member of q still may."""
    client, store, auth, data = app
    job = client.post("/v1/jobs", headers=auth["alice"], json=JOB).json()["id"]
    work = data / "jobs" / job / "work"
    work.mkdir(parents=True)
    (work / "out").write_bytes(b"\1" * 4096 * KIB)
    refused = upload(client, auth["alice"], 10 * KIB)
    assert refused.status_code == 507, refused.text
    message = refused.json()["error"]["message"]
    assert message.startswith("project p uses 4 MiB of its 1 MiB storage cap"), message
    assert "so it takes no new upload" in message
    assert not list((data / "uploads").glob("*.tar.gz"))
    assert upload(client, auth["bob"], 10 * KIB).status_code == 201
    assert upload(client, auth["root"], 10 * KIB).status_code == 201  # operators are not held


def test_uploads_count_against_the_project_they_are_charged_to(app):
    """Archives kept count as their blocks on disk: 1 MiB of random bytes (which gzip
    cannot shrink) fills p's cap, so p takes no further upload."""
    import os
    client, _, auth, data = app
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("noise")
        info.size = 1024 * KIB
        tar.addfile(info, io.BytesIO(os.urandom(info.size)))
    kept = client.post("/v1/uploads", headers=auth["alice"], content=buf.getvalue(),
                       params={"project": "p"})
    assert kept.status_code == 201 and kept.json()["project"] == "p", kept.text
    again = upload(client, auth["alice"], KIB)
    assert again.status_code == 507, again.text
    assert "uploads 1 MiB" in again.json()["error"]["message"]
    assert upload(client, auth["alice"], KIB, project="q").status_code == 422  # not hers


def test_a_running_job_that_writes_past_the_cap_stops_further_submits(app):
    """A running job of p wrote 4 MiB in its directory under p's 1 MiB cap: p's next submit,
    even one without an upload, is refused and says what p uses; q's is not."""
    client, store, auth, data = app
    job = client.post("/v1/jobs", headers=auth["alice"], json=JOB).json()["id"]
    store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    store.transition(job, JobState.RUNNING, backend_handle={"launch_id": "x"})
    assert client.post("/v1/jobs", headers=auth["alice"], json=JOB).status_code == 201
    work = data / "jobs" / job / "work"
    work.mkdir(parents=True)
    (work / "checkpoint.bin").write_bytes(b"\1" * 4096 * KIB)  # what the running job wrote
    refused = client.post("/v1/jobs", headers=auth["alice"], json=JOB)
    assert refused.status_code == 507, refused.text
    message = refused.json()["error"]["message"]
    assert message.startswith("project p uses 4 MiB of its 1 MiB storage cap"), message
    assert "job directories 4 MiB" in message and "so it takes no new job" in message
    assert client.post("/v1/jobs", headers=auth["bob"], json=job_file(
        project="q", queue="q")).status_code == 201
    assert client.post("/v1/jobs", headers=auth["root"], json=JOB).status_code == 201
