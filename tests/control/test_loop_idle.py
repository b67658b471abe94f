"""Idle reclamation through the real control loop, with real processes and GPU utilisation
faked at the NVML boundary: a job idle on its GPU past its period is reclaimed and its GPUs
freed; a busy one is not; an interactive job is warned first (an event and a line in its
output); no output for a while, or a maximum lifetime, reclaims too; an operator's defaults
apply to every job of a queue, and a job may only be stricter."""

from __future__ import annotations

import time

import pytest

from controlkit import drive, python, state_is, submit
from fake_nvml import FakeGpu, initialised
from rota.backends.local import LocalBackend
from rota.backends.nvml import Nvml
from rota.control import ControlLoop
from rota.core import End, JobState as S
from rota.scheduler import build_policy

QUIET = "import time\nwhile True: time.sleep(0.05)"


@pytest.fixture
def gpus(store):
    (n1, _, _), = store.list_nodes()
    return [FakeGpu(bus=0x17 + k) for k in range(len(n1.devices))]


@pytest.fixture
def idle_loop(store, data_dir, clock, gpus):
    (n1, _, _), = store.list_nodes()
    backend = LocalBackend(data_dir, node=n1, nvml=Nvml(initialised(gpus)))
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    yield loop
    loop.stop()


def gpu_of(store, job: str) -> int:
    (share,) = store.get_job(job).job.placement.replicas[0].devices
    return share.index


def test_a_job_idle_on_its_gpu_is_reclaimed_and_a_busy_one_is_not(
        store, idle_loop, clock, gpus):
    idle = submit(store, python(QUIET), idle={"gpu_util_below": 5.0, "for_s": 600.0})
    busy = submit(store, python(QUIET), idle={"gpu_util_below": 5.0, "for_s": 600.0})
    drive(idle_loop, lambda: all(store.get_job(j).state is S.RUNNING for j in (idle, busy)),
          "both to run")
    gpus[gpu_of(store, busy)].utilization = 80
    idle_loop.step()                      # the idle one is first seen low now
    clock.advance(599)
    idle_loop.step()
    assert store.get_job(idle).state is S.RUNNING  # 599 s below 5 %: not yet
    clock.advance(1)
    rec = drive(idle_loop, state_is(store, idle, S.CANCELLED), "the idle job to be reclaimed")
    assert rec.reason == "reclaimed as idle: GPU utilisation below 5 % for 10m"
    assert [a.end for a in store.attempts(idle)] == [End.RECLAIMED_IDLE]
    assert store.get_job(busy).state is S.RUNNING
    assert idle not in {j.id for j in store.snapshot(clock.now()).active}  # its GPU is free


def test_utilisation_back_above_the_threshold_starts_the_period_again(
        store, idle_loop, clock, gpus):
    job = submit(store, python(QUIET), idle={"gpu_util_below": 5.0, "for_s": 600.0})
    drive(idle_loop, state_is(store, job, S.RUNNING), "the job to run")
    idle_loop.step()
    clock.advance(500)
    gpus[gpu_of(store, job)].utilization = 60   # it wakes up
    idle_loop.step()
    gpus[gpu_of(store, job)].utilization = 0
    clock.advance(200)                          # 700 s since first low, 200 since the last
    idle_loop.step()
    assert store.get_job(job).state is S.RUNNING


def test_an_interactive_job_is_warned_before_it_is_reclaimed(store, idle_loop, clock, gpus,
                                                             data_dir):
    from builders import job
    from rota.store import Submission
    built = job("nb").gpus(1).user("alice").project("p").queue("q").kind("interactive").build()
    nb = store.submit(Submission.from_job(built, run={
        "command": ["python3", "-c", QUIET],
        "idle": {"gpu_util_below": 5.0, "for_s": 600.0, "warn_before_s": 120.0}}))
    drive(idle_loop, state_is(store, nb, S.RUNNING), "the notebook to run")
    idle_loop.step()
    clock.advance(479)
    idle_loop.step()
    assert not [e for e in store.events(nb) if e.kind == "idle-warning"]
    clock.advance(1)                            # 480 s: 120 s before it is reclaimed
    idle_loop.step()
    (warning,) = [e for e in store.events(nb) if e.kind == "idle-warning"]
    assert warning.message.startswith("this job will be reclaimed in 2m (GPU utilisation below")
    err = (data_dir / "jobs" / nb / "attempt-0" / "replica-0" / "stderr.log").read_text()
    assert "[rota] this job will be reclaimed in 2m" in err
    clock.advance(60)
    idle_loop.step()                            # warned once, not every pass
    assert len([e for e in store.events(nb) if e.kind == "idle-warning"]) == 1
    clock.advance(60)
    drive(idle_loop, state_is(store, nb, S.CANCELLED), "the notebook to be reclaimed")


def test_a_notebook_used_after_its_warning_is_warned_again_before_a_later_reclaim(
        store, idle_loop, clock, gpus):
    from builders import job
    from rota.store import Submission
    built = job("nb").gpus(1).user("alice").project("p").queue("q").kind("interactive").build()
    nb = store.submit(Submission.from_job(built, run={
        "command": ["python3", "-c", QUIET],
        "idle": {"gpu_util_below": 5.0, "for_s": 600.0, "warn_before_s": 120.0}}))
    drive(idle_loop, state_is(store, nb, S.RUNNING), "the notebook to run")
    warnings = lambda: [e for e in store.events(nb) if e.kind == "idle-warning"]  # noqa: E731
    idle_loop.step()
    clock.advance(500)
    idle_loop.step()
    assert len(warnings()) == 1
    gpus[gpu_of(store, nb)].utilization = 70    # its owner comes back
    idle_loop.step()
    gpus[gpu_of(store, nb)].utilization = 0     # and leaves again
    idle_loop.step()
    clock.advance(480)
    idle_loop.step()
    assert len(warnings()) == 2                 # the second idle period has its own notice
    clock.advance(120)
    drive(idle_loop, state_is(store, nb, S.CANCELLED), "the notebook to be reclaimed")


def test_no_output_for_a_while_reclaims_and_output_keeps_a_job(store, idle_loop, clock):
    """Output times are the machine's own: this test runs on the real clock, with 2 s."""
    real = lambda: setattr(clock, "t", time.time())  # noqa: E731
    real()
    silent = submit(store, python(QUIET), idle={"inactive_for_s": 2.0})
    chatty = submit(store, python("import time\nwhile True:\n print('x', flush=True)\n"
                                  " time.sleep(0.05)"), idle={"inactive_for_s": 2.0})
    rec = drive(idle_loop, state_is(store, silent, S.CANCELLED), "the silent job's reclaim",
                tick=real)
    assert rec.reason == "reclaimed as idle: no output and no API call for 2s"
    assert store.get_job(chatty).state is S.RUNNING  # its log grows


def test_a_warning_written_into_a_silent_notebooks_output_is_not_its_activity(
        store, idle_loop, clock):
    """rota's own warning line must not count as the job's output: were it counted, each
    warning would start a new quiet period with a warning of its own."""
    from builders import job
    from rota.store import Submission
    real = lambda: setattr(clock, "t", time.time())  # noqa: E731
    real()
    built = job("nb").gpus(1).user("alice").project("p").queue("q").kind("interactive").build()
    nb = store.submit(Submission.from_job(built, run={
        "command": ["python3", "-c", QUIET],
        "idle": {"inactive_for_s": 3.0, "warn_before_s": 2.0}}))
    rec = drive(idle_loop, state_is(store, nb, S.CANCELLED), "the notebook's reclaim", tick=real)
    assert rec.reason == "reclaimed as idle: no output and no API call for 3s"
    assert len([e for e in store.events(nb) if e.kind == "idle-warning"]) == 1


def test_a_maximum_lifetime_reclaims(store, idle_loop, clock):
    old = submit(store, python(QUIET), idle={"max_lifetime_s": 3600.0})
    drive(idle_loop, state_is(store, old, S.RUNNING), "the job to run")
    clock.advance(3599)
    idle_loop.step()
    assert store.get_job(old).state is S.RUNNING
    clock.advance(1)
    rec = drive(idle_loop, state_is(store, old, S.CANCELLED), "the old job's reclaim")
    assert rec.reason == "reclaimed as idle: its maximum lifetime of 1h reached"


def test_an_operators_defaults_apply_and_a_job_may_only_be_stricter(
        store, idle_loop, clock, gpus):
    store.put_idle("q", {"max_lifetime_s": 7200.0})
    laxer = submit(store, python(QUIET), idle={"max_lifetime_s": 86400.0})
    stricter = submit(store, python(QUIET), idle={"max_lifetime_s": 600.0})
    drive(idle_loop, lambda: all(store.get_job(j).state is S.RUNNING for j in (laxer, stricter)),
          "both to run")
    clock.advance(601)
    drive(idle_loop, state_is(store, stricter, S.CANCELLED), "the stricter job's reclaim")
    assert store.get_job(laxer).state is S.RUNNING
    clock.advance(7200)
    drive(idle_loop, state_is(store, laxer, S.CANCELLED), "the operator's limit to hold")


def test_the_time_a_job_was_idle_on_its_gpu_is_stored_for_accounting(
        store, idle_loop, clock, gpus):
    job = submit(store, python(QUIET), idle={"gpu_util_below": 5.0, "for_s": 3600.0})
    drive(idle_loop, state_is(store, job, S.RUNNING), "the job to run")
    idle_loop.step()                            # first seen low at t
    t = clock.now()
    clock.advance(900)
    idle_loop.step()                            # still low: the span is [t, t + 900]
    gpus[gpu_of(store, job)].utilization = 70
    clock.advance(300)
    idle_loop.step()                            # busy again: that span ends
    gpus[gpu_of(store, job)].utilization = 0
    clock.advance(100)
    idle_loop.step()                            # a new span from t + 1300
    clock.advance(200)
    idle_loop.step()                            # [t + 1300, t + 1500]
    report, _ = store.report(t - 60, clock.now() + 60, ["project"], clock.now())
    # one GPU idle for 900 s and 200 s
    assert report.total.idle_gpu_hours == pytest.approx((900 + 200) / 3600)
    assert report.total.gpu_hours > report.total.idle_gpu_hours
