"""Preemption follows Kueue's classic rules: who may evict, whom, in which order, and whether
its queue may end borrowing (docs/scheduler.md, "Preemption").

Each case is one cycle (or ``rota plan``'s loop where the outcome is the settled state), with
nodes large enough that quota decides unless the case is about room.
"""

from __future__ import annotations

import pytest

from builders import bound, cluster, codes, decide, job, node, queue
from rota.cli.plan import run_plan
from rota.scheduler import build_policy

POLICY = {"preset": "default", "backfill": "none", "placement": "binpack"}
CLASSIC = {**POLICY, "preemption": "classic"}


def victims(d) -> list[str]:
    return sorted(p.job for p in d.preemptions)


def _big():
    return node("n").gpus(16).cpu(512)


def test_a_borrowers_job_goes_before_the_preemptors_own_lower_priority_job():
    # a (nominal 4) runs low (2 GPUs, priority 0); b (nominal 4) runs 6, borrowing 2: the
    # cohort's 8 are in use (the node has room). a with hi (2 GPUs, priority 5) would be at 4
    # = nominal: it is owed what b borrows. Kueue takes a borrower's job of another queue
    # first (candidate order), even one of higher priority than a's own low: b's most recent
    # 2-GPU job goes, low stays.
    snap = cluster().nodes(_big()).queue(
        queue("a").quota(gpu=4).cohort("c"), queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        job("low").queue("a").gpus(2).priority(0).running_on(("n", [0, 1]), since=5),
        *[job(f"b{k}").queue("b").gpus(2).priority(3).running_on(("n", [2 + 2 * k, 3 + 2 * k]),
                                                              since=k) for k in range(3)],
        job("hi").queue("a").gpus(2).priority(5).submitted(10),
    ).build()
    for policy in (POLICY, CLASSIC):
        assert victims(decide(snap, policy, 10.0)) == ["b2"]


def test_a_queue_above_nominal_evicts_one_of_its_own_jobs_and_borrows_the_rest():
    # a (nominal 4) runs l0 and l1 (2 GPUs each, priority 0) and m (2 GPUs, priority 9): 6,
    # borrowing 2 of b's idle 4. hi (2 GPUs, priority 5) is within a's nominal by its own
    # request, so it may evict (Kueue's heuristic 4: only its own queue's jobs, then borrow).
    # One victim is enough: a ends at 6 again, borrowing 2. Before, rota required a to end
    # within nominal: it evicted both l0 and l1, and the next cycle started one of them again
    # by borrowing.
    snap = cluster().nodes(node("n").gpus(6)).queue(
        queue("a").quota(gpu=4).cohort("c"), queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        job("l0").queue("a").gpus(2).running_on(("n", [0, 1]), since=0),
        job("l1").queue("a").gpus(2).running_on(("n", [2, 3]), since=1),
        job("m").queue("a").gpus(2).priority(9).running_on(("n", [4, 5]), since=2),
        job("hi").queue("a").gpus(2).priority(5).submitted(10),
    ).build()
    run = run_plan(snap, build_policy(POLICY), 10.0)
    assert run.converged
    assert [p.job for _, p in run.preemptions] == ["l1"]       # the most recent
    running = sorted(j.id for j in run.final.jobs if j.state.holds_resources)
    assert running == ["hi", "l0", "m"]


def test_a_job_above_its_queues_nominal_by_itself_evicts_nobody():
    # the same, but hi asks for 6 GPUs, more than a's nominal 4: it may evict only where its
    # queue sets borrow_within_cohort (Kueue's flavour assigner: no preemption mode)
    snap = cluster().nodes(node("n").gpus(6)).queue(
        queue("a").quota(gpu=4).cohort("c"), queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        job("l0").queue("a").gpus(2).running_on(("n", [0, 1]), since=0),
        job("l1").queue("a").gpus(2).running_on(("n", [2, 3]), since=1),
        job("hi").queue("a").gpus(6).priority(5).submitted(10),
    ).build()
    d = decide(snap, POLICY, 10.0)
    assert d.preemptions == [] and codes(d, "hi") == ["quota"]


def test_a_queue_below_nominal_reclaims_from_several_borrowers_at_once():
    # a (nominal 6) runs nothing; b and c (nominal 1 each) borrow 3 and 2 GPUs: 7 of the
    # cohort's 8, one GPU free. a's job (5 GPUs) is owed 5: it takes back 4 more, from both
    # queues in one decision, most recent first while each still borrows (the last victim of a
    # queue may take it below nominal, as in Kueue)
    snap = cluster().nodes(node("n").gpus(8)).queue(
        queue("a").quota(gpu=6).cohort("c"), queue("b").quota(gpu=1).cohort("c"),
        queue("c").quota(gpu=1).cohort("c"),
    ).jobs(
        *[job(f"b{k}").queue("b").gpus(1).running_on(("n", [k]), since=k) for k in range(4)],
        *[job(f"c{k}").queue("c").gpus(1).running_on(("n", [4 + k]), since=k) for k in range(3)],
        job("a").queue("a").gpus(5).submitted(10),
    ).build()
    assert victims(decide(snap, POLICY, 10.0)) == ["b1", "b2", "b3", "c2"]


def test_a_lender_reclaims_what_it_lent_within_its_lending_limit():
    # product (nominal 8, lends at most 2) runs 6: its guaranteed part. research (nominal 2)
    # runs 4, borrowing product's 2 lent GPUs. product's 2-GPU job is owed them back.
    snap = cluster().nodes(node("n").gpus(10)).queue(
        queue("product").quota(gpu=8, lend=2).cohort("c"), queue("research").quota(gpu=2).cohort("c"),
    ).jobs(
        job("p").queue("product").gpus(6).running_on(("n", list(range(6))), since=0),
        *[job(f"r{k}").queue("research").gpus(1).running_on(("n", [6 + k]), since=k)
          for k in range(4)],
        job("more").queue("product").gpus(2).submitted(10),
    ).build()
    assert victims(decide(snap, POLICY, 10.0)) == ["r2", "r3"]


def test_reclaim_reads_only_the_resources_the_job_asks_for():
    # a (nominal 4 GPUs, 8 CPUs) uses 10 CPUs, above its CPU quota (b lends CPUs), and no
    # GPU; b (nominal 4 GPUs, 32 CPUs) borrows all 4 of a's GPUs. a's job asks for 2 GPUs and
    # no CPU: with it a is within nominal in what it asks for, so it reclaims; its queue's CPU
    # use is none of its business (before, any resource above nominal stopped it)
    snap = cluster().nodes(node("n").gpus(8).cpu(64)).queue(
        queue("a").limits(nominal={"gpu": 4000, "cpu": 8000}).cohort("c"),
        queue("b").limits(nominal={"gpu": 4000, "cpu": 32000}).cohort("c"),
    ).jobs(
        job("cpus").queue("a").cpu(10).running_on(("n", []), since=0),
        *[job(f"b{k}").queue("b").gpus(2).cpu(1).running_on(("n", [2 * k, 2 * k + 1]), since=k)
          for k in range(4)],
        job("g").queue("a").gpus(2).cpu(0).submitted(10),
    ).build()
    assert victims(decide(snap, POLICY, 10.0)) == ["b3"]


def test_borrow_within_cohort_stops_at_the_priority_threshold():
    # cohort of a (nominal 2), b (nominal 4) and idle c (nominal 2): 8 GPUs. a runs a0 (2 GPUs,
    # priority 9); b runs three 2-GPU jobs of priority 5, borrowing 2. a's hi (2 GPUs,
    # priority 9) must borrow after any eviction (a at 4 > 2), so it may evict only where a
    # may evict while borrowing: b's jobs of priority at most the threshold
    def snap(threshold):
        return cluster().nodes(node("n").gpus(8)).queue(
            queue("a").quota(gpu=2).cohort("c").borrow_within_cohort(
                "lower-priority", max_priority_threshold=threshold),
            queue("b").quota(gpu=4).cohort("c"), queue("c").quota(gpu=2).cohort("c"),
        ).jobs(
            job("a0").queue("a").gpus(2).priority(9).running_on(("n", [0, 1]), since=0),
            *[job(f"b{k}").queue("b").gpus(2).priority(5).running_on(
                ("n", [2 + 2 * k, 3 + 2 * k]), since=k) for k in range(3)],
            job("hi").queue("a").gpus(2).priority(9).submitted(10),
        ).build()
    d = decide(snap(3), POLICY, 10.0)                 # priority 5 is above the threshold 3
    assert d.preemptions == [] and codes(d, "hi") == ["quota"]
    assert victims(decide(snap(None), POLICY, 10.0)) == ["b2"]      # the most recent


def test_lower_or_newer_equal_priority_evicts_a_newer_job_of_equal_priority():
    snap = cluster().nodes(node("n").gpus(2)).queue(
        queue("q").quota(gpu=2).preemption(within="lower-or-newer-equal-priority"),
    ).jobs(
        job("newer").gpus(2).priority(1).submitted(20).running_on(("n", [0, 1]), since=20),
        job("older").gpus(2).priority(1).submitted(10),
    ).build()
    assert victims(decide(snap, POLICY, 30.0)) == ["newer"]
    later = cluster().nodes(node("n").gpus(2)).queue(
        queue("q").quota(gpu=2).preemption(within="lower-or-newer-equal-priority"),
    ).jobs(
        job("first").gpus(2).priority(1).submitted(10).running_on(("n", [0, 1]), since=20),
        job("second").gpus(2).priority(1).submitted(20),
    ).build()
    assert decide(later, POLICY, 30.0).preemptions == []


def test_classic_takes_candidates_in_order_where_minimal_victims_takes_fewer():
    # q (nominal 4 GPUs) is full: a0 and a1 (1 GPU, priority 0), big (2 GPUs, priority 1). hi (priority 5) needs 2. Kueue's order is lowest priority first: a0 and a1
    # are taken and neither can be given back. minimal-victims takes big alone.
    snap = cluster().nodes(node("n").gpus(4)).queue(queue("q").quota(gpu=4)).jobs(
        job("a0").gpus(1).priority(0).running_on(("n", [0]), since=0),
        job("a1").gpus(1).priority(0).running_on(("n", [1]), since=1),
        job("big").gpus(2).priority(1).running_on(("n", [2, 3]), since=2),
        job("hi").gpus(2).priority(5).submitted(10),
    ).build()
    assert victims(decide(snap, CLASSIC, 10.0)) == ["a0", "a1"]
    assert victims(decide(snap, POLICY, 10.0)) == ["big"]


@pytest.mark.parametrize("walltimes", [False, True], ids=["no-walltimes", "walltimes"])
def test_a_lenders_job_is_not_held_back_by_a_borrowers_queue(walltimes):
    # one 4-GPU node; product and research in one cohort, nominal 2 each. product runs two
    # 2-GPU jobs (borrowing research's 2) and has a third queued; research, using nothing,
    # submits a 2-GPU job: it reclaims one of product's jobs and runs, with or without
    # walltimes (a borrower's reservation does not hold what the lender is owed).
    wall = 3600.0 if walltimes else None

    def walled(b):
        return b.walltime(wall) if wall else b
    snap = cluster().nodes(node("n").gpus(4)).queue(
        queue("product").quota(gpu=2).cohort("lab"), queue("research").quota(gpu=2).cohort("lab"),
    ).jobs(
        walled(job("p1").queue("product").gpus(2)).running_on(("n", [0, 1]), since=0),
        walled(job("p2").queue("product").gpus(2)).running_on(("n", [2, 3]), since=10),
        walled(job("p3").queue("product").gpus(2)).submitted(20),
        job("r1").queue("research").gpus(2).submitted(30),
    ).build()
    run = run_plan(snap, build_policy({"preset": "default"}), 100.0)
    assert run.converged
    assert [p.job for _, p in run.preemptions] == ["p2"]
    state = {j.id: j.state for j in run.final.jobs}
    assert state["r1"].holds_resources and state["p1"].holds_resources
    assert bound(run.last) == {}
