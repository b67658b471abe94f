"""Reasons that name the real cause, in ``rota plan`` (files in, JSON and tables out, the real
console script) and in ``rota show`` (jobs a real store scheduled, against a real server on
loopback): room held by jobs that may not be preempted, a queue's borrowing limit, a lender's
lending limit, GPU memory for a fraction."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from builders import job
from commands import rota_command
from rota.core import FlavorQuota, GpuDevice, Node, Queue
from rota.scheduler import build_policy, run_cycle
from rota.store import Submission

ROOT = Path(__file__).resolve().parents[2]
POLICY = {"preset": "default", "backfill": "none"}

CLUSTER = {
    "now": 100,
    "policy": POLICY,
    "nodes": [{"name": "n", "cpu": 64, "memory": "512Gi",
               "gpus": {"count": 8, "model": "H100", "memory": "80Gi"}},
              {"name": "one", "cpu": 16, "memory": "64Gi", "resource_group": "small",
               "gpus": {"count": 1, "model": "L4", "memory": "24Gi"}},
              {"name": "t", "cpu": 16, "memory": "64Gi", "resource_group": "tg",
               "gpus": {"count": 4, "model": "L4", "memory": "24Gi"}}],
    "queues": [
        # lab: research may borrow up to 3 more; product lends at most 1 of its 4
        {"name": "research", "cohort": "lab",
         "quota": {"any": {"nominal": {"gpu": 2}, "borrowing_limit": {"gpu": 3}}}},
        {"name": "product", "cohort": "lab",
         "quota": {"any": {"nominal": {"gpu": 4}, "lending_limit": {"gpu": 1}}}},
        # lab2: team may use at most 1 + 1
        {"name": "team", "cohort": "lab2", "resource_groups": ["tg"],
         "quota": {"any": {"nominal": {"gpu": 1}, "borrowing_limit": {"gpu": 1}}}},
        {"name": "idle", "cohort": "lab2", "quota": {"any": {"nominal": {"gpu": 4}}}},
        {"name": "ops", "quota": {"any": {"nominal": {"gpu": 16}}}},
        {"name": "notebooks", "resource_groups": ["small"]},
    ],
    "running": [
        {"name": "keep", "project": "p", "queue": "ops", "preemptible": False,
         "resources": {"gpu": 4}, "placement": [{"node": "n", "gpus": [4, 5, 6, 7]}]},
        {"name": "r1", "project": "p", "queue": "research", "resources": {"gpu": 3},
         "placement": [{"node": "n", "gpus": [0, 1, 2]}]},
        {"name": "t1", "project": "p", "queue": "team", "resources": {"gpu": 1},
         "placement": [{"node": "t", "gpus": [0]}]},
        {"name": "half", "project": "p", "queue": "notebooks", "resources": {"gpu": 0.5},
         "placement": [{"node": "one", "gpus": [0]}]},
    ],
}
JOBS = {"jobs": [
    # team: 1 used, 2 more would take it past nominal 1 + borrowing limit 1
    {"name": "borrower", "project": "p", "queue": "team", "resources": {"gpu": 2}},
    # the pool of lab (research's 2 + the 1 product lends) is used by r1; product keeps 3
    # unused that it does not lend
    {"name": "lender-bound", "project": "p", "queue": "research", "resources": {"gpu": 1}},
    # ops: 5 GPUs free nowhere; only keep (not preemptible) holds the room on n
    {"name": "urgent", "project": "p", "queue": "ops", "priority": 10,
     "resources": {"gpu": 5}},
    # a quarter of the L4 with 16Gi: the share is free, 12Gi of its memory is
    {"name": "nb", "project": "p", "queue": "notebooks",
     "resources": {"gpu": 0.25, "gpu_memory": "16Gi"}},
]}


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> tuple[dict, str]:
    base = tmp_path_factory.mktemp("reasons")
    (base / "cluster.yaml").write_text(yaml.safe_dump(CLUSTER))
    (base / "jobs.yaml").write_text(yaml.safe_dump(JOBS))
    out = {}
    for extra in ((), ("--json",)):
        done = subprocess.run([*rota_command(), "plan", "-c", base / "cluster.yaml", "-j",
                               base / "jobs.yaml", *extra], capture_output=True, text=True,
                              timeout=120, cwd=ROOT, env={"COLUMNS": "400", "PATH": ""} | _env())
        assert done.returncode == 0, done.stderr
        out[bool(extra)] = done.stdout
    return json.loads(out[True]), out[False]


def _env() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}


def _why(plan_json: dict, name: str) -> dict:
    (reason,) = {p["job"]: p for p in plan_json["pending"]}[name]["reasons"]
    return reason


def test_plan_names_the_borrowing_limit(plan):
    r = _why(plan[0], "borrower")
    assert (r["code"], r["limit"], r["requested"], r["capacity"]) == (
        "quota", "borrowing_limit", 2, 2)
    assert "borrowing limit" in r["message"] and "at most 2 GPUs" in r["message"]


def test_plan_names_the_lending_limit_and_the_lender(plan):
    r = _why(plan[0], "lender-bound")
    assert (r["code"], r["limit"], r["requested"], r["free"], r["capacity"]) == (
        "quota", "lending_limit", 1, 0, 1)
    assert "queue product lends at most 1 GPU" in r["message"]


def test_plan_says_the_room_is_held_by_jobs_that_may_not_be_preempted(plan):
    r = _why(plan[0], "urgent")
    assert (r["code"], r["resource"], r["requested"], r["detail"]) == (
        "not-preemptible", "gpu", 5, "keep")
    assert "may not be preempted: keep" in r["message"]
    assert "may not be preempted: keep" in plan[1]


def test_plan_says_gpu_memory_with_the_numbers(plan):
    r = _why(plan[0], "nb")
    assert (r["code"], r["resource"], r["requested"], r["free"], r["capacity"]) == (
        "resources", "gpu_memory", 16384, 12288, 24576)
    assert "16 GiB of GPU memory free" in r["message"] and "12 GiB" in r["message"]


# -- rota show: the reasons a real store recorded, through the API ------------------------------


def _submit(server, name: str, queue: str, gpus: float, **fields) -> str:
    built = job(name).user("alice").project("vision").queue(queue).gpus(
        gpus, memory_gib=fields.pop("gpu_memory_gib", None))
    for key, value in fields.items():
        built = getattr(built, key)(value)
    return server.store.submit(Submission.from_job(built.build(), name, {"command": ["true"]}))


def _cycle(server) -> None:
    now = server.store.clock()
    store = server.store
    store.apply(run_cycle(store.snapshot(now), build_policy(POLICY), now), now)


@pytest.fixture(scope="module")
def shown(server) -> dict[str, str]:
    store = server.store
    store.put_queue(Queue("ops"))
    store.put_queue(Queue("team", {"any": FlavorQuota({"gpu": 1000}, {"gpu": 1000})}, "lab2"))
    store.put_queue(Queue("idle", {"any": FlavorQuota({"gpu": 4000})}, "lab2"))
    store.put_queue(Queue("lend", {"any": FlavorQuota({"gpu": 4000}, {}, {"gpu": 1000})}, "lab"))
    store.put_queue(Queue("borrow", {"any": FlavorQuota({"gpu": 0})}, "lab"))
    store.put_queue(Queue("nb", resource_groups=("small",)))
    store.upsert_nodes([Node("l4-0", 16_000, 64 * 1024, (GpuDevice(0, "L4", 24 * 1024),),
                             "small")], "local")
    ids = {"keep": _submit(server, "keep", "ops", 4, preemptible=False),
           "half": _submit(server, "half", "nb", 0.5)}
    _cycle(server)  # both run: keep on gpu-0, half on l4-0
    ids |= {"urgent": _submit(server, "urgent", "ops", 4, priority=10),
            "big": _submit(server, "big", "team", 3),
            "lent": _submit(server, "lent", "borrow", 2),
            "nb": _submit(server, "nb", "nb", 0.25, gpu_memory_gib=16)}
    _cycle(server)
    out = {}
    for name, job_id in ids.items():
        done = server.rota("show", job_id)
        assert done.returncode == 0, done.stderr
        out[name] = " ".join(done.stdout.split())
    out["keep-id"] = ids["keep"]
    return out


def test_show_says_the_room_is_held_by_jobs_that_may_not_be_preempted(shown):
    assert f"held by jobs that may not be preempted: {shown['keep-id']}" in shown["urgent"]


def test_show_names_the_borrowing_limit(shown):
    assert "Held by its queue's borrowing limit: queue team, flavour any may use at most " \
           "2 GPUs" in shown["big"]


def test_show_names_the_lending_limit_and_the_lender(shown):
    assert "Held by a lending limit: queue lend lends at most 1 GPU" in shown["lent"]


def test_show_says_gpu_memory(shown):
    assert "No GPU with the share free has 16 GiB of GPU memory free; the most free on such " \
           "a GPU is 12 GiB." in shown["nb"]
