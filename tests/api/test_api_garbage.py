"""Garbage to every route: wrong types, unknown keys, huge and negative numbers, bad ids. Each
is answered 4xx with the error body, never 500."""

from __future__ import annotations

import pytest
from apikit import job_file

BIG = 10 ** 30
GARBAGE = [
    # (method, path, keyword arguments for the test client)
    ("get", "/v1/jobs/abc", {}),
    ("get", "/v1/jobs/-1", {}),
    ("get", f"/v1/jobs/{BIG}", {}),
    ("get", "/v1/jobs/1%2F..", {}),
    ("get", "/v1/jobs/%00", {}),
    ("get", "/v1/jobs/1/events?after=-5", {}),
    ("get", f"/v1/jobs/1/events?after={BIG}", {}),
    ("get", "/v1/jobs/1/events?limit=abc", {}),
    ("get", f"/v1/jobs?after={BIG}", {}),
    ("get", "/v1/jobs?after=abc", {}),
    ("get", "/v1/jobs?limit=-1", {}),
    ("get", f"/v1/jobs?limit={BIG}", {}),
    ("get", "/v1/jobs?state=%00", {}),
    ("get", "/v1/jobs/1/logs?replica=abc", {}),
    ("get", f"/v1/jobs/1/logs?replica={BIG}", {}),
    ("get", "/v1/jobs/abc/logs", {}),
    ("post", "/v1/jobs/abc/cancel", {}),
    ("post", f"/v1/jobs/{BIG}/cancel", {}),
    ("post", "/v1/jobs", {"content": b"{not json"}),
    ("post", "/v1/jobs", {"json": []}),
    ("post", "/v1/jobs", {"json": "job"}),
    ("post", "/v1/jobs", {"json": None}),
    ("post", "/v1/jobs", {"json": {}}),
    ("post", "/v1/jobs", {"json": job_file(resources="lots")}),
    ("post", "/v1/jobs", {"json": job_file(resources={"gpu": [1]})}),
    ("post", "/v1/jobs", {"json": job_file(resources={"cpu": -BIG})}),
    ("post", "/v1/jobs", {"json": job_file(resources={"memory": BIG})}),
    ("post", "/v1/jobs", {"json": job_file(resources={"gpu": float("1e308")})}),
    ("post", "/v1/jobs", {"json": job_file(walltime=-1)}),
    ("post", "/v1/jobs", {"json": job_file(walltime="9" * 400 + "s")}),  # infinite
    ("post", "/v1/jobs", {"json": job_file(priority="high")}),
    ("post", "/v1/jobs", {"json": job_file(env=["A=1"])}),
    ("post", "/v1/jobs", {"json": job_file(env={"A": {"b": 1}})}),
    ("post", "/v1/jobs", {"json": job_file(selector=5)}),
    ("post", "/v1/jobs", {"json": job_file(upload=5)}),
    ("post", "/v1/jobs", {"json": job_file(restart={"max_retries": BIG})}),
    ("post", "/v1/jobs", {"json": job_file(name="x" * 1000)}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "gpu": BIG}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "priority": BIG}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "replicas": BIG}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "memory": -1}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "run": [1]}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "run": {"command": [""]}}}),
    ("post", "/v1/jobs", {"json": {"project": "p", "queue": "q", "run": {"colour": 1}}}),
    ("post", "/v1/tokens", {"json": {"name": 5}}),
    ("post", "/v1/tokens", {"json": {"name": "ok", "role": "god"}}),
    ("post", "/v1/tokens", {"json": {"name": "ok", "extra": 1}}),
    ("post", "/v1/tokens", {"json": {"name": "../x"}}),
    ("post", "/v1/tokens", {"json": []}),
    ("get", "/v1/tokens?user=%00", {}),
    ("get", "/v1/tokens?user=nobody", {}),
    ("delete", "/v1/tokens/nope", {}),
    ("delete", "/v1/tokens/%00", {}),
    ("post", "/v1/projects", {"json": {"name": "x", "weight": -1}}),
    ("post", "/v1/projects", {"json": {"name": "x", "weight": "heavy"}}),
    ("post", "/v1/projects", {"content": b'{"name": "x", "weight": NaN}'}),
    ("post", "/v1/projects", {"content": b'{"name": "x", "weight": Infinity}'}),
    ("post", "/v1/projects", {"json": {"name": ""}}),
    ("post", "/v1/uploads", {"content": b"\x1f\x8b garbage"}),
    ("get", "/v1/nope", {}),
    ("put", "/v1/jobs", {}),
]


@pytest.mark.parametrize("method, path, kwargs", GARBAGE,
                         ids=[f"{m} {p}"[:60] + f"#{i}" for i, (m, p, _) in enumerate(GARBAGE)])
@pytest.mark.parametrize("user", ["alice", "root"])
def test_garbage_is_a_client_error_with_an_error_body(shared_api, method, path, kwargs, user):
    response = shared_api.client.request(method.upper(), path, headers=shared_api.auth[user], **kwargs)
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    error = response.json()["error"]
    assert set(error) == {"code", "message", "field"} and error["code"] and error["message"]
