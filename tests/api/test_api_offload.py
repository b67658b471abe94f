"""Bounds on heavy request bodies (``rota.api.offload``): a token that keeps sending bad job
files or bad archives is refused with 429 before its next one is read, and uploads have a rate
per token. (That other users keep their latency meanwhile is ``tests/e2e/test_heavy_bodies``.)"""

from __future__ import annotations

import pytest
from apikit import seed_tenants
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.api.offload import Bounds, Offload
from rota.store import Store

GOOD = b"name: ok\nproject: p\nqueue: q\nentrypoint: 'true'\n"
BAD = b"name: x\nentrypoint: [a, b\n"


def make(tmp_path, **bounds):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    offload = Offload(Bounds(**bounds))
    client = TestClient(create_app(store, data_dir=tmp_path / "data", offload=offload),
                        raise_server_exceptions=False)
    return client, {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}, offload, store


@pytest.fixture
def strict(tmp_path):
    client, auth, offload, store = make(tmp_path, max_strikes=3, strike_drain_s=600)
    yield client, auth
    offload.close()
    store.close()


def yaml(client, auth, data: bytes):
    return client.post("/v1/jobs", headers={**auth, "Content-Type": "application/yaml"},
                       content=data)


def test_a_token_sending_bad_job_files_is_refused_before_the_next_is_read(strict):
    client, auth = strict
    for _ in range(3):
        bad = yaml(client, auth["alice"], BAD)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "line 3", bad.text
    refused = yaml(client, auth["alice"], GOOD)  # even a good one, until strikes drain
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "too_many_failures"
    assert "token t of user alice sent 3 bad job files or archives" in error["message"]
    assert "fix the job file or archive" in error["message"]
    assert 600 <= int(refused.headers["Retry-After"]) <= 601
    json_body = client.post("/v1/jobs", headers=auth["alice"], json={
        "name": "j", "project": "p", "queue": "q", "entrypoint": "true"})
    assert json_body.status_code == 201, json_body.text  # JSON is cheap: not held back
    assert yaml(client, auth["bob"], GOOD.replace(b"project: p", b"project: q")
                ).status_code == 201  # another user's token is not affected


def test_bad_archives_are_strikes_too(strict):
    client, auth = strict
    for _ in range(3):
        bad = client.post("/v1/uploads", headers=auth["bob"], content=b"not a tar.gz")
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "body", bad.text
    refused = client.post("/v1/uploads", headers=auth["bob"], content=b"not a tar.gz")
    assert refused.status_code == 429 and \
        refused.json()["error"]["code"] == "too_many_failures", refused.text
    assert yaml(client, auth["bob"], GOOD).status_code == 429  # the token, for both kinds


def test_uploads_have_a_rate_per_token(tmp_path):
    client, auth, offload, store = make(tmp_path, upload_burst=2, uploads_per_s=0.01)
    try:
        for _ in range(2):
            assert client.post("/v1/uploads", headers=auth["alice"],
                               content=b"x").status_code == 422  # counted, even refused
        limited = client.post("/v1/uploads", headers=auth["alice"], content=b"x")
        assert limited.status_code == 429, limited.text
        assert limited.json()["error"]["code"] == "rate_limited"
        assert "upload once and submit several jobs" in limited.json()["error"]["message"]
        assert 99 <= int(limited.headers["Retry-After"]) <= 100  # a token every 100 s
        assert client.post("/v1/uploads", headers=auth["bob"], content=b"x").status_code == 422
    finally:
        offload.close()
        store.close()
