"""A queue's minimum runtime before preemption (``preemption.min_runtime``): a running job of
the queue that has run less than it is never a victim, whoever preempts (a higher priority in
its queue, a lender reclaiming its quota); once it has run that long it is a candidate like
any other. A job that could start only by evicting such young jobs waits with a
``min-runtime`` reason naming them and the seconds each has left."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from builders import cluster, codes, decide, job, node, queue, waiting
from rota.core.wording import sentence
from rota.core import ANY_FLAVOR, Flavor, InvalidSpec, Queue
from rota.scheduler import Snapshot, build_policy

from .test_settling import POLICIES, random_cluster, random_job, random_queues, settle

POLICY = {"preset": "default", "backfill": "none", "placement": "binpack"}


def victims(d) -> set[str]:
    return {p.job for p in d.preemptions}


def _one_node_held_by(*running, min_runtime: float = 60.0):
    return cluster().nodes(node("n1").gpus(4), node("n2").gpus(4)).queue(
        queue("q").min_runtime(min_runtime)).jobs(*running)


def test_a_young_job_is_never_a_victim_even_when_it_would_be_the_cheapest():
    # young: priority 0, started 10 s ago (minimum 60 s); old: priority 5, started long ago.
    # Without the minimum the lower priority goes; with it the old job does.
    running = (job("young").gpus(4).priority(0).running_on(("n1", [0, 1, 2, 3]), since=90),
               job("old").gpus(4).priority(5).running_on(("n2", [0, 1, 2, 3]), since=0),
               job("hi").gpus(4).priority(10).submitted(95))
    assert victims(decide(_one_node_held_by(*running).build(), POLICY, now=100)) == {"old"}
    assert victims(decide(_one_node_held_by(*running, min_runtime=0).build(), POLICY,
                          now=100)) == {"young"}


def test_a_job_held_only_by_young_jobs_waits_and_says_so_then_evicts_them_when_they_age():
    snap = cluster().nodes(node("n1").gpus(4)).queue(queue("q").min_runtime(600)).jobs(
        job("a").gpus(2).running_on(("n1", [0, 1]), since=100),
        job("b").gpus(2).running_on(("n1", [2, 3]), since=400),
        job("hi").gpus(4).priority(10).submitted(450)).build()
    d = decide(snap, POLICY, now=500)
    assert d.preemptions == []
    (reason,) = waiting(d)["hi"].reasons
    assert reason.code.value == "min-runtime"
    assert (reason.resource, reason.requested, reason.free) == ("gpu", 4, 0)
    assert reason.detail == "a (200s left), b (500s left)"
    assert "minimum runtime" in sentence(reason) and "a (200s left)" in sentence(reason)
    assert victims(decide(snap, POLICY, now=750)) == set()          # b is still young
    assert codes(decide(snap, POLICY, now=750), "hi") == ["min-runtime"]
    assert victims(decide(snap, POLICY, now=1000)) == {"a", "b"}    # both have run 600 s


def test_a_non_preemptible_job_among_them_makes_the_reason_not_preemptible():
    snap = cluster().nodes(node("n1").gpus(4)).queue(queue("q").min_runtime(600)).jobs(
        job("a").gpus(2).running_on(("n1", [0, 1]), since=400),
        job("keep").gpus(2).preemptible(False).running_on(("n1", [2, 3]), since=0),
        job("hi").gpus(4).priority(10)).build()
    assert codes(decide(snap, POLICY, now=500), "hi") == ["not-preemptible"]


def test_the_victims_queue_sets_the_minimum_in_a_cohort_reclaim():
    # B borrows 2 of A's GPUs with two jobs; A reclaims. B's minimum protects the younger one.
    def snap(b_min):
        return cluster().nodes(node("n1").gpus(4)).queue(
            queue("A").quota(gpu=2).cohort("c"),
            queue("B").quota(gpu=2).cohort("c").min_runtime(b_min),
        ).jobs(
            *[job(f"b{k}").queue("B").gpus(1).running_on(("n1", [k]), since=100 * k)
              for k in range(4)],
            job("a").queue("A").gpus(1).priority(0).submitted(350)).build()
    assert victims(decide(snap(0), POLICY, now=400)) == {"b3"}      # the most recent
    assert victims(decide(snap(150), POLICY, now=400)) == {"b2"}    # b3 ran 100 s < 150 s
    assert codes(decide(snap(1000), POLICY, now=400), "a") == ["min-runtime"]


def test_a_negative_minimum_is_refused_naming_the_field():
    with pytest.raises(InvalidSpec) as err:
        Queue("q", min_runtime_s=-1.0)
    assert err.value.field == "preemption.min_runtime"


def _with_minimums(rng: random.Random) -> dict[str, Queue]:
    return {name: replace(q, min_runtime_s=rng.choice([0.0, 30.0, 80.0, 500.0]))
            for name, q in random_queues(rng).items()}


@pytest.mark.parametrize("name", list(POLICIES))
@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
# a job in a queue that may evict while borrowing, tried as within nominal because it alone
# was, evicted by borrowing, lost the room to a higher-priority borrower, and evicted again
@example(seed=96520415)
def test_no_victim_is_younger_than_its_queues_minimum(name, seed):
    note(f"policy {name}, seed {seed}")
    rng = random.Random(seed)
    policy = build_policy(POLICIES[name])
    queues = _with_minimums(rng)
    names = list(queues)
    early = tuple(random_job(rng, f"e{k}", names, 0.0) for k in range(rng.randint(1, 10)))
    snap = Snapshot(random_cluster(rng), queues, early, {}, {ANY_FLAVOR: Flavor(ANY_FLAVOR)})
    first = settle(snap, policy, rng.choice([0.0, 40.0]))
    late = tuple(random_job(rng, f"l{k}", names, 50.0) for k in range(rng.randint(1, 8)))
    now = 100.0
    run = settle(replace(first.final, jobs=first.final.jobs + late), policy, now)
    started = {j.id: j.started_at for j in first.final.jobs}
    for _, p in run.preemptions:
        victim_queue = queues[next(j.queue for j in first.final.jobs if j.id == p.job)]
        assert now - started[p.job] >= victim_queue.min_runtime_s, (
            f"{p.job} evicted after {now - started[p.job]:g}s, before its queue's minimum")


def test_a_reclaim_held_by_young_borrowers_names_them_with_the_quota_figures():
    snap = cluster().nodes(node("n1").gpus(4)).queue(
        queue("A").quota(gpu=2).cohort("c"),
        queue("B").quota(gpu=2).cohort("c").min_runtime(1000),
    ).jobs(*[job(f"b{k}").queue("B").gpus(1).running_on(("n1", [k]), since=100 * k)
             for k in range(4)],
           job("a").queue("A").gpus(2).submitted(350)).build()
    (reason,) = waiting(decide(snap, POLICY, now=400))["a"].reasons
    assert reason.code.value == "min-runtime" and reason.limit is not None
    assert reason.detail == "b0 (600s left), b1 (700s left), b2 (800s left), b3 (900s left)"
    text = sentence(reason)
    assert "needs 2 GPUs" in text and "minimum runtime" in text, text
