"""A new operator's first quotas, with a real ``rota up`` (``conftest.RotaServer``): the README's
first job runs in the queue a first start makes (no quota, every project); once a queues file
with quotas is applied, that queue is gone, a member's job that names no queue goes to the
queue the file gives its project, and a restart brings the open queue back for nobody."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

QUOTAS = ("flavors:\n  h100: ['*H100*']\n"
          "queues:\n"
          "  - name: research\n    projects: [vision]\n"
          "    quota: {h100: {nominal: {gpu: 2}}}\n"
          "  - name: ops\n    projects: [default]\n"
          "    quota: {h100: {nominal: {gpu: 1}}}\n")


def rota(server, *args: str | Path) -> subprocess.CompletedProcess:
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *map(str, args)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_the_first_quotas_close_the_open_queue_and_jobs_go_where_the_file_says(rota_server,
                                                                                tmp_path):
    first = ok(rota(rota_server, "run", "--wait", "--gpus", "0.5", "--", "echo", "hello"))
    assert first == "hello\n"
    ok(rota(rota_server, "project", "create", "vision"))
    ok(rota(rota_server, "user", "add", "alice", "--project", "vision"))
    alice = ok(rota(rota_server, "token", "create", "laptop", "--user", "alice")).strip()
    file = tmp_path / "queues.yaml"
    file.write_text(QUOTAS)
    applied = ok(rota(rota_server, "queue", "apply", file))
    assert "Deleted queue default: it had no quota and admitted every project" in applied
    assert "  default  ops\n  vision   research\n" in applied
    with rota_server.client(alice) as member:  # a job file naming no project nor queue
        job = member.post("/v1/jobs", json={"entrypoint": ["true"]})
        assert job.status_code == 201 and job.json()["queue"] == "research", job.text
        refused = member.post("/v1/jobs", json={"queue": "default", "entrypoint": ["true"]})
        assert refused.status_code == 422 and "no queue named 'default'" in refused.text
    mine = json.loads(ok(rota(rota_server, "run", "--gpus", "0.5", "--json", "--", "true")))
    assert mine["queue"] == "ops"
    rota_server.restart()
    queues = json.loads(ok(rota(rota_server, "queues", "--json")))
    assert sorted(q["name"] for q in queues) == ["ops", "research"]
