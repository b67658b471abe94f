"""``rota usage --since`` and ``rota project budget`` from the terminal, against a real server
on loopback: exact GPU-hours per project and model as a table, ``--json`` and ``--csv``; cost
once the queues file has prices; a member sees their projects only and may not set budgets;
budgets show in ``rota project list`` and ``rota show``; ``rota usage`` alone keeps its
decayed fair-share view."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

import pytest

from cli_support import ok
from rota.core import DeviceShare, JobState, Placement, ReplicaPlacement
from rota.scheduler import Bind, Decisions

T = datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp()
RANGE = ("--since", "2026-11-01", "--until", "2026-11-01T01:00:00Z")


def started(server, user: str, project: str, gpus: str, index: int, share: int) -> str:
    """A job submitted with rota run, bound at T (to GPU ``index``, ``share`` milli) and
    running; one hour of it falls in RANGE."""
    made = json.loads(ok(server.rota("run", "--project", project, "--gpus", gpus, "--json",
                                     "--", "true", user=user)))
    placement = Placement((ReplicaPlacement("gpu-0", (DeviceShare(index, share, 1024),)),))
    store = server.store
    assert store.apply(Decisions(binds=[Bind(made["id"], placement, "h100")]), T).bound
    store.transition(made["id"], JobState.RUNNING)
    return made["id"]


@pytest.fixture(scope="module")
def jobs(server):
    return {"alice": started(server, "alice", "vision", "1", 0, 1000),
            "bob": started(server, "bob", "speech", "0.5", 1, 500)}


def cells(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()]


def test_an_operator_gets_exact_gpu_hours_per_project_and_model(server, jobs):
    out = ok(server.rota("usage", *RANGE, "--by", "project,model", user="root"))
    rows = cells(out)
    assert ["PROJECT", "MODEL", "GPU-HOURS", "IDLE", "GPU-HOURS"] in rows
    assert ["speech", "H100-80GB", "0.5000", "0.0000"] in rows   # half a GPU for one hour
    assert ["vision", "H100-80GB", "1.0000", "0.0000"] in rows   # one GPU for one hour
    assert ["TOTAL", "1.5000", "0.0000"] in rows
    assert "No prices set" in out


def test_a_member_sees_only_their_projects(server, jobs):
    rows = cells(ok(server.rota("usage", *RANGE, "--by", "project,user", user="alice")))
    assert ["vision", "alice", "1.0000", "0.0000"] in rows
    assert not any("speech" in row or "bob" in row for row in rows)


def test_json_and_csv_are_for_scripts(server, jobs):
    data = json.loads(ok(server.rota("usage", *RANGE, "--by", "user", "--json", user="root")))
    assert [(r["user"], r["gpu_hours"]) for r in data["rows"]] == [("alice", 1.0), ("bob", 0.5)]
    assert data["total"]["gpu_hours"] == 1.5
    text = ok(server.rota("usage", *RANGE, "--by", "queue,model", "--csv", user="root"))
    read = list(csv.DictReader(io.StringIO(text)))
    assert [(r["queue"], r["model"], float(r["gpu_hours"]), r["cost"]) for r in read] == [
        ("default", "H100-80GB", 1.5, "")]


def test_costs_follow_the_prices_of_the_queues_file(server, jobs, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text("queues:\n  - name: priced\nprices:\n  currency: EUR\n  gpu_hour:\n"
                    "    H100-80GB: 2.40\n")
    ok(server.rota("queue", "apply", path, user="root"))
    rows = cells(ok(server.rota("usage", *RANGE, user="root")))
    assert ["PROJECT", "GPU-HOURS", "IDLE", "GPU-HOURS", "COST", "(EUR)"] in rows
    assert ["vision", "1.0000", "0.0000", "2.4000"] in rows and ["TOTAL", "1.5000", "0.0000", "3.6000"] in rows
    path.write_text("queues:\n  - name: priced\nprices:\n  currency: euro\n  gpu_hour: {}\n")
    refused = server.rota("queue", "apply", path, user="root")
    assert refused.returncode == 2
    assert "prices.currency: expected a three-letter currency code" in refused.stderr


def test_budgets_are_set_by_operators_and_shown_to_members(server, jobs):
    refused = server.rota("project", "budget", "vision", "--soft", "1", "--hard", "1000",
                          user="alice")
    assert refused.returncode != 0 and "only an operator sets a project's budget" in \
        refused.stderr
    done = ok(server.rota("project", "budget", "vision", "--soft", "1", "--hard", "100000",
                          user="root"))
    assert done.startswith("Budget of vision: ") and "over soft limit" in done
    listed = ok(server.rota("project", "list", user="alice"))
    assert "BUDGET THIS MONTH (UTC)" in listed
    assert "of 1 soft, 100000 hard (" in listed and "over soft limit" in listed
    shown = ok(server.rota("show", jobs["alice"], user="alice"))
    assert "Budget:    project vision used" in shown and "past its soft limit of 1" in shown
    assert "Budget:" not in ok(server.rota("show", jobs["bob"], user="bob"))
    assert "no budget now" in ok(server.rota("project", "budget", "vision", "--clear",
                                             user="root"))


def test_without_since_usage_is_the_decayed_view_and_range_options_need_since(server):
    out = ok(server.rota("usage", user="root"))
    assert out.startswith("No usage recorded yet.") or "Decayed GPU-hours" in out
    refused = server.rota("usage", "--by", "model", user="root")
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: --by: needs --since DATE")
    wrong = server.rota("usage", "--since", "2026-11-01", "--by", "team", user="root")
    assert wrong.returncode == 2 and "--by: 'team' is not one of" in wrong.stderr
