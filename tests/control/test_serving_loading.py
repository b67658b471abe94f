"""A replica that loads (it runs, its readiness path has not answered yet) is never evicted:
the scheduler does not choose it as a preemption victim and the serving runtime does not scale
it in, until it is ready or its service's ``load`` time is over.

Real store, real control loop and real processes (the local backend over four virtual H100s);
only the readiness answer is the test's (``ready``), as a server that is still loading its
weights gives it.
"""

from __future__ import annotations

import asyncio

import pytest

from builders import job
from controlkit import drive, python
from rota.control.serving import Serving, Unavailable
from rota.core import JobKind, JobState, ReasonCode
from rota.core.serving import ServiceSettings
from rota.store import Store, Submission

S = JobState
SLEEPER = python("import time\nwhile True: time.sleep(0.05)\n")
LOAD_S = 600.0


def _service(store: Store, gpus: int = 4, **settings) -> object:
    built = job("tiny").gpus(gpus).user("alice").project("p").queue("q").grace_s(10).build()
    template = Submission(project="p", queue="q", user="alice", request=built.request,
                          kind=JobKind.SERVICE, grace_s=10.0,
                          run={"command": SLEEPER, "port": 0})
    return store.services.create("tiny", ServiceSettings(("tiny",), load_s=LOAD_S, **settings),
                                 template)


@pytest.fixture
def ready() -> dict[str, bool]:
    return {"answer": False}


@pytest.fixture
def runtime(store, backend, loop, clock, ready):
    made = Serving(store, backend, loop.wake, clock=clock.now,
                   probe=lambda endpoint, path: ready["answer"])
    yield made
    made.stop()


def _replicas(store: Store) -> list:
    return store.services.replicas()


def _running_replica(store, loop, runtime) -> str:
    runtime.tick()  # submits the replica the service wants
    drive(loop, lambda: [r for r in _replicas(store) if r.state is S.RUNNING], "a replica")
    runtime.tick()  # sees it running, probes it: not ready
    (rec,) = _replicas(store)
    return rec.id


def _batch(store: Store, priority: int) -> str:
    built = job("train").gpus(4).user("alice").project("p").queue("q").priority(priority)
    return store.submit(Submission.from_job(built.build(), "train", {"command": SLEEPER}))


def test_a_loading_replica_is_not_a_victim_until_it_is_ready(store, loop, runtime, ready):
    runtime.created(_service(store, min_replicas=1))
    replica = _running_replica(store, loop, runtime)
    assert store.get_job(replica).job.preemptible is False
    train = _batch(store, priority=100)  # needs the whole node, outranks the replica
    for _ in range(3):
        loop.step()
    assert store.get_job(replica).state is S.RUNNING
    waiting = store.get_job(train)
    assert waiting.state is S.PENDING
    (why,) = [r for r in waiting.wait_reasons if r.code is ReasonCode.NOT_PREEMPTIBLE]
    assert why.detail == replica  # it names the loading replica

    ready["answer"] = True  # the weights are loaded
    runtime.tick()
    assert store.get_job(replica).job.preemptible is True
    assert any(e.kind == "protection" for e in store.events(replica))
    loop.step()
    assert store.get_job(replica).state is S.PREEMPTING  # with its grace, as any victim


def test_a_replica_that_never_becomes_ready_is_protected_only_for_its_load_time(
        store, loop, runtime, clock):
    runtime.created(_service(store, min_replicas=1))
    replica = _running_replica(store, loop, runtime)
    train = _batch(store, priority=100)
    clock.advance(LOAD_S - 1)
    runtime.tick()
    loop.step()
    assert store.get_job(replica).state is S.RUNNING
    clock.advance(2)  # its load time is over: it is like any other replica again
    runtime.tick()
    assert store.get_job(replica).job.preemptible is True
    loop.step()
    assert store.get_job(replica).state is S.PREEMPTING
    assert store.get_job(train).state is S.PENDING  # it starts once the replica has left


def test_a_loading_replica_is_not_scaled_in_when_traffic_stops(store, loop, runtime, clock,
                                                               ready):
    runtime.created(_service(store, idle_s=5.0, timeout_s=0.2))

    async def one_request() -> None:  # waits for a replica that is not ready in time
        asked = asyncio.ensure_future(runtime.acquire("tiny"))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(runtime.tick)  # the runtime's thread: it submits a replica
        with pytest.raises(Unavailable):
            await asked
    asyncio.run(one_request())
    drive(loop, lambda: [r for r in _replicas(store) if r.state is S.RUNNING], "a replica")
    clock.advance(60)  # no request for far longer than idle: the service wants none
    runtime.tick()
    (rec,) = _replicas(store)
    assert (rec.state, rec.cancel_requested) == (S.RUNNING, False)  # loading: kept
    assert runtime.views()["tiny"]["jobs"][0]["loading"] is True

    ready["answer"] = True  # ready now, and idle: it goes
    runtime.tick()
    runtime.tick()
    assert store.get_job(rec.id).cancel_requested


def test_a_pending_replica_is_still_cancelled_when_traffic_stops(store, loop, runtime, clock):
    """Only a running replica loads: one that waits for room is cancelled as before."""
    train = _batch(store, priority=100)  # holds the node: the replica cannot evict it
    drive(loop, lambda: store.get_job(train).state is S.RUNNING, "the batch job")
    runtime.created(_service(store, idle_s=5.0, timeout_s=0.2))

    async def one_request() -> None:
        asked = asyncio.ensure_future(runtime.acquire("tiny"))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(runtime.tick)
        with pytest.raises(Unavailable):
            await asked
    asyncio.run(one_request())
    loop.step()
    (rec,) = _replicas(store)
    assert rec.state is S.PENDING
    clock.advance(60)
    runtime.tick()
    assert store.get_job(rec.id).state is S.CANCELLED
