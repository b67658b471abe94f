"""Node features (``rota.core.nodes``) in placement and screening: a GPU share goes only to a
node that can share a GPU, a job in a container image only to a node that runs containers;
one no node can take is rejected, naming why, and one whose nodes are full waits, saying so;
whole GPUs and jobs without an image go anywhere."""

from __future__ import annotations

from builders import bound, cluster, decide, devices_of, job, node, rejected, waiting
from rota.core.decisions import ReasonCode
from rota.core.nodes import CONTAINERS, GPU_SHARING, SIGNALS
from rota.core.wording import hint, sentence


def test_a_gpu_share_goes_only_to_the_node_that_can_share_a_gpu():
    # n1 comes first in name order and is emptier: without features the share would go there
    snap = cluster().nodes(
        node("n1").gpus(4).features(CONTAINERS),
        node("n2").gpus(1).features(CONTAINERS, GPU_SHARING),
    ).jobs(job("f").gpus(0.5), job("w").gpus(1)).build()
    decisions = decide(snap)
    (where,) = devices_of(bound(decisions)["f"])
    assert where[0] == "n2"
    assert "w" in bound(decisions)


def test_a_share_waits_while_the_only_node_that_can_share_is_full():
    snap = cluster().nodes(
        node("n1").gpus(2).features(CONTAINERS),
        node("n2").gpus(1).features(GPU_SHARING).cordoned(),
    ).jobs(job("f").gpus(0.5)).build()
    decisions = decide(snap)
    assert "f" not in bound(decisions) and "f" not in rejected(decisions)


def test_a_share_no_node_can_take_is_rejected_naming_the_feature():
    snap = cluster().nodes(node("n1").gpus(4).features(CONTAINERS, SIGNALS)).jobs(
        job("f").gpus(0.25), job("w").gpus(2)).build()
    decisions = decide(snap)
    (reason,) = rejected(decisions)["f"].reasons
    assert reason.code is ReasonCode.NEVER_FITS and reason.resource == "gpu"
    assert "0.25 GPU shares need a node that can share a GPU" in sentence(reason)
    assert "HAMi" in (hint(reason) or "")
    assert "w" in bound(decisions)


def hosts_and_pods(host_gpus: int, pod_gpus: int):
    """n1 runs commands (the local backend's features), n2 runs container images (a
    Kubernetes node's): two backends under one control plane."""
    return cluster().nodes(node("n1").gpus(host_gpus).features(GPU_SHARING, SIGNALS),
                           node("n2").gpus(pod_gpus).features(CONTAINERS))


def test_a_job_in_an_image_goes_only_to_the_node_that_runs_containers():
    # n1 comes first in name order and is the fuller fit (packing): without features the job
    # would go there
    snap = hosts_and_pods(1, 4).jobs(job("c").gpus(1).image("python:3.12")).build()
    (where,) = devices_of(bound(decide(snap))["c"])
    assert where[0] == "n2"


def test_a_job_in_an_image_waits_while_only_nodes_without_containers_are_free():
    snap = hosts_and_pods(4, 1).jobs(
        job("busy").gpus(1).image("python:3.12").running_on(("n2", [0])),
        job("c").gpus(1).image("python:3.12")).build()
    decisions = decide(snap)
    assert "c" not in bound(decisions) and "c" not in rejected(decisions)
    (reason,) = waiting(decisions)["c"].reasons
    assert reason.code is ReasonCode.RESOURCES
    assert "no node with the feature it needs (containers)" in sentence(reason)


def test_a_job_without_an_image_may_use_either_node():
    # two jobs of one GPU each and one free GPU on each node: both start, one on each
    snap = hosts_and_pods(1, 1).jobs(job("a").gpus(1), job("b").gpus(1)).build()
    decisions = decide(snap)
    assert {devices_of(bound(decisions)[j])[0][0] for j in ("a", "b")} == {"n1", "n2"}


def test_an_image_no_node_can_run_is_rejected_naming_the_image_and_the_feature():
    snap = cluster().nodes(node("n1").gpus(4).features(GPU_SHARING, SIGNALS)).jobs(
        job("c").gpus(1).image("python:3.12"), job("w").gpus(1)).build()
    decisions = decide(snap)
    (reason,) = rejected(decisions)["c"].reasons
    assert reason.code is ReasonCode.NEVER_FITS and reason.resource == "image"
    assert "container image 'python:3.12'" in sentence(reason)
    assert "feature containers" in sentence(reason)
    assert "drop image" in (hint(reason) or "")
    assert "w" in bound(decisions)


def test_a_job_in_an_image_preempts_only_on_a_node_that_runs_containers():
    # one low-priority job on each node; n1's started last, so it would be the one to go
    # (it loses the least work), but n1 runs no containers: n2's job is evicted
    snap = hosts_and_pods(1, 1).jobs(
        job("old").gpus(1).running_on(("n2", [0]), since=100),
        job("new").gpus(1).running_on(("n1", [0]), since=200),
        job("c").gpus(1).priority(5).image("python:3.12")).build()
    decisions = decide(snap, {"preset": "default", "backfill": "none"})
    assert {p.job for p in decisions.preemptions} == {"old"}


def test_a_job_without_an_image_is_not_held_back_by_an_alike_job_in_an_image_that_waits():
    # c and p ask for the same; c (first in line) finds no room on the containers node, which
    # says nothing about p, which may use n1
    snap = hosts_and_pods(1, 1).jobs(
        job("busy").gpus(1).priority(9).preemptible(False).running_on(("n2", [0])),
        job("c").gpus(1).image("python:3.12").submitted(1),
        job("p").gpus(1).submitted(2)).build()
    for policy in ("default", {"preset": "default", "backfill": "none"}):
        decisions = decide(snap, policy)
        assert "c" in waiting(decisions)
        assert devices_of(bound(decisions)["p"])[0][0] == "n1"

