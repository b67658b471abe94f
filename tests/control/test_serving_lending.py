"""Overnight lending with today's cohorts: training uses a service's idle quota while the
service is at zero, and gives it back, through its checkpoint grace, when traffic returns.

Real store, real control loop, real processes (the local backend over four virtual H100s), the
real serving runtime; only the readiness answer is the test's (a server that is up). Queues
``serve`` (nominal 4 GPUs) and ``train`` (nominal 0) share cohort ``c``; both keep the default
``reclaim_within_cohort: any``. A 4-GPU training job borrows all of ``serve``'s quota; a
request arrives; the replica job the runtime submits reclaims the quota: the training job is
preempted with its grace period (SIGTERM, then requeued), the replica runs and answers; once
the service is idle again it scales to zero and the training job runs again. The training
job saves its checkpoint on the signal and exits within its grace: the test never moves the
clock past it.
"""

from __future__ import annotations

import asyncio

import pytest

from builders import job
from controlkit import DEADLINE_S, drive, python
from rota.control.serving import Serving
from rota.core import FlavorQuota, JobKind, JobState, Queue
from rota.core.serving import ServiceSettings
from rota.store import Store, Submission

S = JobState
SLEEPER = python("import time\nwhile True: time.sleep(0.05)\n")
TRAINER = python(  # on SIGTERM: saves a checkpoint (a file here) and ends as the signal would
    "import pathlib, signal, sys, time\n"
    "path = pathlib.Path(sys.argv[1])\n"
    "def save(*_):\n"
    "    path.write_text('step 42')\n"
    "    sys.exit(128 + signal.SIGTERM)\n"
    "signal.signal(signal.SIGTERM, save)\n"
    "path.with_suffix('.up').write_text('')\n"
    "while True: time.sleep(0.05)\n")
GRACE_S = 10.0
IDLE_S = 30.0


@pytest.fixture
def runtime(store, backend, loop, clock):
    store.put_queue(Queue("serve", {"any": FlavorQuota({"gpu": 4000})}, "c"))
    store.put_queue(Queue("train", {"any": FlavorQuota({"gpu": 0})}, "c"))
    built = job("llm").gpus(4).user("alice").project("p").queue("serve").build()
    made = store.services.create("llm", ServiceSettings(("llm",), idle_s=IDLE_S,
                                                        timeout_s=3600.0), Submission(
        project="p", queue="serve", user="alice", request=built.request, kind=JobKind.SERVICE,
        grace_s=5.0, run={"command": SLEEPER, "port": 0}))
    serving = Serving(store, backend, loop.wake, clock=clock.now,
                      probe=lambda endpoint, path: True)
    serving.created(made)
    yield serving
    serving.stop()


def _training(store: Store, checkpoint) -> str:
    built = job("train").gpus(4).user("alice").project("p").queue("train").grace_s(GRACE_S)
    return store.submit(Submission.from_job(built.build(), "train",
                                            {"command": TRAINER + [str(checkpoint)]}))


def _replicas(store: Store) -> list:
    return store.services.replicas()


def test_training_borrows_an_idle_service_quota_and_gives_it_back_when_traffic_returns(
        store, loop, runtime, clock, tmp_path):
    runtime.tick()
    assert _replicas(store) == []  # at zero: nothing of serve's quota is used
    checkpoint = tmp_path / "checkpoint"
    train = _training(store, checkpoint)
    drive(loop, lambda: checkpoint.with_suffix(".up").exists(), "training to borrow")
    assert store.get_job(train).state is S.RUNNING

    async def request_served() -> None:
        asked = asyncio.ensure_future(runtime.acquire("llm"))

        def one_round() -> None:  # the runtime's thread and the control loop's passes
            runtime.tick()
            loop.step()
        for _ in range(int(DEADLINE_S * 50)):  # at most the deadline of controlkit
            if asked.done():
                break
            await asyncio.sleep(0.02)
            await asyncio.to_thread(one_round)
        runtime.release("llm", await asyncio.wait_for(asked, 1))
    asyncio.run(request_served())

    (replica,) = _replicas(store)
    assert replica.state is S.RUNNING
    preempted = [e for e in store.events(train) if e.kind == "state"
                 and e.message.startswith("preempted")]
    assert len(preempted) == 1
    assert (preempted[0].data["reason"], preempted[0].data["by"]) == ("reclaim", replica.id)
    assert preempted[0].data["grace_s"] == GRACE_S  # it had its checkpoint grace
    assert checkpoint.read_text() == "step 42"  # saved on the signal, within its grace
    assert store.get_job(train).state is S.PENDING  # requeued, to resume from its checkpoint

    clock.advance(IDLE_S + 1)  # the night: no request for longer than idle
    runtime.tick()
    assert store.get_job(replica.id).cancel_requested
    drive(loop, lambda: store.get_job(train).state is S.RUNNING, "training to borrow again",
          tick=lambda: clock.advance(GRACE_S + 1))
    assert _replicas(store) == []
