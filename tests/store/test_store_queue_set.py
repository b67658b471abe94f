"""Applying a queues file on SQLite and PostgreSQL: a file that defines quotas leaves no queue
without quota open to every project unless it lists that queue; a queue that jobs hold is
closed to new jobs instead of deleted, and keeps them; a queue a service uses refuses the file.
Each project's default queue is read back with what was written."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from builders import queue
from rota.core import Flavor, InvalidSpec, JobKind, JobState, Queue
from rota.core.serving import ServiceSettings
from rota.scheduler import build_policy, run_cycle
from rota.store import Store, Submission
from rota.store.errors import InUse, QueueNotAllowed
from rota.store.queueset import DefaultQueue, OpenQueue
from storekit import seed, submission

S = JobState
H100 = Flavor("h100", ("*H100*",))
GOLD = queue("gold").quota("h100", gpu=2).build()  # a quota of 2 GPUs of flavour h100


def apply(store: Store, *listed: tuple[Queue, tuple[str, ...] | None]):
    return store.apply_queue_set([H100], {q.name: (q, b) for q, b in listed}, {})


def test_a_file_with_quotas_deletes_an_open_unlimited_queue_it_does_not_list(store):
    seed(store)  # queue q: no quota, every project; no job
    done = apply(store, (GOLD, None))
    assert (done.flavors, done.queues) == (("h100",), ("gold",))
    assert done.open_unlimited == (OpenQueue("q", "deleted", "not_listed", {}),)
    assert [q.name for q in store.list_queues()] == ["gold"]
    assert done.defaults == (DefaultQueue("p", "gold", ("gold",)),
                             DefaultQueue("q", "gold", ("gold",)))
    with pytest.raises(Exception, match="no queue named 'q'"):
        store.submit(submission(1))


def test_a_queue_holding_jobs_is_closed_and_keeps_them_until_they_finish(store):
    seed(store)
    scheduled = store.submit(submission(1))
    bound = store.submit(submission(1))
    now = store.clock()
    assert store.apply(run_cycle(store.snapshot(now), build_policy("default"), now), now).bound
    store.transition(bound, S.RUNNING)
    pending = store.submit(submission(8))  # more than the node's free GPUs: stays pending
    done = apply(store, (GOLD, ("p",)))
    assert done.open_unlimited == (OpenQueue("q", "closed", "not_listed",
                                             {"pending": 1, "running": 1,
                                              "scheduled": 1}),)
    assert store.bindings() == {"gold": ("p",), "q": ()}
    assert [store.get_job(j).state for j in (scheduled, bound, pending)] == [
        S.SCHEDULED, S.RUNNING, S.PENDING]
    assert pending in {j.id for j in store.snapshot(now).jobs}, "still queued, in its place"
    with pytest.raises(QueueNotAllowed, match="closed to new jobs"):
        store.submit(submission(1))
    # p may use gold only; q no queue at all (its jobs must wait for a queue that admits it)
    assert done.defaults == (DefaultQueue("p", "gold", ("gold",)), DefaultQueue("q", None, ()))
    with pytest.raises(InUse):
        store.delete_queue("q")
    for job_id in (scheduled, bound, pending):
        store.request_cancel(job_id, by="root")
    for job_id in (scheduled, bound):
        store.transition(job_id, S.CANCELLED)
    store.delete_queue("q")
    assert store.get_job(pending).job.queue == "q", "finished jobs keep the queue's name"


@pytest.mark.parametrize("listed, why", [
    ((GOLD, None), None),
    ((Queue("q"), None), "listed"),
])
def test_an_open_unlimited_queue_stays_only_when_the_file_says_so(store, listed, why):
    seed(store)
    store.put_queue(Queue("bound"), ("p",))  # no quota, but not open to every project
    done = apply(store, listed, (queue("silver").quota("h100", gpu=1).build(), None))
    kept = {o.name: (o.action, o.why) for o in done.open_unlimited}
    assert kept == ({"q": ("deleted", "not_listed")} if why is None else {"q": ("kept", why)})
    assert "bound" in store.bindings(), "a queue bound to projects is the file's own business"


def test_a_file_without_quotas_retires_nothing(store):
    seed(store)
    store.put_queue(Queue("default"))
    done = apply(store, (Queue("research"), ("p",)))
    assert done.open_unlimited == (OpenQueue("default", "kept", "no_quotas", {}),
                                   OpenQueue("q", "kept", "no_quotas", {}))
    assert sorted(store.bindings()) == ["default", "q", "research"]
    # p may use three queues, one named default; q two, default among them
    assert done.defaults == (DefaultQueue("p", "default", ("default", "q", "research")),
                             DefaultQueue("q", "default", ("default", "q")))


def test_reapplying_quotas_touches_no_other_queue(store):
    seed(store)
    apply(store, (GOLD, None), (queue("silver").quota("h100", gpu=1).build(), ("q",)))
    done = apply(store, (queue("gold").quota("h100", gpu=4).build(), None))
    assert done.open_unlimited == ()
    assert store.get_queue("gold").quotas["h100"].nominal == {"gpu": 4000}
    assert store.bindings() == {"gold": None, "silver": ("q",)}
    assert done.defaults == (DefaultQueue("p", "gold", ("gold",)),
                             DefaultQueue("q", None, ("gold", "silver")))


def test_a_queue_a_service_uses_refuses_the_file_and_nothing_is_written(store):
    seed(store)
    template = Submission(project="p", queue="q", user="alice", name="tiny",
                          kind=JobKind.SERVICE, request=submission(1).request,
                          run={"command": ["python", "serve.py"], "port": 0})
    store.services.create("tiny", ServiceSettings(models=("tiny",)), template)
    with pytest.raises(InUse) as refused:
        apply(store, (GOLD, None))
    assert refused.value.code == "queue_in_use"
    assert "service tiny (queue q)" in str(refused.value)
    assert "nothing was applied" in str(refused.value)
    assert store.bindings() == {"q": None} and store.list_flavors() == []
    done = apply(store, (GOLD, None), (Queue("q"), None))  # listing it keeps it, on purpose
    assert done.open_unlimited == (OpenQueue("q", "kept", "listed", {}),)


def test_a_submit_racing_the_apply_is_counted_or_refused_never_stranded(db_url, clock):
    """Two stores, as the API's submits and an operator's apply would be: a job accepted
    into the retiring queue is always counted (the queue is closed, not deleted); one that
    comes after is refused."""
    api, operator = seed(Store.open(db_url, clock=clock)), Store.open(db_url, clock=clock)
    try:
        for _ in range(5):
            operator.put_queue(Queue("q"))
            barrier = threading.Barrier(2)

            def submits() -> list[str]:
                barrier.wait()
                accepted = []
                for _ in range(20):
                    try:
                        accepted.append(api.submit(submission(0)))
                    except InvalidSpec:  # no queue named q, or q closed to new jobs
                        pass
                return accepted

            def retire():
                barrier.wait()
                return operator.apply_queue_set([H100], {"gold": (GOLD, None)}, {})

            with ThreadPoolExecutor(2) as pool:
                accepted_f, done_f = pool.submit(submits), pool.submit(retire)
                accepted, (entry,) = accepted_f.result(), done_f.result().open_unlimited
            if entry.action == "deleted":
                assert accepted == []
            else:
                assert (entry.action, dict(entry.jobs)) == ("closed", {"pending": len(accepted)})
            for job_id in accepted:
                api.request_cancel(job_id, by="root")
    finally:
        api.close()
        operator.close()
