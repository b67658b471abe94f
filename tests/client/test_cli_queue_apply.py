"""``rota queue apply`` against a real server: a file with quotas says which queues without
quota open to every project it deleted or closed (and why), which it kept because it lists
them, and where each project's jobs go when they name no queue; ``--json`` carries the same."""

from __future__ import annotations

import json

import httpx

from cli_support import ok
from rota.core import GpuRequest, JobKind, Queue, ReplicaRequest
from rota.core.serving import ServiceSettings
from rota.store import Submission

QUOTAS = ("flavors:\n  h100x: ['*H100*']\n"
          "queues:\n"
          "  - name: research\n    projects: [vision]\n"
          "    quota: {h100x: {nominal: {gpu: 2}}}\n"
          "  - name: product\n    quota: {h100x: {nominal: {gpu: 2}}}\n")


def submit(server, queue: str, user: str = "alice") -> httpx.Response:
    return httpx.post(f"{server.url}/v1/jobs", headers={
        "Authorization": f"Bearer {server.tokens[user]}"}, json={
        "name": "x", "project": "vision", "queue": queue, "entrypoint": "true"})


def test_apply_says_what_it_closed_deleted_and_where_jobs_now_go(server, tmp_path):
    server.store.put_queue(Queue("scratch"))  # no quota, every project: jobs bypass quotas
    server.store.put_queue(Queue("spare"))
    held = submit(server, "scratch")
    assert held.status_code == 201, held.text
    file = tmp_path / "queues.yaml"
    file.write_text(QUOTAS)
    out = ok(server.rota("queue", "apply", file, user="root"))
    assert out.splitlines() == [
        "Applied 2 queues: product, research; flavour: h100x. rota queues shows their "
        "quota and use.",
        "Closed queue scratch to new jobs: it has no quota and admitted every project, so new "
        f"jobs there would bypass the quotas of {file}, which does not list it. Its 1 job "
        "(1 pending) stay and run; rota queue delete scratch once they have finished (rota ps "
        "--queue scratch lists them).",
        f"Deleted queue spare: it had no quota and admitted every project, so jobs there would "
        f"bypass the quotas of {file}, which does not list it (list it there to keep it).",
        "Jobs that name no queue go to, by project:",
        "  speech  default (may also use product)",
        "  vision  default (may also use product, research)",
    ]
    assert server.store.get_job(held.json()["id"]).state.value == "pending"
    refused = server.rota("run", "--queue", "scratch", "--", "true")
    assert refused.returncode == 2 and "queue scratch does not admit project vision: it is " \
        "closed to new jobs" in refused.stderr


def test_apply_json_carries_the_same_facts(server, tmp_path):
    file = tmp_path / "queues.yaml"
    file.write_text(QUOTAS + "  - name: free\n")  # listed without quota nor projects: on purpose
    done = json.loads(ok(server.rota("queue", "apply", file, "--json", user="root")))
    assert done["queues"] == ["free", "product", "research"]
    assert done["open_unlimited"] == [
        {"name": "free", "action": "kept", "why": "listed", "jobs": {}}]
    assert done["default_queues"] == [
        {"project": "speech", "queue": "default", "usable": ["default", "free", "product"]},
        {"project": "vision", "queue": "default",
         "usable": ["default", "free", "product", "research"]}]
    human = ok(server.rota("queue", "apply", file, user="root"))
    assert (f"Queue free has no quota and admits every project, as {file} lists it: no "
            "quota limits the jobs there.") in human


def test_a_queue_a_service_uses_refuses_the_file_naming_it(server, tmp_path):
    server.store.put_queue(Queue("serving"))
    template = Submission(project="vision", queue="serving", user="alice", name="tiny",
                          kind=JobKind.SERVICE, request=ReplicaRequest(1000, 1024, GpuRequest(1)),
                          run={"command": ["python", "serve.py"], "port": 0})
    server.store.services.create("tiny", ServiceSettings(models=("tiny",)), template)
    file = tmp_path / "queues.yaml"
    file.write_text(QUOTAS)
    refused = server.rota("queue", "apply", file, user="root")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith(f"error: {file}: queue serving has no quota")
    assert "service tiny (queue serving)" in refused.stderr
    assert "serving" in server.store.bindings()
