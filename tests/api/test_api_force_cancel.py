"""``POST /v1/jobs/{id}/cancel?force=true``: an operator ends an active job CANCELLED at once,
without waiting for its backend, and its GPU is free for the next pass; a member is refused
(403, naming why) and the job is untouched."""

from __future__ import annotations

from fastapi.testclient import TestClient

from rota.api import create_app
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store
from apikit import seed_tenants

ONE_GPU = {"project": "p", "queue": "q", "gpu": 1, "name": "train"}


def test_only_an_operator_force_cancels_and_the_gpu_is_free_at_once(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    auth = {u: {"Authorization": f"Bearer {t}"} for u, t in seed_tenants(store, gpus=1).items()}
    client = TestClient(create_app(store), raise_server_exceptions=False)
    policy = build_policy("default")
    try:
        stuck = client.post("/v1/jobs", headers=auth["alice"], json=ONE_GPU).json()["id"]
        store.apply(run_cycle(store.snapshot(100.0), policy, 100.0), 100.0)
        store.transition(str(stuck), JobState.RUNNING)
        refused = client.post(f"/v1/jobs/{stuck}/cancel?force=true", headers=auth["alice"])
        assert refused.status_code == 403
        error = refused.json()["error"]
        assert error["code"] == "forbidden" and "operator" in error["message"]
        assert "alice" in error["message"]
        shown = client.get(f"/v1/jobs/{stuck}", headers=auth["alice"]).json()
        assert shown["state"] == "running" and not shown["cancel_requested"]

        nxt = client.post("/v1/jobs", headers=auth["alice"], json=ONE_GPU).json()["id"]
        store.apply(run_cycle(store.snapshot(100.0), policy, 100.0), 100.0)
        assert store.get_job(str(nxt)).state is JobState.PENDING      # the one GPU is taken
        forced = client.post(f"/v1/jobs/{stuck}/cancel?force=true", headers=auth["root"])
        assert forced.status_code == 200, forced.text
        assert (forced.json()["state"], forced.json()["reason"]) == (
            "cancelled", "force-cancelled by root")
        shown = client.get(f"/v1/jobs/{stuck}", headers=auth["root"]).json()
        assert shown["history"][-1]["end"] == "cancelled"
        store.apply(run_cycle(store.snapshot(100.0), policy, 100.0), 100.0)
        assert store.get_job(str(nxt)).state is JobState.SCHEDULED    # on the freed GPU
        again = client.post(f"/v1/jobs/{stuck}/cancel?force=true", headers=auth["root"])
        assert again.status_code == 409 and "already cancelled" in again.json()["error"]["message"]
    finally:
        store.close()
