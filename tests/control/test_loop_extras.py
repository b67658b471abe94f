"""Scheduling extras through the real control loop, with real processes: a job that may not
start before a time, jobs that wait for others (after_ok, after_any, after_failed; one whose
dependency can no longer be met is rejected), and a job array that runs at most its limit of
tasks at once, each knowing its index."""

from __future__ import annotations

from dataclasses import replace

from builders import job
from controlkit import drive, python, state_is, submit
from rota.core import JobState as S, ReasonCode
from rota.store import Store, Submission


def submission(command: list[str], **changes) -> Submission:
    built = job("x").gpus(0).user("alice").project("p").queue("q").build()
    return replace(Submission.from_job(built, run={"command": command}), **changes)


def test_a_job_does_not_start_before_its_start_at(store: Store, loop, clock):
    later = store.submit(submission(["true"], start_at=clock.now() + 3600))
    for _ in range(3):
        loop.step()
    rec = store.get_job(later)
    assert rec.state is S.PENDING and rec.wait_reasons[0].code is ReasonCode.NOT_BEFORE
    assert rec.estimated_start == clock.now() + 3600
    clock.advance(3600)
    drive(loop, state_is(store, later, S.SUCCEEDED), "the job to run at its time")


def test_after_ok_waits_for_success_and_a_failed_dependency_rejects(store: Store, loop):
    first = submit(store, python("import time; time.sleep(0.5)"), gpus=0)
    doomed = submit(store, python("raise SystemExit(1)"), gpus=0)
    waiting = store.submit(submission(["true"], depends=(("after_ok", first),)))
    never = store.submit(submission(["true"], depends=(("after_ok", doomed),)))
    on_failure = store.submit(submission(["true"], depends=(("after_failed", doomed),)))
    after_any = store.submit(submission(["true"], depends=(("after_any", doomed),)))
    loop.step()
    rec = store.get_job(waiting)
    assert rec.state is S.PENDING and rec.wait_reasons[0].code is ReasonCode.DEPENDENCY
    assert f"waits for job {first} to end (after_ok)" in rec.wait_reasons[0].detail
    drive(loop, state_is(store, waiting, S.SUCCEEDED), "the dependent job to run after it")
    assert store.attempts(waiting)[0].bound_at >= store.get_job(first).finished_at
    rejected = drive(loop, state_is(store, never, S.FAILED), "the unmeetable job's reject")
    assert f"job {doomed} ended failed, so after_ok can never be met" in rejected.reason
    drive(loop, state_is(store, on_failure, S.SUCCEEDED), "after_failed to run")
    drive(loop, state_is(store, after_any, S.SUCCEEDED), "after_any to run")


def test_an_array_runs_at_most_its_limit_at_once_each_task_with_its_index(
        store: Store, loop, data_dir):
    code = ("import os, time\n"
            "open(os.path.join(os.environ['OUT'], os.environ['ROTA_ARRAY_INDEX']), 'w')"
            ".write(os.environ['ROTA_ARRAY_ID'])\n"
            "time.sleep(0.3)\n")
    out = data_dir.parent / "out"
    out.mkdir()
    tasks = store.submit_array([
        submission(python(code), run={"command": python(code), "env": {"OUT": str(out)}},
                   array_index=i, array_limit=3) for i in range(8)])
    ids = [t.id for t in tasks]
    most = 0

    def all_done():
        nonlocal most
        running = sum(store.get_job(j).state.holds_resources for j in ids)
        most = max(most, running)
        return all(store.get_job(j).state is S.SUCCEEDED for j in ids)
    drive(loop, all_done, "every task to run")
    assert most == 3
    assert sorted(int(p.name) for p in out.iterdir()) == list(range(8))
    assert {p.read_text() for p in out.iterdir()} == {tasks[0].id}
