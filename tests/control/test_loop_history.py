"""A job's life across attempts, with real processes: every attempt's history (when, where, how
it ended), faults of the infrastructure that requeue without spending the restart budget, a job
lost too often in a row held until released, and the backoff between failed runs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from controlkit import drive, python, state_is, submit, wait_until, workdir
from fake_nvml import FakeGpu, initialised
from rota.backends.local import LocalBackend
from rota.backends.nvml import Nvml
from rota.backends.procs import read_json
from rota.control import ControlLoop
from rota.core import End, JobState as S, ReasonCode
from rota.scheduler import build_policy

# runs until a file named after its attempt appears: 'go-0', 'go-1', ...
WAITER = ("import os, time\n"
          "open('started-' + os.environ['ROTA_ATTEMPT'], 'w').close()\n"
          "while not os.path.exists('go-' + os.environ['ROTA_ATTEMPT']): time.sleep(0.02)\n")


def kill_supervisor(store, job: str, data_dir: Path) -> None:
    """The replica's supervisor dies without a word (as when its node fails), and its command
    with it: the backend reports the replica lost."""
    rec = store.get_job(job)
    ref = rec.backend_handle["replicas"][0]["ref"]
    child = wait_until(lambda: read_json(Path(ref["dir"]) / "child.json"), "the command")
    os.kill(ref["pid"], signal.SIGKILL)
    os.killpg(child["pid"], signal.SIGKILL)


def test_a_lost_replica_is_requeued_without_spending_the_budget(store, loop, data_dir):
    """max_retries 0: a failure would end the job, a lost node does not."""
    job = submit(store, python(WAITER))
    drive(loop, lambda: (workdir(data_dir, job) / "started-0").exists(), "attempt 0 to run")
    kill_supervisor(store, job, data_dir)
    rec = drive(loop, lambda: store.get_job(job).attempts == 1 and store.get_job(job),
                "the job to be requeued")
    assert rec.failures == 0 and rec.lost_streak == 1
    assert store.attempts(job)[0].reason.startswith("requeued (node-lost): replica 0 was lost")
    (workdir(data_dir, job) / "go-1").write_text("")
    done = drive(loop, state_is(store, job, S.SUCCEEDED), "attempt 1 to succeed")
    assert done.lost_streak == 0  # a run that ended on its own ends the streak
    history = store.attempts(job)
    assert [(a.attempt, a.end) for a in history] == [(0, End.NODE_LOST), (1, End.SUCCEEDED)]
    assert all(a.bound_at <= a.launched_at <= a.ended_at for a in history)
    assert history[0].placement[0]["node"] == "n1"


def test_a_job_lost_three_times_in_a_row_is_held_until_released(store, loop, data_dir):
    job = submit(store, python(WAITER))
    for attempt in range(3):
        drive(loop, lambda: (workdir(data_dir, job) / f"started-{attempt}").exists(),
              f"attempt {attempt} to run")
        kill_supervisor(store, job, data_dir)
        drive(loop, lambda: store.get_job(job).attempts == attempt + 1, "the requeue")
    rec = store.get_job(job)
    assert rec.state is S.PENDING and rec.held.startswith("lost 3 times in a row (node-lost")
    assert f"rota release {job}" in rec.held
    for _ in range(3):
        loop.step()
    rec = store.get_job(job)
    assert rec.state is S.PENDING and rec.wait_reasons[0].code is ReasonCode.HELD
    store.release(job, by="alice")
    (workdir(data_dir, job) / "go-3").write_text("")
    drive(loop, state_is(store, job, S.SUCCEEDED), "the released job to run and succeed")
    assert [e.kind for e in store.events(job)].count("released") == 1


def test_a_failed_run_is_retried_after_a_backoff_that_doubles(store, loop, data_dir, clock):
    """backoff 10 s: the first retry waits 10 s, the second 20 s."""
    job = submit(store, python("raise SystemExit(2)"), restart={"max_retries": 2,
                                                                "backoff_s": 10.0})
    requeued = drive(loop, lambda: (r := store.get_job(job)).attempts == 1 and r,
                     "the first failure")
    assert requeued.eligible_at == clock.now() + 10
    for _ in range(3):
        loop.step()
    waiting = store.get_job(job)
    assert waiting.state is S.PENDING and waiting.wait_reasons[0].code is ReasonCode.NOT_BEFORE
    assert waiting.estimated_start == requeued.eligible_at
    clock.advance(10)
    second = drive(loop, lambda: (r := store.get_job(job)).attempts == 2 and r,
                   "the second failure")
    assert second.eligible_at == clock.now() + 20
    clock.advance(20)
    done = drive(loop, state_is(store, job, S.FAILED), "the last retry to fail")
    assert [a.end for a in store.attempts(job)] == [End.FAILED] * 3
    assert done.reason == "replica 0 exited with code 2 (after 2 retries)"


CHECKPOINTER = ("import os, signal, time\n"
                "def saved(*_):\n"
                "    open('checkpointed', 'w').close()\n"
                "signal.signal(signal.SIGUSR1, saved)\n"
                "open('started-0', 'w').close()\n"
                "while True: time.sleep(0.02)\n")


def test_walltime_sends_the_checkpoint_signal_before_the_limit_and_stops_at_it(
        store, loop, data_dir, clock):
    """walltime 60 s, grace 10 s, checkpoint on SIGUSR1: the signal at 50 s, the stop at 60 s."""
    job = submit(store, python(CHECKPOINTER), grace_s=10, walltime_s=60,
                 checkpoint={"signal": "SIGUSR1"})
    drive(loop, lambda: (workdir(data_dir, job) / "started-0").exists(), "the job to run")
    clock.advance(45)
    loop.step()
    assert not (workdir(data_dir, job) / "checkpointed").exists()
    clock.advance(6)  # 51 s: within the last 10 s
    drive(loop, lambda: (workdir(data_dir, job) / "checkpointed").exists(),
          "the checkpoint signal")
    clock.advance(10)  # 61 s: past the limit
    rec = drive(loop, state_is(store, job, S.FAILED), "the job to be stopped")
    assert rec.reason == "walltime: stopped at its limit of 60 s"
    assert [a.end for a in store.attempts(job)] == [End.WALLTIME]


def test_a_job_on_a_gpu_that_turns_unhealthy_is_requeued_elsewhere(store, data_dir, clock):
    """XID 79 on its GPU: the job is stopped and requeued (its budget untouched), the GPU is
    marked unhealthy with the reason, and the job runs again on another GPU."""
    (n1, _, _), = store.list_nodes()
    fake = initialised([FakeGpu(bus=0x17 + k) for k in range(len(n1.devices))])
    backend = LocalBackend(data_dir, node=n1, nvml=Nvml(fake))
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       inventory_s=1.0)
    backend.watch(loop.wake)
    try:
        job = submit(store, python(WAITER))
        drive(loop, lambda: (workdir(data_dir, job) / "started-0").exists(), "attempt 0 to run")
        (first,) = [d.index for d in store.get_job(job).job.placement.replicas[0].devices]
        fake.inject_xid(first, 79)
        rec = drive(loop, lambda: store.get_job(job).attempts == 1 and store.get_job(job),
                    "the requeue", tick=lambda: clock.advance(1))
        assert rec.failures == 0
        assert store.attempts(job)[0].end == End.GPU_UNHEALTHY
        (workdir(data_dir, job) / "go-1").write_text("")
        done = drive(loop, state_is(store, job, S.SUCCEEDED), "attempt 1 to succeed",
                     tick=lambda: clock.advance(1))
        (second,) = [d.index for d in store.attempts(job)[1].placement[0]["devices"]]
        assert second != first
        (stored, _, _), = store.list_nodes()
        sick = stored.devices[first]
        assert (sick.healthy, sick.problem) == (False, "XID 79 reported by the driver")
        assert done.state is S.SUCCEEDED
    finally:
        backend.unwatch()
        loop.stop()
