"""Preemption within a queue: a higher-priority job evicts the fewest lower-priority jobs.

Victims are chosen by, in order: fewest victims (the minimum, found exactly while the
candidates that matter are few), then lowest priorities, then least work lost since each
victim's last checkpoint (or start), then most recently started (Kueue's heuristics: "preempt
as few Workloads as possible, preferring the lowest priority, then the most recently
admitted"). Policies: priority order, minimal-victims, no backfill.
"""

from __future__ import annotations

import pytest

from builders import cluster, codes, decide, job, node, queue, waiting
from rota.core import JobState

POLICY = {"preset": "default", "backfill": "none", "placement": "binpack"}


def victims(d) -> set[str]:
    return {p.job for p in d.preemptions}


def _two_nodes(*running):
    return cluster().nodes(node("n1").gpus(4), node("n2").gpus(4)).jobs(*running)


CASES = [
    # (id, running jobs, preemptor GPUs, expected victims)
    # n1: four 1-GPU jobs (priority 0); n2: one 4-GPU job (priority 1). A 4-GPU preemptor.
    # Greedy by priority evicts the four priority-0 jobs; one victim is enough: n2's job.
    ("one-big-beats-four-small",
     [*[job(f"s{k}").gpus(1).priority(0).running_on(("n1", [k]), since=k) for k in range(4)],
      job("big").gpus(4).priority(1).running_on(("n2", [0, 1, 2, 3]))],
     4, {"big"}),
    # n1: four 1-GPU jobs (priority 0); n2: a 2-GPU job (priority 0) and 2 GPUs held by a
    # priority-9 job. A 2-GPU preemptor: the 2-GPU job alone (1 victim) beats two small ones.
    ("one-pair-beats-two-singles",
     [*[job(f"s{k}").gpus(1).priority(0).running_on(("n1", [k]), since=10 + k) for k in range(4)],
      job("pair").gpus(2).priority(0).running_on(("n2", [0, 1])),
      job("vip").gpus(2).priority(9).running_on(("n2", [2, 3]))],
     2, {"pair"}),
    # Equal counts: the lower priority goes. 4-GPU jobs of priority 2 (n1) and 1 (n2).
    ("lowest-priority",
     [job("p2").gpus(4).priority(2).running_on(("n1", [0, 1, 2, 3])),
      job("p1").gpus(4).priority(1).running_on(("n2", [0, 1, 2, 3]))],
     4, {"p1"}),
    # Equal counts and priorities: the most recently started goes (it loses the least work).
    ("most-recent",
     [job("old").gpus(4).priority(1).running_on(("n1", [0, 1, 2, 3]), since=100),
      job("new").gpus(4).priority(1).running_on(("n2", [0, 1, 2, 3]), since=200)],
     4, {"new"}),
    # Only what is needed: 2 GPUs wanted, n1 full of 1-GPU jobs, n2 full too. Two victims on
    # one node; never three.
    ("exactly-enough",
     [*[job(f"a{k}").gpus(1).priority(0).running_on(("n1", [k]), since=k) for k in range(4)],
      *[job(f"b{k}").gpus(1).priority(0).running_on(("n2", [k]), since=10 + k) for k in range(4)]],
     2, {"b2", "b3"}),   # the two most recently started, and on one node
]


@pytest.mark.parametrize("running,gpus,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_minimal_victim_set(running, gpus, expected):
    snap = _two_nodes(*running, job("hi").gpus(gpus).priority(10).submitted(1000)).build()
    d = decide(snap, POLICY)
    assert victims(d) == expected
    assert codes(d, "hi") == ["preempting"]


def test_victims_are_named_with_their_grace_period_and_preemptor():
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("low").gpus(1).grace_s(120.0).running_on(("n1", [0])),
        job("hi").gpus(1).priority(10)).build()
    (p,) = decide(snap, POLICY).preemptions
    assert (p.job, p.by, p.grace_s, p.reason) == ("low", "hi", 120.0, "priority")


def test_a_non_preemptible_job_is_never_a_victim():
    # The non-preemptible job has the lowest priority and would be the cheapest victim; the
    # preemptor takes the preemptible one instead.
    snap = _two_nodes(
        job("keep").gpus(4).priority(0).preemptible(False).running_on(("n1", [0, 1, 2, 3])),
        job("take").gpus(4).priority(5).running_on(("n2", [0, 1, 2, 3])),
        job("hi").gpus(4).priority(10)).build()
    assert victims(decide(snap, POLICY)) == {"take"}


def test_no_victim_when_only_non_preemptible_jobs_stand_in_the_way():
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("keep").gpus(1).preemptible(False).running_on(("n1", [0])),
        job("hi").gpus(1).priority(10)).build()
    d = decide(snap, POLICY)
    assert d.preemptions == [] and "hi" in waiting(d)


@pytest.mark.parametrize("victim_priority,evicted", [
    (4, True),    # lower than 5: evicted
    (5, False),   # equal: never evicted within the queue
    (9, False),   # higher: never
], ids=["lower", "equal", "higher"])
def test_within_a_queue_only_lower_priority_is_evicted(victim_priority, evicted):
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("running").gpus(1).priority(victim_priority).running_on(("n1", [0])),
        job("pending").gpus(1).priority(5)).build()
    assert victims(decide(snap, POLICY)) == ({"running"} if evicted else set())


def test_within_queue_never_evicts_nobody():
    snap = cluster().nodes(node("n1").gpus(1)).queue(queue("q").preemption(within="never")).jobs(
        job("running").gpus(1).priority(0).running_on(("n1", [0])),
        job("pending").gpus(1).priority(5)).build()
    assert decide(snap, POLICY).preemptions == []


def test_jobs_already_preempting_are_waited_for_instead_of_evicting_more():
    # "going" is already in its grace period and holds n1's 4 GPUs; evicting "other" would
    # also free 4 GPUs, but the space on its way back is enough: no new victim.
    snap = _two_nodes(
        job("going").gpus(4).priority(0).running_on(("n1", [0, 1, 2, 3])).state(JobState.PREEMPTING),
        job("other").gpus(4).priority(0).running_on(("n2", [0, 1, 2, 3])),
        job("hi").gpus(4).priority(10)).build()
    d = decide(snap, POLICY)
    assert d.preemptions == []
    (reason,) = waiting(d)["hi"].reasons
    assert reason.code.value == "preempting" and "going" in reason.detail


def test_space_being_freed_is_promised_only_once():
    # Two preemptors, one preempting victim's 4 GPUs: the first takes them; the second must
    # evict someone else, not count on the same GPUs.
    snap = _two_nodes(
        job("going").gpus(4).priority(0).running_on(("n1", [0, 1, 2, 3])).state(JobState.PREEMPTING),
        job("other").gpus(4).priority(0).running_on(("n2", [0, 1, 2, 3])),
        job("hi1").gpus(4).priority(10).submitted(1),
        job("hi2").gpus(4).priority(10).submitted(2)).build()
    d = decide(snap, POLICY)
    assert victims(d) == {"other"} and {p.by for p in d.preemptions} == {"hi2"}


@pytest.mark.parametrize("budget,preemptors", [(1, 1), (2, 2), (8, 3)], ids=["1", "2", "8"])
def test_max_preemptors_caps_how_many_jobs_preempt_in_one_cycle(budget, preemptors):
    # 3 nodes of 1 GPU, each held by a priority-0 job; three priority-10 jobs want one each.
    snap = cluster().nodes(*[node(f"n{k}").gpus(1) for k in range(3)]).jobs(
        *[job(f"low{k}").gpus(1).running_on((f"n{k}", [0])) for k in range(3)],
        *[job(f"hi{k}").gpus(1).priority(10).submitted(k) for k in range(3)]).build()
    policy = {**POLICY, "preemption": {"name": "minimal-victims", "args": {"max_preemptors": budget}}}
    d = decide(snap, policy)
    assert len({p.by for p in d.preemptions}) == preemptors
    assert len(d.preemptions) == preemptors  # one victim each


def test_a_preemptor_does_not_count_twice_against_its_cohort():
    # Cohort lab: research (nominal 8, may borrow 4) and product (nominal 8, lends at most 2,
    # so 6 are guaranteed). The pool is research's 8 + product's 2 = 10; pretrain uses 8.
    # serve (product, 6 GPUs) evicts embed (product, 4): over the handover product's usage
    # peaks at max(4 now, 6 after) = 6, within its guaranteed 6, so the pool still has
    # 10 - 8 = 2 left and finetune (research, 2 GPUs) borrows them on b's GPUs 6,7 instead
    # of evicting pretrain. Counting serve on top of embed (4 + 6 = 10) would have used the
    # pool up and cost pretrain its 8 GPUs.
    snap = cluster().nodes(node("a").gpus(8), node("b").gpus(8)).queue(
        queue("research").quota(gpu=8, borrow=4).cohort("lab"),
        queue("product").quota(gpu=8, lend=2).cohort("lab"),
    ).jobs(
        job("pretrain").queue("research").gpus(8).priority(10).running_on(("a", list(range(8)))),
        job("embed").queue("product").gpus(4).priority(0).running_on(("b", [0, 1, 2, 3])),
        job("serve").queue("product").gpus(6).priority(100),
        job("finetune").queue("research").gpus(2).priority(50),
    ).build()
    d = decide(snap, POLICY)
    assert victims(d) == {"embed"}
    assert codes(d, "serve") == ["preempting"]
    fin = next(b for b in d.binds if b.job == "finetune")
    assert fin.borrowing
    assert [(r.node, [x.index for x in r.devices]) for r in fin.placement.replicas] == [("b", [6, 7])]


def test_a_failed_victim_search_is_not_repeated_for_the_same_kind_of_job():
    # n1 is held by a non-preemptible job; three identical waiting jobs find no victims: the
    # search runs for the first only, since within a cycle nothing can make it succeed later
    from rota.scheduler import build_policy, run_cycle
    snap = cluster().nodes(node("n1").gpus(4)).jobs(
        job("wall").gpus(4).priority(0).preemptible(False).running_on(("n1", [0, 1, 2, 3])),
        *[job(f"w{k}").gpus(2).priority(5).submitted(k) for k in range(3)],
    ).build()
    policy = build_policy(POLICY)
    calls = []
    real = policy.preemption.find
    policy.preemption.find = lambda cycle, j, capped=False: calls.append(j.id) or real(cycle, j, capped)
    d = run_cycle(snap, policy, 0.0)
    assert calls == ["w0"]
    assert not d.preemptions and set(waiting(d)) == {"w0", "w1", "w2"}


@pytest.mark.parametrize("big_starts", [0, 2, 4], ids=["big-first", "big-middle", "big-last"])
def test_the_fewest_victims_whatever_the_start_order(big_starts):
    # n1: 8 GPUs holding one 4-GPU job and four 1-GPU jobs (priority 0). A 4-GPU job of
    # priority 10 needs 4 GPUs: the one big job (1 victim), never the four small ones (4),
    # whichever started last.
    small = [t for t in range(5) if t != big_starts]
    running = [job("big").gpus(4).running_on(("n1", [0, 1, 2, 3]), since=big_starts)]
    running += [job(f"s{k}").gpus(1).running_on(("n1", [4 + k]), since=t)
                for k, t in enumerate(small)]
    snap = cluster().nodes(node("n1").gpus(8)).jobs(
        *running, job("hi").gpus(4).priority(10).submitted(10)).build()
    assert victims(decide(snap, POLICY, 10.0)) == {"big"}


def test_among_equal_sets_the_least_work_since_the_last_checkpoint_is_lost():
    # Two 4-GPU jobs of equal priority; "old" started first but checkpointed a minute ago,
    # "new" started later and never checkpointed: evicting old loses 4 x 60 GPU-seconds,
    # evicting new 4 x 500.
    snap = _two_nodes(
        job("old").gpus(4).running_on(("n1", [0, 1, 2, 3]), since=0).last_checkpoint_at(940.0),
        job("new").gpus(4).running_on(("n2", [0, 1, 2, 3]), since=500),
        job("hi").gpus(4).priority(10).submitted(1000)).build()
    assert victims(decide(snap, POLICY, 1000.0)) == {"old"}


def test_lower_priorities_go_before_less_work_lost():
    # "cheap" loses no work (checkpointed just now) but has priority 2; "low" has priority 1
    snap = _two_nodes(
        job("cheap").gpus(4).priority(2).running_on(("n1", [0, 1, 2, 3])).last_checkpoint_at(1000.0),
        job("low").gpus(4).priority(1).running_on(("n2", [0, 1, 2, 3]), since=0),
        job("hi").gpus(4).priority(10).submitted(1000)).build()
    assert victims(decide(snap, POLICY, 1000.0)) == {"low"}


def test_a_larger_candidate_set_than_the_exact_limit_still_finds_a_set():
    # 16 one-GPU jobs on two 8-GPU nodes, more candidates than the exact search takes: the
    # greedy search still evicts a set from which none can be spared (4 jobs on one node)
    snap = cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).jobs(
        *[job(f"s{k}").gpus(1).running_on((f"n{1 + k // 8}", [k % 8]), since=k) for k in range(16)],
        job("hi").gpus(4).priority(10).submitted(100)).build()
    policy = {**POLICY, "preemption": {"name": "minimal-victims", "args": {"exact_limit": 4}}}
    d = decide(snap, policy, 100.0)
    assert len(victims(d)) == 4
    assert len({p for k in victims(d) for p in [int(k[1:]) // 8]}) == 1
