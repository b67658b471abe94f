"""Admission by quota, with Kueue's semantics for cohorts, borrowing and lending.

The CPU cases reproduce the examples of Kueue's ClusterQueue concept page
(site/content/en/docs/concepts/cluster_queue.md: "Borrowing example" and "BorrowingLimit"):
team-a-cq has a nominal quota of 9 CPUs, team-b-cq 12, both in cohort team-ab. Quota amounts
are in milli-units (9 CPUs = 9000 milli-cores, 1 GPU = 1000 milli-GPU).
"""

from __future__ import annotations

import pytest

from builders import (
    apply_all, bound, cluster, codes, decide, job, node, queue, waiting,
)
from rota.scheduler import ReasonCode

NO_PREEMPTION = {"preset": "besteffort"}   # quota admission, no preemption, no backfill
PREEMPTION = {"preset": "default", "backfill": "none"}


def _team_a_jobs(n: int, cores: int = 1):
    return [job(f"a{k:02d}").queue("team-a").cpu(cores).memory(1).submitted(k) for k in range(n)]


@pytest.mark.parametrize("a_quota,b_quota,b_running,admitted", [
    # No cohort: team-a gets its nominal 9 CPUs and no more.
    (dict(nominal={"cpu": 9000}), None, 0, 9),
    # Kueue "Borrowing example": team-b-cq has no admitted workloads, so team-a-cq can admit
    # 12 + 9 = 21 CPUs.
    (dict(nominal={"cpu": 9000}), dict(nominal={"cpu": 12000}), 0, 21),
    # team-b uses 5 of its 12: team-a may borrow the 7 idle ones: 9 + 7 = 16.
    (dict(nominal={"cpu": 9000}), dict(nominal={"cpu": 12000}), 5, 16),
    # Kueue "BorrowingLimit": team-a-cq has borrowingLimit 1, so 9 + 1 = 10 CPUs.
    (dict(nominal={"cpu": 9000}, borrowing={"cpu": 1000}), dict(nominal={"cpu": 12000}), 0, 10),
    # borrowingLimit 0: a cohort member that may not borrow at all.
    (dict(nominal={"cpu": 9000}, borrowing={"cpu": 0}), dict(nominal={"cpu": 12000}), 0, 9),
    # Lending limit: team-b lends at most 2 of its 12 CPUs; 10 are guaranteed to it.
    # team-a: 9 + 2 = 11.
    (dict(nominal={"cpu": 9000}), dict(nominal={"cpu": 12000}, lending={"cpu": 2000}), 0, 11),
    # Lending limit with team-b busy: b uses 11 of 12, its guaranteed part is 10, so it takes
    # 1 from what it lends: 2 - 1 = 1 left for team-a: 9 + 1 = 10.
    (dict(nominal={"cpu": 9000}), dict(nominal={"cpu": 12000}, lending={"cpu": 2000}), 11, 10),
], ids=["no-cohort", "kueue-borrowing-example", "borrow-idle-part", "kueue-borrowing-limit",
        "borrowing-limit-zero", "lending-limit", "lending-limit-partly-used"])
def test_cpu_quota_in_a_cohort(a_quota, b_quota, b_running, admitted):
    a = queue("team-a").limits(**a_quota)
    queues = [a.cohort("team-ab") if b_quota else a]
    if b_quota:
        queues.append(queue("team-b").limits(**b_quota).cohort("team-ab"))
    running = [job(f"b{k}").queue("team-b").cpu(1).memory(1).running_on(("n1", []))
               for k in range(b_running)]
    snap = (cluster().nodes(node("n1").cpu(64)).queue(*queues)
            .jobs(*running, *_team_a_jobs(30)).build())
    d = decide(snap, NO_PREEMPTION)
    assert len(d.binds) == admitted
    assert all(w.reasons[0].code is ReasonCode.QUOTA for w in d.waits)


def test_the_owner_gets_its_nominal_quota_before_a_borrower_takes_more():
    # Kueue "Borrowing example", second scenario: team-a has used its nominal 9 CPUs; both
    # teams have pending jobs. team-b's jobs fit in its own nominal quota and are admitted;
    # team-a's only where team-b leaves room: 21 - 9 - 12 = 0 more.
    a = queue("team-a").limits(nominal={"cpu": 9000}).cohort("team-ab")
    b = queue("team-b").limits(nominal={"cpu": 12000}).cohort("team-ab")
    snap = (cluster().nodes(node("n1").cpu(64)).queue(a, b).jobs(
        *[job(f"a-run{k}").queue("team-a").cpu(1).memory(1).running_on(("n1", [])) for k in range(9)],
        *[job(f"b{k:02d}").queue("team-b").cpu(1).memory(1).submitted(100 + k) for k in range(12)],
        *[job(f"a{k:02d}").queue("team-a").cpu(1).memory(1).submitted(200 + k) for k in range(5)],
    ).build())
    d = decide(snap, NO_PREEMPTION)
    assert sorted(bound(d)) == [f"b{k:02d}" for k in range(12)]


def test_a_job_beyond_quota_waits_with_a_quota_reason():
    # Nominal 4 GPUs, 3 in use: a 2-GPU job asks 2000 milli-GPU, 1000 are available, of a
    # nominal 4000. (Quota reasons count in quota units: milli-GPU.)
    snap = cluster().nodes(node("n1").gpus(8)).queue(queue("q").quota(gpu=4)).jobs(
        job("r").gpus(3).running_on(("n1", [0, 1, 2])),
        job("big").gpus(2),
    ).build()
    d = decide(snap, NO_PREEMPTION)
    (reason,) = waiting(d)["big"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.QUOTA, "gpu", 2000, 1000, 4000)
    assert "queue q" in reason.detail


def test_a_borrowing_bind_is_marked_borrowing():
    # a: nominal 1 GPU, b: nominal 1 GPU, idle. a's 2-GPU job fits only by borrowing.
    snap = cluster().nodes(node("n1").gpus(2)).queue(
        queue("a").quota(gpu=1).cohort("c"), queue("b").quota(gpu=1).cohort("c"),
    ).jobs(job("x").queue("a").gpus(2)).build()
    (b,) = decide(snap, NO_PREEMPTION).binds
    assert b.borrowing is True


def test_lending_limit_keeps_a_guaranteed_part_that_others_cannot_borrow():
    # a: nominal 4 GPUs, lends at most 1 -> 3 guaranteed. b: nominal 4. 8 GPUs in the cluster.
    # Cycle 1: b's eight 1-GPU jobs get 4 + 1 = 5. Cycle 2: a's 3-GPU job starts at once,
    # without evicting anyone, on the 3 GPUs that were never lent.
    snap = cluster().nodes(node("n1").gpus(8)).queue(
        queue("a").quota(gpu=4, lend=1).cohort("c"), queue("b").quota(gpu=4).cohort("c"),
    ).jobs(*[job(f"b{k}").queue("b").gpus(1).submitted(k) for k in range(8)]).build()
    first = decide(snap, PREEMPTION)
    assert len(first.binds) == 5
    after = apply_all(snap, first, now=0.0)
    second = decide(after.with_jobs(job("a-job").queue("a").gpus(3).submitted(100)), PREEMPTION,
                    now=1.0)
    assert set(bound(second)) == {"a-job"} and second.preemptions == []


# -- reclaiming lent quota -----------------------------------------------------------------------

def _lent_out(reclaim: str, b_priority: int, a_job_gpus: int = 4):
    """a and b have 4 GPUs nominal each; b borrowed all of a's and runs 8 one-GPU jobs."""
    return cluster().nodes(node("n1").gpus(8)).queue(
        queue("a").quota(gpu=4).cohort("c").preemption(reclaim=reclaim),
        queue("b").quota(gpu=4).cohort("c"),
    ).jobs(
        *[job(f"b{k}").queue("b").gpus(1).priority(b_priority)
          .running_on(("n1", [k]), since=float(k)) for k in range(8)],
        job("a-job").queue("a").gpus(a_job_gpus).priority(5).submitted(100),
    ).build()


@pytest.mark.parametrize("reclaim,b_priority,victims", [
    # any: a takes its nominal quota back whatever b's priorities: 4 victims, the most
    # recently started of b's jobs (b7, b6, b5, b4), and no more: after 4, b is back at its
    # nominal quota and is no longer borrowing.
    ("any", 10, {"b4", "b5", "b6", "b7"}),
    # lower-priority: b's jobs (0) are below a's job (5): reclaimed.
    ("lower-priority", 0, {"b4", "b5", "b6", "b7"}),
    # lower-priority: b's jobs (10) are above a's job (5): a waits.
    ("lower-priority", 10, set()),
    # never: a waits, although b borrows a's quota.
    ("never", 0, set()),
], ids=["any", "lower-priority-evicts-lower", "lower-priority-spares-higher", "never"])
def test_reclaim_of_lent_quota(reclaim, b_priority, victims):
    d = decide(_lent_out(reclaim, b_priority), PREEMPTION)
    assert {p.job for p in d.preemptions} == victims
    assert all(p.by == "a-job" and p.reason == "reclaim" for p in d.preemptions)
    assert "a-job" in waiting(d)  # it starts once the victims have exited
    # b holds the whole cohort pool (8 of 8 GPUs), so without victims a's job is out of quota
    assert codes(d, "a-job") == (["preempting"] if victims else ["quota"])


def test_no_reclaim_for_a_job_that_would_itself_borrow():
    # a's job wants 6 GPUs, above a's nominal 4: Kueue reclaims only for a workload that fits
    # within its queue's nominal quota, so b keeps its borrowed GPUs.
    d = decide(_lent_out("any", 0, a_job_gpus=6), PREEMPTION)
    assert d.preemptions == [] and "a-job" in waiting(d)
