"""Launches run while later passes go on (``rota.control.launcher``): a job in flight keeps
its devices, is not launched twice, judged or preempted before its launch is recorded, and a
pass does not wait for an earlier pass's launches to be answered."""

from __future__ import annotations

import threading

import pytest

from controlkit import HeldLaunches, drive, state_is, submit, wait_until
from rota.backends.base import Handle, LaunchSpec
from rota.control import ControlLoop
from rota.core import JobState as S
from rota.scheduler import build_policy


class Held(HeldLaunches):
    """Launches held until ``release`` (a Binding the API server is slow to answer), each one
    counted; a job in ``fail_once`` fails its first launch."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.launches: dict[str, int] = {}
        self.fail_once: set[str] = set()

    def launch(self, job, placement, spec: LaunchSpec, attempt: int) -> Handle:
        self.launches[str(job.id)] = self.launches.get(str(job.id), 0) + 1
        self.entered.add(str(job.id))
        if str(job.id) in self.fail_once:
            self.fail_once.discard(str(job.id))
            raise RuntimeError("the backend broke down unforeseen")
        return super().launch(job, placement, spec, attempt)


@pytest.fixture
def held(store, data_dir) -> Held:
    return Held(data_dir, node=store.node_records()[0].node)


@pytest.fixture
def piped(store, held, data_dir, clock):
    loop = ControlLoop(store, held, build_policy("default"), data_dir, clock=clock,
                       interval_s=0.05)
    yield loop
    held.release()
    loop.stop()


def devices(store, job_id: str) -> set[int]:
    return {d.index for d in store.get_job(job_id).job.placement.replicas[0].devices}


def test_a_job_is_scheduled_and_launched_while_an_earlier_launch_is_in_flight(store, held,
                                                                                piped):
    piped.start()
    slow = submit(store, ["sleep", "30"], gpus=2)
    held.held.add(slow)
    piped.wake()
    wait_until(lambda: slow in held.entered, "the slow launch to begin")
    quick = submit(store, ["sleep", "30"], gpus=2)
    piped.wake()
    wait_until(state_is(store, quick, S.RUNNING), "the second job to run meanwhile")
    # the job in flight kept its GPUs and was neither launched again nor moved
    assert store.get_job(slow).state is S.SCHEDULED
    assert devices(store, slow).isdisjoint(devices(store, quick))
    assert held.launches[slow] == 1
    held.release()
    rec = wait_until(state_is(store, slow, S.RUNNING), "the slow launch to be recorded")
    assert rec.backend_handle is not None and rec.backend_handle["attempt"] == rec.attempts
    assert held.launches[slow] == 1


def test_a_job_in_flight_is_preempted_only_once_its_launch_is_recorded(store, held, piped):
    piped.start()
    low = submit(store, ["sleep", "30"], gpus=4, priority=0, grace_s=0)
    held.held.add(low)
    piped.wake()
    wait_until(lambda: low in held.entered, "the low-priority launch to begin")
    high = submit(store, ["sleep", "30"], gpus=4, priority=10)
    passes = piped.passes
    piped.wake()
    wait_until(lambda: piped.passes >= passes + 3, "passes to run while the launch is held")
    assert store.get_job(low).state is S.SCHEDULED  # not a victim while in flight
    held.release()
    wait_until(state_is(store, high, S.RUNNING), "the preemptor to run once the launch landed")
    low_rec = store.get_job(low)
    assert low_rec.state is S.PENDING and held.launches[low] == 1
    assert "preempted" in (low_rec.reason or "")


def test_stop_records_the_launches_still_in_flight(store, held, piped):
    piped.start()
    slow = submit(store, ["sleep", "30"], gpus=1)
    held.held.add(slow)
    piped.wake()
    wait_until(lambda: slow in held.entered, "the launch to begin")
    threading.Timer(0.3, held.release).start()
    piped.stop()
    rec = store.get_job(slow)
    assert rec.state is S.RUNNING and rec.backend_handle is not None


def test_a_launch_that_fails_unforeseen_leaves_its_job_scheduled_for_the_next_pass(
        store, held, data_dir, clock):
    loop = ControlLoop(store, held, build_policy("default"), data_dir, clock=clock)
    try:
        job = submit(store, ["sleep", "30"], gpus=1)
        held.fail_once.add(job)
        report = loop.step()
        assert store.get_job(job).state is S.SCHEDULED
        assert any("the backend broke down unforeseen" in e for e in report.errors)
        drive(loop, state_is(store, job, S.RUNNING), "the next pass to launch it again")
        assert held.launches[job] == 2
    finally:
        loop.stop()
