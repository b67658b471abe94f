"""Ordering: which pending job is tried next.

Policies here switch preemption and backfill off (``fifo``/``besteffort`` presets with another
``order``), so that the order alone decides who gets the free GPUs.
"""

from __future__ import annotations

import pytest

from builders import bound, cluster, codes, decide, job, node, queue

NO_EXTRAS = {"preset": "besteffort"}  # quota admission, binpack, no preemption, no backfill


def policy(order, **extra):
    return {**NO_EXTRAS, "order": order, **extra}


# -- FIFO: strict and best effort ----------------------------------------------------------------

def _head_of_line():
    """8 GPUs, 6 held: a's head wants 4 (blocked), a's second and b's job want 1 each."""
    return cluster().nodes(node("n1").gpus(8)).queue(queue("a"), queue("b")).jobs(
        job("running").queue("a").gpus(6).running_on(("n1", [0, 1, 2, 3, 4, 5])),
        job("a-head").queue("a").gpus(4).submitted(1),
        job("a-second").queue("a").gpus(1).submitted(2),
        job("b-first").queue("b").gpus(1).submitted(3),
    ).build()


def test_strict_fifo_a_blocked_head_blocks_its_queue_but_not_others():
    d = decide(_head_of_line(), "fifo")
    # 2 GPUs free: a-head (4) waits for resources; a-second would fit but is behind it;
    # queue b is not blocked by queue a, so b-first starts.
    assert set(bound(d)) == {"b-first"}
    assert codes(d, "a-head") == ["resources"]
    assert codes(d, "a-second") == ["blocked"]


def test_best_effort_fifo_skips_the_blocked_head():
    d = decide(_head_of_line(), "besteffort")
    assert set(bound(d)) == {"a-second", "b-first"}
    assert codes(d, "a-head") == ["resources"]


@pytest.mark.parametrize("order,winner", [
    ("fifo", "early"),              # submitted at 1 beats submitted at 2
    ("besteffort-fifo", "early"),
    ("lifo", "late"),               # last in, first out
    ("priority", "urgent"),         # priority 5 beats the earlier priority-0 jobs
], ids=["strict-fifo", "besteffort-fifo", "lifo", "priority"])
def test_who_gets_the_one_free_gpu(order, winner):
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("early").gpus(1).submitted(1),
        job("late").gpus(1).submitted(3),
        job("urgent").gpus(1).submitted(2).priority(5) if order == "priority"
        else job("middle").gpus(1).submitted(2),
    ).build()
    assert set(bound(decide(snap, policy(order)))) == {winner}


def test_priority_ties_go_to_the_earlier_submission():
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("second").gpus(1).submitted(2).priority(3),
        job("first").gpus(1).submitted(1).priority(3),
    ).build()
    assert set(bound(decide(snap, policy("priority")))) == {"first"}


# -- DRF -----------------------------------------------------------------------------------------

def test_drf_reproduces_the_example_of_ghodsi_et_al_2011():
    # The paper's example: 9 CPUs and 18 GB; user A's tasks need <1 CPU, 4 GB>, user B's
    # <3 CPU, 1 GB>. A's dominant resource is memory (4/18 per task), B's is CPU (3/9).
    # Progressive filling, the smaller dominant share goes next (A first on a tie, by name):
    #   A1: A=4/18=.22 | B1: B=3/9=.33 | A2: A=8/18=.44 | B2: B=6/9=.67 | A3: A=12/18=.67
    #   then 9 CPUs are used (1+3+1+3+1) and nothing else fits.
    # DRF's answer: A runs 3 tasks (3 CPU, 12 GB), B runs 2 (6 CPU, 2 GB); both shares 2/3.
    snap = cluster().nodes(node("n1").cpu(9).memory(18)).jobs(
        *[job(f"A{k}").project("A").cpu(1).memory(4).submitted(k) for k in range(1, 6)],
        *[job(f"B{k}").project("B").cpu(3).memory(1).submitted(10 + k) for k in range(1, 6)],
    ).build()
    won = set(bound(decide(snap, policy("drf"))))
    assert won == {"A1", "A2", "A3", "B1", "B2"}


def test_fifo_on_the_same_example_is_not_fair():
    # Same jobs in submission order: A takes 4 tasks (4 CPU, 16 GB), B1 takes 3 CPU and 1 GB,
    # and B2 finds 2 CPUs left. A 16/18 = .89 against B 3/9 = .33.
    snap = cluster().nodes(node("n1").cpu(9).memory(18)).jobs(
        *[job(f"A{k}").project("A").cpu(1).memory(4).submitted(k) for k in range(1, 6)],
        *[job(f"B{k}").project("B").cpu(3).memory(1).submitted(10 + k) for k in range(1, 6)],
    ).build()
    assert set(bound(decide(snap, policy("besteffort-fifo")))) == {"A1", "A2", "A3", "A4", "B1"}


def test_drf_weights_divide_the_dominant_share():
    # 8 GPUs (the dominant resource of 1-GPU jobs); A has weight 3, B weight 1.
    # Key = (gpus / 8) / weight. A: 0, 1/24, 2/24, 3/24 ... ; B: 0, 1/8 = 3/24, 2/8 = 6/24.
    # Sequence: A(0) B(0) A(1/24) A(2/24) A(3/24, tie with B, A by name) B(3/24) A A -> full.
    # A gets 6 GPUs and B 2: a 3:1 split.
    snap = (cluster().nodes(node("n1").gpus(8).cpu(64)).project("A", weight=3).project("B", weight=1)
            .jobs(*[job(f"A{k}").project("A").gpus(1).submitted(k) for k in range(8)],
                  *[job(f"B{k}").project("B").gpus(1).submitted(k) for k in range(8)]).build())
    won = bound(decide(snap, policy("drf")))
    assert sum(1 for j in won if j.startswith("A")) == 6
    assert sum(1 for j in won if j.startswith("B")) == 2


def test_drf_counts_what_a_project_already_holds():
    # 8 GPUs, A already runs 4 (share 4/8 = .5); 4 free. B climbs 1/8, 2/8, 3/8, 4/8; at the
    # tie A goes next but nothing is left. B gets all 4 free GPUs although A submitted first.
    snap = cluster().nodes(node("n1").gpus(8)).jobs(
        job("A-running").project("A").gpus(4).running_on(("n1", [0, 1, 2, 3])),
        *[job(f"A{k}").project("A").gpus(1).submitted(k) for k in range(4)],
        *[job(f"B{k}").project("B").gpus(1).submitted(10 + k) for k in range(4)],
    ).build()
    assert set(bound(decide(snap, policy("drf")))) == {"B0", "B1", "B2", "B3"}


def test_drf_dominant_resource_may_be_cpu_for_one_project_and_gpu_for_another():
    # Node: 4 GPUs, 16 cores. A runs 1 GPU with 12 cores: dominant share cpu 12/16 = .75.
    # B runs 2 GPUs with 1 core: dominant share gpu 2/4 = .5. One GPU free, one job each:
    # B (.5) goes before A (.75) although A's GPU share (.25) is the smaller.
    snap = cluster().nodes(node("n1").gpus(4).cpu(16)).jobs(
        job("A-running").project("A").gpus(1).cpu(12).running_on(("n1", [0])),
        job("B-running").project("B").gpus(2).cpu(1).running_on(("n1", [1, 2])),
        job("A-next").project("A").gpus(1).cpu(1).submitted(1),
        job("B-next").project("B").gpus(1).cpu(1).submitted(2),
    ).build()
    assert set(bound(decide(snap, policy("drf")))) == {"B-next"}


# -- fair share with decayed usage ---------------------------------------------------------------

HOUR = 3600.0


@pytest.mark.parametrize("half_life_s,a_hours,a_as_of,b_hours,b_as_of,a_holds,now,winner", [
    # A used 16 GPU-h as of t=0; B used 5 GPU-h as of now. Half-life 1 h, now = 4 h:
    # A decays 16 x 0.5^4 = 1 GPU-h < B's 5 GPU-h: A goes first although it used more.
    (HOUR, 16, 0, 5, 4 * HOUR, 0, 4 * HOUR, "A"),
    # Same usage, half-life 1 day: A decays to 16 x 0.5^(4/24) = 14.25 GPU-h > 5: B first.
    (24 * HOUR, 16, 0, 5, 4 * HOUR, 0, 4 * HOUR, "B"),
    # Both decay one half-life: A 6 -> 3, B 8 -> 4 GPU-h: A first.
    (HOUR, 6, 0, 8, 0, 0, HOUR, "A"),
    # Current allocation counts as held for one half-life: A holds 1 GPU now -> 1 x 3600 =
    # 3600 GPU-s; B used 0.5 GPU-h = 1800 GPU-s as of now: B first.
    (HOUR, 0, 0, 0.5, 0, 1, 0, "B"),
    # ... and B with 1.5 GPU-h = 5400 GPU-s > 3600: A first.
    (HOUR, 0, 0, 1.5, 0, 1, 0, "A"),
], ids=["decay-flips-order", "slow-decay-keeps-order", "both-decay", "holding-counts",
        "holding-is-one-half-life"])
def test_fair_share_with_decayed_usage(half_life_s, a_hours, a_as_of, b_hours, b_as_of, a_holds,
                                       now, winner):
    snap = (cluster().nodes(node("n1").gpus(1 + a_holds))
            .project("A", used_gpu_hours=a_hours, as_of=a_as_of)
            .project("B", used_gpu_hours=b_hours, as_of=b_as_of)
            .jobs(*([job("A-running").project("A").gpus(1).running_on(("n1", [1]))] if a_holds else []),
                  # the loser of FIFO would be A: B submitted first
                  job("B-next").project("B").gpus(1).submitted(0),
                  job("A-next").project("A").gpus(1).submitted(1)).build())
    fs = policy({"name": "fairshare", "args": {"half_life_s": half_life_s}})
    assert set(bound(decide(snap, fs, now=now))) == {f"{winner}-next"}


def test_fair_share_weight_divides_usage():
    # A used 4 GPU-h with weight 4 -> 1 per weight; B used 2 GPU-h with weight 1 -> 2: A first.
    snap = (cluster().nodes(node("n1").gpus(1))
            .project("A", weight=4, used_gpu_hours=4).project("B", weight=1, used_gpu_hours=2)
            .jobs(job("B-next").project("B").gpus(1).submitted(0),
                  job("A-next").project("A").gpus(1).submitted(1)).build())
    fs = policy({"name": "fairshare", "args": {"half_life_s": HOUR}})
    assert set(bound(decide(snap, fs))) == {"A-next"}


def test_fair_share_counts_placements_made_earlier_in_the_same_cycle():
    # No history. Two GPUs free, A and B two jobs each, all A's submitted first. After A's
    # first job, A holds 1 GPU (3600 GPU-s) and B holds none: B goes next. One each.
    snap = cluster().nodes(node("n1").gpus(2)).jobs(
        job("A1").project("A").gpus(1).submitted(0), job("A2").project("A").gpus(1).submitted(1),
        job("B1").project("B").gpus(1).submitted(2), job("B2").project("B").gpus(1).submitted(3),
    ).build()
    fs = policy({"name": "fairshare", "args": {"half_life_s": HOUR}})
    assert set(bound(decide(snap, fs))) == {"A1", "B1"}

