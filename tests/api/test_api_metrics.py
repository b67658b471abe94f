"""``GET /metrics``: operators and metrics tokens read it; a metrics token reads nothing else
(no job, no node, not even who it is), sees no project, and only an operator issues one; a
member is refused; without metrics the route does not exist."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from apikit import job_file, seed_tenants
from rota.api import create_app
from rota.store import Store

TEXT = b"# HELP rota_up 1\n# TYPE rota_up gauge\nrota_up 1.0\n"


def metered(tmp_path: Path) -> tuple[TestClient, dict[str, dict[str, str]]]:
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    client = TestClient(create_app(store, metrics=lambda: TEXT), raise_server_exceptions=False)
    return client, {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}


def test_operators_and_metrics_tokens_read_the_metrics_members_do_not(tmp_path):
    client, auth = metered(tmp_path)
    scraped = client.get("/metrics", headers=auth["root"])
    assert scraped.status_code == 200 and scraped.content == TEXT
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    refused = client.get("/metrics", headers=auth["alice"])
    assert refused.status_code == 403 and "--metrics" in refused.json()["error"]["message"]
    assert client.get("/metrics").status_code == 401
    made = client.post("/v1/tokens", headers=auth["root"],
                       json={"name": "prometheus", "role": "metrics"})
    assert made.status_code == 201 and made.json()["role"] == "metrics"
    metrics = {"Authorization": f"Bearer {made.json()['token']}"}
    assert client.get("/metrics", headers=metrics).content == TEXT


def test_a_metrics_token_reads_nothing_else(tmp_path):
    client, auth = metered(tmp_path)
    assert client.post("/v1/jobs", headers=auth["alice"], json=job_file()).status_code == 201
    token = client.post("/v1/tokens", headers=auth["root"],
                        json={"name": "prometheus", "role": "metrics", "user": "alice"})
    metrics = {"Authorization": f"Bearer {token.json()['token']}"}
    for path in ("/v1/jobs", "/v1/jobs/1", "/v1/nodes", "/v1/whoami", "/v1/queues"):
        answer = client.get(path, headers=metrics)
        assert answer.status_code == 403, (path, answer.text)
        assert "may only read /metrics" in answer.text
    assert client.post("/v1/jobs", headers=metrics, json=job_file()).status_code == 403
    assert client.post("/v1/jobs/1/cancel", headers=metrics).status_code == 403


def test_only_an_operator_issues_a_metrics_token(tmp_path):
    client, auth = metered(tmp_path)
    refused = client.post("/v1/tokens", headers=auth["alice"],
                          json={"name": "mine", "role": "metrics"})
    assert refused.status_code == 403 and "operator" in refused.text


def test_without_metrics_there_is_no_route(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    client = TestClient(create_app(store), raise_server_exceptions=False)
    assert client.get("/metrics", headers={"Authorization": f"Bearer {tokens['root']}"}
                      ).status_code == 404
