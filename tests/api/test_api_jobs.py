"""The HTTP API over a real SQLite store: bearer auth on every route, member vs operator
visibility, errors as ``{"error": {code, message, field}}`` with the right status."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from rota.api import create_app
from rota.scheduler import build_policy, run_cycle
from rota.store import Store
from apikit import seed_tenants


@pytest.fixture
def world(tmp_path):
    yield from world_in(tmp_path, 100.0)


@pytest.fixture
def either_world(db_url):
    """The world on SQLite, then on PostgreSQL, at a time of seventeen significant digits."""
    yield from world_in(db_url, 1_764_230_400.123_456_7)


def world_in(where, now: float):
    store = Store.open(where, clock=lambda: now)
    tokens = seed_tenants(store, gpus=1)
    client = TestClient(create_app(store), raise_server_exceptions=False)
    yield store, client, {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    store.close()


ROUTES = [("get", "/v1/whoami"), ("get", "/v1/projects"), ("get", "/v1/queues"),
          ("get", "/v1/nodes"), ("get", "/v1/jobs"), ("get", "/v1/jobs/1"),
          ("post", "/v1/jobs"), ("post", "/v1/jobs/1/cancel"), ("get", "/v1/jobs/1/events"),
          ("get", "/v1/usage"), ("post", "/v1/tokens"), ("post", "/v1/projects")]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer rota_wrong"},
                                     {"Authorization": "Basic abc"}], ids=["none", "wrong", "basic"])
def test_every_route_needs_a_valid_token(world, headers):
    _, client, _ = world
    for method, path in ROUTES:
        response = getattr(client, method)(path, headers=headers)
        assert response.status_code == 401, (method, path)
        assert response.json()["error"]["code"] == "unauthenticated"


def test_a_member_submits_lists_shows_and_cancels_only_its_projects_jobs(world):
    store, client, auth = world
    created = client.post("/v1/jobs", headers=auth["alice"],
                          json={"project": "p", "queue": "q", "gpu": 1, "cpu": "500m",
                                "memory": "8Gi", "walltime": "1h", "name": "train"})
    assert created.status_code == 201, created.text
    job = created.json()
    assert (job["state"], job["user"], job["request"]["cpu_milli"], job["walltime_s"]) == (
        "pending", "alice", 500, 3600.0)
    bob_job = client.post("/v1/jobs", headers=auth["bob"], json={"project": "q", "queue": "q", "entrypoint": "true"}).json()
    assert [j["id"] for j in client.get("/v1/jobs", headers=auth["alice"]).json()["items"]] == [job["id"]]
    assert len(client.get("/v1/jobs", headers=auth["root"]).json()["items"]) == 2
    for path in (f"/v1/jobs/{bob_job['id']}", f"/v1/jobs/{bob_job['id']}/events"):
        response = client.get(path, headers=auth["alice"])
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.post(f"/v1/jobs/{bob_job['id']}/cancel", headers=auth["alice"]).status_code == 404
    # the scheduler binds it; show explains placement
    snap = store.snapshot(100.0)
    store.apply(run_cycle(snap, build_policy("default"), 100.0), 100.0)
    shown = client.get(f"/v1/jobs/{job['id']}", headers=auth["alice"]).json()
    assert shown["state"] == "scheduled" and shown["placement"][0]["node"] == "n1"
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth["alice"]).json()
    assert cancelled["cancel_requested"] is True
    kinds = [e["kind"] for e in client.get(f"/v1/jobs/{job['id']}/events", headers=auth["alice"]).json()]
    assert kinds == ["submitted", "state", "cancel-requested"]


@pytest.mark.parametrize("body, field", [
    ({"project": "p", "queue": "q", "gpu": 1.5}, "gpu"),
    ({"project": "p", "queue": "q", "memory": "16Qi"}, "memory"),
    ({"project": "p", "queue": "nope", "entrypoint": "true"}, "queue"),
    ({"project": "q", "queue": "q", "entrypoint": "true"}, "project"),  # alice is not in q
    ({"project": "p", "queue": "q", "replicas": 0}, "replicas"),
    ({"project": "p", "queue": "q", "colour": "red"}, "colour"),
    ({"queue": "q"}, "entrypoint"),  # the project is rota's choice (test_api_jobfile.py)
], ids=["gpu", "memory", "queue", "foreign-project", "replicas", "unknown-key", "missing"])
def test_bad_submissions_are_422_naming_the_field(world, body, field):
    _, client, auth = world
    response = client.post("/v1/jobs", headers=auth["alice"], json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_spec" and error["field"] == field, error


def test_list_filters_and_errors(world):
    _, client, auth = world
    ids = [client.post("/v1/jobs", headers=auth["root"] , json={"project": "p", "queue": "q",
                                                          "entrypoint": "true"})
           for _ in range(3)]
    assert all(r.status_code == 201 for r in ids)
    page = client.get("/v1/jobs?limit=2", headers=auth["root"]).json()
    rest = client.get(f"/v1/jobs?limit=2&after={page['next_after']}", headers=auth["root"]).json()
    assert len(page["items"]) == 2 and len(rest["items"]) == 1 and rest["next_after"] is None
    assert client.get("/v1/jobs?state=pending", headers=auth["root"]).json()["items"]
    bad = client.get("/v1/jobs?state=sleeping", headers=auth["root"])
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "state"
    assert client.get("/v1/jobs?limit=0", headers=auth["root"]).json()["error"]["field"] == "limit"


def test_operator_only_routes_and_token_issue(world):
    _, client, auth = world
    denied = client.post("/v1/projects", headers=auth["alice"], json={"name": "x"})
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
    assert client.post("/v1/projects", headers=auth["root"], json={"name": "x"}).status_code == 201
    again = client.post("/v1/projects", headers=auth["root"], json={"name": "x"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"
    issued = client.post("/v1/tokens", headers=auth["alice"], json={"name": "laptop"}).json()
    assert client.get("/v1/whoami", headers={"Authorization": f"Bearer {issued['token']}"}).json() == {
        "user": "alice", "role": "member", "projects": ["p"]}
    escalate = client.post("/v1/tokens", headers=auth["alice"], json={"name": "x", "role": "operator"})
    assert escalate.status_code == 403


SAME = ("id", "name", "project", "user", "queue", "state", "priority", "replicas", "placement",
        "submit_time", "exit_code", "reason", "array_id", "array_index", "array_limit",
        "started_at", "finished_at", "walltime_s", "estimated_start")


def test_the_brief_view_is_the_full_views_values_that_rota_ps_shows(either_world):
    """Placed, waiting with reasons, an array, another project's job, on either database:
    each brief view holds the full view's values as they are, the request's numbers, and the
    wait reasons' codes; a member sees only its projects' jobs in either view."""
    store, client, auth = either_world
    for body in ({"resources": {"gpu": 1}, "name": "placed"},
                 {"resources": {"gpu": 0.5, "gpu_memory": "20Gi"}, "name": "waits"},
                 {"array": "0-2%2"}):
        posted = client.post("/v1/jobs", headers=auth["alice"],
                             json={"project": "p", "queue": "q", "entrypoint": "x", **body})
        assert posted.status_code == 201, posted.text
    client.post("/v1/jobs", headers=auth["bob"], json={"project": "q", "queue": "q",
                                                       "entrypoint": "true"})
    now = 1_764_230_401.0
    store.apply(run_cycle(store.snapshot(now), build_policy("default"), now), now)
    for who, seen in (("alice", {"p"}), ("root", {"p", "q"})):
        full = client.get("/v1/jobs", headers=auth[who]).json()["items"]
        page = client.get("/v1/jobs?view=brief", headers=auth[who]).json()
        brief = [dict(zip(page["columns"], values)) for values in page["items"]]
        assert {j["project"] for j in brief} == seen and len(brief) == len(full)
        for b, f in zip(brief, full):
            request, gpu = f["request"], f["request"]["gpu"]
            assert b == {**{k: f[k] for k in SAME}, "cpu_milli": request["cpu_milli"],
                         "memory_mib": request["memory_mib"], "gpu_count": gpu["count"],
                         "gpu_share": gpu["share"], "gpu_memory_mib": gpu["memory_mib"],
                         "wait_codes": [r["code"] for r in f["wait_reasons"]],
                         # what its attempts held (tests/store: exact), none before one
                         "gpu_seconds": None if f["placement"] is None else b["gpu_seconds"],
                         "max_rss_kib": None}
            if f["placement"] is not None:
                assert b["gpu_seconds"] >= 0
    asked = client.get("/v1/jobs?view=brief&project=q", headers=auth["alice"]).json()
    assert asked["items"] == []  # another project's jobs, asked for by name: none
    full = client.get("/v1/jobs", headers=auth["alice"]).json()["items"]
    assert any(j["placement"] for j in full) and any(j["wait_reasons"] for j in full)
    assert any(j["array_id"] for j in full) and any(j["request"]["gpu"]["memory_mib"]
                                                    for j in full)


def test_brief_pages_hold_up_to_ten_thousand_jobs_and_full_ones_a_thousand(either_world):
    _, client, auth = either_world
    for _ in range(3):
        client.post("/v1/jobs", headers=auth["root"], json={"project": "p", "queue": "q",
                                                            "entrypoint": "true"})
    page = client.get("/v1/jobs?view=brief&limit=2", headers=auth["root"]).json()
    rest = client.get(f"/v1/jobs?view=brief&after={page['next_after']}",
                      headers=auth["root"]).json()
    assert [len(page["items"]), len(rest["items"]), rest["next_after"]] == [2, 1, None]
    assert len(client.get("/v1/jobs?view=brief&limit=10000",
                          headers=auth["root"]).json()["items"]) == 3
    some = client.get("/v1/jobs?view=brief&columns=state,id&columns=gpu_count",
                      headers=auth["root"]).json()
    every = client.get("/v1/jobs?view=brief", headers=auth["root"]).json()
    assert some["columns"] == ["id", "state", "gpu_count"]  # in the brief view's own order
    assert some["items"] == [[i[every["columns"].index(c)] for c in some["columns"]]
                             for i in every["items"]]
    for query, field in (("view=brief&limit=10001", "limit"), ("limit=1001", "limit"),
                         ("view=short", "view"), ("view=brief&columns=id,nope", "columns"),
                         ("columns=id", "columns")):
        bad = client.get(f"/v1/jobs?{query}", headers=auth["root"])
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text
