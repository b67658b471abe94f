"""``rota requeue``: a running job asked back to pending gets its checkpoint signal, is stopped
once its grace period is over, goes back to PENDING with the end ``preempted`` (no restart
budget spent), and runs again as a new attempt."""

from __future__ import annotations

from controlkit import drive, python, submit, workdir
from rota.core import End, JobState as S
from test_loop_history import CHECKPOINTER


def test_a_requeued_job_checkpoints_leaves_and_runs_again(store, loop, data_dir, clock):
    job = submit(store, python(CHECKPOINTER), grace_s=10, checkpoint={"signal": "SIGUSR1"})
    drive(loop, lambda: (workdir(data_dir, job) / "started-0").exists(), "the job to run")
    (workdir(data_dir, job) / "started-0").unlink()
    rec = store.requeue(job, by="alice")
    assert (rec.state, rec.reason) == (S.PREEMPTING, "requeued by alice")
    drive(loop, lambda: (workdir(data_dir, job) / "checkpointed").exists(),
          "the checkpoint signal")
    clock.advance(11)  # past its grace period
    drive(loop, lambda: (workdir(data_dir, job) / "started-0").exists(),
          "the job to run again")
    again = store.get_job(job)
    assert again.state in (S.SCHEDULED, S.RUNNING) and again.attempts == 1  # from 0
    assert [a.end for a in store.attempts(job)][:1] == [End.PREEMPTED]
    assert again.failures == 0
    assert any(e.message == "requeued by alice" for e in store.events(job))
