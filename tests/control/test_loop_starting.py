"""A backend whose launches may wait in a queue of its own (``Capabilities.queued``, as Slurm):
the job stays SCHEDULED, *starting* with the backend's reason, until the backend runs it; only
then RUNNING, with ``started_at`` and billing from then. Its handle is stored at launch, so a
restart adopts it and never launches it twice. A launch held because work outside rota took
its GPUs (``Status.displaced``) is taken back and placed again, without spending the restart
budget.

The engine's queue is the local backend with a gate in front of its reports: a job in
``waiting`` is reported held (its process runs, as a real engine's would not, but nothing of
rota looks at it), one in ``displaced`` held for foreign work.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pytest

from controlkit import drive, python, state_is, submit, workdir
from rota.backends.base import Capabilities, Handle, ReplicaState, Status
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import End, JobState
from rota.scheduler import build_policy

S = JobState
# appends its attempt number to 'runs', then waits for 'go'
RUNNER = ("import os, time\n"
          "open('runs', 'a').write(os.environ['ROTA_ATTEMPT'])\n"
          "while not os.path.exists('go'): time.sleep(0.02)\n")


class Queued(LocalBackend):
    """The local backend behind a queue: a launch of a job in ``waiting`` is reported held
    with that reason, one in ``displaced`` held for work outside rota."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.waiting: dict[str, str] = {}
        self.displaced: dict[str, str] = {}

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, queued=True)

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        return [self._gated(h, s) for h, s in zip(handles, super().poll(handles))]

    def adopt(self, handle: Handle) -> Status:
        return self._gated(handle, super().adopt(handle))

    def _gated(self, handle: Handle, status: Status) -> Status:
        if status.state is not ReplicaState.RUNNING or handle.job_id not in self.waiting:
            return status
        return replace(status, waiting=self.waiting[handle.job_id],
                       displaced=self.displaced.get(handle.job_id))


@pytest.fixture
def queued(backend: LocalBackend, data_dir: Path) -> Queued:
    return Queued(data_dir, node=backend.node)


@pytest.fixture
def qloop(store, queued, data_dir, clock):
    loop = ControlLoop(store, queued, build_policy("default"), data_dir, clock=clock)
    yield loop
    loop.stop()


def runs(data_dir: Path, job: str) -> str:
    path = workdir(data_dir, job) / "runs"
    return path.read_text() if path.exists() else ""


def test_a_launch_its_backend_holds_is_starting_until_it_runs_and_billed_from_then(
        store, queued, qloop, data_dir, clock) -> None:
    job = submit(store, python(RUNNER), gpus=2)
    queued.waiting[job] = "queued behind 3 jobs"
    bound_at = clock.now()
    qloop.step()  # bound and launched: its handle is stored, its state is not moved
    rec = store.get_job(job)
    assert rec.state is S.SCHEDULED and rec.backend_handle is not None
    assert rec.backend_handle["attempt"] == rec.attempts
    assert rec.reason.startswith("starting: ")
    clock.advance(100)
    qloop.step()  # its backend says why it waits
    rec = store.get_job(job)
    assert rec.state is S.SCHEDULED and rec.reason == "starting: queued behind 3 jobs"
    assert [e.kind for e in store.events(job)].count("launched") == 1
    assert "p" not in store.usage(clock.now())  # nothing billed while it waits

    del queued.waiting[job]
    clock.advance(5)
    qloop.step()
    rec = store.get_job(job)
    assert rec.state is S.RUNNING and rec.job.started_at == clock.now() > bound_at
    ran_from = clock.now()
    clock.advance(30)
    qloop.step()
    qloop.reconciler.flush_usage(clock.now(), force=True)
    # 2 GPUs x 30 s from when it began running, not the 105 s it waited
    assert store.usage(clock.now())["p"] == pytest.approx(2 * (clock.now() - ran_from), rel=1e-3)
    assert store.attempts(job)[-1].launched_at == ran_from
    (workdir(data_dir, job) / "go").write_text("")
    drive(qloop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    assert runs(data_dir, job) == str(rec.attempts)  # launched once


def test_a_restart_adopts_a_starting_job_and_never_launches_it_again(
        store, queued, qloop, data_dir, clock) -> None:
    job = submit(store, python(RUNNER))
    queued.waiting[job] = "queued"
    qloop.step()
    assert store.get_job(job).state is S.SCHEDULED
    # the control plane dies (no stop); a new one, with a new backend, over the same store
    fresh = Queued(data_dir, node=queued.node)
    fresh.waiting[job] = "still queued"
    again = ControlLoop(store, fresh, build_policy("default"), data_dir, clock=clock)
    try:
        clock.advance(10)
        again.step()
        rec = store.get_job(job)
        assert rec.state is S.SCHEDULED and rec.reason == "starting: still queued"
        del fresh.waiting[job]
        again.step()
        assert store.get_job(job).state is S.RUNNING
        (workdir(data_dir, job) / "go").write_text("")
        drive(again, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    finally:
        again.stop()
    assert runs(data_dir, job) == str(rec.attempts)  # one launch, adopted by the new plane


def test_a_launch_displaced_by_work_outside_rota_is_placed_again_without_spending_the_budget(
        store, queued, qloop, data_dir, clock) -> None:
    job = submit(store, python(RUNNER))  # restart.max_retries: 0
    queued.waiting[job] = "Resources"
    queued.displaced[job] = "node n1 GPU 0 is held by work outside rota"
    qloop.step()
    assert store.get_job(job).state is S.SCHEDULED
    clock.advance(1)
    report = qloop.step()  # displaced: taken back, and placed again in the same pass
    assert (job, "scheduled", "pending",
            "requeued: node n1 GPU 0 is held by work outside rota") in report.moves
    assert report.displaced == [job]
    rec = store.get_job(job)
    assert rec.state is S.SCHEDULED and rec.failures == 0 and rec.attempts == 1
    first = store.attempts(job)[0]
    assert first.end == str(End.DISPLACED) and first.launched_at is None
    del queued.waiting[job]
    clock.advance(1)
    qloop.step()
    assert store.get_job(job).state is S.RUNNING
    (workdir(data_dir, job) / "go").write_text("")
    drive(qloop, state_is(store, job, S.SUCCEEDED), "the job to succeed")
