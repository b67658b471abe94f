"""Rejects and reasons: a job that can never run here is rejected with the reason; a job that
can run later waits with at least one reason; every pending job gets exactly one outcome."""

from __future__ import annotations

import pytest

from builders import GiB, cluster, decide, job, node, queue, rejected, waiting
from rota.scheduler import ReasonCode


def _cluster():
    # two nodes, 8 x 80 GiB GPUs, 64 cores, 512 GiB each
    return cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).queue(queue("q"))


@pytest.mark.parametrize("spec,resource,requested,capacity", [
    (job("j").gpus(12), "gpu", 12, 8),                         # 12 GPUs > 8 per node
    (job("j").cpu(100), "cpu", 100_000, 64_000),               # milli-cores
    (job("j").memory(1024), "memory", 1024 * GiB, 512 * GiB),  # MiB
    (job("j").gpus(1, memory_gib=100), "gpu_memory", 100 * GiB, 80 * GiB),
    (job("j").gpus(0.5, memory_gib=96), "gpu_memory", 96 * GiB, 80 * GiB),
], ids=["gpus", "cpu", "memory", "gpu-memory", "fraction-memory"])
def test_a_replica_bigger_than_any_node_is_rejected(spec, resource, requested, capacity):
    d = decide(_cluster().jobs(spec).build())
    (reason,) = rejected(d)["j"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.capacity) == (
        ReasonCode.NEVER_FITS, resource, requested, capacity)
    assert d.binds == [] and d.waits == []


def test_a_gang_bigger_than_the_cluster_is_rejected_as_a_gang():
    # 3 replicas x 8 GPUs on two 8-GPU nodes: each replica fits some node, but the empty cluster
    # holds only 2 of them, so the gang could only ever wait (and under strict FIFO block its
    # queue for good): it is rejected, as Slurm rejects a job asking for more nodes than exist
    d = decide(_cluster().jobs(job("j").gpus(8).replicas(3)).build(), "besteffort")
    (reason,) = rejected(d)["j"].reasons
    assert (reason.code, reason.resource, reason.requested, reason.capacity) == (
        ReasonCode.NEVER_FITS, "replicas", 3, 2)


def test_a_gang_that_fits_the_empty_cluster_waits_as_a_gang():
    # 2 x 8 GPUs on two 8-GPU nodes, one of which is half busy: it waits, it is not rejected
    snap = _cluster().jobs(job("busy").gpus(4).running_on(("n1", [0, 1, 2, 3])),
                           job("j").gpus(8).replicas(2)).build()
    d = decide(snap, "besteffort")
    assert [r.code for r in waiting(d)["j"].reasons] == [ReasonCode.GANG]


def test_an_unknown_queue_is_rejected():
    d = decide(_cluster().jobs(job("j").queue("nope").gpus(1)).build())
    (reason,) = rejected(d)["j"].reasons
    assert reason.code is ReasonCode.UNKNOWN_QUEUE and "nope" in reason.detail


def test_a_queue_without_a_flavour_for_the_model_rejects_the_job():
    # the queue only has quota for flavour "a100"; the job accepts only H100s
    snap = (cluster().nodes(node("a").gpus(1, "A100"), node("h").gpus(1, "H100"))
            .flavor("a100", "*A100*").queue(queue("q").quota("a100", gpu=1))
            .jobs(job("j").gpus(1, models=("*H100*",))).build())
    (reason,) = rejected(decide(snap)).get("j").reasons
    assert reason.code is ReasonCode.NO_FLAVOR


def test_a_flavour_places_its_jobs_on_its_models_only():
    snap = (cluster().nodes(node("a").gpus(1, "A100"), node("h").gpus(1, "H100"))
            .flavor("h100", "*H100*").queue(queue("q").quota("h100", gpu=1))
            .jobs(job("j").gpus(1)).build())
    (b,) = decide(snap).binds
    assert (b.flavor, b.placement.nodes) == ("h100", ("h",))


def test_every_pending_job_gets_exactly_one_outcome_and_every_wait_a_reason():
    snap = _cluster().jobs(
        job("r").gpus(8).running_on(("n1", list(range(8)))),
        job("fits").gpus(4).submitted(1),
        job("too-big").gpus(16).submitted(2),
        job("lost").queue("nope").submitted(3),
        job("waits").gpus(8).submitted(4),
        job("also-waits").gpus(6).submitted(5),
    ).build()
    d = decide(snap, "besteffort")
    outcomes = [b.job for b in d.binds] + [w.job for w in d.waits] + [r.job for r in d.rejects]
    assert sorted(outcomes) == sorted(j.id for j in snap.pending)
    assert all(w.reasons for w in d.waits) and all(r.reasons for r in d.rejects)
    assert set(rejected(d)) == {"too-big", "lost"}


def test_a_gang_larger_than_the_whole_cluster_is_rejected():
    # two 8-GPU nodes hold at most 2 replicas of 8 GPUs: a 4 x 8 gang can never start (it would
    # otherwise wait forever, and under strict FIFO block its queue); 2 x 8 is fine
    from builders import bound
    snap = cluster().nodes(node("a").gpus(8), node("b").gpus(8)).jobs(
        job("huge").gpus(8).replicas(4), job("ok").gpus(8).replicas(2)).build()
    d = decide(snap, "fifo")
    reason = rejected(d)["huge"].reasons[0]
    assert (reason.code.value, reason.resource, reason.requested, reason.capacity) == (
        "never-fits", "replicas", 4, 2)
    assert "ok" in bound(d)
