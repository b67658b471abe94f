"""How rota jobs end on the fixture cluster in the ways Slurm itself ends them: a walltime that
Slurm enforces (``--time``/``--signal``: one checkpoint signal, then TIMEOUT, recorded as the
local backend records a job past its walltime); and a job whose Slurm record rota cannot read
holds its GPUs until an operator's ``rota cancel --force`` ends it.

The cluster and the control plane are those of ``test_slurm_e2e``.
"""

from __future__ import annotations

import functools
import time
from typing import Iterator

import pytest

from slurmserver import SlurmServer, job_file, running
from waiting import poll

wait = functools.partial(poll, timeout=240.0, every=0.5)

# counts the checkpoint signals it gets, shrugs off SIGTERM: Slurm must SIGKILL it
COUNTS_SIGNALS = ('trap "echo got=USR1" USR1; trap "echo got=TERM" TERM; echo started=yes; '
                  'while true; do sleep 0.2; done')


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-ends-") as plane:
        yield plane


def slurm_id(server: SlurmServer, name: str) -> int:
    return wait(lambda: next((j.id for j in server.slurm_jobs() if j.name == name), None),
                f"Slurm job {name}")


def test_a_job_past_its_walltime_gets_one_checkpoint_signal_and_ends_timeout(server, slurm):
    slurm.require_accounting()
    job = job_file(server, "overrun", entrypoint=repr(COUNTS_SIGNALS), walltime="60s",
                   checkpoint="{signal: SIGUSR1, grace: 20s}", resources="{gpu: 1}")
    name = f"rota-{job}-0"
    launched = slurm_id(server, name)
    record = wait(lambda: (j := server.job(job))["state"] in ("failed", "succeeded",
                                                               "cancelled") and j,
                  "the job to end at its walltime")
    accounted = slurm.accounted(launched, name)
    assert accounted.state == "TIMEOUT"                 # Slurm stopped it, rota did not cancel
    out = (server.data_dir / "jobs" / job / "attempt-0-logs" / "rank-0.out").read_text()
    assert out.count("got=USR1") == 1, out              # one checkpoint signal: Slurm's
    # as the local backend ends a job past its walltime (rota.control.verdict)
    assert record["state"] == "failed", record
    assert record["reason"] == "walltime: stopped at its limit of 60 s"
    assert record["attempts"] == 0                      # not retried
    [attempt] = record["history"]
    assert attempt["end"] == "walltime"


RUNS_ON = 'echo started=yes; while true; do sleep 0.2; done'


def test_an_operator_force_cancels_a_job_slurm_cannot_tell_about_and_frees_its_gpus(server,
                                                                                    slurm):
    stuck = server.submit("--gpus", "4", "--", "sh", "-c", RUNS_ON)
    node = wait(lambda: (j := server.job(stuck))["state"] == "running" and j["placement"]
                and j, "the job to run")["placement"][0]["node"]
    fillers = [server.submit("--gpus", "4", "--", "sleep", "300") for _ in range(3)]
    for job in fillers:
        wait(lambda: server.job(job)["state"] == "running", f"filler {job} to run")
    launched = slurm_id(server, f"rota-{stuck}-0")
    wait(lambda: "started=yes" in server.cli("logs", stuck, check=False), "the job to start")
    comment = slurm.job(launched).comment
    # a Slurm administrator gives the job a comment with a line break: squeue's record of it
    # can no longer be read, so rota cannot poll it (its other jobs it still can)
    slurm.run(["scontrol", "update", f"jobid={launched}", "comment=rota:broken\nrecord"])
    nxt = server.submit("--gpus", "4", "--", "sh", "-c", 'echo "host=$SLURMD_NODENAME"')
    time.sleep(3)                                          # several passes of the control loop
    assert server.job(stuck)["state"] == "running"         # unseen: it holds its GPUs
    assert server.job(nxt)["state"] == "pending"
    # the comment back, before the job ends, so that no other control plane on the cluster
    # asks squeue about a job of that name and meets the broken line
    slurm.run(["scontrol", "update", f"jobid={launched}", f"comment={comment}"])
    shown = server.cli("cancel", "--force", stuck)
    assert f"Cancelled job {stuck}." in shown
    record = server.job(stuck)
    assert (record["state"], record["reason"]) == ("cancelled", "force-cancelled by root")
    slurm.ended(launched)                                  # the control loop's scancel
    done = wait(lambda: (j := server.job(nxt))["state"] in ("succeeded", "failed") and j,
                "the next job to run on the freed GPUs")
    assert done["state"] == "succeeded" and done["placement"][0]["node"] == node
    # leave the cluster free for the next test: the fillers' Slurm jobs ended, not ending
    ids = [slurm_id(server, f"rota-{job}-0") for job in fillers]
    slurm.run(["scancel", *map(str, ids)])
    for launched in ids:
        slurm.ended(launched)
