"""The control loop carrying out placements with real processes: preemption with a checkpoint
signal and grace period, fractional GPUs shared by two jobs, a two-replica gang, and a restart
of the control plane that adopts what runs."""

from __future__ import annotations

import json
from pathlib import Path

from controlkit import drive, python, state_is, submit, wait_until, workdir
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import ANY_FLAVOR, FlavorQuota, JobState, Queue
from rota.scheduler import ReasonCode, build_policy

S = JobState
# Checkpoints on SIGUSR1 and keeps going: only the SIGKILL after the grace period ends it.
STUBBORN = ("import os, signal, time\n"
            "def ckpt(*_): open('checkpointed', 'w').write(os.environ['ROTA_ATTEMPT'])\n"
            "signal.signal(signal.SIGUSR1, ckpt)\n"
            "open('started', 'w').write('')\n"
            "while True: time.sleep(0.05)\n")
SHOW_ENV = ("import json, os, time\n"
            "keys = ['ROTA_REPLICA_RANK', 'ROTA_WORLD_SIZE', 'CUDA_VISIBLE_DEVICES', "
            "'ROTA_GPU_SHARE', 'ROTA_MASTER_PORT']\n"
            "name = 'env-' + os.environ['ROTA_REPLICA_RANK'] + '-' + os.environ['ROTA_JOB_ID']\n"
            "json.dump({k: os.environ.get(k) for k in keys}, open(name, 'w'))\n"
            "while not os.path.exists('go'): time.sleep(0.02)\n")


def test_preempted_job_is_signalled_given_its_grace_then_stopped_and_requeued(
        store, loop, data_dir, clock) -> None:
    low = submit(store, python(STUBBORN), gpus=4, priority=0, grace_s=60,
                 checkpoint={"signal": "SIGUSR1"})
    loop.step()
    drive(loop, (workdir(data_dir, low) / "started").exists, "the low job to start")
    high = submit(store, ["true"], gpus=4, priority=10)
    loop.step()
    rec = store.get_job(low)
    assert rec.state is S.PREEMPTING and rec.preempt_deadline == clock.now() + 60
    drive(loop, (workdir(data_dir, low) / "checkpointed").exists, "the checkpoint signal")
    clock.advance(30)  # within the grace period: it keeps its GPUs
    loop.step()
    assert store.get_job(low).state is S.PREEMPTING
    assert store.get_job(high).state is S.PENDING
    clock.advance(31)  # the grace period is over
    rec = drive(loop, state_is(store, low, S.PENDING, S.SCHEDULED), "the victim to be requeued")
    assert rec.attempts == 1
    drive(loop, state_is(store, high, S.SUCCEEDED), "the preemptor to run and finish")
    rec = drive(loop, state_is(store, low, S.RUNNING), "the victim to run again")
    assert rec.attempts == 1 and rec.backend_handle["launch_id"].endswith("attempt-1")


def test_two_fractional_jobs_share_one_gpu(store, loop, data_dir) -> None:
    a = submit(store, python(SHOW_ENV), gpus=0.5)
    b = submit(store, python(SHOW_ENV), gpus=0.5)
    report = loop.step()
    assert sorted(report.launched) == sorted([a, b])
    envs = [json.loads(drive(loop, lambda j=j: _read(workdir(data_dir, j) / f"env-0-{j}"),
                             f"job {j} to start")) for j in (a, b)]
    assert [e["ROTA_GPU_SHARE"] for e in envs] == ["0.5", "0.5"]
    assert envs[0]["CUDA_VISIBLE_DEVICES"] == envs[1]["CUDA_VISIBLE_DEVICES"]
    for j in (a, b):
        assert store.get_job(j).state is S.RUNNING
        (workdir(data_dir, j) / "go").write_text("")
    for j in (a, b):
        drive(loop, state_is(store, j, S.SUCCEEDED), f"job {j} to succeed")


def test_two_replica_gang_starts_together_with_its_world_size(store, loop, data_dir) -> None:
    gang = submit(store, python(SHOW_ENV), gpus=2, replicas=2)
    assert loop.step().launched == [gang]
    work = workdir(data_dir, gang)
    envs = [json.loads(drive(loop, lambda r=r: _read(work / f"env-{r}-{gang}"),
                             f"replica {r} to start")) for r in (0, 1)]
    assert [(e["ROTA_REPLICA_RANK"], e["ROTA_WORLD_SIZE"]) for e in envs] == [("0", "2"),
                                                                            ("1", "2")]
    assert envs[0]["ROTA_MASTER_PORT"] == envs[1]["ROTA_MASTER_PORT"]
    devices = [set(e["CUDA_VISIBLE_DEVICES"].split(",")) for e in envs]
    assert len(devices[0]) == 2 and not devices[0] & devices[1]
    (work / "go").write_text("")
    drive(loop, state_is(store, gang, S.SUCCEEDED), "the gang to succeed")


def test_gang_with_a_failed_replica_is_stopped_and_fails(store, loop, data_dir) -> None:
    code = ("import os, time\n"
            "if os.environ['ROTA_REPLICA_RANK'] == '1': raise SystemExit(9)\n"
            "while True: time.sleep(0.05)\n")
    gang = submit(store, python(code), gpus=1, replicas=2, grace_s=1)
    rec = drive(loop, state_is(store, gang, S.FAILED), "the broken gang to fail")
    assert rec.exit_code == 9 and "replica 1 exited with code 9" in rec.reason


def test_restarted_loop_adopts_running_and_records_finished_jobs(
        store, loop, backend, data_dir, clock) -> None:
    long = submit(store, python("import os, time\nwhile not os.path.exists('go'): time.sleep(0.02)"))
    short = submit(store, python("raise SystemExit(4)"))
    loop.step()
    for j in (long, short):
        assert store.get_job(j).state is S.RUNNING
    # a new control plane over the same store and data directory, as after a crash
    fresh = LocalBackend(data_dir, node=backend.node)
    restarted = ControlLoop(store, fresh, build_policy("default"), data_dir, clock=clock)
    rec = drive(restarted, state_is(store, short, S.FAILED), "the short job's exit code")
    assert rec.exit_code == 4
    assert store.get_job(long).state is S.RUNNING
    assert [h.job_id for h in fresh.tracked()] == [long]
    (workdir(data_dir, long) / "go").write_text("")
    drive(restarted, state_is(store, long, S.SUCCEEDED), "the long job to succeed")
    restarted.stop()


def _read(path: Path) -> str | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return text or None


def test_background_loop_is_woken_by_a_submit_and_by_a_process_exit(store, loop,
                                                                     data_dir) -> None:
    loop.interval_s = 3600.0  # only wake-ups can trigger passes
    loop.start()
    job = submit(store, python("import os, time\nwhile not os.path.exists('go'): time.sleep(0.02)"))
    loop.wake()  # what the API does after a submit
    wait_until(state_is(store, job, S.RUNNING), "the woken loop to launch the job")
    (workdir(data_dir, job) / "go").write_text("")
    rec = wait_until(state_is(store, job, S.SUCCEEDED), "the exit to wake the loop")
    assert rec.exit_code == 0


def test_each_pass_places_against_the_queues_and_jobs_as_they_are_now(store, loop) -> None:
    # what running jobs hold is kept from pass to pass (``rota.scheduler.base``): a quota set
    # and a job ended since the last pass are what the next one places against
    first = submit(store, python("import time; time.sleep(60)"), gpus=2)
    drive(loop, state_is(store, first, JobState.RUNNING), "the first job to run")
    store.put_queue(Queue("q", {ANY_FLAVOR: FlavorQuota({"gpu": 2000})}))  # 2 GPUs in all
    second = submit(store, python("import time; time.sleep(60)"), gpus=2)
    loop.step()
    loop.step()
    rec = store.get_job(second)  # 2 GPUs of 4 are free, but the queue's quota is used up
    assert rec.state is JobState.PENDING and rec.wait_reasons[0].code is ReasonCode.QUOTA
    store.request_cancel(first, by="alice")
    drive(loop, state_is(store, second, JobState.RUNNING), "the second job to run once the "
                                                          "first gave its quota back")
