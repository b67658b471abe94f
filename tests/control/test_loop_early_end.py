"""Early ends in the control loop (``ControlLoop.exited``): a job's own report of its end is
handed to the backend, frees its GPUs for the next pass, and is answered only once that pass
has its launches out; an attempt the backend names overdue is stopped, with an event saying
so. The backend here is the local one (real processes), taught to take reports as the Slurm
backend does: its processes go on running after the report, as a Slurm job holds its
allocation until its batch script exits."""

from __future__ import annotations

import pytest

from controlkit import HeldLaunches, state_is, submit, wait_until
from rota.backends.base import Handle, LaunchSpec, ReplicaState, ReplicaStatus, Status
from rota.control import ControlLoop
from rota.core import JobState as S
from rota.scheduler import build_policy


class Reporting(HeldLaunches):
    """Takes reports (``poll`` says exited with the reported code while the processes run),
    holds the launches of the jobs in ``held`` until ``release``, logs launches and flushes in
    order, and names the handles in ``late`` overdue."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reports: dict[str, int] = {}
        self.order: list[str] = []
        self.late: list[Handle] = []
        self.codes: dict[str, tuple[int, ...] | None] = {}

    def reported(self, handle: Handle, exit_code: int, replicas=None) -> bool:
        self.reports[handle.launch_id] = exit_code
        self.codes[handle.launch_id] = replicas
        return True

    def poll(self, handles):
        return [Status(tuple(ReplicaStatus(r.rank, ReplicaState.EXITED,
                                           self.reports[h.launch_id]) for r in h.replicas))
                if h.launch_id in self.reports else s
                for h, s in zip(handles, super().poll(handles))]

    def launch(self, job, placement, spec: LaunchSpec, attempt: int) -> Handle:
        handle = super().launch(job, placement, spec, attempt)
        self.order.append(f"launched {job.id}")
        return handle

    def flush_launches(self) -> None:
        self.order.append("flushed")

    def overdue(self) -> list[Handle]:
        late, self.late = self.late, []
        return late


@pytest.fixture
def reporting(store, data_dir) -> Reporting:
    return Reporting(data_dir, node=store.node_records()[0].node)


@pytest.fixture
def running_loop(store, reporting, data_dir, clock):
    loop = ControlLoop(store, reporting, build_policy("default"), data_dir, clock=clock,
                       interval_s=0.05)
    loop.start()
    yield loop
    reporting.release()
    loop.stop()


def test_a_report_frees_the_gpus_and_is_answered_once_the_next_launch_is_out(
        store, reporting, running_loop):
    first = submit(store, ["sleep", "60"], gpus=4)                 # all four GPUs
    wait_until(state_is(store, first, S.RUNNING), "the first job to run")
    second = submit(store, ["sleep", "60"], gpus=4)                # waits for them
    reporting.held.add(second)
    answered = running_loop.exited(first, store.get_job(first).attempts, 3)
    assert answered is not None
    wait_until(lambda: second in reporting.entered, "the next job's launch to begin")
    done = store.get_job(first)
    assert (done.state, done.exit_code) == (S.FAILED, 3)           # ended as reported
    assert not answered.done()                                    # its launch is under way
    reporting.release()
    answered.result(30)
    assert reporting.order[-2:] == [f"launched {second}", "flushed"]
    wait_until(state_is(store, second, S.RUNNING), "the next job to be recorded running")


def test_a_report_of_an_attempt_that_is_not_the_current_one_is_not_taken(
        store, reporting, running_loop):
    job = submit(store, ["sleep", "60"], gpus=1)
    rec = wait_until(state_is(store, job, S.RUNNING), "the job to run")
    assert running_loop.exited(job, rec.attempts + 1, 0) is None
    assert running_loop.exited("no-such-job", 0, 0) is None
    assert reporting.reports == {} and store.get_job(job).state is S.RUNNING


def test_each_replicas_code_goes_to_the_backend_only_for_this_attempts_ranks(
        store, reporting, running_loop):
    one, two = (submit(store, ["sleep", "60"], gpus=1) for _ in range(2))
    for job in (one, two):
        wait_until(state_is(store, job, S.RUNNING), "the job to run")
    assert running_loop.exited(one, store.get_job(one).attempts, 3, (3,)) is not None
    assert running_loop.exited(two, store.get_job(two).attempts, 3, (3, 0)) is not None
    # one replica each: two codes are not this attempt's, and the batch's status stands
    assert list(reporting.codes.values()) == [(3,), None]


def test_an_attempt_still_running_long_after_its_report_is_stopped_and_the_events_say_so(
        store, reporting, running_loop):
    job = submit(store, ["sleep", "60"], gpus=1)
    rec = wait_until(state_is(store, job, S.RUNNING), "the job to run")
    handle = Handle.from_dict(rec.backend_handle)
    reporting.late.append(handle)
    running_loop.wake()
    wait_until(lambda: any(e.kind == "stopped-after-report" for e in store.events(job)),
               "the event")
    wait_until(lambda: reporting.poll([handle])[0].state is not ReplicaState.RUNNING,
               "its processes to be stopped")
    [event] = [e for e in store.events(job) if e.kind == "stopped-after-report"]
    assert "reported its end" in event.message and "stopped" in event.message
