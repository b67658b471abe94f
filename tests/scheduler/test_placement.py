"""Placement: which nodes and which GPUs a job's replicas get.

Policies switch preemption and backfill off so that placement alone is under test.
"""

from __future__ import annotations

import pytest

from builders import GiB, bound, cluster, codes, decide, devices_of, job, node, queue, rejected, waiting
from rota.scheduler import ReasonCode

PACK = {"preset": "besteffort"}                           # binpack, no preemption, no backfill
SPREAD = {"preset": "besteffort", "placement": "spread"}
TOPOLOGY = {"preset": "besteffort", "placement": "topology"}


# -- gangs ---------------------------------------------------------------------------------------

def test_a_gang_is_placed_across_nodes_all_together():
    snap = cluster().nodes(node("n1").gpus(4), node("n2").gpus(4)).jobs(
        job("gang").gpus(4).replicas(2)).build()
    b = bound(decide(snap, PACK))["gang"]
    assert sorted(devices_of(b)) == [("n1", (0, 1, 2, 3)), ("n2", (0, 1, 2, 3))]


def test_a_gang_that_only_partly_fits_binds_nothing():
    # 3 replicas x 2 GPUs; n1 has 4 free (2 replicas), n2 none: 2 of 3 fit -> nothing binds.
    snap = cluster().nodes(node("n1").gpus(4), node("n2").gpus(4)).jobs(
        job("full").gpus(4).running_on(("n2", [0, 1, 2, 3])),
        job("gang").gpus(2).replicas(3),
        job("small").gpus(1).submitted(1),
    ).build()
    d = decide(snap, PACK)
    (reason,) = waiting(d)["gang"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.GANG, "replicas", 3, 2, 3)
    # nothing was kept from the half-placed gang: the later 1-GPU job still finds n1 whole
    assert devices_of(bound(d)["small"]) == [("n1", (0,))]


SLURM, KUBE = "rota.dev/engine-slurm", "rota.dev/engine-kubernetes"


def test_a_gang_goes_to_nodes_that_one_backend_launches_on():
    # n1 and n2 are reached by Slurm alone, n3 by Kubernetes alone: 1 GPU free on n1 and on n3
    # would take a gang of two across both, which no backend could launch
    snap = cluster().nodes(
        node("n1").gpus(2).label(SLURM, "true"), node("n2").gpus(2).label(SLURM, "true"),
        node("n3").gpus(1).label(KUBE, "true")).jobs(
        job("a").gpus(1).running_on(("n1", [0])),
        job("b").gpus(2).running_on(("n2", [0, 1])),
        job("gang").gpus(1).replicas(2)).build()
    d = decide(snap, PACK)
    assert "gang" not in bound(d)
    (reason,) = waiting(d)["gang"].reasons
    assert reason.code is ReasonCode.GANG
    # once n2 frees up, both replicas go to Slurm's nodes
    freed = cluster().nodes(
        node("n1").gpus(2).label(SLURM, "true"), node("n2").gpus(2).label(SLURM, "true"),
        node("n3").gpus(1).label(KUBE, "true")).jobs(
        job("a").gpus(1).running_on(("n1", [0])),
        job("gang").gpus(1).replicas(2)).build()
    placed = {n for n, _ in devices_of(bound(decide(freed, PACK))["gang"])}
    assert placed <= {"n1", "n2"}


def test_a_node_reached_by_both_backends_joins_either_sides_gang():
    snap = cluster().nodes(
        node("n1").gpus(1).label(SLURM, "true").label(KUBE, "true"),
        node("n2").gpus(1).label(KUBE, "true"), node("n3").gpus(1).label(SLURM, "true")).jobs(
        job("gang").gpus(1).replicas(3),
        job("pair").gpus(1).replicas(2).selector(((KUBE, "true"),))).build()
    d = decide(snap, PACK)
    assert "gang" not in bound(d)  # three replicas: no backend reaches three nodes
    assert sorted(n for n, _ in devices_of(bound(d)["pair"])) == ["n1", "n2"]


def test_a_single_backends_labels_change_nothing():
    snap = cluster().nodes(node("n1").gpus(1).label(SLURM, "true"), node("n2").gpus(1)).jobs(
        job("gang").gpus(1).replicas(2)).build()
    assert sorted(n for n, _ in devices_of(bound(decide(snap, PACK))["gang"])) == ["n1", "n2"]


# -- whole and fractional GPUs ------------------------------------------------------------------

def test_whole_gpus_are_free_devices_with_their_whole_memory():
    snap = cluster().nodes(node("n1").gpus(4, memory_gib=80)).jobs(
        job("r").gpus(2).running_on(("n1", [0, 1])),
        job("two").gpus(2)).build()
    b = bound(decide(snap, PACK))["two"]
    (rep,) = b.placement.replicas
    assert [(d.index, d.milli, d.memory_mib) for d in rep.devices] == [
        (2, 1000, 80 * GiB), (3, 1000, 80 * GiB)]


def test_fractions_pack_onto_one_device_and_never_above_one_gpu():
    # 0.3 + 0.3 + 0.3 = 0.9 on device 0; a fourth 0.3 would make 1.2: it goes to device 1.
    snap = cluster().nodes(node("n1").gpus(2)).jobs(
        *[job(f"f{k}").gpus(0.3).submitted(k) for k in range(4)]).build()
    b = bound(decide(snap, PACK))
    assert [devices_of(b[f"f{k}"]) for k in range(4)] == [
        [("n1", (0,))], [("n1", (0,))], [("n1", (0,))], [("n1", (1,))]]
    # each share books 0.3 x 80 GiB = 24 GiB (rounded down to whole MiB)
    assert b["f0"].placement.replicas[0].devices[0].memory_mib == 300 * 80 * GiB // 1000


def test_a_full_device_takes_no_more_fractions():
    # 4 x 0.25 = 1.0 fills the only device: the fifth quarter waits.
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        *[job(f"q{k}").gpus(0.25).submitted(k) for k in range(5)]).build()
    d = decide(snap, PACK)
    assert sorted(bound(d)) == ["q0", "q1", "q2", "q3"]
    assert codes(d, "q4") == ["resources"]


def test_device_memory_bounds_fractions_too():
    # Two jobs of 0.2 GPU that each want 50 GiB: 0.4 of the compute is fine, but 100 GiB is
    # more than the device's 80 GiB: the second waits.
    snap = cluster().nodes(node("n1").gpus(1, memory_gib=80)).jobs(
        job("m1").gpus(0.2, memory_gib=50).submitted(0),
        job("m2").gpus(0.2, memory_gib=50).submitted(1)).build()
    d = decide(snap, PACK)
    assert set(bound(d)) == {"m1"} and "m2" in waiting(d)


def test_explicit_gpu_memory_is_what_the_share_books():
    snap = cluster().nodes(node("n1").gpus(1)).jobs(job("small").gpus(0.1, memory_gib=10)).build()
    (dev,) = bound(decide(snap, PACK))["small"].placement.replicas[0].devices
    assert (dev.milli, dev.memory_mib) == (100, 10 * GiB)


def test_a_fraction_never_shares_a_device_held_whole():
    snap = cluster().nodes(node("n1").gpus(2)).jobs(
        job("whole").gpus(1).running_on(("n1", [0])),
        job("frac").gpus(0.5)).build()
    assert devices_of(bound(decide(snap, PACK))["frac"]) == [("n1", (1,))]


def test_a_whole_gpu_never_takes_a_device_with_a_fraction_on_it():
    snap = cluster().nodes(node("n1").gpus(2)).jobs(
        job("frac").gpus(0.1).running_on(("n1", [0], 100)),
        job("whole").gpus(1)).build()
    assert devices_of(bound(decide(snap, PACK))["whole"]) == [("n1", (1,))]


# -- GPU models, resource groups, selectors ------------------------------------------------------

def _mixed():
    return cluster().nodes(node("a100").gpus(4, "NVIDIA-A100-SXM4-80GB"),
                           node("h100").gpus(4, "NVIDIA-H100-80GB"))


@pytest.mark.parametrize("patterns,nodes", [
    (("*A100*",), {"a100"}),
    (("*h100*",), {"h100"}),              # case-insensitive
    (("*A100*", "*H100*"), {"a100", "h100"}),
], ids=["a100", "h100-lowercase", "either"])
def test_gpu_model_patterns_choose_the_nodes(patterns, nodes):
    snap = _mixed().jobs(job("j").gpus(1, models=patterns)).build()
    b = bound(decide(snap, PACK))["j"]
    assert set(b.placement.nodes) <= nodes


def test_a_pattern_that_matches_no_gpu_is_rejected():
    snap = _mixed().jobs(job("j").gpus(1, models=("*V100*",))).build()
    d = decide(snap, PACK)
    assert codes(d, "j") == ["no-matching-gpu"] and "j" in rejected(d)
    (reason,) = rejected(d)["j"].reasons
    assert reason.detail == ("none of the GPU models here (NVIDIA-A100-SXM4-80GB, "
                             "NVIDIA-H100-80GB) matches *V100*")


def test_a_gpu_job_where_no_node_has_a_gpu_is_rejected_saying_so():
    snap = cluster().nodes(node("cpu-only")).jobs(job("j").gpus(1)).build()
    (reason,) = rejected(decide(snap, PACK))["j"].reasons
    assert (reason.code, reason.detail) == (ReasonCode.NO_MATCHING_GPU,
                                            "it asks for GPUs and no node here has any")


def test_a_job_waits_for_its_model_even_when_other_models_are_free():
    snap = _mixed().jobs(
        job("busy").gpus(4).running_on(("a100", [0, 1, 2, 3])),
        job("j").gpus(1, models=("*A100*",))).build()
    d = decide(snap, PACK)
    assert "j" in waiting(d) and codes(d, "j") == ["resources"]


def test_resource_group_and_selector_choose_the_nodes():
    snap = cluster().nodes(
        node("train-1").gpus(2).group("training").label("zone", "a"),
        node("train-2").gpus(2).group("training").label("zone", "b"),
        node("infer-1").gpus(2).group("inference").label("zone", "a"),
    ).jobs(
        job("in-group").gpus(1).resource_group("inference"),
        job("in-zone-b").gpus(1).selector((("zone", "b"),)),
        job("both").gpus(1).resource_group("training").selector((("zone", "a"),)),
    ).build()
    b = bound(decide(snap, PACK))
    assert (b["in-group"].placement.nodes, b["in-zone-b"].placement.nodes,
            b["both"].placement.nodes) == (("infer-1",), ("train-2",), ("train-1",))


def test_a_queue_limited_to_resource_groups_places_only_there():
    snap = cluster().nodes(node("a").gpus(1).group("cheap"), node("b").gpus(1).group("fast")).queue(
        queue("q").groups("fast")).jobs(job("j").gpus(1)).build()
    assert bound(decide(snap, PACK))["j"].placement.nodes == ("b",)


def test_a_selector_that_matches_no_node_is_rejected():
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("j").gpus(1).selector((("zone", "mars"),))).build()
    d = decide(snap, PACK)
    assert codes(d, "j") == ["never-fits"] and rejected(d)["j"].reasons[0].resource == "node"


# -- health and cordons --------------------------------------------------------------------------

def test_unhealthy_devices_are_never_used():
    snap = cluster().nodes(node("n1").gpus(4).unhealthy(0).unhealthy(2)).jobs(
        job("two").gpus(2).submitted(0),
        job("frac").gpus(0.5).submitted(1),
    ).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["two"]) == [("n1", (1, 3))]
    assert "frac" in waiting(d)  # devices 1 and 3 are taken whole; 0 and 2 are unhealthy


def test_a_cordoned_node_is_never_used():
    snap = cluster().nodes(node("old").gpus(8).cordoned(), node("new").gpus(2)).jobs(
        *[job(f"j{k}").gpus(1).submitted(k) for k in range(3)]).build()
    d = decide(snap, PACK)
    assert all(b.placement.nodes == ("new",) for b in d.binds) and len(d.binds) == 2


def test_a_job_that_only_a_cordoned_node_could_hold_waits_rather_than_is_rejected():
    # Cordoning is an operator's temporary hold (maintenance), like Kubernetes' cordon: the
    # job waits until the node is back; it is not failed as if it could never run.
    snap = cluster().nodes(node("big").gpus(8).cordoned(), node("small").gpus(2)).jobs(
        job("eight").gpus(8)).build()
    d = decide(snap, PACK)
    assert "eight" in waiting(d) and "eight" not in rejected(d)


# -- binpack, spread, topology ------------------------------------------------------------------

def _half_used():
    return cluster().nodes(node("n1").gpus(4), node("n2").gpus(4)).jobs(
        job("r").gpus(2).running_on(("n1", [0, 1])))


@pytest.mark.parametrize("policy,expected", [
    (PACK, "n1"),     # the fuller node (2 free) keeps n2 whole for a 4-GPU job
    (SPREAD, "n2"),   # the emptier node (4 free)
], ids=["binpack", "spread"])
def test_binpack_and_spread_choose_different_nodes(policy, expected):
    snap = _half_used().jobs(job("one").gpus(1)).build()
    assert bound(decide(snap, policy))["one"].placement.nodes == (expected,)


@pytest.mark.parametrize("policy,device", [
    (PACK, 0),    # the most used device that still has room (0.5 used)
    (SPREAD, 1),  # the least used device
], ids=["binpack", "spread"])
def test_binpack_and_spread_choose_different_devices_for_a_fraction(policy, device):
    snap = cluster().nodes(node("n1").gpus(2)).jobs(
        job("half").gpus(0.5).running_on(("n1", [0], 500)),
        job("quarter").gpus(0.25)).build()
    assert devices_of(bound(decide(snap, policy))["quarter"]) == [("n1", (device,))]


def test_a_four_gpu_replica_lands_inside_one_nvlink_domain():
    # Domains interleave: devices 0,2,4,6 are link "a", 1,3,5,7 link "b". The first four free
    # devices (0-3) would span both; one domain holds four.
    snap = cluster().nodes(node("n1").gpus(8, nvlink=list("abababab"))).jobs(
        job("four").gpus(4)).build()
    (_, devs), = devices_of(bound(decide(snap, PACK))["four"])
    assert len({"abababab"[i] for i in devs}) == 1


def test_without_nvlink_a_four_gpu_replica_lands_inside_one_numa_node():
    snap = cluster().nodes(node("n1").gpus(8, numa=[0, 1, 0, 1, 0, 1, 0, 1])).jobs(
        job("four").gpus(4)).build()
    (_, devs), = devices_of(bound(decide(snap, PACK))["four"])
    assert len({k % 2 for k in devs}) == 1


def test_nvlink_comes_before_numa():
    # Devices 0-3 share NUMA 0 but sit in two NVLink domains; 4-7 are split across NUMA nodes
    # but share NVLink domain "z". NVLink wins: 4-7.
    snap = cluster().nodes(node("n1").gpus(
        8, nvlink=["x", "x", "y", "y", "z", "z", "z", "z"], numa=[0, 0, 0, 0, 0, 1, 0, 1])).jobs(
        job("four").gpus(4)).build()
    assert devices_of(bound(decide(snap, PACK))["four"]) == [("n1", (4, 5, 6, 7))]


def test_topology_policy_prefers_a_node_where_the_replica_shares_a_domain():
    # n1 has 4 free GPUs split 2/2 over two NVLink domains and two NUMA nodes; n2 has 6 free,
    # 4 of them in one domain. Binpack takes the fuller n1; topology scoring takes n2.
    links = ["a", "a", "a", "a", "b", "b", "b", "b"]
    numa = [0, 0, 0, 0, 1, 1, 1, 1]
    snap = cluster().nodes(node("n1").gpus(8, nvlink=links, numa=numa),
                           node("n2").gpus(8, nvlink=links, numa=numa)).jobs(
        job("r1").gpus(4).running_on(("n1", [0, 1, 4, 5])),
        job("r2").gpus(2).running_on(("n2", [0, 1])),
        job("four").gpus(4)).build()
    assert bound(decide(snap, PACK))["four"].placement.nodes == ("n1",)
    b = bound(decide(snap, TOPOLOGY))["four"]
    assert devices_of(b) == [("n2", (4, 5, 6, 7))]
