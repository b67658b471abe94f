"""The elastic capacity planner (``rota.scheduler.elastic``): per waiting job, wait, attach
pool GPUs to a node or add nodes, by time to start then cost, within budgets and the cluster
cap; scale-in of what no job uses. The waits come from a real cycle (``run_cycle``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rota.core import InvalidSpec
from rota.core.capacity import (
    AddedNode, Attachment, ElasticState, GpuPool, Limits, NodeGroup, NodeShape,
)
from rota.scheduler.elastic import plan_capacity
from tests.builders import GiB, cluster, decide, job, node, queue

SHAPE = NodeShape(64_000, 512 * GiB, 8, "H100-80GB", 80 * GiB)


def pool(name="fabric", gpus=4, reach=None, attach_s=30.0, cost=4.0, model="H100-80GB"):
    return GpuPool(name, model, 80 * GiB, tuple(f"{name}-{i}" for i in range(gpus)),
                   reach if reach is not None else {"n1": 4}, attach_s, 10.0, cost)


def group(start_s=300.0, max_size=4, cost=32.0, min_size=0):
    return NodeGroup("cloud", SHAPE, min_size, max_size, start_s, cost)


def busy_node(name="n1", gpus=2, cpu=64):
    """A node whose GPUs a running job holds, and the job."""
    return (node(name).gpus(gpus).cpu(cpu),
            job(f"run-{name}").gpus(gpus).cpu(1).running_on((name, list(range(gpus)))))


def plan(snapshot, state, limits=Limits(), now=0.0, estimates=None):
    waits = decide(snapshot, "default", now).waits
    if estimates:
        waits = [replace(w, estimated_start=estimates.get(w.job)) for w in waits]
    return plan_capacity(snapshot, waits, state, limits, now)


def test_a_job_that_fits_nowhere_gets_pool_gpus_attached_to_a_reached_node():
    n1, running = busy_node()
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2).cpu(4)).build()
    out = plan(snap, ElasticState((pool(),), (group(),)))
    # attach is ready at 30 s, a node at 300 s: the attach starts it sooner
    assert [(a.job, a.node, a.gpus, a.ready_at) for a in out.attaches] == [
        ("a", "n1", ("fabric-0", "fabric-1"), 30.0)]
    assert out.adds == [] and out.holds == []


def test_the_node_free_gpus_count_towards_the_job_so_only_the_rest_is_attached():
    # n1 has 3 GPUs, 2 held: a job of 3 GPUs needs 3 - 1 free = 2 attached
    snap = cluster().nodes(node("n1").gpus(3)).jobs(
        job("run").gpus(2).running_on(("n1", [0, 1])), job("a").gpus(3)).build()
    out = plan(snap, ElasticState((pool(),)))
    assert [len(a.gpus) for a in out.attaches] == [2]


@pytest.mark.parametrize("why, the_pool, n1", [
    ("the fabric does not reach the node", pool(reach={"elsewhere": 4}), busy_node()[0]),
    ("the node has no free slot", pool(reach={"n1": 1}), busy_node()[0]),
    ("the node has no CPU left", pool(), busy_node(cpu=4)[0]),
    ("the pool has too few free GPUs", pool(gpus=1), busy_node()[0]),
    ("the pool's model is not one the job accepts", pool(model="A100-40GB"), busy_node()[0]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_node_is_added_when_no_attach_can_serve(why, the_pool, n1):
    running = job("run-n1").gpus(2).cpu(1).running_on(("n1", [0, 1]))
    snap = cluster().nodes(n1, node("elsewhere").gpus(1).cpu(0)).jobs(
        running, job("a").gpus(2, models=("H100*",)).cpu(4)).build()
    out = plan(snap, ElasticState((the_pool,), (group(),)))
    assert out.attaches == [], why
    assert [(d.job, d.group, d.count, d.ready_at) for d in out.adds] == [("a", "cloud", 1, 300.0)]


def test_a_job_that_would_start_sooner_by_waiting_waits():
    n1, running = busy_node()
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2)).build()
    out = plan(snap, ElasticState((pool(),), (group(),)), estimates={"a": 20.0})
    assert out.attaches == [] and out.adds == []
    assert [(h.job, h.until, h.why) for h in out.holds] == [("a", 20.0, "sooner")]


def test_the_earliest_start_wins_and_cost_breaks_ties():
    n1, running = busy_node()
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2).walltime(7200)).build()
    cheap_slow = pool("slow", attach_s=60.0, cost=1.0)
    dear_fast = pool("fast", attach_s=30.0, cost=5.0)
    cheap_fast = pool("cheap", attach_s=30.0, cost=2.0)
    out = plan(snap, ElasticState((cheap_slow, dear_fast)))
    assert [a.pool for a in out.attaches] == ["fast"]
    out = plan(snap, ElasticState((dear_fast, cheap_fast)))
    assert [(a.pool, a.cost_per_h) for a in out.attaches] == [("cheap", 4.0)]  # 2 GPUs x 2.0


def test_a_gang_gets_as_many_nodes_as_its_replicas_need():
    snap = cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).jobs(
        job("run1").gpus(8).running_on(("n1", list(range(8)))),
        job("run2").gpus(8).running_on(("n2", list(range(8)))),
        job("g").gpus(8).replicas(2)).build()
    out = plan(snap, ElasticState((pool(reach={"n1": 8, "n2": 8}),), (group(),)))
    assert out.attaches == []  # pools serve single-replica jobs
    assert [(d.count, d.cost_per_h) for d in out.adds] == [(2, 64.0)]  # 2 nodes x 32/h


def test_a_group_never_grows_past_its_max_size():
    n1, running = busy_node(gpus=8)
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(6), job("b").gpus(6)).build()
    state = ElasticState((), (group(max_size=1),))
    out = plan(snap, state)
    assert [d.job for d in out.adds] == ["a"]
    # b does not fit beside a on a's node (6 + 6 > 8 GPUs), and the group is at its maximum
    assert [(h.job, h.why) for h in out.holds] == [("b", "no-source")]


def test_jobs_join_the_room_left_on_nodes_on_their_way_before_asking_for_more():
    n1, running = busy_node(gpus=8)
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2), job("b").gpus(4),
                                    job("c").gpus(4)).build()
    out = plan(snap, ElasticState((), (group(start_s=300.0),)))
    # a asks for a node (8 GPUs); b joins it (2 + 4); c does not fit there (10) and asks
    assert [(d.job, d.count) for d in out.adds] == [("a", 1), ("c", 1)]
    assert [(h.job, h.until, h.why) for h in out.holds] == [("b", 300.0, "in-flight")]
    # a scan later, the node asked for a is on its way: b joins it again, c's too
    on_its_way = (AddedNode("cloud", "c1", 300.0, "a"), AddedNode("cloud", "c2", 300.0, "c"))
    out = plan(snap, ElasticState((), (group(),), (), on_its_way), now=10.0)
    assert out.adds == []
    assert sorted((h.job, h.why) for h in out.holds) == [
        ("a", "in-flight"), ("b", "in-flight"), ("c", "in-flight")]


def test_budgets_and_the_cluster_cap_leave_options_out():
    n1, running = busy_node()
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2)).build()
    state = ElasticState((pool(cost=4.0),), (group(cost=32.0),))
    # 2 pool GPUs cost 8/h: a budget of 7/h allows neither them nor a node at 32/h
    out = plan(snap, state, Limits(budgets={"p": 7.0}))
    assert [(h.job, h.why) for h in out.holds] == [("a", "budget")]
    # a budget of 8/h allows the attach
    assert [a.job for a in plan(snap, state, Limits(budgets={"p": 8.0})).attaches] == ["a"]
    # the cluster may hold 1 elastic GPU: the job needs 2 (attached) or 8 (a node)
    out = plan(snap, state, Limits(max_elastic_gpus=1))
    assert [(h.job, h.why) for h in out.holds] == [("a", "cap")]


def test_what_a_project_already_holds_counts_against_its_budget():
    n1, running = busy_node()
    snap = cluster().nodes(n1).jobs(running.project("p"), job("a").gpus(2)).build()
    held = Attachment("fabric", "fabric-3", "n1", 0.0, job="run-n1", device=7)
    state = ElasticState((pool(cost=4.0),), (), (held,))
    # holds 4/h already: 4 + 8 > 10
    assert [h.why for h in plan(snap, state, Limits(budgets={"p": 10.0})).holds] == ["budget"]
    assert [a.gpus for a in plan(snap, state, Limits(budgets={"p": 12.0})).attaches] == [
        ("fabric-0", "fabric-1")]  # fabric-3 is attached: never offered again


def test_jobs_waiting_for_quota_or_for_capacity_on_its_way_are_held():
    n1, running = busy_node()
    # queue "tight" may use 2 GPUs, which its running job holds: "quota" waits for quota
    snap = cluster().nodes(n1).queue(queue("tight").quota(gpu=2), queue("q")).jobs(
        running.queue("tight"), job("quota").gpus(2).queue("tight").submitted(0),
        job("coming").gpus(2).submitted(1)).build()
    on_its_way = Attachment("fabric", "fabric-0", "n1", 30.0, job="coming")
    out = plan(snap, ElasticState((pool(),), (), (on_its_way,)))
    assert out.attaches == [] and out.adds == []
    assert sorted((h.job, h.why) for h in out.holds) == [
        ("coming", "in-flight"), ("quota", "not-room")]


def test_an_attach_on_its_way_keeps_the_cpu_its_job_will_take_on_the_node():
    n1, running = busy_node(cpu=10)  # 1 core held by the running job: 9 left
    snap = cluster().nodes(n1).jobs(running, job("a").gpus(2).cpu(4).submitted(0),
                                    job("b").gpus(2).cpu(6).submitted(1)).build()
    on_its_way = Attachment("fabric", "fabric-0", "n1", 30.0, job="a")
    out = plan(snap, ElasticState((pool(),), (group(),), (on_its_way,)), now=10.0)
    # a's attach will take 4 of n1's 9 free cores: b's 6 do not fit beside it, b gets a node
    assert out.attaches == []
    assert [d.job for d in out.adds] == ["b"]
    # once a is gone (cancelled), its attach keeps its slot but no CPU: b is attached to n1
    snap = cluster().nodes(n1).jobs(running, job("b").gpus(2).cpu(6).submitted(1)).build()
    out = plan(snap, ElasticState((pool(),), (group(),), (on_its_way,)), now=10.0)
    assert [(a.job, a.node, a.gpus) for a in out.attaches] == [
        ("b", "n1", ("fabric-1", "fabric-2"))]


def test_a_pool_gpu_is_never_attached_twice_in_one_plan():
    n1, running = busy_node()
    n2 = node("n2").gpus(2)
    snap = cluster().nodes(n1, n2).jobs(
        running, job("run2").gpus(2).running_on(("n2", [0, 1])),
        job("a").gpus(2).submitted(0), job("b").gpus(2).submitted(1)).build()
    out = plan(snap, ElasticState((pool(gpus=3, reach={"n1": 4, "n2": 4}),), (group(),)))
    assert [(a.job, a.gpus) for a in out.attaches] == [("a", ("fabric-0", "fabric-1"))]
    assert [d.job for d in out.adds] == ["b"]  # one pool GPU left: not enough for b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(0, 8),
       st.lists(st.integers(0, 3), min_size=2, max_size=2))
def test_property_no_pool_gpu_twice_and_no_slot_overfilled(sizes, gpus, slots):
    reach = {"n1": slots[0], "n2": slots[1]}
    nodes = [node(n).gpus(1) for n in reach]
    jobs = [job(f"r-{n}").gpus(1).running_on((n, [0])) for n in reach]
    jobs += [job(f"j{i}").gpus(k).submitted(i) for i, k in enumerate(sizes)]
    snap = cluster().nodes(*nodes).jobs(*jobs).build()
    state = ElasticState((pool(gpus=gpus, reach=reach),))
    out = plan(snap, state)
    given_gpus = [g for a in out.attaches for g in a.gpus]
    assert len(given_gpus) == len(set(given_gpus))
    for n, s in reach.items():
        assert sum(len(a.gpus) for a in out.attaches if a.node == n) <= s
    # what the plan decided is a valid next state: the contract refuses double attaches
    ElasticState(state.pools, (), tuple(Attachment(a.pool, g, a.node, a.ready_at, a.job)
                                        for a in out.attaches for g in a.gpus))


def test_the_contract_refuses_a_pool_gpu_attached_twice():
    twice = (Attachment("fabric", "fabric-0", "n1", 0.0), Attachment("fabric", "fabric-0", "n2", 0.0))
    with pytest.raises(InvalidSpec) as exc:
        ElasticState((pool(reach={"n1": 1, "n2": 1}),), (), twice)
    assert exc.value.field == "attachments" and "twice" in exc.value.reason
    with pytest.raises(InvalidSpec) as exc:
        NodeGroup("g", SHAPE, 3, 2, 60.0)
    assert exc.value.field == "group g.max_size"


# -- scale-in -------------------------------------------------------------------------------

def _attached(gpu, device, job_id="", idle_since=None, ready_at=0.0):
    return Attachment("fabric", gpu, "n1", ready_at, job_id, device, idle_since)


def test_scale_in_never_takes_what_a_job_uses_and_returns_what_was_attached_for_a_job():
    n1 = node("n1").gpus(4)  # devices 2 and 3 are attached pool GPUs
    snap = cluster().nodes(n1).jobs(job("uses").gpus(1).running_on(("n1", [2]))).build()
    state = ElasticState((pool(),), (), (
        _attached("fabric-0", 2, "uses", None),          # in use: kept
        _attached("fabric-1", 3, "ended", 100.0),        # its job ended: returned at once
        _attached("fabric-2", None, "", None, 500.0)))   # still on its way: kept
    out = plan_capacity(snap, [], state, Limits(detach_grace_s=300.0), 200.0)
    assert [(d.gpu, d.why) for d in out.detaches] == [("fabric-1", "job-ended")]


@pytest.mark.parametrize("now, detached", [(399.0, []), (400.0, ["fabric-1"])])
def test_an_idle_attached_gpu_is_detached_after_its_grace_period(now, detached):
    snap = cluster().nodes(node("n1").gpus(4)).build()
    state = ElasticState((pool(),), (), (_attached("fabric-1", 3, "", 100.0),))
    out = plan_capacity(snap, [], state, Limits(detach_grace_s=300.0), now)
    assert [d.gpu for d in out.detaches] == detached


def test_empty_added_nodes_are_removed_after_remove_after_s_down_to_min_size():
    snap = cluster().nodes(node("c1").gpus(8), node("c2").gpus(8), node("c3").gpus(8)).jobs(
        job("r").gpus(1).running_on(("c3", [0]))).build()
    state = ElasticState((), (group(min_size=1),), (), (
        AddedNode("cloud", "c1", 0.0, "", 0.0), AddedNode("cloud", "c2", 0.0, "", 0.0),
        AddedNode("cloud", "c3", 0.0, "", None)))
    out = plan_capacity(snap, [], state, Limits(remove_after_s=600.0), 599.0)
    assert out.removals == []
    out = plan_capacity(snap, [], state, Limits(remove_after_s=600.0), 600.0)
    # c3 runs a job and stays; c1 and c2 have been empty for 600 s: 3 - 2 = 1 >= min_size
    assert sorted(r.node for r in out.removals) == ["c1", "c2"]
    state = replace(state, groups=(group(min_size=2),))
    out = plan_capacity(snap, [], state, Limits(remove_after_s=600.0), 600.0)
    assert [r.node for r in out.removals] == ["c1"]
