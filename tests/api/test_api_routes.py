"""Every route the application has, read from its own OpenAPI schema rather than from a list
kept by hand, needs a valid token: the API with services, the gateway and metrics, so that no
router is left out of the walk."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.backends.local import LocalBackend
from rota.control.serving import Serving
from rota.store import Store
from apikit import seed_tenants

GATEWAY_POSTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")


@pytest.fixture
def full_app(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    seed_tenants(store)
    backend = LocalBackend(tmp_path / "data", node=store.list_nodes()[0][0])
    serving = Serving(store, backend, lambda: None)
    app = create_app(store, data_dir=tmp_path / "data", serving=serving,
                     metrics=lambda: b"rota_up 1\n")
    yield app
    store.close()


def operations(app) -> list[tuple[str, str]]:
    """(method, path) of every operation in the schema, each path parameter filled in."""
    return [(method, re.sub(r"\{[^}]*\}", "x", path))
            for path, item in app.openapi()["paths"].items() for method in item]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer rota_wrong"},
                                     {"Authorization": "Basic abc"}], ids=["none", "wrong", "basic"])
def test_every_route_of_the_schema_needs_a_valid_token(full_app, headers):
    client = TestClient(full_app, raise_server_exceptions=False)
    walked = operations(full_app)
    assert {("get", "/metrics"), ("get", "/v1/services"), ("get", "/v1/models"),
            ("put", "/v1/queues"), ("post", "/v1/uploads"), ("get", "/v1/accounting"),
            ("delete", "/v1/users/x/projects/x")} <= set(walked)
    assert len(walked) >= 42  # every operation of the API, services and metrics included
    for method, path in walked:
        response = client.request(method, path, headers=headers)
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"]["code"] == "unauthenticated", (method, path)
    for path in GATEWAY_POSTS:  # raw ASGI, left out of the schema; errors in OpenAI's shape
        response = client.post(path, headers=headers, json={"model": "m"})
        assert response.status_code == 401, (path, response.text)
