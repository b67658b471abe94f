"""Cohort reclaim that settles: a queue takes back the quota it lent with the fewest victims,
what is freed for it is held for it, and nothing moves once it has what it is owed.

The plans run through ``rota plan``'s loop (``run_plan``: cycles at one ``now``, victims
requeued at once) until a cycle changes nothing.
"""

from __future__ import annotations

from collections import Counter

import pytest

from builders import cluster, codes, decide, job, node, queue
from rota.cli.plan import run_plan
from rota.core import JobState
from rota.scheduler import build_policy

POLICY = {"preset": "default", "backfill": "none", "placement": "binpack"}


def _held_by_queue(snapshot) -> Counter:
    """GPUs held per queue."""
    held: Counter = Counter()
    for j in snapshot.jobs:
        if j.state.holds_resources:
            held[j.queue] += int(j.gpus)
    return held


def _lab(reclaim: str = "any"):
    # one node of 8 GPUs; queues a and b, 4 GPUs of nominal quota each, in cohort c. b runs six
    # 1-GPU jobs: 4 within its quota, 2 borrowed from a.
    return cluster().nodes(node("n").gpus(8)).queue(
        queue("a").quota(gpu=4).cohort("c").preemption(reclaim=reclaim),
        queue("b").quota(gpu=4).cohort("c"),
    ).jobs(*[job(f"b{k}").queue("b").gpus(1).running_on(("n", [k]), since=k) for k in range(6)])


def test_a_reclaiming_queue_evicts_only_the_two_borrowed_jobs_and_the_plan_settles():
    # a submits four 1-GPU jobs. Two fit on the free GPUs; the other two are owed to a by b's
    # two borrowed jobs. Expected (Kueue): b's two most recent jobs are evicted, a runs four,
    # b keeps four, and nothing moves after that.
    snap = _lab().jobs(*[job(f"a{k}").queue("a").gpus(1).submitted(100) for k in range(4)]).build()
    run = run_plan(snap, build_policy(POLICY), 100.0)
    assert run.converged
    rounds = {k for k, _ in run.preemptions}
    assert len(rounds) == 1, f"evictions in cycles {sorted(rounds)}"
    assert sorted(p.job for _, p in run.preemptions) == ["b4", "b5"]
    assert _held_by_queue(run.final) == {"a": 4, "b": 4}
    pending = sorted(j.id for j in run.final.jobs if j.state is JobState.PENDING)
    assert pending == ["b4", "b5"]


def test_a_queue_below_nominal_evicts_its_own_lower_priority_job_and_a_borrower_together():
    # n: 8 GPUs. a (nominal 4) runs low (2 GPUs, priority 0); b (nominal 4) runs three 2-GPU
    # jobs, borrowing 2. a's hi (4 GPUs, priority 5) fits within a's nominal quota only once
    # low is gone (2 + 4 > 4), and the cohort's 8 only once one of b's jobs is gone as well
    # (a 4 + b 6 = 10 > 8): Kueue evicts both, checking the fit after the victims leave.
    snap = cluster().nodes(node("n").gpus(8)).queue(
        queue("a").quota(gpu=4).cohort("c"), queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        job("low").queue("a").gpus(2).running_on(("n", [0, 1]), since=5),
        *[job(f"b{k}").queue("b").gpus(2).running_on(("n", [2 + 2 * k, 3 + 2 * k]), since=k)
          for k in range(3)],
        job("hi").queue("a").gpus(4).priority(5).submitted(10),
    ).build()
    d = decide(snap, POLICY, 10.0)
    assert sorted((p.job, p.reason) for p in d.preemptions) == [("b2", "reclaim"),
                                                                 ("low", "priority")]


def _big_job_above_nominal(borrow: str | None):
    # n: 8 GPUs; a (nominal 4) runs two 2-GPU jobs of priority 0; b (nominal 4) is idle, so
    # the cohort's pool (8) has room to lend. a's big (6 GPUs, priority 5) is above a's
    # nominal quota by itself: it can start only by evicting one of a's jobs and borrowing 4.
    a = queue("a").quota(gpu=4).cohort("c")
    if borrow is not None:
        a = a.borrow_within_cohort(borrow)
    return cluster().nodes(node("n").gpus(8)).queue(a, queue("b").quota(gpu=4).cohort("c")).jobs(
        job("l0").queue("a").gpus(2).running_on(("n", [0, 1]), since=0),
        job("l1").queue("a").gpus(2).running_on(("n", [2, 3]), since=1),
        job("big").queue("a").gpus(6).priority(5).submitted(10),
    ).build()


def test_a_job_that_must_borrow_evicts_nobody_by_default():
    d = decide(_big_job_above_nominal(None), POLICY, 10.0)
    assert d.preemptions == []
    assert codes(d, "big") == ["quota"]


def test_borrow_within_cohort_lets_it_evict_lower_priorities_while_borrowing():
    d = decide(_big_job_above_nominal("lower-priority"), POLICY, 10.0)
    assert [(p.job, p.reason) for p in d.preemptions] == [("l1", "priority")]


@pytest.mark.parametrize("reclaim,priority", [("never", 0), ("lower-priority", 0)],
                         ids=["never", "lower-priority-against-equal"])
def test_a_lender_that_cannot_reclaim_keeps_what_it_is_owed_from_new_borrowers(reclaim, priority):
    # n: 8 GPUs. b (nominal 4) runs five 1-GPU jobs, borrowing 1; a (nominal 4) runs two, so
    # one GPU of the cohort's 8 is left. a's wide (2 GPUs) fits a's nominal quota (2 + 2) but
    # not the cohort's one GPU, and a cannot take the borrowed one back. b's next job would
    # borrow that last GPU and hold a's quota for as long as it runs: it waits instead.
    snap = cluster().nodes(node("n").gpus(8)).queue(
        queue("a").quota(gpu=4).cohort("c").preemption(reclaim=reclaim),
        queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        *[job(f"b{k}").queue("b").gpus(1).priority(priority).running_on(("n", [k]), since=k)
          for k in range(5)],
        *[job(f"a{k}").queue("a").gpus(1).priority(priority).running_on(("n", [5 + k]))
          for k in range(2)],
        job("wide").queue("a").gpus(2).priority(priority).submitted(10),
        job("more").queue("b").gpus(1).priority(priority).submitted(5),
    ).build()
    d = decide(snap, POLICY, 10.0)
    assert d.binds == [] and d.preemptions == []
    assert codes(d, "wide") == ["quota"] and codes(d, "more") == ["quota"]
