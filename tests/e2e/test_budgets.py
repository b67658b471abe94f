"""Budgets and exact usage with a real ``rota up``, as an operator would try them: a running
job's GPU-hours in ``rota usage --since`` are its seconds since it was bound, to the
microhour; a project past its soft limit gets a warning event and a line in ``rota show`` and
``rota project list``; past its hard limit its new job waits with reason ``budget`` while its
running job keeps running; raising the limit lets the new job start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 90.0  # a loaded machine may be slow; never asserted on


def rota(server, *args: str) -> subprocess.CompletedProcess:
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def shown(server, job: str) -> dict:
    return json.loads(ok(rota(server, "show", job, "--json")))


def until(what: str, check):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def started(server) -> str:
    job = json.loads(ok(rota(server, "run", "--gpus", "1", "--json", "--", "sleep", "600")))["id"]
    until(f"job {job} to run", lambda: shown(server, job)["state"] == "running")
    return job


def test_a_project_over_its_hard_budget_holds_new_jobs_and_keeps_running_ones(rota_server):
    server = rota_server
    running = started(server)
    # limits of a few GPU-seconds, so that one GPU reaches them within moments
    ok(rota(server, "project", "budget", "default", "--soft", "0.0002", "--hard", "0.0005"))
    until("the soft-limit warning", lambda: any(
        e["kind"] == "budget-warning" for e in shown(server, running)["events"]))
    time.sleep(2.0)  # 1 GPU x 2 s = 0.00056 GPU-hours: past the hard limit
    waiting = json.loads(ok(rota(server, "run", "--gpus", "1", "--json", "--", "true")))["id"]
    job = until("the new job's wait reason", lambda: (
        (j := shown(server, waiting))["wait_reasons"] and j))
    assert job["state"] == "pending"
    assert [r["code"] for r in job["wait_reasons"]] == ["budget"]
    text = ok(rota(server, "show", waiting))
    assert "Over budget: project default reached its hard limit of 0.0005 GPU-hours" in text
    assert "rota project budget" in text  # what to do next
    assert shown(server, running)["state"] == "running"  # running jobs are never stopped
    assert "over hard limit, new jobs wait" in ok(rota(server, "project", "list"))
    assert "Budget:" in ok(rota(server, "show", running))

    ok(rota(server, "project", "budget", "default", "--hard", "1000"))
    until("the waiting job to start once the limit is raised",
          lambda: shown(server, waiting)["state"] in ("running", "succeeded"))


def test_usage_since_gives_the_exact_gpu_hours_of_a_running_job(rota_server):
    server = rota_server
    job = started(server)
    bound = shown(server, job)["history"][0]["bound_at"]
    since = (datetime.now(timezone.utc) - timedelta(days=1)).date().isoformat()
    data = json.loads(ok(rota(server, "usage", "--by", "project,model", "--since", since,
                              "--json")))
    now = datetime.fromisoformat(data["now"].replace("Z", "+00:00")).timestamp()
    [row] = data["rows"]
    assert (row["project"], row["model"]) == ("default", "H100-80GB")
    assert abs(row["gpu_hours"] - (now - bound) / 3600) < 1e-5  # 1 GPU since it was bound
    table = ok(rota(server, "usage", "--by", "project,model", "--since", since))
    assert "default  H100-80GB" in table and "TOTAL" in table
