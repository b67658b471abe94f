"""How rota jobs end on the fixture cluster in the ways Slurm itself ends them: a walltime that
Slurm enforces (``--time``/``--signal``: one checkpoint signal, then TIMEOUT, recorded as the
local backend records a job past its walltime).

The cluster and the control plane are those of ``test_slurm_e2e``.
"""

from __future__ import annotations

import functools
from typing import Iterator

import pytest

from slurmserver import SlurmServer, running
from waiting import poll

wait = functools.partial(poll, timeout=240.0, every=0.5)

# counts the checkpoint signals it gets, shrugs off SIGTERM: Slurm must SIGKILL it
COUNTS_SIGNALS = ('trap "echo got=USR1" USR1; trap "echo got=TERM" TERM; echo started=yes; '
                  'while true; do sleep 0.2; done')


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-ends-") as plane:
        yield plane


def job_file(server: SlurmServer, name: str, **fields: str) -> str:
    lines = [f"name: {name}", "project: default", "queue: default"]
    lines += [f"{k}: {v}" for k, v in fields.items()]
    path = server.work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(server.json("submit", str(path))["id"])


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
