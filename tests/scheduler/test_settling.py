"""Plans settle, over random cohorts: ``rota plan``'s loop (cycles at one ``now``, victims
requeued at once) on random clusters, cohorts of queues with random quotas, borrowing and
lending limits and preemption settings, and jobs of random priorities, some running and some
arriving. For every example, with several policies:

- the plan converges within a bounded number of cycles (``len(jobs) + 3``);
- no job is preempted twice (the input does not change during a plan);
- no victim could be put back with its preemptor still fitting: checked inside the cycle,
  on the overlay and quota book as they are when the victims are chosen.

``ROTA_SETTLE_EXAMPLES`` raises the number of examples per policy (the suite runs 250).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rota.cli.plan import run_plan
from rota.core import (
    ANY_FLAVOR, BorrowWithinCohort, Flavor, FlavorQuota, GpuDevice, GpuRequest, Job, Node,
    Queue, ReclaimWithinCohort, ReplicaRequest, WithinQueue,
)
from rota.scheduler import Snapshot, build_policy
from rota.scheduler.candidates import setting
from rota.scheduler.victims import Search

from .invariants import check_capacity, check_quota

EXAMPLES = int(os.environ.get("ROTA_SETTLE_EXAMPLES", "250"))
POLICIES = {
    "default": {"preset": "default"},
    "binpack-no-backfill": {"preset": "default", "placement": "binpack", "backfill": "none"},
    "fair": {"preset": "fair"},
    "fairshare": {"preset": "fairshare"},
    "lifo": {"preset": "default", "order": "lifo", "backfill": "none"},
}
GiB = 1024


def random_cluster(rng: random.Random) -> tuple[Node, ...]:
    nodes = []
    for n in range(rng.randint(1, 3)):
        gpus = rng.choice([0, 2, 4, 8, 8])
        devices = tuple(GpuDevice(k, "H100", 80 * GiB) for k in range(gpus))
        nodes.append(Node(f"n{n}", rng.choice([16, 64]) * 1000, 256 * GiB, devices))
    return tuple(nodes)


def random_queues(rng: random.Random) -> dict[str, Queue]:
    queues = {}
    for k in range(rng.randint(2, 3)):
        nominal = rng.randint(0, 8) * 1000
        borrowing = {"gpu": rng.randint(0, 4) * 1000} if rng.random() < 0.3 else {}
        lending = {"gpu": rng.randint(0, nominal // 1000) * 1000} if rng.random() < 0.3 else {}
        queues[f"q{k}"] = Queue(
            f"q{k}", {ANY_FLAVOR: FlavorQuota({"gpu": nominal}, borrowing, lending)},
            rng.choice(["c", "c", "c", None]), rng.choice(list(WithinQueue)),
            rng.choice(list(ReclaimWithinCohort)),
            borrow_within_cohort=rng.choice(list(BorrowWithinCohort)))
    return queues


def random_job(rng: random.Random, name: str, queues: list[str], t: float) -> Job:
    count = rng.choice([0, 1, 1, 1, 2, 4])
    gpu = GpuRequest(count) if count or rng.random() < 0.5 else GpuRequest(1, rng.choice([250, 500]))
    return Job(name, rng.choice(["p1", "p2"]), rng.choice(queues),
               ReplicaRequest(rng.randint(1, 8) * 1000, rng.randint(1, 32) * GiB, gpu),
               priority=rng.randint(0, 3), replicas=rng.choice([1, 1, 1, 2]),
               walltime_s=rng.choice([None, None, float(rng.randint(100, 1000))]),
               submit_time=t, preemptible=rng.random() > 0.15)


def checked(policy):
    """The policy, with its victim search checked for needless victims on every plan."""
    plugin = policy.preemption
    if plugin is None:
        return policy
    real = plugin.find

    def find(cycle, job, capped=False):
        plan = real(cycle, job, capped)
        if plan is not None:
            assert_no_needless_victim(cycle, plugin, job, plan, capped)
        return plan

    plugin.find = find
    return policy


def assert_no_needless_victim(cycle, plugin, job, plan, capped) -> None:
    models = dict(cycle.flavors(job))[plan.flavor]
    search = Search(cycle, job, setting(cycle, job, plan.flavor), cycle.shape(job, models),
                    capped, plan.borrow, plugin.exact_limit, plugin.budget, plugin.node_trials)
    gone = [*plan.free, *plan.victims]
    assert search.fits_without(gone), f"{job.id} does not fit with its victims gone"
    for v in plan.victims:
        others = [x for x in gone if x.id != v.id]
        assert not search.fits_without(others), (
            f"{v.id} evicted for {job.id}, which fits without evicting it")


def settle(snap: Snapshot, policy, now: float):
    run = run_plan(snap, policy, now)
    jobs = len(snap.jobs)
    assert run.converged and run.cycles <= jobs + 3, f"{run.cycles} cycles for {jobs} jobs"
    twice = [j for j, n in Counter(p.job for _, p in run.preemptions).items() if n > 1]
    assert not twice, f"preempted twice: {twice}"
    check_capacity(run.final)
    check_quota(run.final)
    return run


@pytest.mark.parametrize("name", list(POLICIES))
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_plans_settle_without_needless_or_repeated_evictions(name, seed):
    note(f"policy {name}, seed {seed}")
    rng = random.Random(seed)
    policy = checked(build_policy(POLICIES[name]))
    queues = random_queues(rng)
    names = list(queues)
    early = tuple(random_job(rng, f"e{k}", names, 0.0) for k in range(rng.randint(1, 10)))
    snap = Snapshot(random_cluster(rng), queues, early, {},
                    {ANY_FLAVOR: Flavor(ANY_FLAVOR)})
    first = settle(snap, policy, 0.0)  # what runs was placed by the scheduler itself
    late = tuple(random_job(rng, f"l{k}", names, 50.0) for k in range(rng.randint(1, 8)))
    settle(replace(first.final, jobs=first.final.jobs + late), policy, 100.0)
