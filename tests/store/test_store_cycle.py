"""The store's side of a scheduling cycle: a snapshot built from the store feeds ``run_cycle``;
``apply`` persists binds, preemptions, rejects and waits in one transaction; usage decays."""

from __future__ import annotations

import pytest

from builders import node, queue
from rota.core import Flavor, InvalidSpec, JobState, Queue
from rota.scheduler import Bind, Decisions, ReasonCode, build_policy, run_cycle
from rota.store import NotFound, Store
from storekit import seed, submission

S = JobState
POLICY = build_policy("default")


def cycle(store: Store, now: float):
    decisions = run_cycle(store.snapshot(now), POLICY, now)
    return decisions, store.apply(decisions, now)


def test_configuration_round_trips_into_the_snapshot(store):
    store.create_project("p", weight=2.5)
    store.put_flavor(Flavor("h100", ("*H100*",)))
    store.put_flavor(Flavor("a100", ("*A100*",)))
    research = (queue("research").quota("h100", gpu=8, borrow=4, lend=2)
                .quota("a100", gpu=4, cpu=64).cohort("lab").preemption("never", "lower-priority")
                .build())
    store.put_queue(research)
    gpu_node = node("n1").gpus(4, "H100-80GB", nvlink=["x", "x", "y", "y"], numa=[0, 0, 1, 1])
    store.upsert_nodes([gpu_node.unhealthy(3).group("west").label("zone", "a").build(),
                        node("cpu1").build()], backend="local")
    store.add_usage("p", 7200.0, now=50.0)
    snap = store.snapshot(now=100.0)
    assert snap.queues == {"research": research}
    assert list(snap.queues["research"].quotas) == ["h100", "a100"]  # flavour order is kept
    assert snap.flavors == {"any": Flavor("any"), "a100": Flavor("a100", ("*A100*",)),
                            "h100": Flavor("h100", ("*H100*",))}
    assert snap.nodes == (node("cpu1").build(), gpu_node.build())
    assert snap.projects["p"].weight == 2.5
    assert (snap.usage["p"].gpu_seconds, snap.usage["p"].as_of) == (7200.0, 50.0)
    assert snap.jobs == ()


def test_a_cycle_round_trip_binds_in_the_store(store, db_url):
    seed(store, gpus=8)
    ids = [store.submit(submission(4)), store.submit(submission(2, priority=5))]
    decisions, result = cycle(store, now=10.0)
    assert sorted(b.job for b in decisions.binds) == sorted(ids)
    assert sorted(result.bound) == sorted(ids) and result.stale == {}
    with Store.open(db_url) as reopened:
        snap = reopened.snapshot(now=11.0)
    binds = {b.job: b for b in decisions.binds}
    for job in snap.jobs:
        assert job.state is S.SCHEDULED and job.started_at == 10.0
        assert job.placement == binds[job.id].placement and job.flavor == binds[job.id].flavor
    # the next cycle sees the GPUs taken: 8 GPUs, 6 held, a 4-GPU job waits with its reasons
    waiting = store.submit(submission(4))
    decisions, result = cycle(store, now=12.0)
    assert decisions.binds == [] and result.waiting == (waiting,)
    rec = store.get_job(waiting)
    assert rec.state is S.PENDING and rec.wait_reasons == decisions.waits[0].reasons
    assert rec.wait_reasons[0].code is ReasonCode.RESOURCES
    assert rec.version == 1  # a wait explanation is a note, not a change of the job


def test_a_checkpoint_reaches_the_job_the_scheduler_sees(store, clock):
    # victim choice weighs the work each victim would lose since its last checkpoint: the
    # time the store records reaches the core Job of the next snapshot (the cache included)
    seed(store, gpus=8)
    job_id = store.submit(submission(4))
    cycle(store, now=10.0)
    (before,) = store.snapshot(now=11.0).jobs
    assert before.last_checkpoint_at is None and before.started_at == 10.0
    clock.t = 1500.0
    store.record_checkpoint(job_id)
    (after,) = store.snapshot(now=1501.0).jobs
    assert after.last_checkpoint_at == 1500.0
    assert after.work_at_risk(1600.0) == 4 * 100.0  # GPUs x seconds since the checkpoint


def test_a_job_that_can_never_fit_is_rejected_with_its_reasons(store):
    seed(store, gpus=8)
    job_id = store.submit(submission(16))
    decisions, result = cycle(store, now=10.0)
    assert result.rejected == (job_id,)
    rec = store.get_job(job_id)
    assert rec.state is S.FAILED and rec.finished_at == 10.0
    assert rec.reason.startswith("rejected: never-fits")
    assert rec.wait_reasons == decisions.rejects[0].reasons


def test_preemption_moves_victims_to_preempting_with_a_deadline(store):
    seed(store, gpus=8)
    low = store.submit(submission(8, priority=0, grace_s=45.0))
    cycle(store, now=10.0)
    store.transition(low, S.RUNNING)
    high = store.submit(submission(8, priority=100))
    decisions, result = cycle(store, now=20.0)
    assert [p.job for p in decisions.preemptions] == [low] and result.preempted == (low,)
    rec = store.get_job(low)
    assert rec.state is S.PREEMPTING and rec.preempt_deadline == 65.0
    assert store.get_job(high).wait_reasons[0].code is ReasonCode.PREEMPTING
    # the victim still holds its GPUs; a second cycle does not preempt it twice
    _, again = cycle(store, now=21.0)
    assert again.preempted == () and store.get_job(low).version == rec.version
    # grace over, the backend requeues it; the preemptor binds next
    store.transition(low, S.PENDING, reason="preempted")
    decisions, result = cycle(store, now=70.0)
    assert result.bound == (high,) and store.get_job(low).attempts == 1


def test_a_preemptor_is_nominated_from_its_eviction_until_it_starts(store, db_url):
    # the cycle that evicts for high leaves it waiting for its victim: the next snapshots
    # say so (the scheduler tries it first), a restarted control plane too; once it is
    # bound, or waits for anything else, it is not
    seed(store, gpus=8)
    low = store.submit(submission(8, priority=0))
    cycle(store, now=10.0)
    store.transition(low, S.RUNNING)
    high = store.submit(submission(8, priority=100))
    other = store.submit(submission(8, priority=50))
    assert store.snapshot(15.0).nominated == frozenset()
    cycle(store, now=20.0)
    assert store.snapshot(21.0).nominated == {high}
    with Store.open(db_url) as reopened:
        assert reopened.snapshot(22.0).nominated == {high}
    store.transition(low, S.PENDING, reason="preempted")
    _, result = cycle(store, now=70.0)
    assert result.bound == (high,)
    snap = store.snapshot(71.0)
    assert snap.nominated == frozenset() and {j.id for j in snap.pending} == {low, other}


def test_decisions_about_jobs_that_moved_on_are_dropped_and_the_rest_applied(store):
    seed(store, gpus=8)
    a, b = store.submit(submission(1)), store.submit(submission(1))
    decisions = run_cycle(store.snapshot(10.0), POLICY, 10.0)
    store.request_cancel(a, by="alice")  # between snapshot and apply
    decisions.binds.append(Bind("424242", decisions.binds[0].placement, "any"))
    result = store.apply(decisions, 10.0)
    assert result.bound == (b,)
    assert set(result.stale) == {a, "424242"}
    assert "cancelled" in result.stale[a]
    assert store.get_job(a).state is S.CANCELLED and store.get_job(b).state is S.SCHEDULED


def test_apply_is_one_transaction(store):
    seed(store, gpus=8)
    a = store.submit(submission(1))
    decisions = run_cycle(store.snapshot(10.0), POLICY, 10.0)
    broken = Decisions(binds=list(decisions.binds) + [Bind(a, None, "any")])  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        store.apply(broken, 10.0)
    assert store.get_job(a).state is S.PENDING and len(store.events(a)) == 1


def test_usage_decays_with_its_half_life(db_url, clock):
    day = 86400.0
    with Store.open(db_url, clock=clock, usage_half_life_s=day) as store:
        store.create_project("p")
        store.add_usage("p", 3600.0, now=0.0)
        # 3600 halves over one half-life, then 600 more are added: 1800 + 600
        assert store.add_usage("p", 600.0, now=day).gpu_seconds == pytest.approx(2400.0)
        assert store.usage(now=2 * day) == {"p": pytest.approx(1200.0)}
        # a report older than the stored time is added without growing the past back
        assert store.add_usage("p", 100.0, now=day / 2).gpu_seconds == pytest.approx(2500.0)


def test_usage_of_an_unknown_project_is_refused(store):
    with pytest.raises(NotFound):
        store.add_usage("ghost", 1.0, now=0.0)


def test_inventory_updates_keep_the_operators_cordon(store, clock):
    store.upsert_nodes([node("n1").gpus(2).build()], backend="local")
    store.set_schedulable("n1", False)
    clock.advance(30)
    store.upsert_nodes([node("n1").gpus(4).build()], backend="local")
    [(n1, backend, last_seen)] = store.list_nodes()
    assert not n1.schedulable and len(n1.devices) == 4
    assert (backend, last_seen) == ("local", clock.t)


def test_put_queue_replaces_and_refuses_unknown_flavours(store):
    store.put_queue(Queue("q", cohort="a"))
    store.put_queue(Queue("q", cohort="b"))
    assert store.list_queues() == [Queue("q", cohort="b")]
    with pytest.raises(InvalidSpec) as err:
        store.put_queue(queue("q").quota("h100", gpu=1).build())
    assert err.value.field == "quotas.h100"


def test_a_forecast_reason_with_its_holders_is_stored_as_it_reads_back(store):
    """An ``estimate`` reason names its holders (job, nodes, end, running): stored, it reads
    back equal, and its JSON is as the database gives it back, so the same wait is not
    written again (``apply`` compares the stored JSON with the new)."""
    import json
    from rota.core.decisions import Holder, Reason, Wait
    from rota.store.convert import reasons_json
    seed(store)
    waiting = store.submit(submission(4))
    reasons = (Reason(ReasonCode.RESOURCES),
               Reason(ReasonCode.ESTIMATE, holders=(Holder("7", ("n1", "n2"), 1900.5, True),
                                                    Holder("9", ("n1",), None, False))))
    store.apply(Decisions(waits=[Wait(waiting, reasons, 1900.5)]), 12.0)
    rec = store.get_job(waiting)
    assert rec.wait_reasons == reasons and rec.estimated_start == 1900.5
    assert json.loads(json.dumps(reasons_json(reasons))) == reasons_json(reasons)
