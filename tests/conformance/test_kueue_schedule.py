"""Kueue's scheduler tests, translated: which workloads one scheduling cycle admits, in which
flavour, which it leaves pending and which it preempts (pkg/scheduler/scheduler_test.go).

A Workload is a job (a pod set of ``count`` pods is a gang of that many replicas), a
ClusterQueue a queue (its LocalQueues are the queue itself), a ResourceFlavor a flavour with no
GPU model pattern (Kueue's flavours in these tests carry no node labels), ``cpu`` is cpu,
Kueue's ``gpu`` and ``example.com/gpu`` are GPUs, and the extended resources ``r1`` / ``r2`` of
two cases are cpu and memory (GiB). Quota is in raw units: cpu and gpu in milli, memory in MiB.
A ClusterQueue without a ``preemption`` stanza never preempts (Kueue's defaults, ``never`` for
both policies), so such queues say so explicitly here: rota's own defaults differ. A resource
group of its own (``model-a`` in eng-beta holds only the GPU) is a flavour whose quota is zero
for the resources outside the group.

Kueue runs one cycle per test: one head per ClusterQueue, admitted or left pending, and the
victims of a preemption marked while the preemptor waits; here that is one ``run_cycle`` with
``backfill: none`` and Kueue's classic preemption. Nodes are ``roomy``: only quota decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from builders import cluster, decide, job, queue, waiting
from conformance.kit import KUEUE, Upstream, roomy
from rota.core import JobState

POLICY = {"preset": "default", "backfill": "none", "placement": "binpack",
          "preemption": "classic"}
SCHED = "pkg/scheduler/scheduler_test.go"
GIB = 1024
FLAVORS = ("default", "on-demand", "spot", "model-a")


def up(test: str, case: str) -> Upstream:
    return Upstream(KUEUE, SCHED, test, case)


# -- building a case -------------------------------------------------------------------------


def kq(name: str, cohort: str | None = None, within: str = "never", reclaim: str = "never",
       borrow_within: bool = False):
    """A ClusterQueue with Kueue's preemption defaults (never, never) unless told."""
    q = queue(name).preemption(within=within, reclaim=reclaim)
    if cohort is not None:
        q = q.cohort(cohort)
    if borrow_within:
        q = q.borrow_within_cohort("lower-priority")
    return q


def cpu(n: float) -> dict[str, int]:
    return {"cpu": int(n * 1000)}


def pending(id: str, q: str, cores: float = 0, replicas: int = 1, priority: int = 0,
            created: float = 0.0, gpus: int = 0, mem_gib: float = 0):
    b = job(id).queue(q).cpu(cores).memory(mem_gib).priority(priority).submitted(created)
    if replicas > 1:
        b = b.replicas(replicas)
    if gpus:
        b = b.gpus(gpus)
    return b


def admitted(id: str, q: str, flavor: str, cores: float = 0, replicas: int = 1,
             priority: int = 0, since: float = 0.0, gpus: tuple[int, ...] = (),
             mem_gib: float = 0):
    """A workload holding quota in ``flavor``; ``gpus`` lists the device indices it holds."""
    b = job(id).queue(q).cpu(cores).memory(mem_gib).priority(priority)
    if gpus:
        b = b.gpus(len(gpus))
    reps = [("n", list(gpus))] + [("n", [])] * (replicas - 1)
    return b.running_on(*reps, since=since, flavor=flavor)


def lab(*queues, gpus: int = 64):
    c = cluster().nodes(roomy("n", gpus=gpus))
    for f in FLAVORS:
        c = c.flavor(f)
    return c.queue(*queues)


def schedule_lab(*extra):
    """TestSchedule's ClusterQueues (flavor-nonexistent-cq left out: rota refuses a queue
    naming an unknown flavour when it loads it)."""
    return lab(
        kq("sales").limits("default", nominal=cpu(50), borrowing=cpu(0)),
        kq("eng-alpha", cohort="eng")
        .limits("on-demand", nominal=cpu(50), borrowing=cpu(50))
        .limits("spot", nominal=cpu(100), borrowing=cpu(0)),
        kq("eng-beta", cohort="eng", within="lower-priority", reclaim="any")
        .limits("on-demand", nominal={**cpu(50), "gpu": 0}, borrowing=cpu(10))
        .limits("spot", nominal={**cpu(0), "gpu": 0}, borrowing=cpu(100))
        .limits("model-a", nominal={"gpu": 20_000, "cpu": 0}, borrowing={"gpu": 0}),
        kq("lend-a", cohort="lend").limits("default", nominal=cpu(3), lending=cpu(2)),
        kq("lend-b", cohort="lend").limits("default", nominal=cpu(2), lending=cpu(2)),
        *extra,
    )


@dataclass(frozen=True)
class Want:
    """Kueue's outcome of the cycle: admitted (job -> flavour), evicted, left pending."""

    bound: dict[str, str] = field(default_factory=dict)
    preempted: frozenset[str] = frozenset()
    pending: frozenset[str] = frozenset()


def want(bound=None, preempted=(), pending=()) -> Want:
    return Want(dict(bound or {}), frozenset(preempted), frozenset(pending))


def assert_outcome(decisions, expected: Want) -> None:
    assert {b.job: b.flavor for b in decisions.binds} == expected.bound
    assert {p.job for p in decisions.preemptions} == expected.preempted
    assert set(waiting(decisions)) == expected.pending
    assert decisions.rejects == []


# -- TestSchedule ----------------------------------------------------------------------------

T = "TestSchedule"

SCHEDULE_CASES = [
    pytest.param(
        up(T, "use second flavor when the first has no preemption candidates; "
              "WhenCanPreempt: MayStopSearch"),
        # other-alpha (no cohort): on-demand 50 is all used by `admitted`, which has the same
        # priority (no candidate); spot: 20 <= 100 -> spot. (rota has no WhenCanPreempt
        # setting; without a candidate, MayStopSearch moves on to the next flavour too.)
        lambda: schedule_lab(
            kq("other-alpha", within="lower-priority")
            .limits("on-demand", nominal=cpu(50), borrowing=cpu(50))
            .limits("spot", nominal=cpu(100), borrowing=cpu(0)),
        ).jobs(
            admitted("eng-alpha/admitted", "other-alpha", "on-demand", 50),
            pending("eng-alpha/new", "other-alpha", 20),
        ),
        want(bound={"eng-alpha/new": "spot"}),
        id="use second flavor when the first has no preemption candidates; "
           "WhenCanPreempt: MayStopSearch"),
    pytest.param(
        up(T, "single clusterQueue full"),
        # sales: 40 of 50 used; 11 pods of 1 cpu: 40 + 11 = 51 > 50 -> pending.
        lambda: schedule_lab().jobs(
            admitted("sales/assigned", "sales", "default", 1, replicas=40),
            pending("sales/new", "sales", 1, replicas=11),
        ),
        want(pending={"sales/new"}),
        id="single clusterQueue full"),
    pytest.param(
        up(T, "admit in different cohorts"),
        # sales: 1 <= 50. eng-alpha: 51 pods > nominal 50, borrows 1 of the cohort's
        # on-demand 100 (alpha 50 + beta 50), within its borrowing limit 50 -> on-demand.
        lambda: schedule_lab().jobs(
            pending("sales/new", "sales", 1),
            pending("eng-alpha/new", "eng-alpha", 1, replicas=51),
        ),
        want(bound={"sales/new": "default", "eng-alpha/new": "on-demand"}),
        id="admit in different cohorts"),
    pytest.param(
        up(T, "admit in same cohort with no borrowing"),
        # 40 <= 50 in each queue's on-demand.
        lambda: schedule_lab().jobs(
            pending("eng-alpha/new", "eng-alpha", 1, replicas=40),
            pending("eng-beta/new", "eng-beta", 1, replicas=40),
        ),
        want(bound={"eng-alpha/new": "on-demand", "eng-beta/new": "on-demand"}),
        id="admit in same cohort with no borrowing"),
    pytest.param(
        up(T, "can borrow if cohort was assigned and will not result in overadmission"),
        # on-demand: alpha 45 (within nominal), beta 55 (borrows 5, limit 10): 45 + 55 = 100,
        # the cohort's whole on-demand.
        lambda: schedule_lab().jobs(
            pending("eng-alpha/new", "eng-alpha", 1, replicas=45),
            pending("eng-beta/new", "eng-beta", 1, replicas=55),
        ),
        want(bound={"eng-alpha/new": "on-demand", "eng-beta/new": "on-demand"}),
        id="can borrow if cohort was assigned and will not result in overadmission"),
    pytest.param(
        up(T, "can borrow if needs reclaim from cohort in different flavor"),
        # can-reclaim (alpha, 100): on-demand max 100 but beta holds 50 of the cohort's 100;
        # spot 100 <= nominal 100 but beta's user-spot borrows 1 of it and eng-alpha may not
        # reclaim (never): pending. needs-to-borrow (beta, 1): on-demand 50 + 1, borrowing 1
        # of the 50 alpha leaves idle (limit 10) -> on-demand.
        lambda: schedule_lab().jobs(
            pending("eng-alpha/can-reclaim", "eng-alpha", 100),
            pending("eng-beta/needs-to-borrow", "eng-beta", 1),
            admitted("eng-beta/user-on-demand", "eng-beta", "on-demand", 50),
            admitted("eng-beta/user-spot", "eng-beta", "spot", 1),
        ),
        want(bound={"eng-beta/needs-to-borrow": "on-demand"},
             pending={"eng-alpha/can-reclaim"}),
        id="can borrow if needs reclaim from cohort in different flavor"),
    pytest.param(
        up(T, "workload exceeds lending limit when borrow in cohort"),
        # lend-a keeps 3 - 2 = 1 back; the pool is 2 (lend-a) + 2 (lend-b) = 4, of which a
        # uses 2: lend-b may take 2 more < 3 -> pending.
        lambda: schedule_lab().jobs(
            admitted("lend/a", "lend-b", "default", 2),
            pending("lend/b", "lend-b", 3),
        ),
        want(pending={"lend/b"}),
        id="workload exceeds lending limit when borrow in cohort"),
    pytest.param(
        up(T, "hierarchical cohort respects lending limit when borrowing"),
        # The cohort tree root -> child holds no quota and nothing but child, so it is the flat
        # cohort child. cq-lender (10) lends at most 3; cq-borrower (5, borrowing limit 10)
        # uses its 5: it may borrow 3 < 4 -> pending.
        lambda: schedule_lab(
            kq("cq-lender", cohort="child").limits("on-demand", nominal=cpu(10), lending=cpu(3)),
            kq("cq-borrower", cohort="child")
            .limits("on-demand", nominal=cpu(5), borrowing=cpu(10)),
        ).jobs(
            admitted("eng-alpha/wl-existing", "cq-borrower", "on-demand", 5),
            pending("eng-alpha/wl-pending", "cq-borrower", 4),
        ),
        want(pending={"eng-alpha/wl-pending"}),
        id="hierarchical cohort respects lending limit when borrowing"),
    pytest.param(
        up(T, "hierarchical cohort allows borrowing up to lending limit"),
        # As above with lending limit 5: 5 <= 5 -> on-demand.
        lambda: schedule_lab(
            kq("cq-lender", cohort="child").limits("on-demand", nominal=cpu(10), lending=cpu(5)),
            kq("cq-borrower", cohort="child")
            .limits("on-demand", nominal=cpu(5), borrowing=cpu(10)),
        ).jobs(
            admitted("eng-alpha/wl-existing", "cq-borrower", "on-demand", 5),
            pending("eng-alpha/wl-borrowing", "cq-borrower", 5),
        ),
        want(bound={"eng-alpha/wl-borrowing": "on-demand"}),
        id="hierarchical cohort allows borrowing up to lending limit"),
    pytest.param(
        up(T, "preempt workloads in ClusterQueue and cohort"),
        # on-demand: 100 used of 100 (borrower 60 in alpha, low-1 30 + low-2 10 in beta).
        # preemptor (beta, 20): beta 40 + 20 = 60 > 50: low-2 (-2) goes, beta 50 <= nominal;
        # the cohort is then 60 + 30 + 20 = 110 > 100: alpha's borrower goes too (alpha
        # borrows 10). Spot: beta would borrow all of it, not allowed while preempting.
        lambda: schedule_lab().jobs(
            pending("eng-beta/preemptor", "eng-beta", 20),
            admitted("eng-alpha/use-all-spot", "eng-alpha", "spot", 100),
            admitted("eng-beta/low-1", "eng-beta", "on-demand", 30, priority=-1),
            admitted("eng-beta/low-2", "eng-beta", "on-demand", 10, priority=-2),
            admitted("eng-alpha/borrower", "eng-alpha", "on-demand", 60),
        ),
        want(preempted={"eng-alpha/borrower", "eng-beta/low-2"},
             pending={"eng-beta/preemptor"}),
        id="preempt workloads in ClusterQueue and cohort"),
    pytest.param(
        up(T, "multiple CQs need preemption"),
        # cohort other: on-demand 50 + 50, all used by use-all (other-alpha borrows 50).
        # preemptor (other-beta, 1, priority -1): within nominal, reclaims use-all (any).
        # pending (other-alpha, 1): alpha 100 + 1 > 50 + borrowing limit 50, and alpha never
        # preempts -> pending.
        lambda: schedule_lab(
            kq("other-alpha", cohort="other")
            .limits("on-demand", nominal=cpu(50), borrowing=cpu(50)),
            kq("other-beta", cohort="other", within="lower-priority", reclaim="any")
            .limits("on-demand", nominal=cpu(50), borrowing=cpu(10)),
        ).jobs(
            pending("eng-beta/preemptor", "other-beta", 1, priority=-1),
            pending("eng-alpha/pending", "other-alpha", 1, priority=1),
            admitted("eng-alpha/use-all", "other-alpha", "on-demand", 100),
        ),
        want(preempted={"eng-alpha/use-all"},
             pending={"eng-beta/preemptor", "eng-alpha/pending"}),
        id="multiple CQs need preemption"),
    pytest.param(
        up(T, "not enough resources to borrow, fallback to next flavor; "
              "WhenCanPreempt: TryNextFlavor"),
        # on-demand: alpha 60 > 50 must borrow 10, but beta holds 45 of the cohort's 100:
        # 100 - 45 = 55 < 60 (and alpha never preempts); spot 60 <= 100 -> spot.
        lambda: schedule_lab().jobs(
            pending("eng-alpha/new", "eng-alpha", 1, replicas=60),
            admitted("eng-beta/existing", "eng-beta", "on-demand", 1, replicas=45),
        ),
        want(bound={"eng-alpha/new": "spot"}),
        id="not enough resources to borrow, fallback to next flavor; "
           "WhenCanPreempt: TryNextFlavor"),
    pytest.param(
        up(T, "no overadmission while borrowing"),
        # eng-gamma's existing workload holds on-demand 51 and spot 100 (two pod sets in two
        # flavours: here two jobs). on-demand cohort 150: beta 50 and alpha 1 fit within
        # nominal; gamma 51 + 50 > 50 + 10; spot 100 of 100 used -> new-gamma pending.
        lambda: schedule_lab(
            kq("eng-gamma", cohort="eng", within="lower-priority", reclaim="any")
            .limits("on-demand", nominal=cpu(50), borrowing=cpu(10))
            .limits("spot", nominal=cpu(0), borrowing=cpu(100)),
        ).jobs(
            pending("eng-beta/new", "eng-beta", 1, replicas=50, created=-2),
            pending("eng-alpha/new-alpha", "eng-alpha", 1, created=-1),
            pending("eng-gamma/new-gamma", "eng-gamma", 1, replicas=50, created=0),
            admitted("eng-gamma/existing.borrow-on-demand", "eng-gamma", "on-demand", 1,
                     replicas=51),
            admitted("eng-gamma/existing.use-all-spot", "eng-gamma", "spot", 1, replicas=100),
        ),
        want(bound={"eng-beta/new": "on-demand", "eng-alpha/new-alpha": "on-demand"},
             pending={"eng-gamma/new-gamma"}),
        id="no overadmission while borrowing"),
    pytest.param(
        up(T, "two workloads can borrow different resources from the same flavor in the same "
              "cycle"),
        # r1 = cpu, r2 = memory (GiB). cq1..cq3 each 10 (+10 borrowing) of both: wl1 borrows
        # 6 of r1, wl2 6 of r2; the cohort has 30 of each -> both.
        lambda: lab(*_three_cqs()).jobs(
            pending("sales/wl1", "cq1", 16, priority=-1),
            pending("sales/wl2", "cq2", 0, mem_gib=16, priority=-2),
        ),
        want(bound={"sales/wl1": "default", "sales/wl2": "default"}),
        id="two workloads can borrow different resources from the same flavor in the same "
           "cycle"),
    pytest.param(
        up(T, "two workloads can borrow the same resources from the same flavor in the same "
              "cycle if fits in the cohort quota"),
        # r1: 16 + 14 = 30 <= the cohort's 30 -> both.
        lambda: lab(*_three_cqs()).jobs(
            pending("sales/wl1", "cq1", 16, priority=-1),
            pending("sales/wl2", "cq2", 14, priority=-2),
        ),
        want(bound={"sales/wl1": "default", "sales/wl2": "default"}),
        id="two workloads can borrow the same resources from the same flavor in the same "
           "cycle if fits in the cohort quota"),
    pytest.param(
        up(T, "only one workload can borrow one resources from the same flavor in the same "
              "cycle if cohort quota cannot fit"),
        # r1: 16 + 16 = 32 > 30: wl1 (priority -1) first; wl2 then finds 14 < 16 -> pending.
        lambda: lab(*_three_cqs()).jobs(
            pending("sales/wl1", "cq1", 16, priority=-1),
            pending("sales/wl2", "cq2", 16, priority=-2),
        ),
        want(bound={"sales/wl1": "default"}, pending={"sales/wl2"}),
        id="only one workload can borrow one resources from the same flavor in the same "
           "cycle if cohort quota cannot fit"),
    pytest.param(
        up(T, "preemption while borrowing, workload waiting for preemption should not block a "
              "borrowing workload in another CQ"),
        # Cohort: cq_shared lends 4. cq_a uses 2; a (3) would take cq_a to 5 > 0 + borrowing
        # limit 3, and its only same-queue job has its priority -> pending. b (cq_b, 1):
        # 4 - 2 = 2 left -> default.
        lambda: lab(
            kq("cq_shared", cohort="preemption-while-borrowing")
            .limits("default", nominal=cpu(4), borrowing=cpu(0)),
            kq("cq_a", cohort="preemption-while-borrowing", reclaim="lower-priority",
               borrow_within=True).limits("default", nominal=cpu(0), borrowing=cpu(3)),
            kq("cq_b", cohort="preemption-while-borrowing", reclaim="lower-priority",
               borrow_within=True).limits("default", nominal=cpu(0)),
        ).jobs(
            pending("eng-alpha/a", "cq_a", 3, created=1),
            pending("eng-beta/b", "cq_b", 1, created=2),
            admitted("eng-alpha/admitted_a", "cq_a", "default", 2),
        ),
        want(bound={"eng-beta/b": "default"}, pending={"eng-alpha/a"}),
        id="preemption while borrowing, workload waiting for preemption should not block a "
           "borrowing workload in another CQ"),
    pytest.param(
        up(T, "minimal preemptions when target queue is exhausted"),
        # Cohort other: 2 + 2 + 2 = 6, all used (alpha 3, beta 3: each borrows 1). incoming
        # (alpha, 2): alpha is above its nominal already, so it may only evict its own lower
        # priorities and end borrowing: a1 (-2) and a2 (-2) go, a3 (-1) stays: alpha
        # 1 + 2 = 3, the cohort 1 + 3 + 2 = 6. Beta's jobs have incoming's priority and would
        # only be reclaimed by a queue that ends within nominal.
        lambda: schedule_lab(
            kq("other-alpha", cohort="other", within="lower-priority", reclaim="any")
            .limits("on-demand", nominal=cpu(2)),
            kq("other-beta", cohort="other").limits("on-demand", nominal=cpu(2)),
            kq("other-gamma", cohort="other").limits("on-demand", nominal=cpu(2)),
        ).jobs(
            admitted("eng-alpha/a1", "other-alpha", "on-demand", 1, priority=-2),
            admitted("eng-alpha/a2", "other-alpha", "on-demand", 1, priority=-2),
            admitted("eng-alpha/a3", "other-alpha", "on-demand", 1, priority=-1),
            *[admitted(f"eng-beta/b{k}", "other-beta", "on-demand", 1) for k in (1, 2, 3)],
            pending("eng-alpha/incoming", "other-alpha", 2),
        ),
        want(preempted={"eng-alpha/a1", "eng-alpha/a2"}, pending={"eng-alpha/incoming"}),
        id="minimal preemptions when target queue is exhausted"),
    pytest.param(
        up(T, "A workload is only eligible to do preemptions if it fits fully within nominal "
              "quota"),
        # incoming (3) > other-alpha's nominal 2 by itself: it could only borrow, and without
        # borrowWithinCohort it may not preempt -> pending, nobody evicted.
        lambda: schedule_lab(
            kq("other-alpha", cohort="other", within="lower-priority", reclaim="any")
            .limits("on-demand", nominal=cpu(2)),
            kq("other-beta", cohort="other").limits("on-demand", nominal=cpu(2)),
        ).jobs(
            admitted("eng-alpha/a1", "other-alpha", "on-demand", 1, priority=-1),
            admitted("eng-beta/b1", "other-beta", "on-demand", 1, priority=-1),
            pending("eng-alpha/incoming", "other-alpha", 3, priority=1),
        ),
        want(pending={"eng-alpha/incoming"}),
        id="A workload is only eligible to do preemptions if it fits fully within nominal "
           "quota"),
    pytest.param(
        up(T, "multiple preemptions without borrowing"),
        # Each queue (2) is full with one priority-0 job; each preemptor (100, 2) evicts it
        # within its own queue, in the same cycle.
        lambda: schedule_lab(*_other_pair(2, 2)).jobs(
            admitted("eng-alpha/a1", "other-alpha", "default", 2),
            admitted("eng-beta/b1", "other-beta", "default", 2),
            pending("eng-alpha/preemptor", "other-alpha", 2, priority=100),
            pending("eng-beta/preemptor", "other-beta", 2, priority=100),
        ),
        want(preempted={"eng-alpha/a1", "eng-beta/b1"},
             pending={"eng-alpha/preemptor", "eng-beta/preemptor"}),
        id="multiple preemptions without borrowing"),
    pytest.param(
        up(T, "multiple preemptions preemption possible after earlier workload fits"),
        # fit (alpha, 1 <= 1) is admitted; preemptor (beta, 2) evicts b1 in beta (2).
        lambda: schedule_lab(*_other_pair(1, 2)).jobs(
            admitted("eng-beta/b1", "other-beta", "default", 2),
            pending("eng-alpha/fit", "other-alpha", 1, priority=100),
            pending("eng-beta/preemptor", "other-beta", 2, priority=99),
        ),
        want(bound={"eng-alpha/fit": "default"}, preempted={"eng-beta/b1"},
             pending={"eng-beta/preemptor"}),
        id="multiple preemptions preemption possible after earlier workload fits"),
    pytest.param(
        up(T, "multiple preemptions skip preemption when shared limited resource"),
        # Cohort 2 + 2 + 1 = 5, 4 used. preemptor (alpha, 3) evicts a1 and borrows 1: 2 + 3 = 5.
        # pretending-preemptor (beta, 3) would need b1 gone and 1 more: 3 + 3 = 6 > 5 ->
        # it evicts nobody.
        lambda: schedule_lab(
            *_other_pair(2, 2, borrow_within=True),
            kq("resource-bank", cohort="other").limits("default", nominal=cpu(1)),
        ).jobs(
            admitted("eng-alpha/a1", "other-alpha", "default", 2),
            admitted("eng-beta/b1", "other-beta", "default", 2),
            pending("eng-alpha/preemptor", "other-alpha", 3, priority=100),
            pending("eng-beta/pretending-preemptor", "other-beta", 3, priority=99),
        ),
        want(preempted={"eng-alpha/a1"},
             pending={"eng-alpha/preemptor", "eng-beta/pretending-preemptor"}),
        id="multiple preemptions skip preemption when shared limited resource"),
    pytest.param(
        up(T, "not enough resources"),
        # sales: 100 > 50 -> pending.
        lambda: schedule_lab().jobs(pending("sales/new", "sales", 100)),
        want(pending={"sales/new"}),
        id="not enough resources"),
    pytest.param(
        up(T, "prefer first preemption flavor when second flavor requires both reclaim and cq "
              "priority preemption"),
        # on-demand: 5 + 6 > 10: evict a1 (priority 50 < 100) -> 6. spot: 5 + 5 + 6 > 10 + 0
        # needs a2 and b1 both. The first flavour wins: a1.
        lambda: schedule_lab(*_gpu_pair()).jobs(
            admitted("eng-alpha/a1", "other-alpha", "on-demand", gpus=range5(0), priority=50),
            admitted("eng-alpha/a2", "other-alpha", "spot", gpus=range5(5), priority=50),
            admitted("eng-beta/b1", "other-beta", "spot", gpus=range5(10), priority=50),
            pending("eng-alpha/preemptor", "other-alpha", gpus=6, priority=100),
        ),
        want(preempted={"eng-alpha/a1"}, pending={"eng-alpha/preemptor"}),
        id="prefer first preemption flavor when second flavor requires both reclaim and cq "
           "priority preemption"),
    pytest.param(
        up(T, "prefer first preemption flavor when second flavor also requires cq preemption"),
        # on-demand: 6 + 5 > 10: evict a1. spot: b1 borrows but has priority 9001 > 100, so
        # spot too needs a2: same mode, the first flavour wins: a1.
        lambda: schedule_lab(*_gpu_pair()).jobs(
            admitted("eng-alpha/a1", "other-alpha", "on-demand", gpus=tuple(range(6)),
                     priority=50),
            admitted("eng-alpha/a2", "other-alpha", "spot", gpus=range5(6), priority=50),
            admitted("eng-beta/b1", "other-beta", "spot", gpus=range5(11), priority=9001),
            pending("eng-alpha/preemptor", "other-alpha", gpus=5, priority=100),
        ),
        want(preempted={"eng-alpha/a1"}, pending={"eng-alpha/preemptor"}),
        id="prefer first preemption flavor when second flavor also requires cq preemption"),
    pytest.param(
        up(T, "workload requiring reclaimation prioritized over wl in another full cq"),
        # Cohort on-demand 10 + 10 + 0 = 20, 15 used (CQ1 5, CQ3 10). WL2 (CQ2, 10) is within
        # CQ2's nominal: it goes first and reclaims 5 from CQ3, lowest priority first
        # (Admitted-Workload-2). WL1 (CQ1, 10): 5 + 10 > 10, it would borrow 5 and CQ1 never
        # preempts -> pending.
        lambda: schedule_lab(
            kq("CQ1", cohort="other").limits("on-demand", nominal={"gpu": 10_000}),
            kq("CQ2", cohort="other", reclaim="any").limits("on-demand",
                                                            nominal={"gpu": 10_000}),
            kq("CQ3", cohort="other").limits("on-demand", nominal={"gpu": 0}),
        ).jobs(
            admitted("eng-alpha/Admitted-Workload-1", "CQ1", "on-demand", gpus=range5(0)),
            pending("eng-alpha/WL1", "CQ1", gpus=10, created=0),
            pending("eng-beta/WL2", "CQ2", gpus=10, created=1),
            admitted("eng-gamma/Admitted-Workload-2", "CQ3", "on-demand", gpus=range5(5)),
            admitted("eng-gamma/Admitted-Workload-3", "CQ3", "on-demand", gpus=range5(10),
                     priority=1),
        ),
        want(preempted={"eng-gamma/Admitted-Workload-2"},
             pending={"eng-alpha/WL1", "eng-beta/WL2"}),
        id="workload requiring reclaimation prioritized over wl in another full cq"),
    pytest.param(
        up(T, "capacity not blocked when lending clusterqueue can reclaim "
              "(ReclaimWithinCohort=Any)"),
        # ClusterQueueA (2) uses 1; a2-pending (2): 1 + 2 > 2 -> pending. A can always take
        # its quota back (any), so B may borrow the idle 1 -> b1-pending on-demand.
        lambda: schedule_lab(*_lender_pair("any")).jobs(*_lender_jobs()),
        want(bound={"eng-beta/b1-pending": "on-demand"}, pending={"eng-alpha/a2-pending"}),
        id="capacity not blocked when lending clusterqueue can reclaim "
           "(ReclaimWithinCohort=Any)"),
    pytest.param(
        up(T, "don't assign flavor if there are no candidates for preemption"),
        # on-demand: the cohort's 1 is cq2's, used within its nominal by `admitted`: no
        # candidate; spot: cq1 borrows cq2's idle 1 (limit 1) -> spot.
        lambda: schedule_lab(
            kq("cq1", cohort="cohort", within="lower-priority", reclaim="any",
               borrow_within=True)
            .limits("on-demand", nominal=cpu(0), borrowing=cpu(1))
            .limits("spot", nominal=cpu(0), borrowing=cpu(1)),
            kq("cq2", cohort="cohort")
            .limits("on-demand", nominal=cpu(1)).limits("spot", nominal=cpu(1)),
        ).jobs(
            admitted("eng-alpha/admitted", "cq2", "on-demand", 1, since=-1),
            pending("eng-alpha/new", "cq1", 1, priority=100),
        ),
        want(bound={"eng-alpha/new": "spot"}),
        id="don't assign flavor if there are no candidates for preemption"),
    pytest.param(
        up(T, "admit to second flavor when first needs preemption; "
              "WhenCanPreempt: TryNextFlavor"),
        # on-demand 1 is held by blocker (priority 50 < 100: it could be evicted), spot 1 is
        # free: spot, nobody evicted.
        lambda: schedule_lab(
            kq("preempt-attempts-cq", within="lower-priority")
            .limits("on-demand", nominal=cpu(1)).limits("spot", nominal=cpu(1)),
        ).jobs(
            admitted("eng-alpha/blocker", "preempt-attempts-cq", "on-demand", 1, priority=50),
            pending("eng-alpha/test-wl", "preempt-attempts-cq", 1, priority=100),
        ),
        want(bound={"eng-alpha/test-wl": "spot"}),
        id="admit to second flavor when first needs preemption; "
           "WhenCanPreempt: TryNextFlavor"),
    pytest.param(
        up(T, "admit workload with zero-quantity request for resource not in ClusterQueue"),
        # A zero GPU request is no GPU request: 1 cpu <= 50 -> default.
        lambda: schedule_lab().jobs(pending("sales/zero-resource-wl", "sales", 1, gpus=0)),
        want(bound={"sales/zero-resource-wl": "default"}),
        id="admit workload with zero-quantity request for resource not in ClusterQueue"),
    pytest.param(
        up(T, "preempt when workload requests zero of a resource not defined in ClusterQueue"),
        # 4 + 2 > 4: low-priority (-1) is evicted for preemptor (0).
        lambda: schedule_lab(
            kq("preempt-zero-gpu-cq", within="lower-priority")
            .limits("default", nominal=cpu(4)),
        ).jobs(
            pending("sales/preemptor", "preempt-zero-gpu-cq", 2),
            admitted("sales/low-priority", "preempt-zero-gpu-cq", "default", 4, priority=-1),
        ),
        want(preempted={"sales/low-priority"}, pending={"sales/preemptor"}),
        id="preempt when workload requests zero of a resource not defined in ClusterQueue"),
    pytest.param(
        up(T, "BorrowingOverPreemption preference: borrow in second flavor instead of "
              "preempting in first"),
        # rota has no flavour-fungibility settings; its fixed order (any flavour with room,
        # borrowing allowed, before any preemption) is Kueue's answer here. on-demand 5 is
        # held by low-bop (-1 < 0); spot: bop-cq borrows bop-lender's 5 (limit 5) -> spot.
        lambda: schedule_lab(
            kq("bop-cq", cohort="bop-cohort", within="lower-priority")
            .limits("on-demand", nominal=cpu(5), borrowing=cpu(0))
            .limits("spot", nominal=cpu(0), borrowing=cpu(5)),
            kq("bop-lender", cohort="bop-cohort")
            .limits("on-demand", nominal=cpu(0)).limits("spot", nominal=cpu(5)),
        ).jobs(
            admitted("default/low-bop", "bop-cq", "on-demand", 5, priority=-1),
            pending("default/high-bop", "bop-cq", 5),
        ),
        want(bound={"default/high-bop": "spot"}),
        id="BorrowingOverPreemption preference: borrow in second flavor instead of "
           "preempting in first"),
    pytest.param(
        up(T, "prefer reclamation over cq priority based preemption"),
        # Kueue: on-demand needs a1 evicted within other-alpha (5 + 6 > 10); spot needs only
        # b1 reclaimed (other-beta borrows all 5 of spot): reclaim is the better mode, so
        # spot, and b1 is preempted.
        # rota, too, prefers a flavour where only other queues' jobs are taken back.
        lambda: schedule_lab(
            kq("other-alpha", cohort="other", within="lower-priority", reclaim="lower-priority")
            .limits("on-demand", nominal={"gpu": 10_000}).limits("spot", nominal={"gpu": 10_000}),
            kq("other-beta", cohort="other", within="lower-priority", reclaim="lower-priority")
            .limits("on-demand", nominal={"gpu": 0}).limits("spot", nominal={"gpu": 0}),
        ).jobs(
            admitted("eng-alpha/a1", "other-alpha", "on-demand", gpus=range5(0), priority=50),
            admitted("eng-beta/b1", "other-beta", "spot", gpus=range5(5), priority=50),
            pending("eng-alpha/preemptor", "other-alpha", gpus=6, priority=100),
        ),
        want(preempted={"eng-beta/b1"}, pending={"eng-alpha/preemptor"}),
        id="prefer reclamation over cq priority based preemption"),
    pytest.param(
        up(T, "capacity blocked when lending clusterqueue not guaranteed to reclaim "
              "(ReclaimWithinCohort=LowerPriority)"),
        # Kueue: a2-pending (2 <= A's nominal 2) is in preempt mode with no candidate; A cannot
        # always reclaim (lower-priority), so the scheduler reserves min(2, 2 - 1) = 1 of A's
        # quota for it: B's b1-pending no longer fits -> both pending.
        # rota holds the same part of A's nominal quota (Cycle.hold_owed).
        lambda: schedule_lab(*_lender_pair("lower-priority")).jobs(*_lender_jobs()),
        want(pending={"eng-alpha/a2-pending", "eng-beta/b1-pending"}),
        id="capacity blocked when lending clusterqueue not guaranteed to reclaim "
           "(ReclaimWithinCohort=LowerPriority)"),
    pytest.param(
        up(T, "capacity blocked when lending clusterqueue not guaranteed to reclaim "
              "(ReclaimWithinCohort=Never)"),
        # As above with reclaim never: Kueue reserves 1 for a2-pending -> both pending.
        lambda: schedule_lab(*_lender_pair("never")).jobs(*_lender_jobs()),
        want(pending={"eng-alpha/a2-pending", "eng-beta/b1-pending"}),
        id="capacity blocked when lending clusterqueue not guaranteed to reclaim "
           "(ReclaimWithinCohort=Never)"),
]


def range5(first: int) -> tuple[int, ...]:
    return tuple(range(first, first + 5))


def _three_cqs():
    limits = dict(nominal={"cpu": 10_000, "memory": 10 * GIB},
                  borrowing={"cpu": 10_000, "memory": 10 * GIB})
    return [kq(f"cq{k}", cohort="co", within="lower-priority", reclaim="any")
            .limits("default", **limits) for k in (1, 2, 3)]


def _other_pair(alpha: float, beta: float, borrow_within: bool = False):
    return [kq(name, cohort="other", within="lower-priority", borrow_within=borrow_within)
            .limits("default", nominal=cpu(n)) for name, n in (("other-alpha", alpha),
                                                                 ("other-beta", beta))]


def _gpu_pair():
    """other-alpha: 10 GPUs in on-demand and in spot, evicts lower priorities; other-beta:
    no quota of its own, never preempts."""
    return [
        kq("other-alpha", cohort="other", within="lower-priority", reclaim="lower-priority")
        .limits("on-demand", nominal={"gpu": 10_000}).limits("spot", nominal={"gpu": 10_000}),
        kq("other-beta", cohort="other")
        .limits("on-demand", nominal={"gpu": 0}).limits("spot", nominal={"gpu": 0}),
    ]


def _lender_pair(reclaim: str):
    return [kq("ClusterQueueA", cohort="root", reclaim=reclaim)
            .limits("on-demand", nominal={"gpu": 2000}),
            kq("ClusterQueueB", cohort="root").limits("on-demand", nominal={"gpu": 0})]


def _lender_jobs():
    return [admitted("eng-alpha/a1-admitted", "ClusterQueueA", "on-demand", gpus=(0,)),
            pending("eng-alpha/a2-pending", "ClusterQueueA", gpus=2),
            pending("eng-beta/b1-pending", "ClusterQueueB", gpus=1)]


@pytest.mark.parametrize("upstream,build,expected", SCHEDULE_CASES)
def test_one_kueue_cycle(upstream, build, expected):
    assert_outcome(decide(build().build(), POLICY), expected)


# -- TestLastSchedulingContext: a cycle, a workload deleted, a second cycle ------------------

L = "TestLastSchedulingContext"


def _cohort_trio():
    """eng-cohort-alpha/beta/theta: within never, reclaim lower-priority; on-demand 50 (+50),
    spot 100 (+0). theta's TryNextFlavor settings are not rota's; the cases below do not
    depend on them."""
    return [kq(name, cohort="cohort", reclaim="lower-priority")
            .limits("on-demand", nominal=cpu(50), borrowing=cpu(50))
            .limits("spot", nominal=cpu(100), borrowing=cpu(0))
            for name in ("eng-cohort-alpha", "eng-cohort-beta", "eng-cohort-theta")]


def _first_flavor_jobs(deleted: bool):
    low = [] if deleted else [admitted("default/low-1", "eng-alpha", "on-demand", 50)]
    return lab(kq("eng-alpha", within="lower-priority")
               .limits("on-demand", nominal=cpu(50), borrowing=cpu(50))
               .limits("spot", nominal=cpu(10), borrowing=cpu(0))
               ).jobs(*low, pending("default/preemptor", "eng-alpha", 20))


def _preempt_on_first(deleted: bool):
    alpha = [] if deleted else [
        admitted("default/placeholder-alpha", "eng-cohort-alpha", "on-demand", 150,
                 priority=-1)]
    return lab(*_cohort_trio()).jobs(
        *alpha,
        admitted("default/placeholder-theta-spot", "eng-cohort-theta", "spot", 100),
        pending("default/new", "eng-cohort-theta", 20))


def _second_full_preempt_on_first(deleted: bool):
    queues = [
        kq("eng-cohort-alpha", cohort="cohort", within="lower-priority", reclaim="any")
        .limits("on-demand", nominal=cpu(0), borrowing=cpu(60))
        .limits("spot", nominal=cpu(30), borrowing=cpu(30)),
        kq("eng-cohort-beta", cohort="cohort", within="lower-priority", reclaim="any")
        .limits("on-demand", nominal=cpu(30), borrowing=cpu(30))
        .limits("spot", nominal=cpu(30), borrowing=cpu(30)),
        kq("eng-cohort-shared", cohort="cohort").limits("on-demand", nominal=cpu(30)),
    ]
    alpha2 = [] if deleted else [
        admitted("default/alpha2", "eng-cohort-alpha", "on-demand", 22, since=0)]
    return lab(*queues).jobs(
        admitted("default/alpha1", "eng-cohort-alpha", "on-demand", 22, since=-1),
        *alpha2,
        admitted("default/alpha3", "eng-cohort-alpha", "spot", 22),
        admitted("default/beta1", "eng-cohort-beta", "spot", 22),
        pending("default/new", "eng-cohort-beta", 22))


LAST_CONTEXT_CASES = [
    pytest.param(
        up(L, "scheduling on the first flavor is unblocked after some workloads were deleted"),
        # Cycle 1: on-demand 50 + 20 > 50 (no cohort; low-1 has the same priority), spot
        # 20 > 10 -> pending. low-1 deleted; cycle 2: 20 <= 50 -> on-demand.
        _first_flavor_jobs,
        want(pending={"default/preemptor"}),
        want(bound={"default/preemptor": "on-demand"}),
        id="scheduling on the first flavor is unblocked after some workloads were deleted"),
    pytest.param(
        up(L, "borrow before next flavor"),
        # workload1 (beta, 20 <= 50) -> on-demand. borrower (alpha, 50 used): on-demand by
        # borrowing 20 of the cohort's 150 - 70 (limit 50) before trying spot -> on-demand.
        lambda deleted: lab(*_cohort_trio()).jobs(
            admitted("default/placeholder", "eng-cohort-alpha", "on-demand", 50),
            pending("default/borrower", "eng-cohort-alpha", 20),
            pending("default/workload1", "eng-cohort-beta", 20)),
        want(bound={"default/borrower": "on-demand", "default/workload1": "on-demand"}),
        None,
        id="borrow before next flavor"),
    pytest.param(
        up(L, "when the next flavor is full, but can borrow on first"),
        # theta: on-demand 40 + 20 = 60 > 50 borrows 10 of the cohort's 150 - 80; spot is
        # full (100 of 100) -> on-demand.
        lambda deleted: lab(*_cohort_trio()).jobs(
            admitted("default/placeholder", "eng-cohort-alpha", "on-demand", 40),
            admitted("default/placeholder1", "eng-cohort-theta", "on-demand", 40),
            admitted("default/placeholder2", "eng-cohort-theta", "spot", 100),
            pending("default/workload", "eng-cohort-theta", 20)),
        want(bound={"default/workload": "on-demand"}),
        None,
        id="when the next flavor is full, but can borrow on first"),
    pytest.param(
        up(L, "when the next flavor is full, but can preempt on first"),
        # Cycle 1: on-demand 150 of 150 is placeholder-alpha's (alpha borrows 100, priority
        # -1); theta's 20 is within its nominal 50: reclaim placeholder-alpha. Spot is full
        # and theta may not borrow it (limit 0). placeholder-alpha deleted; cycle 2: new ->
        # on-demand.
        _preempt_on_first,
        want(preempted={"default/placeholder-alpha"}, pending={"default/new"}),
        want(bound={"default/new": "on-demand"}),
        id="when the next flavor is full, but can preempt on first"),
    pytest.param(
        up(L, "TryNextFlavor, but second flavor is full and can preempt on first"),
        # on-demand: 30 (beta) + 30 (shared) = 60, 44 used by alpha (nominal 0): new (22)
        # within beta's nominal 30 needs 6 more: reclaim alpha2, the most recently admitted.
        # spot: 60, 44 used; beta 22 + 22 = 44 > 30 would borrow, not allowed while
        # preempting. alpha2 deleted; cycle 2: new -> on-demand.
        _second_full_preempt_on_first,
        want(preempted={"default/alpha2"}, pending={"default/new"}),
        want(bound={"default/new": "on-demand"}),
        id="TryNextFlavor, but second flavor is full and can preempt on first"),
]


@pytest.mark.parametrize("upstream,build,first,second", LAST_CONTEXT_CASES)
def test_two_kueue_cycles_around_a_deletion(upstream, build, first, second):
    assert_outcome(decide(build(False).build(), POLICY), first)
    if second is not None:
        assert_outcome(decide(build(True).build(), POLICY), second)


# -- TestFitsDedupsOverlappingVictims --------------------------------------------------------


def test_a_victim_already_leaving_is_counted_once():
    """kubernetes-sigs/kueue@ff69552e79 pkg/scheduler/scheduler_test.go
    TestFitsDedupsOverlappingVictims: cq (10) holds victim (6, already being preempted) and
    other (2). An incoming 9 fits only if the victim were subtracted twice: 10 - 2 = 8 < 9 ->
    it does not fit, and nothing else may be evicted (cq never preempts)."""
    victim = admitted("ns/victim", "cq", "default", 6).state(JobState.PREEMPTING)
    snap = lab(kq("cq").limits("default", nominal=cpu(10))).jobs(
        victim, admitted("ns/other", "cq", "default", 2), pending("ns/incoming", "cq", 9),
    ).build()
    assert_outcome(decide(snap, POLICY), want(pending={"ns/incoming"}))


# -- where rota deliberately differs -----------------------------------------------------------


def test_a_flavour_is_chosen_again_after_the_cycles_earlier_binds():
    """kubernetes-sigs/kueue@ff69552e79 pkg/scheduler/scheduler_test.go TestSchedule/"cannot
    borrow if cohort was assigned and would result in overadmission". Kueue assigns each head
    its flavour when the cycle starts: beta's 56 was assigned on-demand (borrowing 6); after
    alpha's 45, on-demand has 100 - 45 = 55 < 56 and beta is left pending this cycle, to be
    admitted in spot the next. rota tries beta's flavours again on the quota book as alpha
    left it (docs/scheduler.md, "rota vs Kueue"): beta starts in spot in this cycle, which is
    where Kueue puts it one cycle later. Neither over-admits."""
    d = decide(schedule_lab().jobs(
        pending("eng-alpha/new", "eng-alpha", 1, replicas=45),
        pending("eng-beta/new", "eng-beta", 1, replicas=56),
    ).build(), POLICY)
    assert_outcome(d, want(bound={"eng-alpha/new": "on-demand", "eng-beta/new": "spot"}))


def test_a_resource_a_quota_leaves_out_is_not_limited():
    """kubernetes-sigs/kueue@ff69552e79 pkg/scheduler/scheduler_test.go TestSchedule/"cannot
    borrow resource not listed in clusterQueue". Kueue: eng-alpha's quota names cpu only, so
    a GPU request is unavailable there and stays pending. In rota a resource a flavour's quota
    leaves out is not limited (docs/scheduler.md, Admission): the job starts. A quota of 0 GPUs
    gives Kueue's answer."""
    d = decide(schedule_lab().jobs(pending("eng-alpha/new", "eng-alpha", gpus=1)).build(), POLICY)
    assert_outcome(d, want(bound={"eng-alpha/new": "on-demand"}))
    zero = kq("eng-alpha", cohort="eng").limits("on-demand", nominal={"cpu": 50_000, "gpu": 0})
    d = decide(schedule_lab(zero).jobs(pending("eng-alpha/new", "eng-alpha", gpus=1)).build(),
               POLICY)
    assert_outcome(d, want(pending={"eng-alpha/new"}))
