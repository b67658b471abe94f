"""Accounts, partitions and QOS on a cluster that enforces them
(``AccountingStorageEnforce=associations,limits,qos``), driven from the CLI: a project's jobs
run under its account (its own name, or the one ``--slurm-accounts`` maps it to) in its queue's
partition and QOS, or in a QOS the queue lets the job choose; a choice the queue does not allow
is refused at submit; a project whose account has no association fails at once, saying why;
rota's GPU-hours of an account are ``sacct``'s (AllocTRES ``gres/gpu`` x elapsed).

The cluster is a private one, not the shared test cluster: its own directory and ports, with
enforcement on and the accounts ``alpha`` and ``beta`` (root a user of both, with the QOS
``normal`` and ``gold``), started for this module and stopped at its end.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from rotaup import ROTA
from slurmserver import SlurmServer, running
from waiting import poll

FIXTURE = Path(__file__).parent / "fixture"
PORT, NODE_PORT = "26837", "27021"  # not the shared cluster's 26817.. and 27001..
# the shared cluster running means Slurm's packages are installed and this runs as root
pytestmark = pytest.mark.usefixtures("slurm_env")
wait = functools.partial(poll, timeout=120.0, every=0.5)

QUEUES = """\
queues:
  - name: gold
    slurm:
      partition: high
      qos: gold
      allow: {qos: [normal]}
"""


@pytest.fixture(scope="module")
def enforced(slurm_env) -> Iterator[dict[str, str]]:
    """The environment of a private cluster with enforcement on, stopped and removed after."""
    root = Path(tempfile.mkdtemp(prefix="rota-slurm-acct-"))
    root.chmod(0o755)  # munged wants its socket's directories searchable by all
    cluster = root / "cluster"
    settings = {"ROTA_SLURM_DIR": str(cluster), "ROTA_SLURM_PORT": PORT,
                "ROTA_SLURM_NODE_PORT": NODE_PORT, "ROTA_SLURM_NO_APT": "1",
                "ROTA_SLURM_ENFORCE": "associations,limits,qos",
                "ROTA_SLURM_ACCOUNTS": "alpha beta"}
    try:
        done = subprocess.run([str(FIXTURE / "start.sh")], env={**os.environ, **settings},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        yield {**slurm_env, "SLURM_CONF": str(cluster / "etc" / "slurm.conf")}
    finally:
        subprocess.run([str(FIXTURE / "stop.sh"), "--purge"], capture_output=True,
                       env={**os.environ, "ROTA_SLURM_DIR": str(cluster)})
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server(enforced) -> Iterator[SlurmServer]:
    with running(enforced, "rota-slurm-acct-e2e-", "--slurm-accounts", "vision=beta") as plane:
        for project in ("alpha", "vision", "gamma"):
            plane.cli("project", "create", project)
        (plane.work / "queues.yaml").write_text(QUEUES)
        plane.cli("queue", "apply", str(plane.work / "queues.yaml"))
        yield plane


def submit(server: SlurmServer, name: str, project: str, *lines: str, gpus: int = 1,
           check: bool = True) -> str:
    """``rota submit`` of a job of ``project`` in queue gold with ``gpus`` GPUs; its id (or,
    with ``check`` False, what rota said refusing it)."""
    path = server.work / f"{name}.yaml"
    path.write_text("\n".join([f"name: {name}", f"project: {project}", "queue: gold",
                               f"resources: {{gpu: {gpus}}}", *lines]) + "\n")
    if not check:
        done = subprocess.run([*ROTA, "submit", str(path)], cwd=server.work, env=server.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout
        return done.stdout + done.stderr
    return str(server.json("submit", str(path))["id"])


def ended(server: SlurmServer, job: str) -> dict:
    return wait(lambda: (j := server.job(job))["state"] in ("succeeded", "failed") and j,
                f"job {job} to end")


def sacct(server: SlurmServer, *args: str) -> list[dict[str, str]]:
    fields = ("JobName", "Account", "Partition", "QOS", "State", "AllocTRES", "ElapsedRaw",
              "Start", "End")
    out = subprocess.run(["sacct", "-X", "-P", "-n", "--starttime=now-1days",
                          f"--format={','.join(fields)}", *args],
                         env={**server.env, "SLURM_TIME_FORMAT": "%s"},
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line]


def slurm_record(server: SlurmServer, job: str) -> dict[str, str]:
    """``sacct``'s record of the job's first attempt, once Slurm has ended it."""
    return wait(lambda: next((r for r in sacct(server, f"--name=rota-{job}-0")
                              if r["State"] == "COMPLETED"), None),
                f"sacct to list job {job} completed")


def test_a_projects_job_runs_under_its_account_in_its_queues_partition_and_qos(server):
    job = submit(server, "plain", "alpha", "entrypoint: sleep 3")
    mapped = submit(server, "mapped", "vision", "entrypoint: sleep 3")
    chosen = submit(server, "chosen", "alpha", "entrypoint: sleep 3", "slurm: {qos: normal}")
    for one in (job, mapped, chosen):
        record = ended(server, one)
        assert record["state"] == "succeeded", record
        assert record["placement"][0]["node"] in ("node3", "node4")   # partition high's nodes
    got = {one: slurm_record(server, one) for one in (job, mapped, chosen)}
    assert [(r["Account"], r["Partition"], r["QOS"]) for r in got.values()] == [
        ("alpha", "high", "gold"), ("beta", "high", "gold"), ("alpha", "high", "normal")]


@pytest.mark.parametrize("choice, field", [
    ("{qos: high}", "slurm.qos"), ("{partition: debug}", "slurm.partition"),
    ("{reservation: maint}", "slurm.reservation"), ("{constraint: a100}", "slurm.constraint"),
], ids=["qos", "partition", "reservation", "constraint"])
def test_a_choice_the_queue_does_not_allow_is_refused_at_submit(server, choice, field):
    said = submit(server, "refused", "alpha", "entrypoint: 'true'", f"slurm: {choice}",
                  check=False)
    assert field in said and "queue gold" in said, said
    assert not [j for j in server.json("ps", "-A") if j.get("name") == "refused"]


def test_a_project_whose_account_has_no_association_fails_at_once_saying_why(server):
    job = submit(server, "unassociated", "gamma", "entrypoint: 'true'")
    record = ended(server, job)
    assert record["state"] == "failed"
    assert "run.slurm.account" in record["reason"], record["reason"]
    assert "Slurm refused account 'gamma'" in record["reason"]
    assert "Invalid account" in record["reason"]
    assert "sacctmgr add user root account=gamma" in record["reason"]  # the job's OS account
    assert sacct(server, f"--name=rota-{job}-0") == []                # never in Slurm


def test_rotas_gpu_hours_of_an_account_are_sacct_s(server):
    """rota counts an attempt's GPUs from the pass that bound them to its end, Slurm from the
    job's start to its end (docs/slurm.md): the two agree, per account, once the seconds each
    job waited in Slurm for its start are added to sacct's, within sacct's whole seconds."""
    jobs = [submit(server, f"hours{k}", "alpha", "entrypoint: sleep 20", gpus=2)
            for k in range(2)]
    for job in jobs:
        assert ended(server, job)["state"] == "succeeded"
    ours = [j["id"] for j in server.json("ps", "-A") if j["project"] == "alpha"]
    slurm = {r["JobName"]: r for r in sacct(server, "--accounts=alpha")
             if r["State"] == "COMPLETED"}
    assert sorted(slurm) == sorted(f"rota-{j}-0" for j in ours)  # no other project's jobs
    slurm_s = sum(_gpus(r["AllocTRES"]) * int(r["ElapsedRaw"]) for r in slurm.values())
    waited_s = 0.0
    for job in ours:
        [attempt] = server.job(job)["history"]
        record = slurm[f"rota-{job}-0"]
        waited_s += _gpus(record["AllocTRES"]) * (
            (int(record["Start"]) - attempt["bound_at"])
            + (attempt["ended_at"] - int(record["End"])))
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    rows = server.json("usage", "--since", today, "--project", "alpha")["rows"]
    rota_s = sum(r["gpu_hours"] for r in rows) * 3600
    assert slurm_s >= 2 * 2 * 20                       # at least the two jobs' 2 GPUs x 20 s
    assert rota_s == pytest.approx(slurm_s + waited_s, abs=2 * len(ours)), (rota_s, slurm_s,
                                                                           waited_s)


def _gpus(tres: str) -> int:
    found = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
    return int(found.get("gres/gpu", "0"))
