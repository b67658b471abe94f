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


# -- reasons that name the real cause ---------------------------------------------------------

NO_BACKFILL = {"preset": "default", "backfill": "none"}


def _reason(d, job_id):
    (reason,) = waiting(d)[job_id].reasons
    return reason


def test_room_held_only_by_jobs_that_may_not_be_preempted_says_so():
    # n1: 8 GPUs; "keep" (4 GPUs) and "pin" (2) may not be preempted, "low" (2) may. hi needs
    # 4: evicting low alone frees 2, so it could start only if keep went (pin is not needed).
    snap = _cluster().jobs(
        job("keep").gpus(4).preemptible(False).running_on(("n1", [0, 1, 2, 3])),
        job("pin").gpus(2).preemptible(False).running_on(("n1", [4, 5])),
        job("low").gpus(2).running_on(("n1", [6, 7])),
        job("wall").gpus(8).preemptible(False).running_on(("n2", list(range(8)))),
        job("hi").gpus(4).priority(10)).build()
    d = decide(snap, NO_BACKFILL)
    reason = _reason(d, "hi")
    assert (reason.code, reason.resource, reason.requested, reason.free) == (
        ReasonCode.NOT_PREEMPTIBLE, "gpu", 4, 0)
    assert reason.detail == "keep" and d.preemptions == []


def test_room_that_evicting_preemptible_jobs_would_give_is_not_blamed_on_protected_ones():
    # hi has the lowest priority, so nothing may be evicted for it; keep's room (2 GPUs)
    # alone would not do, it would need the preemptible job's too: the plain resources
    # reason stays
    snap = _cluster().jobs(
        job("keep").gpus(2).preemptible(False).running_on(("n1", [0, 1])),
        job("busy").gpus(6).priority(5).running_on(("n1", [2, 3, 4, 5, 6, 7])),
        job("wall").gpus(8).priority(5).running_on(("n2", list(range(8)))),
        job("hi").gpus(4)).build()
    assert _reason(decide(snap, NO_BACKFILL), "hi").code is ReasonCode.RESOURCES


def _cohort(research_borrow=None, product_lend=None):
    return cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).queue(
        queue("research").quota(gpu=4, borrow=research_borrow).cohort("lab"),
        queue("product").quota(gpu=8, lend=product_lend).cohort("lab"),
        queue("other").quota(gpu=4).cohort("lab"))


def test_a_borrowing_limit_is_named_with_its_numbers():
    # research: nominal 4, may borrow 2 (at most 6); it runs 5, the cohort has 11 left; a
    # 2-GPU job would take it to 7
    snap = _cohort(research_borrow=2).jobs(
        job("r").queue("research").gpus(5).running_on(("n1", [0, 1, 2, 3, 4])),
        job("more").queue("research").gpus(2)).build()
    reason = _reason(decide(snap, NO_BACKFILL), "more")
    assert (reason.code, reason.limit, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.QUOTA, "borrowing_limit", 2000, 1000, 6000)


def test_a_lenders_lending_limit_is_named_with_its_numbers():
    # product (nominal 8) lends at most 2 and runs nothing: 6 of its GPUs stay unused; other
    # (4) runs 4; research (4) runs 6 after borrowing product's 2. Research's next 2 GPUs
    # would fit in what product keeps back, not in what is lent.
    snap = _cohort(product_lend=2).jobs(
        job("o").queue("other").gpus(4).running_on(("n2", [0, 1, 2, 3])),
        job("r").queue("research").gpus(6).running_on(("n1", [0, 1, 2, 3, 4, 5])),
        job("more").queue("research").gpus(2)).build()
    reason = _reason(decide(snap, NO_BACKFILL), "more")
    assert (reason.code, reason.limit, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.QUOTA, "lending_limit", 2000, 0, 2000)
    assert "lender product" in reason.detail


def test_a_used_up_cohort_and_a_queue_without_cohort_are_told_apart():
    # other borrows research's 4 GPUs with one job that may not be preempted, so research
    # cannot reclaim them: more waits on the cohort's quota, s on its own queue's
    snap = _cohort().queue(queue("solo").quota(gpu=1)).jobs(
        job("o").queue("other").gpus(8).preemptible(False).running_on(("n2", list(range(8)))),
        job("p").queue("product").gpus(8).running_on(("n1", list(range(8)))),
        job("more").queue("research").gpus(2),
        job("s").queue("solo").gpus(2)).build()
    d = decide(snap, NO_BACKFILL)
    assert (_reason(d, "more").limit, _reason(d, "s").limit) == ("cohort", "nominal")


def test_a_fraction_held_by_gpu_memory_says_gpu_memory_with_the_numbers():
    # n1: one 80 GiB GPU with half its compute and 40 GiB of its memory taken; a 0.25 share
    # asking for 50 GiB fits the compute, not the memory
    snap = cluster().nodes(node("n1").gpus(1)).jobs(
        job("half").gpus(0.5).running_on(("n1", [0], 500)),
        job("j").gpus(0.25, memory_gib=50)).build()
    reason = _reason(decide(snap, NO_BACKFILL), "j")
    assert (reason.code, reason.resource, reason.requested, reason.free, reason.capacity) == (
        ReasonCode.RESOURCES, "gpu_memory", 50 * GiB, 40 * GiB, 80 * GiB)
