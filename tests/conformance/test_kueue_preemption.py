"""Kueue's classic preemption tests, translated: which running workloads one incoming workload
evicts (pkg/scheduler/preemption/preemption_test.go: TestPreemption, TestCandidatesOrdering).

A Workload is a job of one pod set (``count`` pods: ``replicas``), a ClusterQueue a queue, a
cohort a (flat) cohort, a ResourceFlavor a flavour without a GPU model pattern. A workload
"admitted at t" runs since t, charged to the flavour of its admission. Kueue's test hands the
preemptor a flavour assignment with a mode per resource (Fit / Preempt); rota has no such
input: one ``run_cycle`` computes it. Where Kueue's own flavour assigner would have admitted
the incoming workload (its mode is forced to Preempt by the test), rota starts it, and the
case says so: the victims (none) are Kueue's all the same.

Kueue's ClusterQueues split cpu and memory into resource groups of their own flavours
(standalone: cpu in ``default``, memory in ``alpha`` / ``beta``); a rota job is charged
wholly to one flavour, so each flavour here gives the resources of the other groups a
nominal quota of 0 (a resource a rota quota leaves out is unlimited). A ClusterQueue without
a ``preemption`` stanza never preempts (Kueue's defaults): such queues say so. Quota is in
raw units: cpu in milli, memory in MiB (the ``cohort-three`` queues' 2 bytes of memory are 2
MiB here). Nodes are ``roomy``: only quota decides.

The victims and their reasons are Kueue's: ``InClusterQueue`` is rota's ``priority``,
``InCohortReclamation`` and ``InCohortReclaimWhileBorrowing`` are ``reclaim``.
"""

from __future__ import annotations

import pytest

from builders import bound, cluster, codes, decide, job, queue
from conformance.kit import KUEUE, Upstream, roomy
from rota.core import JobState

POLICY = {"preset": "default", "backfill": "none"}
FILE = "pkg/scheduler/preemption/preemption_test.go"
NOW = 100.0  # Kueue's ``now``: when the admitted workloads reserved their quota
CYCLE = 160.0  # when the cycle runs
PRIORITY, RECLAIM = "priority", "reclaim"


def up(test: str, case: str) -> Upstream:
    return Upstream(KUEUE, FILE, test, case)


# -- building a case -------------------------------------------------------------------------


def cq(name: str, cohort: str | None = None, within: str = "never", reclaim: str = "never",
       borrow_threshold: int | None = None, borrow_within: bool = False):
    """A ClusterQueue with Kueue's preemption defaults (never, never) unless told;
    ``borrow_within`` is ``borrowWithinCohort: LowerPriority`` (with ``borrow_threshold``,
    its ``maxPriorityThreshold``)."""
    q = queue(name).preemption(within=within, reclaim=reclaim)
    if cohort is not None:
        q = q.cohort(cohort)
    if borrow_within:
        q = q.borrow_within_cohort("lower-priority", max_priority_threshold=borrow_threshold)
    return q


def cpu(cores: float) -> dict[str, int]:
    return {"cpu": int(cores * 1000)}


def res(cores: float = 0, mem_mib: int = 0) -> dict[str, int]:
    return {"cpu": int(cores * 1000), "memory": mem_mib}


GI = 1024  # MiB


def default_cluster_queues():
    """TestPreemption's defaultClusterQueues."""
    within_lp = dict(within="lower-priority")
    bwc = dict(borrow_within=True, borrow_threshold=0)
    return [
        cq("standalone", **within_lp)
        .limits("default", nominal=res(6, 0))
        .limits("alpha", nominal=res(0, 3 * GI))
        .limits("beta", nominal=res(0, 3 * GI)),
        cq("c1", cohort="cohort", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=res(6, 3 * GI), borrowing=res(6, 3 * GI)),
        cq("c2", cohort="cohort", within="never", reclaim="any")
        .limits("default", nominal=res(6, 3 * GI), borrowing=res(6, 3 * GI)),
        cq("d1", cohort="cohort-no-limits", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=res(6, 3 * GI)),
        cq("d2", cohort="cohort-no-limits", within="never", reclaim="any")
        .limits("default", nominal=res(6, 3 * GI)),
        cq("l1", cohort="legion", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=res(6, 3 * GI), borrowing=res(12, 6 * GI)),
        cq("preventStarvation", within="lower-or-newer-equal-priority")
        .limits("default", nominal=cpu(6)),
        cq("a_standard", cohort="with_shared_cq", within="never", reclaim="lower-priority", **bwc)
        .limits("default", nominal=cpu(1), borrowing=cpu(12)),
        cq("b_standard", cohort="with_shared_cq", within="lower-priority", reclaim="any", **bwc)
        .limits("default", nominal=cpu(1), borrowing=cpu(12)),
        cq("a_best_effort", cohort="with_shared_cq", within="never", reclaim="lower-priority",
           **bwc)
        .limits("default", nominal=cpu(1), borrowing=cpu(12)),
        cq("b_best_effort", cohort="with_shared_cq", within="never", reclaim="lower-priority",
           **bwc)
        .limits("default", nominal=cpu(0), borrowing=cpu(13)),
        cq("shared", cohort="with_shared_cq").limits("default", nominal=cpu(10)),
        cq("lend1", cohort="cohort-lend", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=cpu(6), lending=cpu(4)),
        cq("lend2", cohort="cohort-lend", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=cpu(6), lending=cpu(2)),
        cq("a", cohort="cohort-three", within="lower-priority", reclaim="any")
        .limits("default", nominal=res(2, 2)),
        cq("b", cohort="cohort-three").limits("default", nominal=res(2, 2)),
        cq("c", cohort="cohort-three").limits("default", nominal=res(2, 2)),
    ]


def lab(*queues):
    """The flavours default, alpha and beta, a roomy node, and ``queues``."""
    return cluster().nodes(roomy("n")).flavor("default").flavor("alpha").flavor("beta") \
        .queue(*queues)


def kueue(*jobs):
    return lab(*default_cluster_queues()).jobs(*jobs)


def admitted(id: str, q: str, cores: float = 0, mem_mib: int = 0, priority: int = 0,
             since: float = NOW, flavor: str = "default", created: float = 0.0):
    """A workload that reserved quota in ``flavor`` of ``q`` at ``since``."""
    return job(id).queue(q).cpu(cores).memory(mem_mib / GI).priority(priority) \
        .submitted(created).running_on(("n", []), since=since, flavor=flavor)


def incoming(q: str, cores: float = 0, mem_mib: int = 0, priority: int = 0,
             created: float = NOW):
    return job("in").queue(q).cpu(cores).memory(mem_mib / GI).priority(priority) \
        .submitted(created)


def case(upstream: Upstream, build, expected: dict[str, str], starts: bool = False):
    """One translated case, named by its upstream case: ``build()`` gives the cluster,
    ``expected`` Kueue's targets (victim -> reason), ``starts`` whether ``in`` starts at once."""
    return pytest.param(upstream, build, expected, starts, id=upstream.case)


def run(snapshot, expected: dict[str, str], starts: bool = False) -> None:
    """Kueue's targets (victim -> reason), all evicted for ``in``; ``in`` waits for them, or
    (``starts``: Kueue's flavour assigner would give it Fit) starts at once."""
    d = decide(snapshot, POLICY, CYCLE)
    assert {p.job: p.reason for p in d.preemptions} == expected
    assert {p.by for p in d.preemptions} <= {"in"}
    assert ("in" in bound(d)) is starts


# -- TestPreemption --------------------------------------------------------------------------

T = "TestPreemption"

PREEMPTION_CASES = [
    case(
        up(T, "preempt lowest priority"),
        # standalone cpu 6, used 2 + 2 + 2. in (1, 2): candidates below 1: low (-1), mid (0);
        # low first: 4 + 2 = 6 <= 6.
        lambda: kueue(
            admitted("low", "standalone", 2, priority=-1),
            admitted("mid", "standalone", 2),
            admitted("high", "standalone", 2, priority=1),
            incoming("standalone", 2, priority=1),
        ),
        {"low": PRIORITY}),
    case(
        up(T, "preempt multiple"),
        # in (1, 3): without low 4 + 3 = 7 > 6; without mid too 2 + 3 = 5 <= 6; low is
        # needed (mid alone: 4 + 3 = 7).
        lambda: kueue(
            admitted("low", "standalone", 2, priority=-1),
            admitted("mid", "standalone", 2),
            admitted("high", "standalone", 2, priority=1),
            incoming("standalone", 3, priority=1),
        ),
        {"low": PRIORITY, "mid": PRIORITY}),
    case(
        up(T, "no preemption for low priority"),
        # in (-1, 1): 6 + 1 > 6 and nothing runs below -1.
        lambda: kueue(
            admitted("low", "standalone", 3, priority=-1),
            admitted("mid", "standalone", 3),
            incoming("standalone", 1, priority=-1),
        ),
        {}),
    case(
        up(T, "not enough low priority workloads"),
        # in (0, 4): only low (-1) is below; without it 3 + 4 = 7 > 6.
        lambda: kueue(
            admitted("low", "standalone", 3, priority=-1),
            admitted("mid", "standalone", 3),
            incoming("standalone", 4),
        ),
        {}),
    case(
        up(T, "some free quota, preempt low priority"),
        # used 1 + 1 + 3 = 5; in (1, 2): 7 > 6; without low 4 + 2 = 6.
        lambda: kueue(
            admitted("low", "standalone", 1, priority=-1),
            admitted("mid", "standalone", 1),
            admitted("high", "standalone", 3, priority=1),
            incoming("standalone", 2, priority=1),
        ),
        {"low": PRIORITY}),
    case(
        up(T, "minimal set excludes low priority"),
        # used 1 + 2 + 3 = 6; in (1, 2): without low 5 + 2 = 7 > 6, without mid too
        # 3 + 2 = 5; fill-back: low back, 4 + 2 = 6 <= 6 -> mid alone.
        lambda: kueue(
            admitted("low", "standalone", 1, priority=-1),
            admitted("mid", "standalone", 2),
            admitted("high", "standalone", 3, priority=1),
            incoming("standalone", 2, priority=1),
        ),
        {"mid": PRIORITY}),
    case(
        up(T, "reclaim quota from borrower"),
        # cohort: c1 6 + c2 6 = 12, used c1 3 + c2 9 (c2 borrows 3). in (c1, 1, 3):
        # c1 3 + 3 = 6 <= nominal, so c1 takes back what it lent; c2-mid (0) is below 1, c2-high
        # (1) is not; other queues first: without c2-mid the cohort has 3 free.
        lambda: kueue(
            admitted("c1-low", "c1", 3, priority=-1),
            admitted("c2-mid", "c2", 3),
            admitted("c2-high", "c2", 6, priority=1),
            incoming("c1", 3, priority=1),
        ),
        {"c2-mid": RECLAIM}),
    case(
        up(T, "reclaim quota if workload requests 0 resources for a resource at nominal quota"),
        # as above, with c1-low holding c1's whole memory (3Gi of 3Gi); in asks 0 memory:
        # memory plays no part, c1 3 + 3 <= 6 cpu -> c2-mid.
        lambda: kueue(
            admitted("c1-low", "c1", 3, 3 * GI, priority=-1),
            admitted("c2-mid", "c2", 3),
            admitted("c2-high", "c2", 6, priority=1),
            incoming("c1", 3, 0, priority=1),
        ),
        {"c2-mid": RECLAIM}),
    case(
        up(T, "no workloads borrowing"),
        # c1 4, c2 4 of 12. in (c1, 1, 4): nobody borrows and c1-high is not below 1: no
        # target. (Kueue's flavour assigner gives Fit: c1 may take min(6 + 6 - 4, 12 - 8) = 4
        # >= 4, borrowing 2; the test forces Preempt. rota starts it by borrowing.)
        lambda: kueue(
            admitted("c1-high", "c1", 4, priority=1),
            admitted("c2-low-1", "c2", 4, priority=-1),
            incoming("c1", 4, priority=1),
        ),
        {},
        True),
    case(
        up(T, "not enough workloads borrowing"),
        # c1 4, c2 8 (borrows 2): cohort full. in (c1, 1, 4): c1 4 + 4 = 8 > 6, so c2's jobs
        # may go only if c1 ends within nominal, which it cannot (c1-high stays): pass
        # without borrowing fails (c2-low-1 out, c1 still 8), and they are not candidates
        # while c1 borrows.
        lambda: kueue(
            admitted("c1-high", "c1", 4, priority=1),
            admitted("c2-low-1", "c2", 4, priority=-1),
            admitted("c2-low-2", "c2", 4, priority=-1),
            incoming("c1", 4, priority=1),
        ),
        {}),
    case(
        up(T, "preempting locally and borrowing other resources in cohort, "
              "without cohort candidates"),
        # cpu: c1 4 + c2 8 = 12 of 12. in (c1, 1, cpu 4, memory 5Gi): memory 5Gi > c1's 3Gi,
        # so c1 ends borrowing and c2-low-1 (taken only if c1 ends within nominal) is no
        # target; c1-low goes: cpu 0 + 4, cohort 8 + 4 = 12; memory 5Gi of the cohort's 6Gi.
        lambda: kueue(
            admitted("c1-low", "c1", 4, priority=-1),
            admitted("c2-low-1", "c2", 4, priority=-1),
            admitted("c2-high-2", "c2", 4, priority=1),
            incoming("c1", 4, 5 * GI, priority=1),
        ),
        {"c1-low": PRIORITY}),
    case(
        up(T, "preempting locally and borrowing same resource in cohort"),
        # c1 8 (borrows 2), c2 4: cohort full. in (c1, 1, 4): c2 does not borrow, so only
        # c1's own: c1-low (-1) first: c1 4 + 4 = 8 <= 6 + 6, cohort 4 + 4 + 4 = 12.
        lambda: kueue(
            admitted("c1-med", "c1", 4),
            admitted("c1-low", "c1", 4, priority=-1),
            admitted("c2-low-1", "c2", 4, priority=-1),
            incoming("c1", 4, priority=1),
        ),
        {"c1-low": PRIORITY}),
    case(
        up(T, "preempting locally and borrowing same resource in cohort; "
              "no borrowing limit in the cohort"),
        # as above in d1 / d2 (no borrowing limit).
        lambda: kueue(
            admitted("d1-med", "d1", 4),
            admitted("d1-low", "d1", 4, priority=-1),
            admitted("d2-low-1", "d2", 4, priority=-1),
            incoming("d1", 4, priority=1),
        ),
        {"d1-low": PRIORITY}),
    case(
        up(T, "preempting locally and borrowing other resources in cohort, "
              "with cohort candidates"),
        # cpu: c1 4 + c2 7 (borrows 1) = 11 of 12. in (c1, 1, cpu 2, memory 5Gi): memory
        # makes c1 borrow, so c2's jobs are no targets; c1-med (0) goes: cpu 0 + 2, cohort
        # 7 + 2 = 9 <= 12.
        lambda: kueue(
            admitted("c1-med", "c1", 4),
            admitted("c2-low-1", "c2", 5, priority=-1),
            admitted("c2-low-2", "c2", 1, priority=-1),
            admitted("c2-low-3", "c2", 1, priority=-1),
            incoming("c1", 2, 5 * GI, priority=1),
        ),
        {"c1-med": PRIORITY}),
    case(
        up(T, "preempting locally and not borrowing same resource in 1-queue cohort"),
        # l1 alone in its cohort: 6, all used (4 + 2). in (1, 4): without l1-low 4 + 4 = 8
        # > 6, without l1-med too 0 + 4; fill-back: l1-low back, 2 + 4 = 6 -> l1-med alone.
        lambda: kueue(
            admitted("l1-med", "l1", 4),
            admitted("l1-low", "l1", 2, priority=-1),
            incoming("l1", 4, priority=1),
        ),
        {"l1-med": PRIORITY}),
    case(
        up(T, "do not reclaim borrowed quota from same priority for "
              "withinCohort=ReclaimFromLowerPriority"),
        # c1 2, c2 8 (borrows 2). in (c1, 0, 4): c1 2 + 4 = 6 <= nominal, but c1 reclaims
        # only lower priorities and every job is 0.
        lambda: kueue(
            admitted("c1", "c1", 2),
            admitted("c2-1", "c2", 4),
            admitted("c2-2", "c2", 4),
            incoming("c1", 4),
        ),
        {}),
    case(
        up(T, "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny"),
        # c1 8 (borrows 2), c2 2. in (c2, 0, 4): c2 2 + 4 = 6 <= nominal; c2 reclaims any:
        # c1-1 (0) before c1-2 (1): cohort 4 + 2 + 4 = 10 <= 12.
        lambda: kueue(
            admitted("c1-1", "c1", 4),
            admitted("c1-2", "c1", 4, priority=1),
            admitted("c2", "c2", 2),
            incoming("c2", 4),
        ),
        {"c1-1": RECLAIM}),
    case(
        up(T, "preempt from all ClusterQueues in cohort"),
        # c1 5, c2 7 (borrows 1): full. in (c1, 0, 4): c1 5 + 4 = 9 > 6, so c2-low is taken
        # only if c1 ends within nominal: pass without borrowing: c2-low (other queue first;
        # c2 4), c1 still 9; c1-low: c1 2 + 4 = 6, cohort 4 + 6 = 10 <= 12; fill-back: c2-low
        # back, 7 + 6 = 13 > 12 -> both.
        lambda: kueue(
            admitted("c1-low", "c1", 3, priority=-1),
            admitted("c1-mid", "c1", 2),
            admitted("c2-low", "c2", 3, priority=-1),
            admitted("c2-mid", "c2", 4),
            incoming("c1", 4),
        ),
        {"c1-low": PRIORITY, "c2-low": RECLAIM}),
    case(
        up(T, "can't preempt workloads in ClusterQueue for withinClusterQueue=Never"),
        # c2 never evicts its own, and c1 borrows nothing: no target. (Kueue's flavour
        # assigner gives Fit: c2 may take min(6 + 6 - 3, 12 - 3) = 9 >= 4; rota starts it.)
        lambda: kueue(
            admitted("c2-low", "c2", 3, priority=-1),
            incoming("c2", 4, priority=1),
        ),
        {},
        True),
    case(
        up(T, "preempt newer workloads with the same priority"),
        # preventStarvation (lower-or-newer-equal-priority) 6, all used. in (1, 2, created 15 s
        # before wl2 and wl3): wl2 and wl3 (1, newer) are candidates, wl1 (2) is not; the most
        # recently admitted first: wl2 (now + 1 s).
        lambda: kueue(
            admitted("wl1", "preventStarvation", 2, priority=2),
            admitted("wl2", "preventStarvation", 2, priority=1, created=NOW, since=NOW + 1),
            admitted("wl3", "preventStarvation", 2, priority=1, created=NOW),
            incoming("preventStarvation", 2, priority=1, created=NOW - 15),
        ),
        {"wl2": PRIORITY}),
    case(
        up(T, "use BorrowWithinCohort; don't allow preempting a lower-priority workload with "
              "priority above MaxPriorityThreshold, if borrowing is required even after the "
              "preemption"),
        # b_standard 10 (borrows 9). in (a_standard, 2, 10): 10 > 1, a_standard borrows even
        # with b_standard gone, and b_standard (1) is above the threshold 0: no target.
        lambda: kueue(
            admitted("b_standard", "b_standard", 10, priority=1),
            incoming("a_standard", 10, priority=2),
        ),
        {}),
    case(
        up(T, "use BorrowWithinCohort; allow preempting a lower-priority workload with "
              "priority above MaxPriorityThreshold, if borrowing is not required after the "
              "preemption"),
        # b_standard 13: the cohort is full. in (a_standard, 2, 1): 0 + 1 <= a_standard's
        # nominal 1, so it takes back what it lent, whatever the threshold.
        lambda: kueue(
            admitted("b_standard", "b_standard", 13, priority=1),
            incoming("a_standard", 1, priority=2),
        ),
        {"b_standard": RECLAIM}),
    case(
        up(T, "use BorrowWithinCohort; don't allow for preemption of lower-priority workload "
              "from the same ClusterQueue"),
        # a_standard 13 (the cohort's all); a_standard never evicts its own, nobody else
        # borrows: no target.
        lambda: kueue(
            admitted("a_standard", "a_standard", 13, priority=1),
            incoming("a_standard", 1, priority=2),
        ),
        {}),
    case(
        up(T, "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold "
              "and already above nominal"),
        # a_standard 11 (borrows 10), b_standard 2 (borrows 1): full. in (b_standard, 3, 1):
        # b 2 + 1 > 1. a_standard's jobs (1) are above the threshold 0: taken only if b ends
        # within nominal. Pass with borrowing first: b_standard_1 (1) goes, b 1 + 1 = 2,
        # cohort 13.
        lambda: kueue(
            admitted("a_standard_1", "a_standard", 10, priority=1),
            admitted("a_standard_2", "a_standard", 1, priority=1),
            admitted("b_standard_1", "b_standard", 1, priority=1),
            admitted("b_standard_2", "b_standard", 1, priority=2),
            incoming("b_standard", 1, priority=3),
        ),
        {"b_standard_1": PRIORITY}),
    case(
        up(T, "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads "
              "below threshold"),
        # b_standard 11 (borrows 10), a_best_effort 2 (borrows 1): full. in (b_standard, 2, 2)
        # borrows. Order: a_best_effort_lower (-2), a_best_effort_low (-1), b_standard_mid
        # (1). lower out: 1 free; a_best_effort is then at nominal, low is no longer taken;
        # mid out: 2 free; fill-back: lower back leaves 1 < 2 -> both.
        lambda: kueue(
            admitted("b_standard_high", "b_standard", 10, priority=2),
            admitted("b_standard_mid", "b_standard", 1, priority=1),
            admitted("a_best_effort_low", "a_best_effort", 1, priority=-1),
            admitted("a_best_effort_lower", "a_best_effort", 1, priority=-2),
            incoming("b_standard", 2, priority=2),
        ),
        {"a_best_effort_lower": RECLAIM, "b_standard_mid": PRIORITY}),
    case(
        up(T, "reclaim quota from lender"),
        # lend1 keeps 6 - 4 = 2, lend2 6 - 2 = 4; the pool is 4 + 2 = 6. lend1 3 (1 from the
        # pool), lend2 7 (3 from the pool): 2 free. in (lend1, 1, 3): 3 + 3 = 6 <= nominal;
        # lend2 borrows: lend2-mid (0) goes, the pool has 5 free >= 3.
        lambda: kueue(
            admitted("lend1-low", "lend1", 3, priority=-1),
            admitted("lend2-mid", "lend2", 3),
            admitted("lend2-high", "lend2", 4, priority=1),
            incoming("lend1", 3, priority=1),
        ),
        {"lend2-mid": RECLAIM}),
    case(
        up(T, "preempt from all ClusterQueues in cohort-lend"),
        # lend1 5 (2 kept + 3 pool), lend2 7 (4 kept + 3 pool): the pool is full. in (lend1,
        # 0, 4): 5 + 4 > 6, so lend2-low goes only if lend1 ends within nominal. Pass without
        # borrowing: lend2-low (other queue first; pool 3 used), lend1 still 9; lend1-low:
        # lend1 2 + 4 = 6 <= nominal, 4 of it from the pool (0 used); fill-back: lend2-low
        # back leaves the pool 3 free < 4 -> both.
        lambda: kueue(
            admitted("lend1-low", "lend1", 3, priority=-1),
            admitted("lend1-mid", "lend1", 2),
            admitted("lend2-low", "lend2", 3, priority=-1),
            admitted("lend2-mid", "lend2", 4),
            incoming("lend1", 4),
        ),
        {"lend1-low": PRIORITY, "lend2-low": RECLAIM}),
    case(
        up(T, "cannot preempt from other ClusterQueues if exceeds requestable quota including "
              "lending limit"),
        # lend1 may hold at most its kept 2 + the pool 6 = 8 < 9: never admissible.
        lambda: kueue(
            admitted("lend2-low", "lend2", 10, priority=-1),
            incoming("lend1", 9),
        ),
        {}),
    case(
        up(T, "preemptions from cq when target queue is exhausted for the single requested "
              "resource"),
        # cohort-three cpu 2 + 2 + 2, used a 3 (borrows 1) + b 3 (borrows 1). in (a, 0, 2):
        # a is at or above nominal, so one pass with borrowing, own jobs only (b's may go only
        # if a ends within nominal): a1 (-2): cohort 5 + 2 = 7 > 6; a2 (-2): 4 + 2 = 6;
        # fill-back: a1 back, 7 -> both.
        lambda: kueue(
            admitted("a1", "a", 1, priority=-2),
            admitted("a2", "a", 1, priority=-2),
            admitted("a3", "a", 1, priority=-1),
            admitted("b1", "b", 1),
            admitted("b2", "b", 1),
            admitted("b3", "b", 1),
            incoming("a", 2),
        ),
        {"a1": PRIORITY, "a2": PRIORITY}),
    case(
        up(T, "preemptions from cq when target queue is exhausted for two requested resources"),
        # as above, each job also holding 1 of memory (a 3 of 2, b 3 of 2); in asks 2 + 2.
        lambda: kueue(
            admitted("a1", "a", 1, 1, priority=-2),
            admitted("a2", "a", 1, 1, priority=-2),
            admitted("a3", "a", 1, 1, priority=-1),
            admitted("b1", "b", 1, 1),
            admitted("b2", "b", 1, 1),
            admitted("b3", "b", 1, 1),
            incoming("a", 2, 2),
        ),
        {"a1": PRIORITY, "a2": PRIORITY}),
    case(
        up(T, "preemptions from cq when target queue is exhausted for one requested resource, "
              "but not the other"),
        # as the single-resource case; in also asks 2 of memory, of which nobody uses any.
        lambda: kueue(
            admitted("a1", "a", 1, priority=-2),
            admitted("a2", "a", 1, priority=-2),
            admitted("a3", "a", 1, priority=-1),
            admitted("b1", "b", 1),
            admitted("b2", "b", 1),
            admitted("b3", "b", 1),
            incoming("a", 2, 2),
        ),
        {"a1": PRIORITY, "a2": PRIORITY}),
    case(
        up(T, "allow preemption from other cluster queues if target cq is not exhausted for "
              "the requested resource"),
        # a 1, b 5 (borrows 3): full. in (a, 0, 2): a 1 + 2 > 2 but a is below nominal: pass
        # without borrowing first. b5 (-1), then b's 0s while b borrows (b1, b2: b at 2), then
        # a1: a 0 + 2 = 2, cohort 2 + 2 = 4; fill-back: b2, b1 back (6), b5 not (7) -> b5, a1.
        lambda: kueue(
            admitted("a1", "a", 1, priority=-1),
            admitted("b1", "b", 1),
            admitted("b2", "b", 1),
            admitted("b3", "b", 1),
            admitted("b4", "b", 1),
            admitted("b5", "b", 1, priority=-1),
            incoming("a", 2),
        ),
        {"a1": PRIORITY, "b5": RECLAIM}),
]


@pytest.mark.parametrize("upstream,build,expected,starts", PREEMPTION_CASES)
def test_kueue_preemption(upstream, build, expected, starts):
    run(build().build(), expected, starts)


# -- TestCandidatesOrdering, seen through the victim chosen ----------------------------------

C = "TestCandidatesOrdering"


def _own_pair(*jobs, preemptor_priority: int, need: float = 1):
    """Queue ``preemptor`` (no cohort) full with ``jobs``; ``in`` needs ``need`` cpu."""
    used = sum(j.build().request.cpu_milli for j in jobs) / 1000
    return lab(cq("preemptor", within="lower-priority").limits("default", nominal=cpu(used))) \
        .jobs(*jobs, incoming("preemptor", need, priority=preemptor_priority))


def _cohort_pair(own, other, preemptor_priority: int):
    """Queue ``preemptor`` (nominal 2) runs ``own`` (1 cpu), queue ``other`` (nominal 0)
    borrows 1 cpu for ``other``: the cohort is full and ``in`` (1 cpu) is within the
    preemptor's nominal, so either job makes room."""
    return lab(
        cq("preemptor", cohort="co", within="lower-priority", reclaim="lower-priority")
        .limits("default", nominal=cpu(2)),
        cq("other", cohort="co").limits("default", nominal=cpu(0)),
    ).jobs(own, other, incoming("preemptor", 1, priority=preemptor_priority))


ORDERING_CASES = [
    case(
        up(C, "workloads sorted by priority"),
        # high (10) and low (-10) both below in (20); one must go: the lower priority.
        lambda: _own_pair(admitted("high", "preemptor", 1, priority=10),
                          admitted("low", "preemptor", 1, priority=-10),
                          preemptor_priority=20),
        {"low": PRIORITY}),
    case(
        up(C, "workload from different CQ first"),
        # preemptorCq (own queue) and other (borrowing queue), both 10, in 11: the other
        # queue's job first.
        lambda: _cohort_pair(admitted("preemptorCq", "preemptor", 1, priority=10),
                             admitted("other", "other", 1, priority=10),
                             preemptor_priority=11),
        {"other": RECLAIM}),
    case(
        up(C, "old workloads last"),
        # older (now - 1 s), current (now), younger (now + 1 s): the order is younger,
        # current, older; two must go: younger and current.
        lambda: _own_pair(admitted("older", "preemptor", 1, since=NOW - 1),
                          admitted("younger", "preemptor", 1, since=NOW + 1),
                          admitted("current", "preemptor", 1, since=NOW),
                          preemptor_priority=1, need=2),
        {"younger": PRIORITY, "current": PRIORITY}),
    case(
        up(C, "workloads from different CQ are sorted based on priority and timestamp"),
        # with admission fair sharing on, mid_lq_usage (own queue, 10, usage 0.5) and
        # high_lq_usage_different_cq (other queue, 1, usage 1.0): local queue usage is
        # compared only within a queue; the other queue's job first (rota has no local
        # queues: the usage plays no part).
        lambda: _cohort_pair(admitted("mid_lq_usage", "preemptor", 1, priority=10),
                             admitted("high_lq_usage_different_cq", "other", 1, priority=1),
                             preemptor_priority=11),
        {"high_lq_usage_different_cq": RECLAIM}),
]


@pytest.mark.parametrize("upstream,build,expected,starts", ORDERING_CASES)
def test_kueue_candidates_ordering(upstream, build, expected, starts):
    run(build().build(), expected, starts)


def test_kueue_candidates_ordering_evicted_workload_first():
    # TestCandidatesOrdering/evicted workload first: a workload already evicted comes before
    # every other. Queue full with other (10) and evicted (already being preempted); in (20)
    # needs 1: the room on its way back is taken, nobody else is evicted.
    upstream = up(C, "evicted workload first")
    snap = _own_pair(admitted("other", "preemptor", 1, priority=10),
                     admitted("evicted", "preemptor", 1).state(JobState.PREEMPTING),
                     preemptor_priority=20).build()
    d = decide(snap, POLICY, CYCLE)
    assert d.preemptions == [], upstream
    assert codes(d, "in") == ["preempting"], upstream


# -- where rota deliberately differs -----------------------------------------------------------


def test_a_victim_taken_while_borrowing_keeps_its_queue_at_nominal():
    """kubernetes-sigs/kueue@ff69552e79 pkg/scheduler/preemption/preemption_test.go
    TestPreemption/"use BorrowWithinCohort; allow preempting a lower-priority workload from
    another ClusterQueue while borrowing". with_shared_cq: 1 + 1 + 1 + 0 + 10 = 13; used
    a_best_effort 10 (borrows 9), b_best_effort 1 (borrows 1): 2 free. in (a_standard, 10)
    borrows 9 whatever goes; both jobs are -1, below it and not above the threshold 0.

    Kueue takes a_best_effort_low (its queue still borrows at its turn), which takes
    a_best_effort from 10 to 0, below its nominal 1. rota's minimal-victims does not take a
    victim for a job that borrows where that leaves the victim's queue below nominal
    (docs/scheduler.md, "rota vs Kueue": the victim would be owed its quota back and take it
    at once); b_best_effort_low alone frees 1 (3 < 10), so nobody is evicted and in waits.
    ``preemption: classic`` gives Kueue's answer."""
    snap = kueue(admitted("a_best_effort_low", "a_best_effort", 10, priority=-1),
                 admitted("b_best_effort_low", "b_best_effort", 1, priority=-1),
                 incoming("a_standard", 10)).build()
    rota = decide(snap, POLICY, CYCLE)
    assert rota.preemptions == [] and "in" not in bound(rota)
    run_classic = decide(snap, {**POLICY, "preemption": "classic"}, CYCLE)
    assert {p.job: p.reason for p in run_classic.preemptions} == {"a_best_effort_low": RECLAIM}
