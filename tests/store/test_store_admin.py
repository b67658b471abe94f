"""Operators' writes on SQLite and PostgreSQL: queues bound to projects, deleting queues and
projects without losing a job's history, cordon / drain / resume with a reason, eviction."""

from __future__ import annotations

import pytest

from builders import queue
from rota.core import InvalidSpec, JobState, Queue
from rota.scheduler import build_policy, run_cycle
from rota.store import NotFound, Store
from rota.store.errors import InUse, QueueNotAllowed
from storekit import seed, submission

S = JobState
POLICY = build_policy("default")


def running(store: Store, *subs) -> list[str]:
    """Submit ``subs``, bind them in one cycle and report them running."""
    ids = [store.submit(s) for s in subs]
    decisions = run_cycle(store.snapshot(10.0), POLICY, 10.0)
    assert sorted(store.apply(decisions, 10.0).bound) == sorted(ids)
    for job_id in ids:
        store.transition(job_id, S.RUNNING)
    return ids


# -- bindings -------------------------------------------------------------------------------


def test_a_bound_queue_admits_only_its_projects_and_keeps_jobs_it_accepted(store):
    seed(store, members={"alice": ["p"], "bob": ["q"]})
    store.put_queue(Queue("q"), ("p",))
    assert store.bindings() == {"q": ("p",)}
    kept = store.submit(submission(1, user="alice", project="p"), member=True)
    with pytest.raises(QueueNotAllowed) as err:
        store.submit(submission(1, user="bob", project="q"), member=True)
    assert (err.value.code, err.value.field) == ("queue_not_allowed", "queue")
    assert "only project p may use it" in err.value.reason
    store.put_queue(Queue("q"), ("q",))  # the binding moves on: the accepted job stays
    assert store.get_job(kept).state is S.PENDING
    assert [j.id for j in store.snapshot(20.0).jobs] == [kept]
    store.submit(submission(1, user="bob", project="q"), member=True)
    store.put_queue(Queue("q"), ())
    with pytest.raises(QueueNotAllowed, match="closed to new jobs"):
        store.submit(submission(1, user="bob", project="q"))
    store.put_queue(Queue("q"))  # no binding: open to every project again
    assert store.bindings() == {"q": None}
    store.submit(submission(1, user="bob", project="q"))


def test_a_binding_names_existing_projects(store):
    seed(store)
    with pytest.raises(InvalidSpec) as err:
        store.put_queue(Queue("q"), ("p", "nope"))
    assert err.value.field == "projects[1]"
    assert store.bindings() == {"q": None}


# -- deleting queues ------------------------------------------------------------------------


def test_a_queue_with_live_jobs_is_not_deleted_and_its_finished_jobs_outlive_it(store):
    seed(store, gpus=2)
    store.put_queue(queue("r").cohort("lab").quota(gpu=1).build())
    store.put_queue(queue("q").cohort("lab").quota(gpu=1).build())
    [run] = running(store, submission(1))
    waiting = store.submit(submission(4))
    with pytest.raises(InUse) as err:
        store.delete_queue("q")
    assert err.value.code == "queue_in_use"
    assert err.value.counts == {"pending": 1, "running": 1}
    assert "2 jobs (1 pending, 1 running)" in err.value.message
    store.request_cancel(waiting, by="alice")
    store.transition(run, S.SUCCEEDED, exit_code=0)
    store.delete_queue("q")
    assert [q.name for q in store.list_queues()] == ["r"]
    assert store.get_job(run).job.queue == "q"  # history keeps the queue's name
    assert store.events(run)[0].kind == "submitted"
    snap = store.snapshot(30.0)  # the cohort's other queue is whole, one lender fewer
    assert list(snap.queues) == ["r"] and snap.queues["r"].cohort == "lab"
    run_cycle(snap, POLICY, 30.0)
    with pytest.raises(NotFound):
        store.delete_queue("q")


def test_a_queue_keeps_its_scheduling_settings(store):
    store.put_queue(queue("r").cohort("lab").quota(gpu=1).borrow_within_cohort(
        max_priority_threshold=3).strict_priority().min_runtime(600).build())
    store.put_queue(queue("q").build())
    got = {q.name: q for q in store.list_queues()}
    assert (str(got["r"].borrow_within_cohort), got["r"].strict_priority) == ("lower-priority", True)
    assert (str(got["q"].borrow_within_cohort), got["q"].strict_priority) == ("never", False)
    assert (got["r"].min_runtime_s, got["q"].min_runtime_s) == (600, 0)
    assert (got["r"].max_priority_threshold, got["q"].max_priority_threshold) == (3, None)


# -- deleting projects ----------------------------------------------------------------------


def test_a_project_is_deleted_only_without_jobs_and_leaves_the_bindings(store):
    seed(store, members={"alice": ["p", "q"]})
    store.create_project("empty")
    store.create_user("erin", ["empty"])
    store.put_queue(Queue("q"), ("p", "empty"))
    store.put_queue(Queue("solo"), ("empty",))
    token = store.issue_token("erin", "t").token
    assert store.authenticate(token).projects == {"empty"}
    store.add_usage("empty", 3600.0, now=5.0)
    assert store.delete_project("empty") == ["q", "solo"]
    assert store.bindings() == {"q": ("p",), "solo": ()}
    assert "empty" not in {p.name for p in store.list_projects()}
    assert store.authenticate(token).projects == frozenset()  # membership went with it
    assert "empty" not in store.usage(10.0)
    with pytest.raises(NotFound):
        store.delete_project("empty")


def test_a_project_with_live_or_finished_jobs_is_kept(store):
    seed(store)
    job = store.submit(submission(1))
    with pytest.raises(InUse) as err:
        store.delete_project("p")
    assert (err.value.code, err.value.counts) == ("project_in_use", {"pending": 1})
    store.request_cancel(job, by="alice")
    with pytest.raises(InUse) as err:
        store.delete_project("p")
    assert (err.value.code, err.value.counts) == ("project_has_jobs", {"finished": 1})
    assert store.get_job(job).state is S.CANCELLED


# -- node states ----------------------------------------------------------------------------


def test_cordon_drain_and_resume_survive_inventory_updates(store):
    seed(store)
    [reported] = store.list_nodes()
    store.set_node("n1", False, drain=True, reason="bad fan")
    store.upsert_nodes([reported[0]], backend="local")  # a backend reports it again
    [rec] = store.node_records()
    assert (rec.node.schedulable, rec.drain, rec.reason) == (False, True, "bad fan")
    assert not store.snapshot(1.0).nodes[0].schedulable  # the scheduler places nothing new
    store.set_node("n1", False, reason="maintenance")
    [rec] = store.node_records()
    assert (rec.node.schedulable, rec.drain, rec.reason) == (False, False, "maintenance")
    store.set_node("n1", True)
    [rec] = store.node_records()
    assert (rec.node.schedulable, rec.drain, rec.reason) == (True, False, "")
    with pytest.raises(NotFound):
        store.set_node("nope", False, drain=True)
    with pytest.raises(InvalidSpec):
        store.set_node("n1", True, drain=True)


def test_evicting_a_drained_node_preempts_its_jobs_with_their_grace(store, clock):
    seed(store, gpus=4)
    evictable, pinned = running(store, submission(1, grace_s=45.0),
                                submission(1, preemptible=False))
    waiting = store.submit(submission(8))
    evicted, kept = store.set_node("n1", False, drain=True, reason="swap GPU",
                                   evict_by="root")
    assert (evicted, kept) == ([evictable], [pinned])
    rec = store.get_job(evictable)
    assert rec.state is S.PREEMPTING
    assert rec.preempt_deadline == clock() + 45.0
    assert rec.reason == "evicted: node n1 is drained"
    assert store.events(evictable)[-1].data["by"] == "root"
    assert store.get_job(pinned).state is S.RUNNING
    assert store.get_job(waiting).state is S.PENDING
    assert store.set_node("n1", False, drain=True, evict_by="root") == ([], [pinned])
