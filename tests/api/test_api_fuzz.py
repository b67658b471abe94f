"""The whole HTTP API, fuzzed from its own OpenAPI schema (schemathesis), as an operator and as
a member: no request makes the server fail (5xx), and no answer to the member carries anything
of a project it is not in.

The store holds a job of project ``q`` (bob's) whose name, environment, command and log carry
a marker; alice, a member of ``p`` only, must never see it, whatever she sends. Tokens have
names the fuzzer will not guess, so that it cannot revoke the one it is using.

Examples per operation and role: ``ROTA_FUZZ_EXAMPLES`` (default 15, derandomized so that CI
runs the same requests every time; set ``ROTA_FUZZ_RANDOM=1`` to explore further).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from apikit import job_file, seed_tenants
from rota.api import create_app
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import LocalBackend, Proc
from rota.control.logs import log_reader
from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store

MARKER = "BOB-PRIVATE-7c1e"
EXAMPLES = int(os.environ.get("ROTA_FUZZ_EXAMPLES", "15"))
RANDOM = os.environ.get("ROTA_FUZZ_RANDOM") == "1"
BASE = Path(os.environ.get("ROTA_FUZZ_DIR", "/tmp")) / f"rota-fuzz-{os.getpid()}"


def build() -> tuple:
    """A store with two projects, a member of each, an operator, bob's marked running job and
    alice's own; the app over it, with the local backend's logs."""
    data = BASE / "data"
    data.mkdir(parents=True, exist_ok=True)
    store = Store.open(data, clock=lambda: 100.0)
    tokens = seed_tenants(store, token="fuzz-token-kq93")
    node = store.list_nodes()[0][0]
    app = create_app(store, data_dir=data, log_poll_s=0.01,
                     read_log=log_reader(LocalBackend(data, node=node)))
    return store, app, tokens


def _seed_jobs(store: Store, client_headers) -> None:
    from fastapi.testclient import TestClient
    client = TestClient(APP, raise_server_exceptions=False)
    secret = job_file(name=f"job-{MARKER}", project="q", env={"TOKEN": MARKER},
                      entrypoint=f"echo {MARKER}")
    bob = client.post("/v1/jobs", headers=client_headers("bob"), json=secret).json()["id"]
    client.post("/v1/jobs", headers=client_headers("alice"), json=job_file())
    store.apply(run_cycle(store.snapshot(100.0), build_policy("default"), 100.0), 100.0)
    out = BASE / "bob.out"
    out.write_text(f"{MARKER}\n")
    handle = Handle("local", bob, str(BASE), (
        ReplicaHandle(0, "n1", ref=Proc(4242, 1, str(BASE), str(out), str(out)).ref()),),
        ref={"boot_id": "boot"})
    store.transition(bob, JobState.RUNNING, backend_handle=handle.to_dict())


STORE, APP, TOKENS = build()


def headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


_seed_jobs(STORE, headers)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM,
                suppress_health_check=list(HealthCheck), database=None)


def _check(case, user: str) -> None:
    response = case.call(headers=headers(user))
    request = f"{case.method} {case.formatted_path} as {user}"
    assert response.status_code < 500, f"{request}: {response.status_code} {response.text[:500]}"
    if user == "alice":
        assert MARKER not in response.text, f"{request} leaked bob's job: {response.text[:500]}"


@schema.parametrize()
@FUZZ
def test_an_operator_never_gets_a_server_error(case) -> None:
    _check(case, "root")


@schema.parametrize()
@FUZZ
def test_a_member_never_gets_a_server_error_nor_another_projects_data(case) -> None:
    _check(case, "alice")


def test_the_marked_job_is_there_to_be_found() -> None:
    """The fuzzing above would prove nothing if bob's job did not exist with its marker."""
    from fastapi.testclient import TestClient
    client = TestClient(APP)
    jobs = client.get("/v1/jobs", headers=headers("bob")).json()["items"]
    assert any(MARKER in j["name"] for j in jobs)
    marked = next(j for j in jobs if MARKER in j["name"])
    assert MARKER in client.get(f"/v1/jobs/{marked['id']}/logs", headers=headers("bob")).text
    assert client.get(f"/v1/jobs/{marked['id']}", headers=headers("alice")).status_code == 404


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    STORE.close()
    import shutil
    shutil.rmtree(BASE, ignore_errors=True)


@pytest.mark.parametrize("path", [
    "/v1/jobs/%C2%B9", "/v1/jobs/%D9%A2", "/v1/jobs/%C2%B9/events", "/v1/jobs/%C2%B9/logs",
    "/v1/jobs/%EF%BC%92", "/v1/jobs/1%20", "/v1/jobs/" + "9" * 19,
], ids=["superscript-one", "arabic-indic-two", "events", "logs", "fullwidth-two", "space",
        "too-long"])
def test_a_job_id_is_ascii_digits_or_no_job(path: str) -> None:
    """Ids that ``str.isdigit`` takes but ``int`` refuses (``¹``) or reads as another number
    (``٢`` is 2) name no job: 404, never a 500 nor job 2."""
    from fastapi.testclient import TestClient
    client = TestClient(APP, raise_server_exceptions=False)
    answer = client.get(path, headers=headers("root"))
    assert answer.status_code == 404, answer.text
    cancel = client.post(path.split("/events")[0].split("/logs")[0] + "/cancel",
                         headers=headers("root"))
    assert cancel.status_code == 404


@pytest.mark.parametrize("after", ["%C2%B9", "%D9%A2", "-1", "1e3", "9" * 19])
def test_a_page_cursor_is_ascii_digits(after: str) -> None:
    from fastapi.testclient import TestClient
    client = TestClient(APP, raise_server_exceptions=False)
    answer = client.get(f"/v1/jobs?after={after}", headers=headers("root"))
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "after"
