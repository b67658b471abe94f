"""Volcano's scheduler tests, translated: which pods one scheduling session binds, evicts or
leaves pending (pkg/scheduler/actions/{allocate,preempt}/*_test.go,
pkg/scheduler/plugins/{capacity,proportion}/*_test.go).

The translation:

- A PodGroup whose ``minMember`` equals its pods, all alike, is one job of that many
  replicas (a gang). A PodGroup of ``minMember`` 0 or 1 needs none of its pods to run
  together, so each pod is a job of its own (named after the pod), with the group's queue and
  priority; a pod with a priority of its own (``BuildPodWithPriority``) keeps it.
- A pod's cpu, memory and ``nvidia.com/gpu`` (or ``nvidia.com/A100``) requests are the
  replica's; ``G`` and ``Gi`` both read as GiB (no case turns on the difference).
  ``volcano.sh/preemptable: false`` is ``preemptible: false``.
- A Volcano queue is a queue. Under the ``capacity`` plugin, queues share the cluster: they
  form one cohort, a queue's ``deserved`` is its nominal quota (0 for a resource ``deserved``
  leaves out), its ``capability`` is nominal + borrowing limit (no limit where it is unset),
  and what the nodes hold beyond the queues' deserved is lent by a queue ``rest`` that runs
  nothing. Under the ``proportion`` plugin, where queue weights decide, queues share the
  cluster by weight (docs/scheduler.md, "Fair sharing between queues"): each has its weight
  and a nominal quota of 0 in a cohort whose queue ``pool`` lends the nodes' capacity, under
  the ``fair-sharing`` preset; where the weights do not decide the outcome, a queue's
  ``capability`` is its nominal quota (no cohort): the case says why.
- A priority class is a job priority.

Volcano's session runs the actions its test names; here one ``run_cycle`` does the work of
``allocate``, ``preempt`` and ``reclaim`` together. So a preemptor for which the nodes and its
queue have room is bound (Volcano's ``allocate`` would bind it; its preempt tests run
``preempt`` alone and check only that nothing is evicted), and a preemptor whose victims are
evicted waits with reason ``preempting``; where Volcano pipelines it to a node, the next cycle,
after its victims left, binds it there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from builders import apply_all, cluster, decide, job, node, queue, rejected, waiting
from conformance.kit import VOLCANO, Upstream

POLICY = {"preset": "default", "backfill": "none"}
FAIR = {"preset": "fair-sharing", "backfill": "none"}
GIB = 1024

ALLOCATE = "pkg/scheduler/actions/allocate/allocate_test.go"
PREEMPT = "pkg/scheduler/actions/preempt/preempt_test.go"
RECLAIM = "pkg/scheduler/actions/reclaim/reclaim_test.go"
CAPACITY = "pkg/scheduler/plugins/capacity/capacity_test.go"
PROPORTION = "pkg/scheduler/plugins/proportion/proportion_test.go"

HIGH, LOW = 100000, 10  # TestPreempt's priority classes


def up(path: str, test: str, case: str) -> Upstream:
    return Upstream(VOLCANO, path, test, case)


# -- building a case -------------------------------------------------------------------------


def pod(id: str, q: str, cpu: float, gib: float, gpus: int = 0, priority: int = 0,
        preemptible: bool = True, on: str | None = None, devices: tuple[int, ...] = (),
        selector: dict[str, str] | None = None, created: float = 0.0, replicas: int = 1):
    """A job for one Volcano pod (or a gang of ``replicas`` alike); ``on``: running there,
    holding GPU ``devices``."""
    b = job(id).queue(q).cpu(cpu).memory(gib).priority(priority).submitted(created)
    if gpus:
        b = b.gpus(gpus)
    if not preemptible:
        b = b.preemptible(False)
    if selector:
        b = b.selector(tuple(selector.items()))
    if replicas > 1:
        b = b.replicas(replicas)
    if on is not None:
        b = b.running_on(*[(on, list(devices))] * replicas)
    return b


def res(cpu: float = 0, gib: float = 0, gpu: float = 0) -> dict[str, int]:
    """A resource list in quota units (cpu and gpu in milli, memory in MiB)."""
    return {"cpu": round(cpu * 1000), "memory": round(gib * GIB), "gpu": round(gpu * 1000)}


@dataclass(frozen=True)
class VQ:
    """A Volcano queue under the capacity plugin: ``deserved`` and ``capability`` as ``res``
    lists (None: unset; a capability resource of 0 is unset too, as Volcano reads it)."""

    name: str
    deserved: dict[str, int] | None = None
    capability: dict[str, int] | None = None


def _capacity_of(built) -> dict[str, int]:
    return {"cpu": sum(n.cpu_milli for n in built), "memory": sum(n.memory_mib for n in built),
            "gpu": 1000 * sum(len(n.devices) for n in built)}


def capacity_cluster(nodes, *queues: VQ):
    """Nodes and capacity queues as one cohort ``cluster``, with ``rest`` lending what the
    nodes hold beyond the queues' deserved."""
    built = [n.build() for n in nodes]
    total = _capacity_of(built)
    c = cluster().nodes(*built)
    deserved_sum = dict.fromkeys(total, 0)
    for vq in queues:
        nominal = {r: (vq.deserved or {}).get(r, 0) for r in total}
        for r in total:
            deserved_sum[r] += nominal[r]
        borrowing = {r: max(0, amount - nominal[r])
                     for r, amount in (vq.capability or {}).items() if amount > 0}
        c = c.queue(queue(vq.name).cohort("cluster").limits(nominal=nominal, borrowing=borrowing))
    rest = {r: max(0, total[r] - deserved_sum[r]) for r in total}
    if any(rest.values()):
        c = c.queue(queue("rest").cohort("cluster").limits(nominal=rest))
    return c


def proportion_cluster(nodes, *queues: tuple[str, float]):
    """Nodes and proportion queues (name, weight): each with a nominal quota of 0 in one
    cohort ``cluster`` whose queue ``pool`` lends the nodes' capacity."""
    built = [n.build() for n in nodes]
    total = _capacity_of(built)
    c = cluster().nodes(*built).queue(queue("pool").cohort("cluster").limits(nominal=total))
    for name, weight in queues:
        c = c.queue(queue(name).cohort("cluster").weight(weight)
                    .limits(nominal=dict.fromkeys(total, 0)))
    return c


def capped(name: str, capability: dict[str, int]):
    """A proportion queue whose capability is what holds it: a queue without cohort."""
    return queue(name).limits(nominal={r: a for r, a in capability.items() if a > 0})


@dataclass(frozen=True)
class Want:
    """Volcano's outcome of the session: bound (job -> node of its first replica), evicted,
    left pending, rejected (rota's screen: can never run here), and, where Volcano pipelines
    a preemptor, where the next cycle binds it once its victims left."""

    bound: dict[str, str] = field(default_factory=dict)
    evicted: frozenset[str] = frozenset()
    pending: frozenset[str] = frozenset()
    rejected: frozenset[str] = frozenset()
    then: dict[str, str] = field(default_factory=dict)


def want(bound=None, evicted=(), pending=(), rejected=(), then=None) -> Want:
    return Want(dict(bound or {}), frozenset(evicted), frozenset(pending), frozenset(rejected),
                dict(then or {}))


def first_nodes(decisions) -> dict[str, str]:
    return {b.job: b.placement.replicas[0].node for b in decisions.binds}


def assert_outcome(snapshot, expected: Want, policy: dict = POLICY) -> None:
    d = decide(snapshot, policy)
    assert first_nodes(d) == expected.bound
    assert {p.job for p in d.preemptions} == expected.evicted
    assert set(waiting(d)) == expected.pending
    assert set(rejected(d)) == expected.rejected
    for preemptor in {p.by for p in d.preemptions}:
        assert "preempting" in [r.code.value for r in waiting(d)[preemptor].reasons]
    if expected.then:
        after = decide(apply_all(snapshot, d, 0.0).snapshot, policy)
        assert {j: n for j, n in first_nodes(after).items() if j in expected.then} == expected.then


# == allocate: TestAllocate, TestFareShareAllocate ============================================

A = "TestAllocate"
FS = "TestFareShareAllocate"

ALLOCATE_CASES = [
    pytest.param(
        up(ALLOCATE, A, "prepredicate failed: node selector does not match"),
        # pg1 (minMember 1): p1 asks for nodeRole=master, p2 for nodeRole=worker; n1 is a
        # worker (2 cpu, 4Gi). p2 (1 cpu) -> n1. No node is a master: rota rejects p1 as
        # never-fits where Volcano leaves it pending (neither binds it).
        lambda: cluster().nodes(node("n1").cpu(2).memory(4).label("nodeRole", "worker")).queue(
            queue("c1"),
        ).jobs(
            pod("c1/p1", "c1", 1, 1, selector={"nodeRole": "master"}),
            pod("c1/p2", "c1", 1, 1, selector={"nodeRole": "worker"}, created=1),
        ),
        want(bound={"c1/p2": "n1"}, rejected={"c1/p1"}),
        id="prepredicate failed: node selector does not match"),
    pytest.param(
        up(ALLOCATE, A, "one Job with two Pods on one node"),
        # pg1 (minMember 0): two pods of 1 cpu, 1G; n1 has 2 cpu, 4Gi: 1 + 1 <= 2 -> both.
        lambda: cluster().nodes(node("n1").cpu(2).memory(4)).queue(queue("c1")).jobs(
            pod("c1/p1", "c1", 1, 1),
            pod("c1/p2", "c1", 1, 1, created=1),
        ),
        want(bound={"c1/p1": "n1", "c1/p2": "n1"}),
        id="one Job with two Pods on one node"),
    pytest.param(
        up(ALLOCATE, A, "high priority queue should not block others"),
        # p1 (queue c1) asks for 3 cpu, more than n1's 2: it never fits (rota rejects it,
        # Volcano leaves it pending). p2 (queue c2, 1 cpu) -> n1.
        lambda: cluster().nodes(node("n1").cpu(2).memory(4)).queue(queue("c1"), queue("c2")).jobs(
            pod("c1/p1", "c1", 3, 1),
            pod("c1/p2", "c2", 1, 1, created=1),
        ),
        want(bound={"c1/p2": "n1"}, rejected={"c1/p1"}),
        id="high priority queue should not block others"),
    pytest.param(
        up(ALLOCATE, FS, "queue's one jobs has no pending tasks, should be put back to queues "
                         "for next job"),
        # q-1: pod-1 (1 cpu) runs on node-1 (5 cpu, 5G); pod-2 (2 cpu): 1 + 2 <= 5 -> node-1.
        lambda: cluster().nodes(node("node-1").cpu(5).memory(5)).queue(queue("q-1")).jobs(
            pod("ns-1/pod-1", "q-1", 1, 1, on="node-1"),
            pod("ns-1/pod-2", "q-1", 2, 2),
        ),
        want(bound={"ns-1/pod-2": "node-1"}),
        id="queue's one jobs has no pending tasks, should be put back to queues for next job"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), ALLOCATE_CASES)
def test_allocate(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected)


WEIGHTED_ALLOCATE_CASES = [
    pytest.param(
        up(ALLOCATE, A, "two Jobs on one node"),
        # n1: 2 cpu, 4G. c1 and c2 (weight 1 each) ask for 2 cpu each (pg1 and pg2, minMember
        # 0, two 1-cpu pods each): deserved 2 * 1/2 = 1 cpu each. c1 -> pg1-p-1; c2, below
        # its share, -> pg2-p-1; n1 is full, each queue at its deserved.
        lambda: proportion_cluster([node("n1").cpu(2).memory(4)], ("c1", 1), ("c2", 1)).jobs(
            pod("c1/pg1-p-1", "c1", 1, 1), pod("c1/pg1-p-2", "c1", 1, 1, created=1),
            pod("c2/pg2-p-1", "c2", 1, 1, created=2), pod("c2/pg2-p-2", "c2", 1, 1, created=3),
        ),
        want(bound={"c1/pg1-p-1": "n1", "c2/pg2-p-1": "n1"},
             pending={"c1/pg1-p-2", "c2/pg2-p-2"}),
        id="two Jobs on one node"),
    pytest.param(
        up(ALLOCATE, FS, "queue's DRF share value will be updated and its priority will "
                         "change before it is put back into the priority queue"),
        # node-1: 5 cpu, 5G. q-1 runs pod-small-1 (1 cpu 1G) and asks pod-large-1 (2, 2G);
        # q-2 asks pod-large-2 (2, 2G) and pod-small-2 (1, 1G). Deserved 2.5 cpu each.
        # q-2 (share 0) -> pod-large-2 (share 2/2.5 = 0.8); q-1 (0.4) -> pod-large-1 (1.2;
        # node-1 full); pod-small-2: no room. Inside q-2 equal job shares leave the job name
        # (pg-large-2 before pg-small-2), here their submission.
        lambda: proportion_cluster([node("node-1").cpu(5).memory(5)], ("q-1", 1), ("q-2", 1))
        .jobs(
            pod("ns-1/pod-small-1", "q-1", 1, 1, on="node-1"),
            pod("ns-1/pod-large-1", "q-1", 2, 2),
            pod("ns-1/pod-large-2", "q-2", 2, 2, created=1),
            pod("ns-1/pod-small-2", "q-2", 1, 1, created=2),
        ),
        want(bound={"ns-1/pod-large-1": "node-1", "ns-1/pod-large-2": "node-1"},
             pending={"ns-1/pod-small-2"}),
        id="queue's DRF share value will be updated and its priority will change before it "
           "is put back into the priority queue"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), WEIGHTED_ALLOCATE_CASES)
def test_allocate_by_weight(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected, FAIR)


# == preempt: TestPreempt, TestTopologyAwarePreempt, TestNormalPreemptRechecksPredicate... ===

P = "TestPreempt"
TP = "TestTopologyAwarePreempt"


def _preempt_cases(test: str) -> list:
    """The ten cases TestPreempt and TestTopologyAwarePreempt share, less those that need
    what rota lacks (see draft_volcano.py): Volcano runs them with topology-aware preemption
    off and on, and expects the same victims."""
    def u(case: str) -> Upstream:
        return up(PREEMPT, test, case)

    return [
        pytest.param(
            u("do not preempt if there are enough idle resources"),
            # pg1 (minMember 3): preemptee1, preemptee2 run on n1 (10 cpu, 10G), 1 cpu each;
            # preemptor1 (1 cpu) fits in the 8 idle cpu: bound, nobody evicted.
            lambda: cluster().nodes(node("n1").cpu(10).memory(10)).queue(queue("q1")).jobs(
                pod("c1/preemptee1", "q1", 1, 1, on="n1"),
                pod("c1/preemptee2", "q1", 1, 1, on="n1"),
                pod("c1/preemptor1", "q1", 1, 1),
            ),
            want(bound={"c1/preemptor1": "n1"}),
            id="do not preempt if there are enough idle resources"),
        pytest.param(
            u("preempt one task of different job to fit both jobs on one node"),
            # n1: 2 cpu, both held by pg1 (low): preemptee1 (preemptable), preemptee2 (not).
            # pg2 (high, minMember 1): preemptor1 evicts preemptee1; preemptor2 could only
            # take preemptee2's room, which may not be taken. Evicted: preemptee1.
            lambda: cluster().nodes(node("n1").cpu(2).memory(2)).queue(queue("q1")).jobs(
                pod("c1/preemptee1", "q1", 1, 1, priority=LOW, on="n1"),
                pod("c1/preemptee2", "q1", 1, 1, priority=LOW, preemptible=False, on="n1"),
                pod("c1/preemptor1", "q1", 1, 1, priority=HIGH),
                pod("c1/preemptor2", "q1", 1, 1, priority=HIGH, created=1),
            ),
            want(evicted={"c1/preemptee1"}, pending={"c1/preemptor1", "c1/preemptor2"}),
            id="preempt one task of different job to fit both jobs on one node"),
        pytest.param(
            u("preempt enough tasks to fit large task of different job"),
            # n1: 6 cpu, 3 idle; pg1 (low) runs three 1-cpu pods, preemptee3 not preemptable.
            # preemptor1 (high) asks 5: 3 idle + 2 freed -> preemptee1 and preemptee2.
            lambda: cluster().nodes(node("n1").cpu(6).memory(6)).queue(queue("q1")).jobs(
                pod("c1/preemptee1", "q1", 1, 1, priority=LOW, on="n1"),
                pod("c1/preemptee2", "q1", 1, 1, priority=LOW, on="n1"),
                pod("c1/preemptee3", "q1", 1, 1, priority=LOW, preemptible=False, on="n1"),
                pod("c1/preemptor1", "q1", 5, 5, priority=HIGH),
            ),
            want(evicted={"c1/preemptee1", "c1/preemptee2"}, pending={"c1/preemptor1"}),
            id="preempt enough tasks to fit large task of different job"),
        pytest.param(
            u("preempt low priority job in same queue"),
            # q1 capability 4 cpu, 4G (its nominal quota); preemptee1 (low) uses 3: 3 + 3 > 4.
            # preemptor1 (high, 3 cpu; n1 has 9 idle) evicts preemptee1: 0 + 3 <= 4.
            lambda: cluster().nodes(node("n1").cpu(12).memory(12)).queue(
                capped("q1", res(4, 4)),
            ).jobs(
                pod("c1/preemptee1", "q1", 3, 3, priority=LOW, on="n1"),
                pod("c1/preemptor1", "q1", 3, 3, priority=HIGH),
            ),
            want(evicted={"c1/preemptee1"}, pending={"c1/preemptor1"}),
            id="preempt low priority job in same queue"),
        pytest.param(
            u("preempt low priority job in same queue: allocatable and has enough resource, "
              "don't preempt"),
            # As above with capability 6: 3 + 3 <= 6 -> preemptor1 bound, nobody evicted.
            lambda: cluster().nodes(node("n1").cpu(12).memory(12)).queue(
                capped("q1", res(6, 6)),
            ).jobs(
                pod("c1/preemptee1", "q1", 3, 3, priority=LOW, on="n1"),
                pod("c1/preemptor1", "q1", 3, 3, priority=HIGH),
            ),
            want(bound={"c1/preemptor1": "n1"}),
            id="preempt low priority job in same queue: allocatable and has enough "
               "resource, don't preempt"),
        pytest.param(
            u("preempt low priority job in same queue but not pod with preemptable=false or "
              "higher priority"),
            # q1 capability 3 cpu, 3G, all used by pg1 (low): preemptee1 (not preemptable),
            # preemptee2, preemptee3 (a pod of priority high). preemptor1 (high, 1 cpu) may
            # take only preemptee2: 3 - 1 + 1 <= 3.
            lambda: cluster().nodes(node("n1").cpu(12).memory(12)).queue(
                capped("q1", res(3, 3)),
            ).jobs(
                pod("c1/preemptee1", "q1", 1, 1, priority=LOW, preemptible=False, on="n1"),
                pod("c1/preemptee2", "q1", 1, 1, priority=LOW, on="n1"),
                pod("c1/preemptee3", "q1", 1, 1, priority=HIGH, on="n1"),
                pod("c1/preemptor1", "q1", 1, 1, priority=HIGH),
            ),
            want(evicted={"c1/preemptee2"}, pending={"c1/preemptor1"}),
            id="preempt low priority job in same queue but not pod with "
               "preemptable=false or higher priority"),
    ]


PREEMPT_CASES = [
    *_preempt_cases(P),
    pytest.param(
        up(PREEMPT, P, "rollback evictions when preemptor exceeds queue capacity after "
                       "evicting victims"),
        # q1 capability 3 cpu, 3G; preemptor1 (high) asks 4 > 3: evicting pg1's two pods
        # (low, 1 cpu each) would not admit it. Nobody evicted; it waits for quota.
        lambda: cluster().nodes(node("n1").cpu(10).memory(10)).queue(
            capped("q1", res(3, 3)),
        ).jobs(
            pod("c1/preemptee1", "q1", 1, 1, priority=LOW, on="n1"),
            pod("c1/preemptee2", "q1", 1, 1, priority=LOW, on="n1"),
            pod("c1/preemptor1", "q1", 4, 4, priority=HIGH),
        ),
        want(pending={"c1/preemptor1"}),
        id="rollback evictions when preemptor exceeds queue capacity after evicting victims"),
    pytest.param(
        up(PREEMPT, P, "only commit evictions on the node where preemption succeeds"),
        # q1 capability 6 cpu, 6G; used 1 (preemptee1 on n1, 3 cpu) + 4 (preemptee2 on n2,
        # 4 cpu) = 5. preemptor1 (high, 3): evicting preemptee1 leaves 4 + 3 = 7 > 6;
        # evicting preemptee2 leaves 1 + 3 = 4 <= 6 and n2 empty -> preemptee2 only.
        lambda: cluster().nodes(node("n1").cpu(3).memory(3), node("n2").cpu(4).memory(4)).queue(
            capped("q1", res(6, 6)),
        ).jobs(
            pod("c1/preemptee1", "q1", 1, 1, priority=LOW, on="n1"),
            pod("c1/preemptee2", "q1", 4, 4, priority=LOW, on="n2"),
            pod("c1/preemptor1", "q1", 3, 3, priority=HIGH),
        ),
        want(evicted={"c1/preemptee2"}, pending={"c1/preemptor1"},
             then={"c1/preemptor1": "n2"}),
        id="only commit evictions on the node where preemption succeeds"),
    pytest.param(
        up(PREEMPT, P, "multi-queue: preemptorTasks must not be overwritten by intra-job "
                       "preemption of another queue"),
        # n1 (2 cpu) holds q1-runner1 (q1) and q2-preemptee1 (q2, low). q2-preemptor1 (q2,
        # high, 1 cpu; q2 capability 4 admits it) evicts q2-preemptee1; q1's job is of
        # another queue that does not borrow.
        lambda: cluster().nodes(node("n1").cpu(2).memory(2)).queue(
            queue("q1"), capped("q2", res(4, 4)),
        ).jobs(
            pod("c1/q1-runner1", "q1", 1, 1, on="n1"),
            pod("c1/q2-preemptee1", "q2", 1, 1, priority=LOW, on="n1"),
            pod("c1/q2-preemptor1", "q2", 1, 1, priority=HIGH),
        ),
        want(evicted={"c1/q2-preemptee1"}, pending={"c1/q2-preemptor1"},
             then={"c1/q2-preemptor1": "n1"}),
        id="multi-queue: preemptorTasks must not be overwritten by intra-job preemption of "
           "another queue"),
    pytest.param(
        up(PREEMPT, "TestNormalPreemptRechecksPredicateAfterEviction",
           "normal preemption evicts a victim when hidden device capacity remains unavailable"),
        # Volcano's test plugin keeps preemptor off n1 while preemptee runs there, though n1's
        # cpu (2) holds both: a device of n1 that preemptee holds. Here that device is n1's
        # one GPU: preemptor (high, 1 cpu + 1 GPU) must evict preemptee (low) to get it.
        lambda: cluster().nodes(node("n1").cpu(2).memory(2).gpus(1)).queue(queue("q1")).jobs(
            pod("c1/preemptee", "q1", 1, 1, gpus=1, priority=LOW, on="n1", devices=(0,)),
            pod("c1/preemptor", "q1", 1, 1, gpus=1, priority=HIGH),
        ),
        want(evicted={"c1/preemptee"}, pending={"c1/preemptor"}, then={"c1/preemptor": "n1"}),
        id="normal preemption evicts a victim when hidden device capacity remains unavailable"),
]

TOPOLOGY_CASES = [
    *_preempt_cases(TP),
    pytest.param(
        up(PREEMPT, TP, "preemption with priority queues"),
        # q1 and q2 deserve and may use 1 cpu, 1G each; n1 (2 cpu) holds one pod of each.
        # preemptor1 (q1, high) evicts q1's preemptee1 (low); q2's pod (q2 within its
        # quota) is not its to take, whatever q2's queue priority.
        lambda: capacity_cluster(
            [node("n1").cpu(2).memory(2)],
            VQ("q1", res(1, 1), res(1, 1)), VQ("q2", res(1, 1), res(1, 1)),
        ).jobs(
            pod("c1/preemptee2", "q2", 1, 1, priority=HIGH, on="n1"),
            pod("c1/preemptee1", "q1", 1, 1, priority=LOW, on="n1"),
            pod("c1/preemptor1", "q1", 1, 1, priority=HIGH),
        ),
        want(evicted={"c1/preemptee1"}, pending={"c1/preemptor1"},
             then={"c1/preemptor1": "n1"}),
        id="preemption with priority queues"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), PREEMPT_CASES)
def test_preempt(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected)


@pytest.mark.parametrize(("upstream", "build", "expected"), TOPOLOGY_CASES)
def test_topology_aware_preempt(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected)


# == reclaim: TestReclaim ======================================================================

RECLAIM_CASES = [
    pytest.param(
        up(RECLAIM, "TestReclaim", "Two Queue with one Queue overusing resource, should reclaim"),
        # n1: 3 cpu, 3Gi. q1 (weight 1) runs pg1's preemptee1, preemptee2, preemptee3 (1 cpu
        # 1G each; 1 and 3 not preemptable); q2 (weight 1) asks preemptor1 (1 cpu 1G).
        # Volcano: deserved 1.5 cpu each, q2 capped at its request 1, q1 gets the rest, 2;
        # q1 holds 3 > 2 -> preemptor1 reclaims preemptee2, the only preemptable one. rota:
        # q2's share with preemptor1 is 1/3 of the pool, q1's 3/3, 2/3 without preemptee2.
        lambda: proportion_cluster([node("n1").cpu(3).memory(3)], ("q1", 1), ("q2", 1)).jobs(
            pod("c1/preemptee1", "q1", 1, 1, preemptible=False, on="n1"),
            pod("c1/preemptee2", "q1", 1, 1, on="n1"),
            pod("c1/preemptee3", "q1", 1, 1, preemptible=False, on="n1"),
            pod("c1/preemptor1", "q2", 1, 1),
        ),
        want(evicted={"c1/preemptee2"}, pending={"c1/preemptor1"},
             then={"c1/preemptor1": "n1"}),
        id="Two Queue with one Queue overusing resource, should reclaim"),
    pytest.param(
        up(RECLAIM, "TestReclaim", "sort reclaimees when reclaiming from overusing queue"),
        # n1: 4 cpu, 4Gi, full. q1, q2, q3 of weight 1. q1 (pg1, priority 500) runs
        # preemptee1-1, preemptee1-2; q2 (pg2, priority 100) runs preemptee2-1 and
        # preemptee2-2 (not preemptable); q3 (pg3, priority 1000) asks preemptor1 (1 cpu).
        # Deserved: 4/3 each, q3 capped at its request 1, q1 and q2 1.5: both above (2).
        # The lowest priority goes first, and one victim is enough: preemptee2-1.
        lambda: proportion_cluster([node("n1").cpu(4).memory(4)], ("q1", 1), ("q2", 1),
                                   ("q3", 1)).jobs(
            pod("c1/preemptee1-1", "q1", 1, 1, priority=500, on="n1"),
            pod("c1/preemptee1-2", "q1", 1, 1, priority=500, on="n1"),
            pod("c1/preemptee2-1", "q2", 1, 1, priority=100, on="n1"),
            pod("c1/preemptee2-2", "q2", 1, 1, priority=100, preemptible=False, on="n1"),
            pod("c1/preemptor1", "q3", 1, 1, priority=1000),
        ),
        want(evicted={"c1/preemptee2-1"}, pending={"c1/preemptor1"},
             then={"c1/preemptor1": "n1"}),
        id="sort reclaimees when reclaiming from overusing queue"),
    pytest.param(
        up(RECLAIM, "TestReclaim", "only commit evictions on the node where reclaim succeeds"),
        # n1: 10 cpu, 10G. q1 (weight 1) runs victim-n1 (2 cpu 2G), above the 1 cpu its
        # weight deserves; preemptor1 (q2, weight 9; 3 cpu 3G) fits in the 8 idle cpu:
        # bound, nothing reclaimed.
        lambda: proportion_cluster([node("n1").cpu(10).memory(10)], ("q1", 1), ("q2", 9)).jobs(
            pod("c1/victim-n1", "q1", 2, 2, on="n1"),
            pod("c1/preemptor1", "q2", 3, 3),
        ),
        want(bound={"c1/preemptor1": "n1"}),
        id="only commit evictions on the node where reclaim succeeds"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), RECLAIM_CASES)
def test_reclaim(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected, FAIR)


# == capacity: Test_capacityPlugin_OnSessionOpenWithoutHierarchy, TestEnqueueAndAllocatable ==

CW = "Test_capacityPlugin_OnSessionOpenWithoutHierarchy"
CE = "TestEnqueueAndAllocatable"


def _workers():
    """n1 (labelled selector=worker) and n2: 2 cpu, 4Gi each."""
    return [node("n1").cpu(2).memory(4).label("selector", "worker"), node("n2").cpu(2).memory(4)]


def _a100s():
    """n3 (selector=worker) and n4: 2 cpu, 4Gi, ten A100 each."""
    return [node("n3").cpu(2).memory(4).gpus(10, "A100").label("selector", "worker"),
            node("n4").cpu(2).memory(4).gpus(10, "A100")]


def _enqueue_pair():
    """TestEnqueueAndAllocatable's cluster: n1, n2 of 3 cpu, 3G; q1 deserves 2 cpu, 2G and
    may use as much; q2 deserves 2, 2G and may use 3, 3G. pod1 (q1, 1 cpu 3G) runs on n1,
    pod2 (q2, 3 cpu 1G) on n2. Rest lends 6 - 4 = 2 cpu, 2G."""
    return capacity_cluster(
        [node("n1").cpu(3).memory(3), node("n2").cpu(3).memory(3)],
        VQ("q1", res(2, 2), res(2, 2)), VQ("q2", res(2, 2), res(3, 3)),
    )


CAPACITY_CASES = [
    pytest.param(
        up(CAPACITY, CW, "case0: Pod allocatable when queue has not exceed capability"),
        # q1 may use 2 cpu, 2Gi; p1 (1, 1Gi) runs on n1; p2 (1, 1Gi, selector=worker):
        # 1 + 1 <= 2 -> n1, the only worker.
        lambda: capacity_cluster(_workers(), VQ("q1", capability=res(2, 2))).jobs(
            pod("ns1/p1", "q1", 1, 1, on="n1"),
            pod("ns1/p2", "q1", 1, 1, selector={"selector": "worker"}),
        ),
        want(bound={"ns1/p2": "n1"}),
        id="case0: Pod allocatable when queue has not exceed capability"),
    pytest.param(
        up(CAPACITY, CW, "case1: Pod not allocatable when queue exceed queue capability"),
        # q2 may use 1.5 cpu, 1.5Gi; p3 (1, 1Gi) runs; p4 (1, 1Gi): 2 > 1.5 -> pending.
        lambda: capacity_cluster(_workers(), VQ("q2", capability=res(1.5, 1.5))).jobs(
            pod("ns1/p3", "q2", 1, 1, on="n1"),
            pod("ns1/p4", "q2", 1, 1),
        ),
        want(pending={"ns1/p4"}),
        id="case1: Pod not allocatable when queue exceed queue capability"),
    pytest.param(
        up(CAPACITY, CW, "case2: Can reclaim from other queues when allocated < deserved"),
        # q3, q4 deserve 2 cpu, 4Gi each (the whole cluster). q3 runs p5 (n1, not
        # preemptable) and p6 (n2), 2 cpu 4Gi each: it borrows q4's share. p7 (q4, 2 cpu
        # 4Gi): 0 + 2 <= 2 -> reclaims p6, pipelined to n2.
        lambda: capacity_cluster(
            _workers(), VQ("q3", res(2, 4)), VQ("q4", res(2, 4)),
        ).jobs(
            pod("ns1/p5", "q3", 2, 4, preemptible=False, on="n1"),
            pod("ns1/p6", "q3", 2, 4, on="n2"),
            pod("ns1/p7", "q4", 2, 4),
        ),
        want(evicted={"ns1/p6"}, pending={"ns1/p7"}, then={"ns1/p7": "n2"}),
        id="case2: Can reclaim from other queues when allocated < deserved"),
    pytest.param(
        up(CAPACITY, CW, "case3: CPU & Memory are overused, scalar resource is not overused, "
                         "but candidate pod has not request CPU & Memory, reclaim should "
                         "happen"),
        # q5, q6 deserve 2 cpu, 4Gi, 10 A100 each (the whole cluster). q5 runs p8 (n3, not
        # preemptable) and p9 (n4), 10 A100 each: it borrows 10. q6 runs p10, p11 (2 cpu
        # 4Gi each): it borrows 2 cpu, 4Gi. p12 (q6, 10 A100, no cpu): 0 + 10 <= 10 A100
        # -> reclaims p9, pipelined to n4.
        lambda: capacity_cluster(
            _a100s(), VQ("q5", res(2, 4, 10)), VQ("q6", res(2, 4, 10)),
        ).jobs(
            pod("ns1/p8", "q5", 0, 0, gpus=10, preemptible=False, on="n3",
                devices=tuple(range(10))),
            pod("ns1/p9", "q5", 0, 0, gpus=10, on="n4", devices=tuple(range(10))),
            pod("ns1/p10", "q6", 2, 4, on="n3"),
            pod("ns1/p11", "q6", 2, 4, on="n4"),
            pod("ns1/p12", "q6", 0, 0, gpus=10),
        ),
        want(evicted={"ns1/p9"}, pending={"ns1/p12"}, then={"ns1/p12": "n4"}),
        id="case3: CPU & Memory are overused, scalar resource is not overused, but candidate "
           "pod has not request CPU & Memory, reclaim should happen"),
    pytest.param(
        up(CAPACITY, CW, "case6: Can not reclaim from other queues when allocated + req > "
                         "deserved"),
        # n1: 2 cpu, 4Gi. q12 deserves 1 cpu, 2Gi (may use 4, 4Gi); q13 deserves nothing
        # (may use 2, 2Gi). p19 (q12) and p21 (q13) run, 1 cpu 1Gi each: n1's cpu is full.
        # p20 (q12, 1 cpu 2Gi): q12 would hold 2 cpu > 1 and 3Gi > 2: nothing to reclaim.
        lambda: capacity_cluster(
            [node("n1").cpu(2).memory(4).label("selector", "worker")],
            VQ("q12", res(1, 2), res(4, 4)), VQ("q13", res(0, 0), res(2, 2)),
        ).jobs(
            pod("ns1/p19", "q12", 1, 1, on="n1"),
            pod("ns1/p20", "q12", 1, 2),
            pod("ns1/p21", "q13", 1, 1, on="n1"),
        ),
        want(pending={"ns1/p20"}),
        id="case6: Can not reclaim from other queues when allocated + req > deserved"),
    pytest.param(
        up(CAPACITY, CW, "case7: allocated does not contain scalar dimension (GPU), deserved "
                         "does; should not reclaim"),
        # n7: 4 cpu, 8Gi, 4 GPUs. queue14 and queue16 deserve 2 cpu, 4Gi, 2 GPUs; queue15
        # nothing. Running: p22 (queue14, 2 cpu 4Gi), p23 (queue15, 1 GPU), p24 (queue16,
        # 2 cpu 1Gi 1 GPU): n7's cpu is full. p25 (queue16, 2 cpu 3Gi 1 GPU) needs 2 cpu:
        # queue14 is within its deserved cpu and p23 frees no cpu -> nothing evicted.
        lambda: capacity_cluster(
            [node("n7").cpu(4).memory(8).gpus(4)],
            VQ("queue14", res(2, 4, 2)), VQ("queue15"), VQ("queue16", res(2, 4, 2)),
        ).jobs(
            pod("ns1/p22", "queue14", 2, 4, on="n7"),
            pod("ns1/p23", "queue15", 0, 0, gpus=1, on="n7", devices=(0,)),
            pod("ns1/p24", "queue16", 2, 1, gpus=1, on="n7", devices=(1,)),
            pod("ns1/p25", "queue16", 2, 3, gpus=1),
        ),
        want(pending={"ns1/p25"}),
        id="case7: allocated does not contain scalar dimension (GPU), deserved does; should "
           "not reclaim"),
    pytest.param(
        up(CAPACITY, CW, "case10: PreemptiveFn respects capability — no reclaim when "
                         "futureUsed would exceed capability"),
        # n9, n10: 8 cpu, 100Gi each. queue21 deserves and may use 8 cpu, 100Gi; p33 (7 cpu
        # 90Gi) runs on n9. queue22 may use 2 cpu, 5Gi; p35 (2, 5Gi) runs on n10. p34
        # (queue21, 2 cpu 5Gi): 7 + 2 = 9 > 8 -> pending, nothing evicted.
        lambda: capacity_cluster(
            [node("n9").cpu(8).memory(100), node("n10").cpu(8).memory(100)],
            VQ("queue21", res(8, 100), res(8, 100)), VQ("queue22", capability=res(2, 5)),
        ).jobs(
            pod("ns1/p33", "queue21", 7, 90, on="n9"),
            pod("ns1/p34", "queue21", 2, 5),
            pod("ns1/p35", "queue22", 2, 5, on="n10"),
        ),
        want(pending={"ns1/p34"}),
        id="case10: PreemptiveFn respects capability — no reclaim when futureUsed would "
           "exceed capability"),
    pytest.param(
        up(CAPACITY, CE, "case0: memory exceed derserved, job only request cpu can be "
                         "enqueued and allocated"),
        # q1 holds 1 cpu, 3G (above its 2G); pod3 (q1, 1 cpu, no memory): 1 + 1 <= 2 cpu,
        # memory not asked -> n1, the node with a free cpu (n1: 2 cpu 0G free, n2: none).
        lambda: _enqueue_pair().jobs(
            pod("ns1/pod1", "q1", 1, 3, on="n1"),
            pod("ns1/pod2", "q2", 3, 1, on="n2"),
            pod("ns1/pod3", "q1", 1, 0),
        ),
        want(bound={"ns1/pod3": "n1"}),
        id="case0: memory exceed derserved, job only request cpu can be enqueued and "
           "allocated"),
    pytest.param(
        up(CAPACITY, CE, "case1: cpu exceed derserved, job only request memory can be "
                         "enqueued and allocated"),
        # q2 holds 3 cpu (above its 2), 1G; pod4 (q2, 1G, no cpu): 1 + 1 <= 2G -> n2, the
        # node with free memory (n2: 0 cpu 2G free, n1: 2 cpu 0G).
        lambda: _enqueue_pair().jobs(
            pod("ns1/pod1", "q1", 1, 3, on="n1"),
            pod("ns1/pod2", "q2", 3, 1, on="n2"),
            pod("ns1/pod4", "q2", 0, 1),
        ),
        want(bound={"ns1/pod4": "n2"}),
        id="case1: cpu exceed derserved, job only request memory can be enqueued and "
           "allocated"),
    pytest.param(
        up(CAPACITY, CE, "case2: exceed capacity, can not enqueue"),
        # pod5 (q1, 1 cpu 1G): 3 + 1 = 4G > q1's capability 2G -> pending.
        lambda: _enqueue_pair().jobs(
            pod("ns1/pod1", "q1", 1, 3, on="n1"),
            pod("ns1/pod2", "q2", 3, 1, on="n2"),
            pod("ns1/pod5", "q1", 1, 1),
        ),
        want(pending={"ns1/pod5"}),
        id="case2: exceed capacity, can not enqueue"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), CAPACITY_CASES)
def test_capacity(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected)


# == proportion: TestEnqueueAndAllocable ======================================================

PE = "TestEnqueueAndAllocable"


def _proportion_pair():
    """n1, n2 of 2 cpu, 2G; q1 (weight 1) may use 2 cpu, 2G, q2 (weight 1) 3 cpu, 3G. pod1
    (q1, 1 cpu 2G) runs on n1, pod2 (q2, 2 cpu 1G) on n2. The weights split 4 cpu, 4G in two
    halves of 2 cpu, 2G; q1's deserved is then its capability (2 cpu, 2G) in every case, and
    q2's deserved covers its request: each queue's capability is what its quota says."""
    return cluster().nodes(node("n1").cpu(2).memory(2), node("n2").cpu(2).memory(2)).queue(
        capped("q1", res(2, 2)), capped("q2", res(3, 3)),
    ).jobs(
        pod("ns1/pod1", "q1", 1, 2, on="n1"),
        pod("ns1/pod2", "q2", 2, 1, on="n2"),
    )


PROPORTION_CASES = [
    pytest.param(
        up(PROPORTION, PE, "case0: memory exceed derserved, job only request cpu can be "
                           "enqueued and allocated"),
        # pod3 (q1, 1 cpu, no memory): 1 + 1 <= 2 cpu -> n1 (1 cpu free; n2 has none).
        lambda: _proportion_pair().jobs(pod("ns1/pod3", "q1", 1, 0)),
        want(bound={"ns1/pod3": "n1"}),
        id="case0: memory exceed derserved, job only request cpu can be enqueued and "
           "allocated"),
    pytest.param(
        up(PROPORTION, PE, "case1: cpu exceed derserved, job only request memory can be "
                           "enqueued and allocated"),
        # pod4 (q2, 1G, no cpu): 1 + 1 <= 2G deserved (3G capability) -> n2 (1G free; n1 none).
        lambda: _proportion_pair().jobs(pod("ns1/pod4", "q2", 0, 1)),
        want(bound={"ns1/pod4": "n2"}),
        id="case1: cpu exceed derserved, job only request memory can be enqueued and "
           "allocated"),
    pytest.param(
        up(PROPORTION, PE, "case2: exceed capacity, can not enqueue"),
        # pod5 (q1, 1 cpu 1G): 2 + 1 = 3G > capability 2G -> pending.
        lambda: _proportion_pair().jobs(pod("ns1/pod5", "q1", 1, 1)),
        want(pending={"ns1/pod5"}),
        id="case2: exceed capacity, can not enqueue"),
    pytest.param(
        up(PROPORTION, PE, "case3: exceed deserved, can not allocate"),
        # pod5: 2 + 1 = 3G > q1's deserved 2G (half of 4G, capped by capability) -> pending.
        lambda: _proportion_pair().jobs(pod("ns1/pod5", "q1", 1, 1)),
        want(pending={"ns1/pod5"}),
        id="case3: exceed deserved, can not allocate"),
]


@pytest.mark.parametrize(("upstream", "build", "expected"), PROPORTION_CASES)
def test_proportion(upstream: Upstream, build: Callable, expected: Want) -> None:
    assert_outcome(build().build(), expected)


# == TestNoDoubleCountingForInqueueJobWithBindingTasks (capacity, proportion) ================

ND = "TestNoDoubleCountingForInqueueJobWithBindingTasks"

GANG_THEN_ONE = [
    pytest.param(
        up(CAPACITY, ND, ND),
        # q1 may use 4 cpu, 8Gi (no deserved); n1: 4 cpu, 8Gi. Session 1: pgA (minMember 3,
        # three pods of 1 cpu 1Gi) -> n1. Session 2: pB1 (1 cpu): 3 + 1 <= 4 -> n1.
        lambda: capacity_cluster([node("n1").cpu(4).memory(8)], VQ("q1", capability=res(4, 8))),
        id="capacity_test.go"),
    pytest.param(
        up(PROPORTION, ND, ND),
        # The same with proportion: q1 (weight 1) may use 4 cpu, 8Gi.
        lambda: cluster().nodes(node("n1").cpu(4).memory(8)).queue(capped("q1", res(4, 8))),
        id="proportion_test.go"),
]


@pytest.mark.parametrize(("upstream", "build"), GANG_THEN_ONE)
def test_a_bound_gang_counts_once(upstream: Upstream, build: Callable) -> None:
    first = build().jobs(pod("ns1/pgA", "q1", 1, 1, replicas=3)).build()
    d1 = decide(first, POLICY)
    assert first_nodes(d1) == {"ns1/pgA": "n1"}
    assert [r.node for r in d1.binds[0].placement.replicas] == ["n1"] * 3
    second = apply_all(first, d1, 0.0).with_jobs(pod("ns1/pB1", "q1", 1, 1, created=1))
    d2 = decide(second, POLICY)
    assert first_nodes(d2) == {"ns1/pB1": "n1"}
    assert d2.waits == [] and d2.preemptions == []
