"""Slurm ending a rota job for its own reasons, on the fixture, from the CLI: a node taken DOWN
under the job, and a job of a higher-tier partition preempting it.

Slurm ends the job ``NODE_FAIL`` and ``sacct`` prints an empty exit code for it. The control
loop must go on scheduling (a job submitted afterwards starts, a cancel is carried out), and the
job whose node failed is requeued and runs again, without a restart budget: losing its node
is not the job's failure. After a restart only the new attempt is left in Slurm. A job
preempted by Slurm (``PreemptType=preempt/partition_prio``: its steps are ``CANCELLED`` with
it) is requeued the same way, never recorded as failed.

The cluster: node1-2 with 4 H100s, node3-4 with 4 A100s.
"""

from __future__ import annotations

import functools
from typing import Iterator

import pytest

from slurmserver import SlurmServer, running
from waiting import poll

wait = functools.partial(poll, timeout=120.0, every=0.5)
WHERE = 'echo "host=$SLURMD_NODENAME"; sleep 300'


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-down-") as plane:
        yield plane


def state_of(server: SlurmServer, job: str, *states: str) -> dict:
    return wait(lambda: (j := server.job(job))["state"] in states and j,
                f"job {job} to be {' or '.join(states)}")


def test_a_node_down_under_a_job_requeues_it_and_the_loop_keeps_scheduling(server, slurm):
    job = server.submit("--gpus", "4", "--", "sh", "-c", WHERE)
    first = state_of(server, job, "running")
    node = first["placement"][0]["node"]
    wait(lambda: "host=" in server.cli("logs", job, check=False), "the job to start")
    slurm.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=e2e psu"])
    try:
        again = wait(lambda: (j := server.job(job))["attempts"] == 1
                     and j["state"] == "running" and j, "the job to be requeued and run again")
        # the loop still schedules and carries out what it is asked
        other = server.submit("--gpus", "1", "--", "sh", "-c", WHERE)
        state_of(server, other, "running")
        server.cli("cancel", other)
        state_of(server, other, "cancelled")
        server.kill9()
        server.start()
        assert server.job(job)["state"] == "running"
        live = [j for j in server.slurm_jobs() if not j.phase.ended]
        assert [j.name for j in live] == [f"rota-{job}-1"], live
    finally:  # the fixture's slurmd registers again and may have brought the node back
        if "down" in slurm.run(["sinfo", "-h", "-n", node, "-o", "%T"]):
            slurm.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    server.cli("cancel", job)
    state_of(server, job, "cancelled")


def job_file(server: SlurmServer, name: str, **fields: str) -> str:
    lines = [f"name: {name}", "project: default", "queue: default"]
    lines += [f"{k}: {v}" for k, v in fields.items()]
    path = server.work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(server.json("submit", str(path))["id"])


def test_a_job_preempted_by_slurms_higher_tier_partition_is_requeued(server, slurm):
    job = job_file(server, "tiered", entrypoint=repr(WHERE),
                   resources='{gpu: 4, gpu_model: "*A100*"}')
    first = state_of(server, job, "running")
    node = first["placement"][0]["node"]
    wait(lambda: "host=" in server.cli("logs", job, check=False), "the job to start")
    slurm.sbatch(["sbatch", "--parsable", "--partition=high", f"--nodelist={node}",
                  "--gres=gpu:a100:4", "--job-name=tier-e2e", "--output=/dev/null",
                  "--wrap", "sleep 300"])
    again = wait(lambda: (j := server.job(job))["attempts"] == 1 and j["state"] == "running"
                 and j, "the preempted job to be requeued and run again")
    assert [r["node"] for r in again["placement"]] != [node]  # the other A100 node
    assert any("preempted by Slurm" in str(e["data"].get("reason")) for e in again["events"])
    assert not any(e["data"].get("to") == "failed" for e in again["events"])
    server.cli("cancel", job)
