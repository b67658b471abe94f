"""A real SQLite store behind the app, with a data directory and a wake-up counter."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.backends.local import LocalBackend
from rota.control.logs import log_reader
from rota.store import Store
from apikit import job_file, seed_tenants  # noqa: F401  (job_file: importable from here)


@dataclass
class Api:
    store: Store
    client: TestClient
    auth: dict[str, dict[str, str]]
    data_dir: Path
    wakes: list[int] = field(default_factory=list)

    def post_job(self, body: dict[str, Any], user: str = "alice"):
        return self.client.post("/v1/jobs", headers=self.auth[user], json=body)


def make_api(tmp_path: Path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    wakes: list[int] = []
    backend = LocalBackend(tmp_path / "data", node=store.list_nodes()[0][0])
    app = create_app(store, data_dir=tmp_path / "data", on_change=lambda: wakes.append(1),
                     max_upload_bytes=64 * 1024, log_poll_s=0.01, read_log=log_reader(backend))
    client = TestClient(app, raise_server_exceptions=False)
    return Api(store, client, {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()},
               tmp_path / "data", wakes)


@pytest.fixture
def api(tmp_path):
    made = make_api(tmp_path)
    yield made
    made.store.close()


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory):
    """One app for a module of tests that leave nothing the others read."""
    made = make_api(tmp_path_factory.mktemp("api"))
    yield made
    made.store.close()
