"""``rota plan`` end to end: the real console script, run as a subprocess, on the shipped
examples and on files written here. Each distinct command runs once (module fixtures)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import yaml

from commands import rota_command

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "examples" / "lab"
MINIMAL = ROOT / "examples" / "minimal"




def rota(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*rota_command(), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def plan_json(cluster: Path, jobs: Path, *extra: str) -> dict:
    out = rota("plan", "--cluster", cluster, "--jobs", jobs, "--json", *extra)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def lab() -> dict:
    return plan_json(LAB / "cluster.yaml", LAB / "jobs.yaml")


def by_job(rows: list[dict]) -> dict[str, dict]:
    return {r["job"]: r for r in rows}


def gpus(row: dict) -> list[tuple[str, list[int]]]:
    return [(r["node"], [g["index"] for g in r["gpus"]]) for r in row["replicas"]]


# -- the lab example: the answer written at the top of examples/lab/jobs.yaml --------------


def test_lab_schema(lab):
    assert lab["schema"] == "rota.plan/v1"
    assert lab["converged"] is True and lab["now"] == 7200
    assert lab["policy"]["name"] == "default" and lab["policy"]["backfill"] == "easy"
    assert set(lab) >= {"placements", "preemptions", "reservations", "pending", "rejected",
                        "policy", "cycles", "summary"}
    s = lab["summary"]
    assert [s[k] for k in ("placed", "preempted", "reserved", "pending", "rejected")] == [
        len(lab["placements"]), len(lab["preemptions"]), len(lab["reservations"]),
        len(lab["pending"]), len(lab["rejected"])]


def test_lab_gang_fractions_and_backfill(lab):
    placed = by_job(lab["placements"])
    assert gpus(placed["ddp-train"]) == [("a100-0", [2, 3]), ("a100-1", [0, 1])]   # a gang
    assert placed["ddp-train"]["flavor"] == "a100"
    assert placed["quick-eval"]["backfilled"] and placed["eval-long"]["backfilled"]
    assert gpus(placed["quick-eval"]) == [("a100-1", [2])]
    assert gpus(placed["eval-long"]) == [("a100-1", [3])]      # off the reserved node
    alice, bob = placed["nb-alice"]["replicas"][0], placed["nb-bob"]["replicas"][0]
    assert alice["node"] == bob["node"] == "l4-0"
    assert alice["gpus"] == bob["gpus"] == [{"index": 0, "share": 0.5, "memory_mib": 12288}]
    assert len(gpus(placed["serve-llm"])[0][1]) == 6


def test_lab_preemption_reservation_pending_rejected(lab):
    pre = by_job(lab["preemptions"])["embed-batch"]
    assert (pre["by"], pre["reason"], pre["grace_s"], pre["then"]) == (
        "serve-llm", "priority", 120, "pending")
    (res,) = lab["reservations"]
    assert res["job"] == "big-sweep" and res["start_at"] == 14400 and res["start_in_s"] == 7200
    assert gpus(res) == [("a100-0", [0, 1, 2, 3])]
    pending = by_job(lab["pending"])
    assert set(pending) == {"embed-batch", "big-sweep", "ablation"}
    assert pending["big-sweep"]["estimated_start"] == 14400
    assert pending["embed-batch"]["reasons"][0]["code"] == "quota"
    quota = pending["ablation"]["reasons"][0]
    assert {k: quota[k] for k in ("code", "resource", "requested", "free", "capacity")} == {
        "code": "quota", "resource": "gpu", "requested": 2, "free": 0, "capacity": 8}
    assert "the job needs 2 GPUs" in quota["message"]
    (rej,) = lab["rejected"]
    assert rej["job"] == "huge" and rej["reasons"][0]["code"] == "never-fits"
    assert rej["reasons"][0]["requested"] == 16 and rej["reasons"][0]["capacity"] == 8


def test_lab_finetune_borrows_without_evicting_pretrain(lab):
    placed = by_job(lab["placements"])
    assert [p["job"] for p in lab["preemptions"]] == ["embed-batch"]
    assert placed["finetune"]["borrowing"] is True
    assert gpus(placed["finetune"]) == [("h100-1", [6, 7])]
    assert gpus(placed["serve-llm"]) == [("h100-1", [0, 1, 2, 3, 4, 5])]
    assert lab["summary"] == {"placed": 7, "preempted": 1, "reserved": 1, "pending": 3,
                              "rejected": 1, "running": 9}
    assert lab["cycles"] == 3


def test_lab_other_policy_changes_the_plan():
    fifo = plan_json(LAB / "cluster.yaml", LAB / "jobs.yaml", "--policy", "fifo")
    assert fifo["policy"]["name"] == "fifo" and fifo["policy"]["preemption"] == "none"
    assert fifo["preemptions"] == [] and fifo["reservations"] == []


# -- human output ----------------------------------------------------------------------------


def test_plan_takes_a_single_job_file_as_rota_submit_does():
    report = plan_json(MINIMAL / "cluster.yaml", ROOT / "examples" / "jobs" / "one-gpu.yaml")
    assert [p["job"] for p in report["placements"]] == ["train-resnet"]


def test_minimal_human_output():
    out = rota("plan", "--cluster", MINIMAL / "cluster.yaml", "--jobs", MINIMAL / "jobs.yaml")
    assert out.returncode == 0, out.stderr
    assert "2 placed, 0 preempted, 1 reserved, 1 pending, 0 rejected" in out.stdout
    for words in ("train", "box: GPU 0,1", "0.5 share", "in 2h"):
        assert words in out.stdout


def test_help_and_version():
    out = rota("--version")
    assert out.returncode == 0 and out.stdout.startswith("rota ")
    out = rota("plan", "--help")
    assert out.returncode == 0
    for words in ("--cluster", "--jobs", "--policy", "--json", "Dry-run"):
        assert words in out.stdout


# -- temp files: placements, policy files, bad input ------------------------------------------


def write(tmp: Path, name: str, data) -> Path:
    path = tmp / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


CLUSTER = {
    "nodes": [{"name": "n", "cpu": 16, "memory": "64Gi",
               "gpus": {"count": 2, "model": "L4", "memory": "24Gi"}}],
    "queues": [{"name": "q"}],
}


def test_temp_files_with_a_policy_file(tmp_path):
    jobs = {"jobs": [
        {"name": "a", "project": "p", "queue": "q", "resources": {"gpu": 2}, "walltime": "1h"},
        {"name": "b", "project": "p", "queue": "q", "resources": {"gpu": 1}},
        {"name": "c", "project": "p", "queue": "q", "resources": {"gpu": 4}},
    ]}
    policy = write(tmp_path, "policy.yaml", {"preset": "fifo", "order": "besteffort-fifo"})
    out = plan_json(write(tmp_path, "c.yaml", CLUSTER), write(tmp_path, "j.yaml", jobs),
                    "--policy", str(policy))
    assert out["policy"]["order"] == "besteffort-fifo" and out["policy"]["name"] == "custom"
    assert [p["job"] for p in out["placements"]] == ["a"]
    (wait,) = out["pending"]
    assert wait["job"] == "b" and wait["reasons"][0]["code"] == "resources"
    assert out["rejected"][0]["job"] == "c"
    assert "largest eligible node has 2 GPUs" in out["rejected"][0]["message"]


BAD = [
    # (id, cluster change, jobs, file the error names, field)
    ("fraction above one", {}, [{"name": "a", "project": "p", "queue": "q",
                                 "resources": {"gpu": 1.5}}], "j.yaml", "jobs[0].resources.gpu"),
    ("unknown queue", {}, [{"name": "a", "project": "p", "queue": "x"}], "j.yaml", "jobs[0].queue"),
    ("lending above nominal", {"queues": [{"name": "q", "quota": {"any": {
        "nominal": {"gpu": 1}, "lending_limit": {"gpu": 2}}}}]}, [], "c.yaml",
     "queues[0].quota.any.lending_limit.gpu"),
]


@pytest.mark.parametrize("change,jobs,culprit,field", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_exits_2_with_one_line(tmp_path, change, jobs, culprit, field):
    cluster = write(tmp_path, "c.yaml", {**CLUSTER, **change})
    jobs_path = write(tmp_path, "j.yaml", {"jobs": jobs})
    out = rota("plan", "--cluster", cluster, "--jobs", jobs_path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith(f"error: {tmp_path / culprit}: {field}: ")
    assert out.stdout == ""


def test_bad_policy_and_missing_file(tmp_path):
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    jobs = write(tmp_path, "j.yaml", {"jobs": []})
    out = rota("plan", "-c", cluster, "-j", jobs, "--policy", "fastest")
    assert out.returncode == 2 and out.stderr.startswith("error: --policy: no preset named")
    out = rota("plan", "-c", tmp_path / "nope.yaml", "-j", jobs)
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: no such file"
