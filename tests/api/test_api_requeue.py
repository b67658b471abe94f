"""``POST /v1/jobs/{id}/requeue``, as ``scontrol requeue``: a scheduled or running job moves to
PREEMPTING with its grace period (the control loop then stops it and requeues it:
tests/control/test_loop_requeue.py); its owner or an operator may ask, another member of its
project is refused (403), another project's user does not see it (404); a pending, finished or
already stopping job is refused (409), naming why."""

from __future__ import annotations

from fastapi.testclient import TestClient

from rota.api import create_app
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store
from apikit import seed_tenants

ONE_GPU = {"project": "p", "queue": "q", "gpu": 1, "name": "train"}


def test_the_owner_or_an_operator_requeues_and_no_one_else(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    auth = {u: {"Authorization": f"Bearer {t}"} for u, t in seed_tenants(store).items()}
    store.create_user("carol", ["p"])
    auth["carol"] = {"Authorization": "Bearer " + store.issue_token("carol", "t").token}
    client = TestClient(create_app(store), raise_server_exceptions=False)
    post = lambda job, who: client.post(f"/v1/jobs/{job}/requeue", headers=auth[who])
    try:
        first, second = (client.post("/v1/jobs", headers=auth["alice"], json=ONE_GPU).json()["id"]
                         for _ in range(2))
        store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
        store.transition(str(first), JobState.RUNNING)

        assert post(first, "bob").status_code == 404         # another project's job
        refused = post(first, "carol")                        # same project, not the owner
        assert refused.status_code == 403
        assert "owner (alice) or an operator" in refused.json()["error"]["message"]
        assert store.get_job(str(first)).state is JobState.RUNNING

        done = post(first, "alice")
        assert done.status_code == 200, done.text
        assert (done.json()["state"], done.json()["reason"]) == ("preempting",
                                                                 "requeued by alice")
        assert store.get_job(str(first)).preempt_deadline == 100.0 + 30  # its default grace
        again = post(first, "alice")
        assert again.status_code == 409 and "already stopping" in again.json()["error"]["message"]

        by_root = post(second, "root")                        # scheduled, not started yet
        assert (by_root.json()["state"], by_root.json()["reason"]) == ("preempting",
                                                                       "requeued by root")
        pending = client.post("/v1/jobs", headers=auth["alice"], json=ONE_GPU).json()["id"]
        refused = post(pending, "alice")
        assert refused.status_code == 409 and "already pending" in refused.json()["error"]["message"]
        client.post(f"/v1/jobs/{pending}/cancel", headers=auth["alice"])
        refused = post(pending, "alice")
        assert refused.status_code == 409
        assert "a finished job is not requeued; submit it again" in \
            refused.json()["error"]["message"]
    finally:
        store.close()
