"""A backend that runs commands on its machines (the local backend) mounts no volume claim and
sizes no /dev/shm: a job that names either fails at once, saying so, rather than run without
what it asked for."""

from __future__ import annotations

import sys

import pytest

from controlkit import drive, state_is, submit
from rota.core import JobState as S


@pytest.mark.parametrize("run, field", [
    ({"volumes": [{"claim": "datasets", "path": "/data", "read_only": True}]}, "run.volumes"),
    ({"shm_mib": 8192}, "run.shm_mib"),
])
def test_the_local_backend_refuses_a_job_that_mounts_volumes_or_sizes_shm(loop, store, run,
                                                                          field):
    job_id = submit(store, [sys.executable, "-c", "pass"], **run)
    rec = drive(loop, state_is(store, job_id, S.FAILED), "the job to fail")
    assert rec.reason.startswith(f"cannot be started as written: {field}: the local backend "
                                 "runs jobs on its hosts, not in containers")
