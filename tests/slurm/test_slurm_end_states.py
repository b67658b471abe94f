"""Every way Slurm 22.05 ends a job, read from output captured on the fixture cluster
(``data/sacct-ends.json`` with ``--duplicates``, its parseable exit codes, and
``data/squeue-ends.txt``) and judged as ``docs/slurm.md``'s state table says:

- job 1, a rota job past its ``--time``: TIMEOUT, its step ``rank-0`` CANCELLED ``0:9``;
- job 15, held past its ``--deadline`` and then released: DEADLINE ``1:0``, never started;
- jobs 16-18, requeueable plain jobs (rota's are not: ``--no-requeue``) after ``scontrol
  requeue``, ``requeuehold`` and ``requeuehold State=SpecialExit``: sacct keeps each earlier
  run as REQUEUED; squeue lists the held ones PENDING ("job requeued in held state") and
  SPECIAL_EXIT.

States the fixture cannot produce (OUT_OF_MEMORY: no cgroup memory limits, ``task/none``;
BOOT_FAIL: no nodes that boot; REQUEUE_FED, REVOKED: no federation; RESV_DEL_HOLD) are judged
from records carrying the names Slurm prints for them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rota.backends.base import Handle, ReplicaHandle, ReplicaState as R
from rota.backends.slurm.observe import Seen, attempt_status
from rota.backends.slurm.records import (SlurmJob, parse_sacct, parse_sacct_exit_codes,
                                         parse_squeue_named, with_exit_codes)
from rota.backends.slurm.states import JobPhase, job_phase
from rota.core import DeviceShare, End
from slurmkit import data


def handle(slurm_id: int) -> Handle:
    return Handle("slurm", "1", str(slurm_id), (ReplicaHandle(0, "node1", (
        DeviceShare(0, 1000, 81920),)),), 0, {"slurm_job": slurm_id, "name": "rota-1-0"})


def accounted() -> list[SlurmJob]:
    return list(with_exit_codes(parse_sacct(data("sacct-ends.json")),
                                parse_sacct_exit_codes(data("sacct-ends-exit-codes.txt"))))


def record(state: str, slurm_id: int | None = None) -> SlurmJob:
    return next(j for j in accounted() if j.state == state
                and (slurm_id is None or j.id == slurm_id))


def ended(job: SlurmJob, queued: bool = False):
    seen = Seen(job, None, now=job.end_time or 0.0) if queued else \
        Seen(None, job, now=(job.end_time or 0.0) + 60)
    return [(r.state, r.exit_code, r.reason, r.cause)
            for r in attempt_status(handle(job.id), seen).replicas]


def test_timeout_is_the_walltime_end():
    job = record("TIMEOUT", 1)
    assert [(s.name, s.state, str(s.exit)) for s in job.steps if s.name == "rank-0"] == [
        ("rank-0", "CANCELLED", "0:9")]
    assert ended(job) == [(R.EXITED, 137, "cancelled in Slurm", End.WALLTIME)]


def test_deadline_is_an_end_of_the_jobs_own_asking_with_no_command_run():
    job = record("DEADLINE", 15)
    assert (job.start_time, str(job.exit)) == (None, "1:0")
    assert ended(job) == [(R.EXITED, None, "reached its Slurm deadline before it started",
                           None)]


def test_a_run_slurm_requeued_is_lost_so_rota_requeues_it_as_a_new_attempt():
    runs = [j for j in accounted() if j.state == "REQUEUED"]
    assert sorted(j.id for j in runs) == [16, 17, 18]       # requeue, requeuehold, SpecialExit
    for job in runs:
        assert ended(job) == [(R.LOST, None, "requeued by Slurm", None)]


def test_squeue_lists_a_requeued_held_job_pending_and_a_special_exit_as_ended():
    listed = {j.name: j for j in parse_squeue_named(data("squeue-ends.txt"))}
    held = listed["ends-requeue-hold"]
    assert (held.state, held.reason) == ("PENDING", "job requeued in held state")
    assert held.phase is JobPhase.PENDING
    special = listed["ends-special-exit"]
    assert special.phase is JobPhase.EXITED
    assert ended(special, queued=True) == [(R.EXITED, None, "special exit before it started",
                                            None)]


@pytest.mark.parametrize("state, phase, reason", [
    ("OUT_OF_MEMORY", JobPhase.EXITED, "out of memory in Slurm"),
    ("BOOT_FAIL", JobPhase.LOST, "a Slurm node failed to boot"),
    ("REQUEUE_FED", JobPhase.LOST, "requeued by a Slurm federation"),
    ("REVOKED", JobPhase.LOST, "revoked by a Slurm federation"),
    ("RESV_DEL_HOLD", JobPhase.LOST, "held by Slurm: its reservation was deleted"),
])
def test_ends_the_fixture_cannot_produce(state, phase, reason):
    assert job_phase(state) is phase
    ran = replace(record("TIMEOUT", 1), state=state)        # a run that started, as job 1 did
    if phase is JobPhase.LOST:
        assert ended(ran) == [(R.LOST, None, reason, None)]
    else:  # the job's own failure: its step's exit code, no walltime
        assert ended(ran) == [(R.EXITED, 137, "cancelled in Slurm", None)]
