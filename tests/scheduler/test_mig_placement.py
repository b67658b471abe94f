"""MIG instances in placement, screening and quota: a job asking for a profile gets free
instances of exactly that profile; no other job ever gets an instance.

Node ``mig-box`` below: GPU 0 whole (an A100-40GB), GPU 1 in MIG mode cut as 4g.20gb at 0,
2g.10gb at 4 and 1g.5gb at 6 (devices 2000, 2004, 2006).
"""

from __future__ import annotations

import pytest

from builders import (
    GiB, bound, cluster, codes, decide, devices_of, job, node, queue, rejected, waiting,
)
from rota.scheduler import ReasonCode

PACK = {"preset": "besteffort"}


def mig_box(name: str = "mig-box"):
    return node(name).gpus(1, "A100-40GB", 40).mig(("4g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6))


def test_a_profile_job_gets_a_free_instance_of_that_profile():
    snap = cluster().nodes(mig_box()).jobs(job("small").mig("2g.10gb")).build()
    b = bound(decide(snap, PACK))["small"]
    (rep,) = b.placement.replicas
    # its share is its charge, 2 of 7 compute slices (285.7 milli-GPU, rounded), and all
    # of the instance's memory
    assert [(d.index, d.milli, d.memory_mib) for d in rep.devices] == [(2004, 286, 10 * GiB)]


def test_an_instance_held_is_not_given_twice():
    snap = cluster().nodes(mig_box()).jobs(
        job("r").mig("1g.5gb").running_with(("mig-box", [(2006, 143, 5 * GiB)])),
        job("next").mig("1g.5gb")).build()
    d = decide(snap, PACK)
    assert "next" not in bound(d)
    (reason,) = waiting(d)["next"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.RESOURCES, "mig-1g.5gb", 1, 0, 1)


def test_several_instances_of_one_profile():
    snap = cluster().nodes(node("n").mig(*[("1g.5gb", s) for s in range(7)])).jobs(
        job("a").mig("1g.5gb", 3).submitted(0), job("b").mig("1g.5gb", 3).submitted(1),
        job("c").mig("1g.5gb", 3).submitted(2)).build()
    d = decide(snap, PACK)
    a, b = bound(d)["a"], bound(d)["b"]
    taken = [i for x in (a, b) for _, devs in devices_of(x) for i in devs]
    assert sorted(taken) == [1000, 1001, 1002, 1003, 1004, 1005]  # 6 distinct instances
    assert "c" in waiting(d)  # one 1g left, it needs 3


def test_whole_gpu_jobs_never_take_an_instance():
    snap = cluster().nodes(mig_box()).jobs(
        job("one").gpus(1).submitted(0), job("another").gpus(1).submitted(1)).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["one"]) == [("mig-box", (0,))]
    assert "another" in waiting(d)  # the free 4g, 2g and 1g instances are no whole GPU


def test_a_whole_gpu_job_larger_than_the_whole_gpus_is_rejected():
    snap = cluster().nodes(mig_box()).jobs(job("two").gpus(2)).build()
    (reason,) = rejected(decide(snap, PACK))["two"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.capacity) == (
        ReasonCode.NEVER_FITS, "gpu", 2, 1)


def test_a_share_never_lands_on_an_instance():
    only_mig = cluster().nodes(node("n").mig(("7g.40gb", 0))).jobs(job("half").gpus(0.5)).build()
    assert codes(decide(only_mig, PACK), "half") == ["never-fits"]
    both = cluster().nodes(mig_box()).jobs(
        *[job(f"f{k}").gpus(0.5).submitted(k) for k in range(3)]).build()
    d = decide(both, PACK)
    assert [devices_of(bound(d)[f"f{k}"]) for k in range(2)] == [[("mig-box", (0,))]] * 2
    assert "f2" in waiting(d)  # GPU 0 is full; the instances take no share


def test_a_profile_no_gpu_has_is_refused_at_submit():
    snap = cluster().nodes(mig_box()).jobs(job("big").mig("3g.20gb")).build()
    (reason,) = rejected(decide(snap, PACK))["big"].reasons
    assert reason.code is ReasonCode.NO_MATCHING_GPU
    assert reason.detail == ("no GPU here has MIG instances of profile 3g.20gb (the profiles "
                             "here: 1g.5gb, 2g.10gb, 4g.20gb)")
    plain = cluster().nodes(node("n").gpus(2)).jobs(job("big").mig("1g.10gb")).build()
    (reason,) = rejected(decide(plain, PACK))["big"].reasons
    assert reason.detail.endswith("(no GPU here is MIG-enabled)")


def test_more_instances_than_a_node_has_is_refused():
    snap = cluster().nodes(mig_box()).jobs(job("many").mig("1g.5gb", 2)).build()
    (reason,) = rejected(decide(snap, PACK))["many"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.capacity) == (
        ReasonCode.NEVER_FITS, "mig-1g.5gb", 2, 1)


def test_the_model_patterns_pick_the_gpus_instances_come_from():
    snap = cluster().nodes(
        mig_box("a100"),
        node("h100").mig(("1g.10gb", 0), ("3g.40gb", 4), model="H100-80GB", memory_gib=80),
    ).jobs(job("h").mig("1g.10gb", models=("*H100*",)),
           job("a").mig("1g.10gb", models=("*A100*",))).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["h"]) == [("h100", (1000,))]
    assert codes(d, "a") == ["no-matching-gpu"]  # an A100-40GB's 1g.10gb is not cut here


@pytest.mark.parametrize("held, admitted", [(0, 2), (1, 1), (2, 0)])
def test_a_quota_counts_instances_of_a_profile(held: int, admitted: int):
    # mig-1g.5gb: 2 per queue; ``held`` instances already run, so 2 - held more start
    running = [job(f"r{k}").mig("1g.5gb").running_with(("n", [(1000 + k, 143, 5 * GiB)]))
               for k in range(held)]
    snap = cluster().nodes(node("n").mig(*[("1g.5gb", s) for s in range(7)])).queue(
        queue("q").limits(nominal={"mig-1g.5gb": 2})).jobs(
        *running, *[job(f"j{k}").mig("1g.5gb").submitted(k) for k in range(3)]).build()
    d = decide(snap, PACK)
    assert len([j for j in bound(d) if j.startswith("j")]) == admitted
    refused = waiting(d)["j2"].reasons[0]
    assert (refused.code, refused.resource) == (ReasonCode.QUOTA, "mig-1g.5gb")


def test_a_gpu_quota_charges_an_instance_its_compute_slices():
    # gpu: 0.5 = 500 milli-GPU; 3g (429) fits, 3g + 1g (429 + 143 = 572) does not
    snap = cluster().nodes(node("n").mig(("3g.20gb", 0), ("1g.5gb", 4))).queue(
        queue("q").quota(gpu=0.5)).jobs(
        job("three").mig("3g.20gb").submitted(0), job("one").mig("1g.5gb").submitted(1)).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["three"]) == [("n", (1000,))]
    (reason,) = waiting(d)["one"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.free) == (
        ReasonCode.QUOTA, "gpu", 143, 71)


@pytest.mark.parametrize("placement", ["binpack", "spread", "topology", "round-robin", "random",
                                       "dotprod", "bestfit", "gpupacking", "gpuclustering"])
def test_every_placement_plugin_keeps_instances_and_whole_gpus_apart(placement: str):
    # a plugin that remembers a node's score per request must not take a profile request
    # for a whole-GPU one: after "m" takes the 4g, "w2" finds no whole GPU and waits
    snap = cluster().nodes(mig_box()).jobs(
        job("w").gpus(1).submitted(0), job("m").mig("4g.20gb").submitted(1),
        job("w2").gpus(1).submitted(2), job("m2").mig("2g.10gb").submitted(3)).build()
    d = decide(snap, {"preset": "besteffort", "placement": placement})
    assert {j: devices_of(b) for j, b in bound(d).items()} == {
        "w": [("mig-box", (0,))], "m": [("mig-box", (2000,))], "m2": [("mig-box", (2004,))]}
    assert "w2" in waiting(d)
