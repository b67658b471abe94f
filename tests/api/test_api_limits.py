"""Limits on everything a request can grow: the body of every route (413 before it is read
whole), and in a job the environment, selector, labels, GPU model patterns, walltime, grace
period and checkpoint signal (422 naming the field). Nothing refused is stored."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import pytest
from apikit import job_file

from rota.api.bodylimit import MAX_BODY_BYTES
from rota.spec import limits

MIB = 1024 * 1024
BIG_ENV = {f"V{i}": "x" * 1000 for i in range(10 * 1024)}  # 10 MB of environment


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/jobs"), ("PUT", "/v1/queues"), ("POST", "/v1/tokens"),
    ("POST", "/v1/projects"), ("POST", "/v1/jobs/1/hold"), ("POST", "/v1/users"),
])
def test_a_body_over_the_limit_is_413_naming_the_body(shared_api, method, path):
    body = b'{"pad": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}'
    reply = shared_api.client.request(method, path, headers=shared_api.auth["root"], content=body)
    assert reply.status_code == 413, reply.text
    assert reply.json()["error"] | {"message": ""} == {"code": "too_large", "field": "body",
                                                        "message": ""}


def test_a_body_sent_without_a_length_is_refused_once_it_passes_the_limit(api):
    sent = []

    def chunks() -> Iterator[bytes]:
        yield b'{"name": "x", "env": {"A": "'
        for _ in range(100):  # 100 MB, if it were all read
            sent.append(1)
            yield b"x" * MIB
        yield b'"}}'
    reply = api.client.post("/v1/jobs", headers=api.auth["alice"], content=chunks())
    assert reply.status_code == 413, reply.text
    assert reply.json()["error"]["field"] == "body"
    assert api.store.list_jobs().items == ()


def test_a_10_mb_environment_is_refused_and_not_stored(api):
    reply = api.post_job(job_file(project="p", queue="q", env=BIG_ENV))
    assert reply.status_code == 413 and reply.json()["error"]["field"] == "body"
    assert api.store.list_jobs().items == ()


@pytest.mark.parametrize("changes, field", [
    ({"env": {f"V{i}": "1" for i in range(limits.MAX_ENV_VARS + 1)}}, "env"),
    ({"env": {"HUGE": "x" * 200_000}}, "env.HUGE"),
    ({"env": {f"V{i}": "x" * 100_000 for i in range(6)}}, "env"),
    ({"selector": {f"k{i}": "v" for i in range(limits.MAX_LABELS + 1)}}, "selector"),
    ({"selector": {"zone": "a" * 300}}, "selector.zone"),
    ({"resources": {"gpu": 1, "gpu_model": ["*H100*"] * 33}}, "resources.gpu_model"),
    ({"resources": {"gpu": 1, "gpu_model": ["H" * 200]}}, "resources.gpu_model[0]"),
    ({"walltime": "99999999999d"}, "walltime"),
    ({"walltime": "367d"}, "walltime"),
    ({"checkpoint": {"signal": "SIGKILL"}}, "checkpoint.signal"),
    ({"checkpoint": {"signal": "stop"}}, "checkpoint.signal"),
    ({"checkpoint": {"grace": "8d"}}, "checkpoint.grace"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_job_file_over_a_limit_is_422_naming_the_field(api, changes, field):
    reply = api.post_job(job_file(project="p", queue="q", **changes))
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["field"] == field
    assert api.store.list_jobs().items == ()


CORE = {"project": "p", "queue": "q", "run": {"command": ["true"]}}


@pytest.mark.parametrize("changes, field", [
    ({"run": {"command": ["true"], "env": {f"V{i}": "1" for i in range(1001)}}}, "run.env"),
    ({"run": {"command": ["true"], "checkpoint": {"signal": "SIGSTOP"}}},
     "run.checkpoint.signal"),
    ({"run": {"command": ["true"], "checkpoint": {"signal": "SIGNOPE"}}},
     "run.checkpoint.signal"),
    ({"walltime": "99999999999d"}, "walltime"),
    ({"grace": "30d"}, "grace"),
    ({"selector": {f"k{i}": "v" for i in range(65)}}, "selector"),
    ({"labels": {"k": "v" * 300}}, "labels.k"),
    ({"gpu": 1, "gpu_model": ["*"] * 33}, "gpu_model"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_the_core_level_form_has_the_same_limits(api, changes, field):
    reply = api.post_job({**CORE, **changes})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["field"] == field
    assert api.store.list_jobs().items == ()


def test_a_job_at_the_limits_is_accepted(api):
    selector = {f"k{i}": "v" for i in range(limits.MAX_LABELS)}
    (node, _, _), = api.store.list_nodes()
    api.store.upsert_nodes([replace(node, labels=selector)], "local")  # a node it can run on
    reply = api.post_job(job_file(
        project="p", queue="q", walltime="366d", checkpoint={"signal": "usr1", "grace": "7d"},
        env={f"V{i}": "x" * 400 for i in range(limits.MAX_ENV_VARS)}, selector=selector))
    assert reply.status_code == 201, reply.text
    run = api.store.get_job(reply.json()["id"]).run
    assert run["checkpoint"]["signal"] == "SIGUSR1" and len(run["env"]) == limits.MAX_ENV_VARS
