"""MIG through the store: a job asking for a profile keeps it across the store, is placed on an
instance by the real cycle, and is charged the instance's compute slices of its GPU."""

from __future__ import annotations

from datetime import datetime, timezone

from builders import job, node
from rota.core import JobState, Queue
from rota.core.queues import FlavorQuota
from rota.scheduler import build_policy, run_cycle
from rota.store import Store, Submission
from storekit import GiB, seed

H = 3600.0
T0 = datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()


def mig_cluster(store: Store) -> Store:
    """n1: 8 H100s; n2: one A100-40GB cut as 4g.20gb + 2g.10gb + 1g.5gb."""
    seed(store)
    store.upsert_nodes([node("n2").mig(("4g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)).build()],
                       backend="local")
    return store


def place(store: Store, now: float) -> None:
    decisions = run_cycle(store.snapshot(now), build_policy({"preset": "besteffort"}), now)
    store.apply(decisions, now)


def test_an_instance_is_charged_its_compute_slices(store, clock):
    mig_cluster(store)
    clock.t = T0
    one = store.submit(Submission.from_job(job("x").mig("1g.5gb").user("alice").project("p")
                                           .build()))
    place(store, clock.t)
    record = store.get_job(one)
    (rep,) = record.job.placement.replicas
    assert [(d.index, d.milli, d.memory_mib) for d in rep.devices] == [(1006, 143, 5 * GiB)]
    assert record.job.request.gpu.profile == "1g.5gb"
    store.transition(one, JobState.RUNNING)
    clock.t = T0 + 7 * H
    store.transition(one, JobState.SUCCEEDED, exit_code=0)
    report, _ = store.report(T0, T0 + 24 * H, ["project", "model"], now=clock.t)
    # 7 h on 1 of the A100's 7 compute slices: 7 x 0.143 GPU (1/7, rounded to milli-GPU)
    assert {line.key: round(line.gpu_hours, 9) for line in report.lines} == {
        ("p", "A100-40GB"): 1.001}


def test_a_queue_quota_of_instances_is_kept(store, clock):
    seed(store)
    store.upsert_nodes([node("n3").mig(("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4)).build()],
                       backend="local")
    store.put_queue(Queue("q", {"any": FlavorQuota({"mig-2g.10gb": 1})}))
    assert store.snapshot(clock.t).queues["q"].quotas["any"].nominal == {"mig-2g.10gb": 1}
    jobs = [store.submit(Submission.from_job(job(n).mig("2g.10gb").user("alice").project("p")
                                             .build())) for n in ("a", "b")]
    place(store, clock.t)
    first, second = (store.get_job(j) for j in jobs)
    assert first.job.state is JobState.SCHEDULED
    # two 2g.10gb instances are still free, but the queue may hold one
    assert second.job.state is JobState.PENDING
    assert [(r.code.value, r.resource) for r in second.wait_reasons] == [("quota", "mig-2g.10gb")]
