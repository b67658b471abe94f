"""Ordering for job completion time: shortest job first, and least attained service (Tiresias).

LAS: a job's attained service is GPUs x seconds run, earlier attempts included; thresholds
cut it into levels and level 0 goes first. It preempts through its effective priority: a
waiting job at a lower level may evict a running job of its queue at a higher level.
"""

from __future__ import annotations

import pytest

from builders import bound, cluster, decide, job, node, waiting
from rota.core import InvalidSpec
from rota.scheduler import build_policy

SJF = {"preset": "besteffort", "order": "shortest-first"}


def las(*thresholds: float) -> dict:
    return {"preset": "default", "backfill": "none", "placement": "binpack",
            "order": {"name": "las", "args": {"thresholds_gpu_s": list(thresholds)}}}


def test_shortest_walltime_goes_first_and_jobs_without_walltime_last():
    # one 8-GPU node, three 8-GPU jobs: only one can run; the 10-minute one is chosen even
    # though it was submitted last, and the job without a walltime would come after the 2h one
    snap = cluster().nodes(node("n").gpus(8)).jobs(
        job("long").gpus(8).walltime(7200).submitted(0),
        job("unknown").gpus(8).submitted(1),
        job("short").gpus(8).walltime(600).submitted(2),
    ).build()
    d = decide(snap, SJF)
    assert list(bound(d)) == ["short"]
    policy = build_policy(SJF)
    keys = sorted(snap.pending, key=policy.order.pending_key)
    assert [j.id for j in keys] == ["short", "long", "unknown"]


def test_attained_service_counts_earlier_attempts_and_the_running_one():
    # 2 GPUs running since t=100, 500 GPU-s from an earlier attempt: at t=400,
    # 500 + 2 x (400 - 100) = 1100 GPU-s
    j = job("a").gpus(2).running_on(("n", [0, 1]), since=100).attained_gpu_s(500.0).build()
    assert j.attained(400.0) == pytest.approx(1100.0)


@pytest.mark.parametrize("attained_now, preempted", [
    # running job: 4 GPUs since t=0; at t=1000 it has 4 x 1000 = 4000 GPU-s; with a
    # threshold at 3600 it is at level 1 and the new job (level 0) evicts it
    (4000.0, True),
    # with a threshold at 5000 both are at level 0: same effective priority, no eviction
    (None, False),
], ids=["higher-level-evicted", "same-level-kept"])
def test_las_preempts_a_job_that_attained_more_service(attained_now, preempted):
    threshold = 3600.0 if attained_now else 5000.0
    snap = cluster().nodes(node("n").gpus(4)).jobs(
        job("old").gpus(4).running_on(("n", [0, 1, 2, 3]), since=0).submitted(0),
        job("new").gpus(4).submitted(900),
    ).build()
    d = decide(snap, las(threshold), now=1000.0)
    assert ({p.job for p in d.preemptions} == {"old"}) is preempted
    assert "new" in waiting(d)


def test_las_orders_waiting_jobs_by_level_then_submission():
    # a job requeued after 7200 GPU-s of service (level 1 with a 3600 threshold) waits behind a
    # fresh job submitted later (level 0)
    snap = cluster().nodes(node("n").gpus(1)).jobs(
        job("veteran").gpus(1).submitted(0).attained_gpu_s(7200.0),
        job("fresh").gpus(1).submitted(50),
    ).build()
    d = decide(snap, las(3600.0), now=100.0)
    assert list(bound(d)) == ["fresh"]


@pytest.mark.parametrize("bad", [[], [0.0], [10.0, 5.0]])
def test_las_thresholds_must_be_positive_and_increasing(bad):
    with pytest.raises(InvalidSpec) as err:
        build_policy(las(*bad))
    assert err.value.field.startswith("order.args.thresholds_gpu_s")
