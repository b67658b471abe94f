"""``GET /v1/accounting`` and budgets through the API: a member sees only their projects'
rows, an operator all; only an operator sets a budget (403 with the reason otherwise); a
project's budget shows in the project list and on its jobs; bad ranges name the parameter."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.core import DeviceShare, JobState, Placement, ReplicaPlacement
from rota.scheduler import Bind, Decisions
from rota.store import Store
from apikit import job_file, seed_tenants

T0 = datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()
H = 3600.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def setup(tmp_path):
    """Alice's job in p on 1 GPU and bob's in q on half a GPU, both from T0; now T0 + 2 h."""
    clock = Clock()
    store = Store.open(tmp_path / "db", clock=clock)
    tokens = seed_tenants(store, gpus=2)
    client = TestClient(create_app(store, clock=clock), raise_server_exceptions=False)
    auth = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    ids = {}
    for user, project, share, index in (("alice", "p", 1000, 0), ("bob", "q", 500, 1)):
        body = job_file(project=project, resources={"gpu": share / 1000, "cpu": 1,
                                                    "memory": "1Gi"})
        made = client.post("/v1/jobs", headers=auth[user], json=body)
        assert made.status_code == 201, made.text
        job = made.json()["id"]
        placement = Placement((ReplicaPlacement("n1", (DeviceShare(index, share, 1024),)),))
        assert store.apply(Decisions(binds=[Bind(job, placement, "any")]), T0).bound == (job,)
        store.transition(job, JobState.RUNNING)
        ids[user] = job
    clock.t = T0 + 2 * H
    yield client, auth, store, ids
    store.close()


def test_a_member_sees_only_their_projects_rows_and_an_operator_all(setup):
    client, auth, _, _ = setup
    query = {"since": "2026-11-01", "by": "project,user,model"}
    mine = client.get("/v1/accounting", params=query, headers=auth["alice"]).json()
    assert [(r["project"], r["user"], r["model"], r["gpu_hours"]) for r in mine["rows"]] == [
        ("p", "alice", "H100", 2.0)]  # 1 GPU x 2 h, still running: counted up to now
    assert mine["total"]["gpu_hours"] == 2.0 and mine["by"] == ["project", "user", "model"]
    asked = client.get("/v1/accounting", params={**query, "project": "q"},
                       headers=auth["alice"]).json()
    assert asked["rows"] == []  # another project's rows are simply not there
    every = client.get("/v1/accounting", params=query, headers=auth["root"]).json()
    assert [(r["project"], r["gpu_hours"]) for r in every["rows"]] == [("p", 2.0), ("q", 1.0)]
    assert every["until"] == every["now"] == "2026-11-02T02:00:00Z"
    assert every["since"] == "2026-11-01T00:00:00Z"


@pytest.mark.parametrize("since, until, hours", [
    ("now-1hour", None, 1.0), ("90m", None, 1.5), ("1d", "now-30m", 1.5),
    ("now-1w", "now", 2.0),
], ids=["now-minus", "ago", "both", "week"])
def test_times_relative_to_the_servers_now_as_sacct_reads_them(setup, since, until, hours):
    """``now-7days``, ``2h`` (ago), ``now``: from the server's clock (here 2 h after both jobs
    of project p and q started; p's holds one GPU)."""
    client, auth, _, _ = setup
    params = {"since": since, **({"until": until} if until else {})}
    got = client.get("/v1/accounting", params=params, headers=auth["alice"]).json()
    assert got["total"]["gpu_hours"] == pytest.approx(hours), got


def test_costs_show_in_the_queues_file_currency(setup):
    client, auth, _, _ = setup
    applied = client.put("/v1/queues", headers=auth["root"], json={
        "queues": [{"name": "q"}], "prices": {"currency": "EUR", "gpu_hour": {"H100": 2.5}}})
    assert applied.status_code == 200, applied.text
    got = client.get("/v1/accounting", params={"since": "2026-11-01", "until": "2026-12-01"},
                     headers=auth["root"]).json()
    assert got["currency"] == "EUR"
    assert [(r["project"], r["cost"]) for r in got["rows"]] == [("p", 5.0), ("q", 2.5)]
    assert got["total"]["cost"] == 7.5 and got["unpriced_models"] == []


@pytest.mark.parametrize("params, field", [
    ({"since": "yesterday"}, "since"),
    ({"since": "now+2h"}, "since"),
    ({"since": "2 fortnights"}, "since"),
    ({"since": "2026-11-02", "until": "2026-11-01"}, "until"),
    ({"since": "2026-11-03"}, "since"),
    ({"since": "2026-11-01", "by": "project,team"}, "by"),
    ({}, "since"),
], ids=["not-a-date", "future-relative", "unknown-unit", "backwards", "future", "unknown-key",
         "missing"])
def test_a_bad_range_or_key_names_the_parameter(setup, params, field):
    client, auth, _, _ = setup
    refused = client.get("/v1/accounting", params=params, headers=auth["alice"])
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] in (field, f"query.{field}")


def test_only_an_operator_sets_a_budget_and_everyone_sees_their_projects(setup):
    client, auth, _, ids = setup
    refused = client.put("/v1/projects/p/budget", headers=auth["alice"],
                         json={"soft_gpu_hours": 1, "hard_gpu_hours": 100})
    assert refused.status_code == 403
    assert "only an operator" in refused.json()["error"]["message"]
    done = client.put("/v1/projects/p/budget", headers=auth["root"],
                      json={"soft_gpu_hours": 1, "hard_gpu_hours": 100})
    assert done.status_code == 200
    assert done.json()["budget"] == {
        "month": "2026-11", "soft_gpu_hours": 1.0, "hard_gpu_hours": 100.0,
        "used_gpu_hours": 2.0, "state": "over-soft", "resets_at": "2026-12-01T00:00:00Z"}
    listed = client.get("/v1/projects", headers=auth["alice"]).json()
    assert [(p["name"], p["budget"]["state"]) for p in listed] == [("p", "over-soft")]
    everyone = client.get("/v1/projects", headers=auth["root"]).json()
    assert {p["name"]: p["budget"] for p in everyone}["q"] is None
    shown = client.get(f"/v1/jobs/{ids['alice']}", headers=auth["alice"]).json()
    assert shown["budget"]["state"] == "over-soft"
    wrong = client.put("/v1/projects/p/budget", headers=auth["root"],
                       json={"soft_gpu_hours": 10, "hard_gpu_hours": 5})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "soft"
    missing = client.put("/v1/projects/nope/budget", headers=auth["root"],
                         json={"hard_gpu_hours": 5})
    assert missing.status_code == 404
