"""Crash safety of the real control plane: ``kill -9`` of ``rota up`` loses no accepted job.

Scenario: a long job, a short job, a job that will be killed while the plane is down (with a
restart budget) and a pending job. The plane is killed with SIGKILL; meanwhile the short job
finishes and the third job's processes are killed. After a restart: the long job is still
running (and later succeeds), the short job's exit code is recorded, the killed job is
requeued and runs again, and the pending job is still pending.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any, Callable

import httpx
from rotaup import up_once
from waiting import poll

DEADLINE_S = 60.0
# waits for a file named by $GO, then exits with $CODE
WAITER = ("import os, sys, time\n"
          "open('started', 'w').write(os.environ['ROTA_ATTEMPT'])\n"
          "while not os.path.exists(os.environ['GO']): time.sleep(0.05)\n"
          "sys.exit(int(os.environ['CODE']))\n")


wait_for = partial(poll, timeout=DEADLINE_S, every=0.1)


def submit(client: httpx.Client, go: Path, code: int = 0, gpu: int = 1,
           retries: int = 0) -> str:
    reply = client.post("/v1/jobs", json={
        "project": "default", "queue": "default", "entrypoint": [sys.executable, "-c", WAITER],
        "env": {"GO": str(go), "CODE": str(code)}, "resources": {"gpu": gpu, "cpu": "100m", "memory": "64Mi"},
        "restart": {"max_retries": retries}, "checkpoint": {"grace": 1}})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    reply = client.get(f"/v1/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()


def in_state(client: httpx.Client, job_id: str, *states: str) -> Callable[[], Any]:
    def check() -> dict[str, Any] | None:
        found = job(client, job_id)
        return found if found["state"] in states else None
    return check


def replica_dir(data_dir: Path, job_id: str, attempt: int = 0) -> Path:
    return data_dir / "jobs" / job_id / f"attempt-{attempt}" / "replica-0"


def test_kill9_of_the_control_plane_loses_no_job(rota_server, tmp_path: Path) -> None:
    go_long, go_short = tmp_path / "go-long", tmp_path / "go-short"
    data = rota_server.data_dir
    with rota_server.client() as client:
        long = submit(client, go_long)
        short = submit(client, go_short, code=3)
        doomed = submit(client, tmp_path / "never", retries=1)
        pending = submit(client, tmp_path / "never", gpu=4)
        for j in (long, short, doomed):
            wait_for(in_state(client, j, "running"), f"job {j} to run")
            wait_for((data / "jobs" / j / "work" / "started").exists, f"job {j}'s command")
        assert job(client, pending)["state"] == "pending"

    rota_server.kill9()
    go_short.write_text("")  # the short job ends while nobody watches
    wait_for((replica_dir(data, short) / "status.json").exists, "the short job to end")
    supervisor = json.loads((data / "jobs" / doomed / "attempt-0" / "handle.json").read_text())
    child = json.loads((replica_dir(data, doomed) / "child.json").read_text())
    os.kill(supervisor["replicas"][0]["ref"]["pid"], signal.SIGKILL)  # its processes vanish
    os.killpg(child["pid"], signal.SIGKILL)

    rota_server.start()
    with rota_server.client() as client:
        ended = wait_for(in_state(client, short, "failed"), "the short job's exit code")
        assert ended["exit_code"] == 3
        assert job(client, long)["state"] == "running"
        again = wait_for(in_state(client, doomed, "running"), "the killed job to run again")
        assert again["attempts"] == 1
        assert replica_dir(data, doomed, attempt=1).exists()
        events = client.get(f"/v1/jobs/{doomed}/events").json()
        assert any("was lost" in e["message"] or "was lost" in str(e["data"]) for e in events)
        assert job(client, pending)["state"] == "pending"
        go_long.write_text("")
        done = wait_for(in_state(client, long, "succeeded"), "the long job to succeed")
        assert done["exit_code"] == 0 and done["attempts"] == 0
        for j in (doomed, pending):
            client.post(f"/v1/jobs/{j}/cancel")
        wait_for(in_state(client, doomed, "cancelled"), "the requeued job to be cancelled")


def test_clean_stop_leaves_jobs_running_and_a_restart_adopts_them(rota_server,
                                                                  tmp_path: Path) -> None:
    go = tmp_path / "go"
    with rota_server.client() as client:
        j = submit(client, go)
        wait_for(in_state(client, j, "running"), "the job to run")
    assert rota_server.stop() == 0
    handle = json.loads((rota_server.data_dir / "jobs" / j / "attempt-0" / "handle.json").read_text())
    assert os.path.exists(f"/proc/{handle['replicas'][0]['ref']['pid']}")  # still supervised
    token = rota_server.token
    rota_server.start()
    assert rota_server.token == token  # the credentials file's token is kept
    with rota_server.client() as client:
        assert job(client, j)["state"] == "running"
        go.write_text("")
        wait_for(in_state(client, j, "succeeded"), "the adopted job to succeed")


def test_second_control_plane_on_the_same_data_dir_is_refused(rota_server) -> None:
    result = up_once(rota_server.env, "--port", "0", "--data-dir", str(rota_server.data_dir),
                     "--gpus", "1xT4-16GB", timeout=DEADLINE_S)
    assert result.returncode == 1
    assert "another control plane is already running on" in result.stderr


def test_second_control_plane_on_the_same_database_is_refused_naming_the_holder(
        rota_server, tmp_path: Path) -> None:
    """Another data directory, the same database: the lease refuses it at once."""
    result = up_once(rota_server.env, "--port", "0", "--data-dir", str(tmp_path / "other"),
                     "--db", f"sqlite:///{rota_server.data_dir / 'rota.db'}",
                     "--gpus", "1xT4-16GB", timeout=DEADLINE_S)
    assert result.returncode == 1, result.stderr
    assert "another control plane is using this database" in result.stderr
    assert f"pid {rota_server.proc.pid}" in result.stderr
    assert "rota down" in result.stderr
    assert "No standby: the local backend's jobs are processes of the machine" in result.stderr
