"""Node choice that sees every resource: ``binpack`` and ``spread`` score nodes on the GPUs,
GPU shares, cpu and memory a job asks for, keep jobs without GPUs off GPU nodes while other
nodes fit them, and never decide by the order in which nodes are listed; ``round-robin``
walks the nodes in name order. A gang that cannot place every replica says ``gang``.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import bound, cluster, codes, decide, devices_of, job, node
from rota.core import Snapshot
from rota.scheduler import apply_decisions, build_policy, run_cycle
from rota.scheduler.base import Base

from .test_properties import FLAVORS, random_job, random_nodes, random_queues


def _nodes_of(d) -> dict[str, str]:
    return {b.job: b.placement.replicas[0].node for b in d.binds}


def test_spread_puts_three_jobs_on_three_empty_nodes():
    for gpus in (1, 0):  # GPU jobs on GPU nodes, CPU-only jobs on CPU-only nodes
        snap = cluster().nodes(*[node(f"n{k}").gpus(8 if gpus else 0) for k in range(3)]).jobs(
            *[job(f"j{k}").gpus(gpus).cpu(2).submitted(k) for k in range(3)]).build()
        assert sorted(_nodes_of(decide(snap, "spread")).values()) == ["n0", "n1", "n2"]


@pytest.mark.parametrize("policy", ["spread", {"preset": "default", "placement": "binpack"}],
                         ids=["spread", "binpack"])
def test_a_job_without_gpus_goes_to_a_node_without_gpus(policy):
    # the GPU nodes are listed first and are emptier; the CPU node fits the job too
    snap = cluster().nodes(node("gpu-a").gpus(8), node("gpu-b").gpus(8),
                           node("cpu").gpus(0).cpu(16)).jobs(job("etl").cpu(4)).build()
    assert _nodes_of(decide(snap, policy)) == {"etl": "cpu"}


def test_a_job_without_gpus_uses_a_gpu_node_when_no_other_fits():
    snap = cluster().nodes(node("gpu").gpus(8), node("cpu").gpus(0).cpu(2)).jobs(
        job("etl").cpu(4)).build()
    assert _nodes_of(decide(snap, "spread")) == {"etl": "gpu"}


def test_binpack_puts_a_fraction_on_the_node_with_the_least_gpu_free():
    # n-a: 3 GPUs free; n-b: 1 GPU free (3 busy); both have a wholly free GPU for 0.5
    snap = cluster().nodes(node("n-a").gpus(4), node("n-b").gpus(4)).jobs(
        job("busy-a").gpus(1).running_on(("n-a", [0])),
        job("busy-b").gpus(3).running_on(("n-b", [0, 1, 2])),
        job("half").gpus(0.5)).build()
    policy = {"preset": "default", "placement": "binpack"}
    assert devices_of(bound(decide(snap, policy))["half"]) == [("n-b", (3,))]


@pytest.mark.parametrize("placement,expected", [("binpack", "small"), ("spread", "big")])
def test_cpu_and_memory_decide_between_nodes_equal_in_gpus(placement, expected):
    # both nodes have 8 free GPUs; "small" has 16 cores free, "big" 64
    snap = cluster().nodes(node("big").gpus(8).cpu(64), node("small").gpus(8).cpu(16)).jobs(
        job("j").gpus(1).cpu(8)).build()
    d = decide(snap, {"preset": "default", "placement": placement})
    assert _nodes_of(d) == {"j": expected}


def test_round_robin_walks_the_nodes_in_name_order_across_cycles():
    policy = build_policy({"preset": "default", "placement": "round-robin"})
    snap = cluster().nodes(*[node(f"n{k}").gpus(4) for k in (2, 0, 1)]).jobs(
        *[job(f"j{k}").gpus(1).submitted(k) for k in range(4)]).build()
    d = run_cycle(snap, policy, 0.0)
    assert [_nodes_of(d)[f"j{k}"] for k in range(4)] == ["n0", "n1", "n2", "n0"]
    later = replace(apply_decisions(snap, d, 0.0), jobs=apply_decisions(snap, d, 0.0).jobs
                    + (job("j4").gpus(1).submitted(9).build(),))
    assert _nodes_of(run_cycle(later, policy, 10.0)) == {"j4": "n1"}


@pytest.mark.parametrize("placement", ["binpack", "spread", "topology", "round-robin"])
def test_a_gang_that_cannot_place_every_replica_says_gang(placement):
    # two nodes with 4 GPUs, 3 busy on one: each 2-GPU replica fits somewhere, not both
    snap = cluster().nodes(node("a").gpus(4), node("b").gpus(4)).jobs(
        job("busy").gpus(3).running_on(("a", [0, 1, 2])),
        job("wide").gpus(2).replicas(3)).build()
    d = decide(snap, {"preset": "default", "placement": placement, "backfill": "none"})
    assert codes(d, "wide") == ["gang"]


# -- no decision depends on the order of the node list -----------------------------------------

POLICIES = [
    {"preset": "default", "placement": "binpack"},
    {"preset": "spread"},
    {"preset": "default"},
    {"preset": "fair", "placement": "round-robin"},
    {"preset": "besteffort", "placement": {"name": "random", "args": {"seed": 3}}},
    {"preset": "besteffort", "placement": "capgd"},
]


def _run(nodes, queues, jobs_at, spec) -> list:
    policy = build_policy(spec)
    snap = Snapshot(nodes, queues, (), {}, FLAVORS)
    out = []
    for now, arrivals in jobs_at:
        snap = replace(snap, jobs=tuple(j for j in snap.jobs if not (
            j.state.holds_resources and j.expected_end is not None and j.expected_end <= now))
            + arrivals)
        d = run_cycle(snap, policy, now)
        out.append(d)
        snap = apply_decisions(snap, d, now)
    return out


@pytest.mark.parametrize("spec", POLICIES, ids=lambda p: str(p.get("placement", p["preset"])))
@settings(max_examples=100, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_no_placement_changes_when_the_node_list_is_shuffled(spec, seed):
    rng = random.Random(seed)
    nodes = random_nodes(rng) + random_nodes(rng)
    nodes = tuple(replace(n, name=f"{n.name}-{k}") for k, n in enumerate(nodes))
    queues = random_queues(rng)
    jobs_at, serial, now = [], 0, 0.0
    for _ in range(3):
        arrivals = []
        for _ in range(rng.randint(1, 8)):
            arrivals.append(random_job(rng, f"j{serial}", list(queues), now))
            serial += 1
        jobs_at.append((now, tuple(arrivals)))
        now += rng.choice([10.0, 100.0, 250.0])
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    assert _run(tuple(shuffled), queues, jobs_at, spec) == _run(nodes, queues, jobs_at, spec)


@pytest.mark.parametrize("fresh_base", [True, False], ids=["full-snapshot", "kept-base"])
def test_gpuclustering_sees_the_kinds_of_task_running_jobs_host(fresh_base):
    # n-a hosts three 2-GPU jobs (6 of 8 busy), n-b one 1-GPU job: a 1-GPU job belongs with
    # its kind on n-b (band 75..100) rather than among other kinds on the fuller n-a (0..25).
    # Both are running when the cycle starts, so the plugin learns them from what the base
    # holds, not from the cycle's own placements.
    snap = cluster().nodes(node("n-a").gpus(8), node("n-b").gpus(8)).jobs(
        *[job(f"pair{k}").gpus(2).running_on(("n-a", [2 * k, 2 * k + 1])) for k in range(3)],
        job("single").gpus(1).running_on(("n-b", [0])),
        job("new").gpus(1)).build()
    policy = build_policy({"preset": "default", "placement": "gpuclustering"})
    if fresh_base:
        decisions = run_cycle(snap, policy, 0.0)
    else:
        base = Base.of(replace(snap, jobs=tuple(j for j in snap.jobs if j.id != "new")))
        decisions = run_cycle(replace(snap, jobs=snap.pending), policy, 0.0, base=base)
    assert _nodes_of(decisions) == {"new": "n-b"}
