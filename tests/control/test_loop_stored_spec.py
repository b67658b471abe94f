"""The launch spec a job keeps in the store, read back by the control loop: a spec of the
first, unversioned shape upgrades and runs; one that cannot be read any more (edited on disk,
or of a version this release does not know) fails its job with the field named, whatever
state the job is in, and never runs something else in its place."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from sqlalchemy import select, update

from controlkit import drive, python, state_is, submit, workdir
from waiting import poll
from rota.core import JobState
from rota.store import Store
from rota.store.jobs import job_key
from rota.store.schema import jobs

S = JobState
RUNS = ("import os, time\n"
        "open('started', 'w').write(str(os.getpid()))\n"
        "while True: time.sleep(0.05)\n")


def corrupt_run(store: Store, job: str, **run: Any) -> None:
    """Write ``run`` over the job's stored launch spec, bumping the row's version as every
    write to a job row does."""
    with store._engine.begin() as conn:
        spec = conn.execute(select(jobs.c.spec).where(jobs.c.id == job_key(job))).scalar_one()
        spec = json.loads(spec) if isinstance(spec, str) else dict(spec)
        spec["run"] = {**spec["run"], **run}
        conn.execute(update(jobs).where(jobs.c.id == job_key(job)).values(spec=spec,
                                                                      version=jobs.c.version + 1))


def test_an_unversioned_spec_with_a_string_command_upgrades_and_runs(store, loop,
                                                                    data_dir) -> None:
    job = submit(store, "echo upgraded > out")  # version 1: no "version", a shell string
    assert "version" not in store.get_job(job).run
    rec = drive(loop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert rec.exit_code == 0
    assert (workdir(data_dir, job) / "out").read_text() == "upgraded\n"


@pytest.mark.parametrize("run, field", [
    pytest.param({"restart": {"max_retries": "many"}}, "run.restart.max_retries",
                 id="bad-retries"),
    pytest.param({"checkpoint": {"signal": "SIGNOPE"}}, "run.checkpoint.signal",
                 id="bad-signal"),
    pytest.param({"version": 99}, "run.version", id="unknown-version"),
])
def test_a_running_job_whose_stored_spec_turns_unreadable_fails_naming_the_field(
        store, loop, data_dir, run, field) -> None:
    job = submit(store, python(RUNS))
    started = workdir(data_dir, job) / "started"
    pid = int(drive(loop, lambda: started.exists() and started.read_text(), "the command to start"))
    corrupt_run(store, job, **run)
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail")
    assert rec.reason.startswith(f"its stored launch spec cannot be read: {field}:"), rec.reason
    poll(lambda: not os.path.exists(f"/proc/{pid}"), "the job's process to be stopped", 30)


def test_a_bound_job_whose_stored_spec_is_unreadable_fails_at_launch(store, loop) -> None:
    job = submit(store, ["true"])
    corrupt_run(store, job, command=["true", 7])
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail")
    assert rec.reason.startswith("cannot be started as written: run.command[1]:"), rec.reason
