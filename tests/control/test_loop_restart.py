"""A control loop that dies and a new one over the same store and data directory: a launch
whose handle was never saved is adopted, not run twice; the time the plane was down is
billed; the restart budget comes from the ``attempts`` column and preemptions do not spend it.

"Dies" is simulated in-process: the first loop is abandoned without ``stop`` (as ``kill -9``
would leave it), and where the death must fall at an exact point an exception that nothing
catches is raised there.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controlkit import drive, python, state_is, submit, wait_until, workdir
from rota.backends.local import LocalBackend
from rota.backends.procs import is_running, read_json
from rota.control import ControlLoop
from rota.control.tracking import FLUSH_S
from rota.core import JobState
from rota.scheduler import Decisions, Preempt, build_policy

S = JobState
# appends its attempt number to 'runs', then waits for 'go'
RUNNER = ("import os, time\n"
          "open('runs', 'a').write(os.environ['ROTA_ATTEMPT'])\n"
          "while not os.path.exists('go'): time.sleep(0.02)\n")


class Killed(BaseException):
    """The control plane dies here: nothing in the loop catches it."""


def restarted(store, backend: LocalBackend, data_dir: Path, clock) -> ControlLoop:
    """A new control loop and backend over the same store and data directory."""
    fresh = LocalBackend(data_dir, node=backend.node)
    return ControlLoop(store, fresh, build_policy("default"), data_dir, clock=clock)


def runs(data_dir: Path, job: str) -> str:
    path = workdir(data_dir, job) / "runs"
    return path.read_text() if path.exists() else ""


def die_after_launch(loop: ControlLoop, monkeypatch) -> None:
    def killed(*_args, **_kwargs):
        raise Killed()
    monkeypatch.setattr(loop.reconciler, "_launched", killed)  # processes up, handle unsaved
    with pytest.raises(Killed):
        loop.step()


def test_launch_whose_handle_was_never_saved_is_adopted_not_run_twice(
        store, loop, backend, data_dir, clock, monkeypatch) -> None:
    job = submit(store, python(RUNNER))
    die_after_launch(loop, monkeypatch)
    rec = store.get_job(job)
    assert rec.state is S.SCHEDULED and rec.backend_handle is None
    wait_until(lambda: runs(data_dir, job), "the orphaned attempt to run")

    again = restarted(store, backend, data_dir, clock)
    report = again.step()
    rec = store.get_job(job)
    assert rec.state is S.RUNNING and rec.backend_handle["attempt"] == 0
    assert rec.backend_handle["launch_id"].endswith("attempt-0")
    assert report.launched == [job]
    (workdir(data_dir, job) / "go").write_text("")
    drive(again, state_is(store, job, S.SUCCEEDED), "the adopted job to succeed")
    assert runs(data_dir, job) == "0"  # one run, not two
    again.stop()


def test_cancelled_job_whose_handle_was_never_saved_is_found_and_stopped(
        store, loop, backend, data_dir, clock, monkeypatch) -> None:
    job = submit(store, python(RUNNER), grace_s=1)
    die_after_launch(loop, monkeypatch)
    wait_until(lambda: runs(data_dir, job), "the orphaned attempt to run")
    store.request_cancel(job, by="alice")

    again = restarted(store, backend, data_dir, clock)
    rec = drive(again, state_is(store, job, S.CANCELLED), "the job to be cancelled")
    replica = Path(rec.backend_handle["replicas"][0]["ref"]["dir"])
    child = read_json(replica / "child.json")
    assert not is_running(child["pid"], child["start_ticks"])
    assert any(e.kind == "adopted" for e in store.events(job))
    again.stop()


def test_time_the_plane_was_down_is_billed(store, loop, backend, data_dir, clock) -> None:
    job = submit(store, python(RUNNER), gpus=2)
    loop.step()
    clock.advance(10)
    loop.step()  # bills 2 GPUs x 10 s and stores billed_until
    assert store.get_job(job).billed_until == clock.now()
    clock.advance(100)  # the plane is down

    again = restarted(store, backend, data_dir, clock)
    again.step()
    assert store.usage(clock.now())["p"] == pytest.approx(2 * 110, rel=1e-3)
    (workdir(data_dir, job) / "go").write_text("")
    drive(again, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    again.stop()


def test_usage_is_stored_every_few_seconds_and_a_crash_loses_none_of_a_running_job(
        store, loop, backend, data_dir, clock) -> None:
    job = submit(store, python(RUNNER))
    loop.step()  # bound and launched at this time
    began = clock.now()
    clock.advance(FLUSH_S + 1)
    loop.step()
    stored = store.get_job(job).billed_until
    assert stored == clock.now()
    clock.advance(FLUSH_S / 4)
    loop.step()  # a pass soon after: nothing written for the running job
    assert store.get_job(job).billed_until == stored
    clock.advance(3)  # then the control plane dies without storing the last passes

    again = restarted(store, backend, data_dir, clock)
    again.step()  # billed again from what was stored: every second held is counted
    assert store.usage(clock.now())["p"] == pytest.approx(clock.now() - began, rel=1e-3)
    (workdir(data_dir, job) / "go").write_text("")
    drive(again, state_is(store, job, S.SUCCEEDED), "the job to succeed")
    again.stop()


def test_job_that_ended_while_the_plane_was_down_is_billed_up_to_its_end(
        store, loop, backend, data_dir, clock) -> None:
    clock.t = time.time()  # the supervisor records its end on the system clock
    job = submit(store, python(RUNNER))
    loop.step()
    began = clock.now()
    (workdir(data_dir, job) / "go").write_text("")  # it ends while nobody watches
    replica = Path(store.get_job(job).backend_handle["replicas"][0]["ref"]["dir"])
    status = wait_until(lambda: read_json(replica / "status.json"), "the job to end")
    clock.t = status["finished_at"] + 1000  # the plane comes back much later

    again = restarted(store, backend, data_dir, clock)
    again.step()
    assert store.get_job(job).state is S.SUCCEEDED
    # 1 GPU from the bind to its end, not to the restart
    assert store.usage(clock.now())["p"] == pytest.approx(status["finished_at"] - began, abs=1.0)
    again.stop()


FAILS_AFTER_TWO_PREEMPTIONS = (
    "import os, sys, time\n"
    "attempt = os.environ['ROTA_ATTEMPT']\n"
    "open('runs', 'a').write(attempt)\n"
    "while attempt in ('0', '1'): time.sleep(0.05)\n"
    "sys.exit(3)\n")


def test_preemptions_do_not_spend_the_restart_budget(store, loop, data_dir, clock) -> None:
    """Attempts 0 and 1 are preempted, 2 and 3 fail; max_retries 1. When attempt 2 fails,
    failures before it = attempts 2 - preemptions 2 = 0 < 1: retried. When attempt 3 fails,
    3 - 2 = 1, not < 1: FAILED. (Counting preemptions as failures would fail it at attempt 2.)"""
    job = submit(store, python(FAILS_AFTER_TWO_PREEMPTIONS), restart={"max_retries": 1},
                 grace_s=0)
    for attempt in ("0", "1"):
        drive(loop, lambda a=attempt: runs(data_dir, job).endswith(a), f"attempt {attempt}")
        store.apply(Decisions(preemptions=(Preempt(job, "someone", 0.0, "priority"),)),
                    clock.now())
        clock.advance(1)
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to fail", tick=lambda: clock.advance(1))
    assert (rec.attempts, rec.exit_code) == (3, 3)
    assert runs(data_dir, job) == "0123"
    assert rec.failures == 1  # the requeue after attempt 2; those after 0 and 1 were preemptions
