"""Services over HTTP and the gateway's answers that need no replica: who may create and see
a service, errors that name the field, and OpenAI-shaped errors for models one cannot reach.
(Requests that reach a replica are in tests/e2e/test_serving.py, with a real rota up.)"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from apikit import job_file, seed_tenants
from rota.api import create_app
from rota.backends.local import LocalBackend
from rota.control.serving import Serving
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store


@pytest.fixture
def gw(tmp_path):
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    tokens = seed_tenants(store)
    backend = LocalBackend(tmp_path / "data", node=store.list_nodes()[0][0])
    serving = Serving(store, backend, lambda: None)
    client = TestClient(create_app(store, data_dir=tmp_path / "data", serving=serving),
                        raise_server_exceptions=False)
    client.serving = serving
    client.who = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
    yield client
    store.close()


def service(**changes):
    body = job_file(name="tiny", kind="service", resources={"gpu": 1},
                    service={"models": ["tiny"], "replicas": {"min": 0, "max": 2},
                             "timeout": "1s"})
    body.update(changes)
    return body


def test_a_member_creates_a_service_in_its_project_and_only_its_projects_see_it(gw):
    made = gw.post("/v1/services", json=service(), headers=gw.who["alice"])
    assert made.status_code == 201, made.text
    assert (made.json()["models"], made.json()["replicas"]["max"]) == (["tiny"], 2)
    assert [s["name"] for s in gw.get("/v1/services", headers=gw.who["alice"]).json()] == \
        ["tiny"]
    assert gw.get("/v1/services", headers=gw.who["bob"]).json() == []
    assert gw.get("/v1/services/tiny", headers=gw.who["bob"]).status_code == 404
    assert gw.delete("/v1/services/tiny", headers=gw.who["bob"]).status_code == 404
    assert gw.get("/v1/services/tiny", headers=gw.who["root"]).status_code == 200
    assert gw.delete("/v1/services/tiny", headers=gw.who["alice"]).json()["deleted"]
    assert gw.get("/v1/services/tiny", headers=gw.who["alice"]).status_code == 404


@pytest.mark.parametrize("body, status, field", [
    (service(project="q"), 422, "project"),                   # alice is not in q
    (service(service=None), 422, "service"),
    (service(name=None), 422, "name"),
    (service(kind="batch"), 422, "kind"),
    (service(service={"models": ["tiny"], "replicas": {"min": 2, "max": 1}}), 422,
     "service.replicas.min"),
    (service(entrypoint=None), 422, "entrypoint"),
], ids=["other-project", "no-service", "no-name", "not-kind-service", "min-above-max",
        "no-entrypoint"])
def test_a_bad_service_is_refused_naming_the_field(gw, body, status, field):
    body = {k: v for k, v in body.items() if v is not None}
    answer = gw.post("/v1/services", json=body, headers=gw.who["alice"])
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["field"] == field


def test_a_model_served_already_is_refused_and_a_job_cannot_carry_a_service(gw):
    assert gw.post("/v1/services", json=service(), headers=gw.who["alice"]).status_code == 201
    again = gw.post("/v1/services", json=service(name="other"), headers=gw.who["root"])
    assert (again.status_code, again.json()["error"]["code"]) == (409, "model_taken")
    as_job = gw.post("/v1/jobs", json=service(name="x"), headers=gw.who["alice"])
    assert (as_job.status_code, as_job.json()["error"]["field"]) == (422, "service")


def openai_client(gw, user: str):
    """The official client, talking to the app in this process (the test client is an httpx
    client); only what it cannot send (a body without a model, one that is not JSON) is sent
    by hand below."""
    openai = pytest.importorskip("openai", reason="the official openai client is a test "
                                 "dependency")
    token = gw.who[user]["Authorization"].split()[1]
    return openai, openai.OpenAI(base_url="http://testserver/v1", api_key=token, http_client=gw,
                                 max_retries=0)


def test_the_gateway_lists_and_reaches_only_ones_own_models(gw):
    gw.post("/v1/services", json=service(), headers=gw.who["alice"])
    openai, alice = openai_client(gw, "alice")
    _, bob = openai_client(gw, "bob")
    assert [m.id for m in alice.models.list()] == ["tiny"]
    assert alice.models.retrieve("tiny").owned_by == "p"
    assert [m.id for m in bob.models.list()] == []
    with pytest.raises(openai.NotFoundError) as hidden:
        bob.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    assert hidden.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        bob.models.retrieve("tiny")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url="http://testserver/v1", api_key="nope", http_client=gw,
                      max_retries=0).models.list()
    nobody = gw.post("/v1/completions", json={"prompt": "x"}, headers=gw.who["alice"])
    assert (nobody.status_code, nobody.json()["error"]["param"]) == (400, "model")
    garbage = gw.post("/v1/embeddings", content=b"{", headers=gw.who["alice"])
    assert garbage.status_code == 400


def test_a_request_no_replica_answers_in_time_gets_503_with_retry_after(gw):
    gw.post("/v1/services", json=service(), headers=gw.who["alice"])
    openai, alice = openai_client(gw, "alice")
    with pytest.raises(openai.APIStatusError) as raised:
        alice.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 503
    assert int(raised.value.response.headers["Retry-After"]) > 0
    assert "no replica of service tiny became ready within 1 s" in raised.value.message


def test_a_deleted_service_s_models_answer_404_at_once(gw):
    gw.post("/v1/services", json=service(), headers=gw.who["alice"])
    gw.delete("/v1/services/tiny", headers=gw.who["alice"])
    openai, alice = openai_client(gw, "alice")
    assert [m.id for m in alice.models.list()] == []
    with pytest.raises(openai.NotFoundError):
        alice.completions.create(model="tiny", prompt="hi")


def test_a_job_s_own_token_calls_only_the_models_of_its_project(gw):
    store = gw.serving.store
    store.create_user("carol", ["p", "q"])
    carol = {"Authorization": f"Bearer {store.issue_token('carol', 't').token}"}
    assert gw.post("/v1/services", json=service(), headers=gw.who["alice"]).status_code == 201
    other = service(name="other", project="q", queue="q",
                    service={"models": ["other"], "replicas": {"min": 0, "max": 1}})
    assert gw.post("/v1/services", json=other, headers=gw.who["bob"]).status_code == 201
    assert {m["id"] for m in gw.get("/v1/models", headers=carol).json()["data"]} == \
        {"tiny", "other"}
    job = gw.post("/v1/jobs", json=job_file(name="eval", project="q", queue="q"),
                  headers=carol).json()["id"]
    store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    store.transition(job, JobState.RUNNING, backend_handle={"launch_id": "x"})
    own = {"Authorization": f"Bearer {store.issue_job_token(job, 0)}"}
    # carol sees both projects' models; her job's token, only those of the job's project q
    listed = gw.get("/v1/models", headers=own)
    assert listed.status_code == 200, listed.text
    assert [m["id"] for m in listed.json()["data"]] == ["other"]
    assert gw.get("/v1/models/other", headers=own).status_code == 200
    hidden = gw.get("/v1/models/tiny", headers=own)
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "model_not_found")
    call = gw.post("/v1/chat/completions", headers=own,
                   json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})
    assert (call.status_code, call.json()["error"]["code"]) == (404, "model_not_found")
    # the rest of the API stays closed to it
    assert gw.get("/v1/services", headers=own).status_code == 403
    assert gw.post("/v1/jobs", json=job_file(project="q", queue="q"),
                   headers=own).status_code == 403
    store.transition(job, JobState.SUCCEEDED, exit_code=0)  # the attempt ends, its token too
    assert gw.get("/v1/models", headers=own).status_code == 401


def ui_login(client, token_header: dict[str, str]) -> None:
    token = token_header["Authorization"].split()[1]
    reply = client.post("/ui/login", data={"token": token, "next": "/ui/services"},
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text


def test_the_dashboards_services_page_shows_what_rota_services_shows(gw):
    assert gw.post("/v1/services", json=service(), headers=gw.who["alice"]).status_code == 201
    ui_login(gw, gw.who["alice"])
    text = gw.get("/ui/services").text
    row = text.split('id="service-tiny">', 1)[1].split("</tr>", 1)[0]
    assert "<td>tiny</td><td>tiny</td><td>p</td><td>q</td>" in row
    assert "0/0 (0-2)" in row and "stands by" not in text
    ui_login(gw, gw.who["bob"])  # another project's service is not shown
    assert 'id="service-tiny"' not in gw.get("/ui/services").text


def test_a_standby_dashboard_lists_the_stored_services(tmp_path):
    """Without a serving runtime (a standby's), the services are listed as stored."""
    store = Store.open(tmp_path / "db", clock=lambda: 100.0)
    try:
        tokens = seed_tenants(store)
        leader = TestClient(create_app(store, data_dir=tmp_path / "data", serving=Serving(
            store, LocalBackend(tmp_path / "data", node=store.list_nodes()[0][0]),
            lambda: None)))
        who = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
        assert leader.post("/v1/services", json=service(), headers=who["alice"]).status_code \
            == 201
        standby = TestClient(create_app(store, data_dir=tmp_path / "data"))
        ui_login(standby, who["alice"])
        text = standby.get("/ui/services").text
        assert 'id="service-tiny"' in text and "stands by" in text
    finally:
        store.close()


def test_a_streamed_request_waiting_for_a_replica_hears_progress_then_why_it_gave_up(gw):
    """A streamed request gets its stream at once while it waits: SSE comments saying how long
    it has waited, then OpenAI's in-stream error (which the official client raises)."""
    gw.post("/v1/services", json=service(service={
        "models": ["tiny"], "replicas": {"min": 0, "max": 2}, "timeout": "3s"}),
        headers=gw.who["alice"])
    ask = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with gw.stream("POST", "/v1/chat/completions", json=ask, headers=gw.who["alice"]) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line]
    assert lines[0] == ": waiting for a replica of service tiny"
    assert lines[1].startswith(": waiting for a replica of service tiny: ")
    error = json.loads(lines[-1].removeprefix("data: "))["error"]
    assert error["code"] == "no_ready_replica"
    assert "no replica of service tiny became ready within 3 s" in error["message"]

    openai, alice = openai_client(gw, "alice")
    with pytest.raises(openai.APIError, match="became ready within 3 s"):
        list(alice.chat.completions.create(**ask))


def test_a_streamed_request_refused_at_once_is_an_ordinary_503(gw):
    gw.post("/v1/services", json=service(service={
        "models": ["tiny"], "replicas": {"min": 0, "max": 2}, "timeout": "3s", "queue": 0}),
        headers=gw.who["alice"])
    ask = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    refused = gw.post("/v1/chat/completions", json=ask, headers=gw.who["alice"])
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
    assert refused.json()["error"]["code"] == "no_ready_replica"


def test_a_service_shows_its_headroom_and_load_time(gw):
    body = service(service={"models": ["tiny"], "replicas": {"min": 0, "max": 2},
                            "headroom": 1, "load": "10m"})
    assert gw.post("/v1/services", json=body, headers=gw.who["alice"]).status_code == 201
    shown = gw.get("/v1/services/tiny", headers=gw.who["alice"]).json()
    assert (shown["headroom"], shown["load_s"]) == (1, 600.0)
    gw.serving.tick()  # the runtime's view says the same
    shown = gw.get("/v1/services/tiny", headers=gw.who["alice"]).json()
    assert (shown["headroom"], shown["load_s"]) == (1, 600.0)
