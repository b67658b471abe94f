"""A base kept between cycles decides as a base built afresh from the full snapshot.

The property runs random clusters, queues and job mixes for several cycles both ways: one
``run_cycle`` on the full snapshot of each cycle, one on a single ``Base`` fed with the deltas
of ``apply_decisions`` (jobs that started or changed while holding: ``hold``; jobs that ended
or were evicted: ``release``) and shown only the pending jobs. Decisions must be identical,
and after every cycle the kept base must equal one built afresh (free capacity per node and
device, node buckets and their order, quota usage, allocations, no cap left behind).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import cluster, job, node
from rota.core import InvalidSpec
from rota.scheduler import Snapshot, apply_decisions, build_policy, run_cycle
from rota.scheduler.base import Base
from rota.scheduler.context import Cycle

from .test_properties import FLAVORS, ended, random_job, random_nodes, random_queues

POLICIES = {
    "default": "default",  # priority, preemption, EASY backfill, topology
    "fifo": "fifo",
    "besteffort": "besteffort",
    "fair": "fair",
    "fairshare": "fairshare",
    "spread": "spread",
    "las": {"preset": "besteffort", "order": "las", "preemption": "minimal-victims"},
    "sjf-easy": {"preset": "fifo", "order": "shortest-first", "backfill": "easy"},
    "gpuclustering": {"preset": "default", "placement": "gpuclustering"},  # follows the journal
    # starts after the node of the latest job bound among those holding resources
    "round-robin": {"preset": "fifo", "placement": "round-robin"},
}


def fingerprint(base: Base) -> tuple:
    """Everything a cycle reads from a base, as plain values (zero amounts left out)."""
    state = base.state
    slots = tuple((s.cpu, s.mem, tuple(s.milli), tuple(s.gmem), s.whole, tuple(s.level_count),
                   s.cap is None) for s in state.slots)
    pools = tuple((key, tuple(map(tuple, p.whole)), tuple(map(tuple, p.frac)))
                  for key, p in sorted(state.pools.items()))
    book = base.book
    quota = tuple(sorted((k, v) for d in (book.usage, book.pool_used) for k, v in d.items() if v))
    alloc = tuple(sorted((p, r, v) for p, a in base.alloc.items() for r, v in a.items() if v))
    return slots, pools, quota, alloc, tuple(sorted(base.active.items()))


def holders(snapshot: Snapshot) -> dict[str, object]:
    return {j.id: j for j in snapshot.jobs if j.state.holds_resources}


def feed(base: Base, before: Snapshot, after: Snapshot) -> None:
    """Tell ``base`` what changed between two full snapshots."""
    was, now = holders(before), holders(after)
    for job_id in was.keys() - now.keys():
        base.release(job_id)
    for job_id, j in now.items():
        if was.get(job_id) != j:
            base.hold(j)


def both_ways(seed: int, spec, steps: int = 5, by_sync: bool = False) -> int:
    """Run ``steps`` cycles both ways; return how many binds and preemptions were compared.
    ``by_sync``: the kept base is told by ``sync`` of each full snapshot, not by deltas."""
    rng = random.Random(seed)
    fresh_policy, kept_policy = build_policy(spec), build_policy(spec)
    queues = random_queues(rng)
    snap = Snapshot(random_nodes(rng), queues, (), {}, FLAVORS)
    base = Base.of(snap)
    now, serial, compared = 0.0, 0, 0
    for _ in range(steps):
        arrivals = []
        for _ in range(rng.randint(1, 8)):
            arrivals.append(random_job(rng, f"j{serial}", list(queues), now))
            serial += 1
        left = ended(snap, now)
        if not by_sync:
            feed(base, snap, left)
        snap = replace(left, jobs=left.jobs + tuple(arrivals))
        fresh = run_cycle(snap, fresh_policy, now)
        pending = base.sync(snap) if by_sync else replace(snap, jobs=snap.pending)
        kept = run_cycle(pending, kept_policy, now, base=base)
        assert kept == fresh, "a kept base decided differently from a fresh one"
        compared += len(fresh.binds) + len(fresh.preemptions) + len(fresh.reservations)
        after = apply_decisions(snap, fresh, now, evict_now=rng.random() < 0.5)
        if by_sync:
            base.sync(after)
        else:
            feed(base, snap, after)
        assert fingerprint(base) == fingerprint(Base.of(after)), "the kept base drifted"
        snap = after
        now += rng.choice([10.0, 100.0, 250.0])
    return compared


@pytest.mark.parametrize("policy", POLICIES.values(), ids=list(POLICIES))
@settings(max_examples=15, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_a_kept_base_decides_as_a_fresh_one(policy, seed):
    both_ways(seed, policy)


@pytest.mark.parametrize("policy", ["default", "fair", "round-robin"])
@settings(max_examples=15, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_a_base_kept_by_sync_of_full_snapshots_decides_as_a_fresh_one(policy, seed):
    both_ways(seed, POLICIES[policy], by_sync=True)


def test_sync_takes_again_only_the_jobs_that_are_not_the_objects_it_was_given():
    full = _busy_cluster()
    base = Base(full.nodes, full.queues, full.flavors)
    pending = base.sync(full)
    assert {j.id for j in pending.jobs} == {"big", "small", "huge"}
    assert list(base.active) == ["old", "rest"]  # in the snapshot's order
    taken: list[str] = []
    hold = base.hold
    base.hold = lambda job: (taken.append(job.id), hold(job))  # type: ignore[method-assign]
    base.sync(full)  # the same objects: nothing is taken again
    assert taken == []
    # "rest" ended, "old" started its grace period (a new object); the pending jobs are as
    # they were
    old = next(j for j in full.jobs if j.id == "old")
    after = replace(full, jobs=tuple(old.move_to(old.state.PREEMPTING) if j.id == "old" else j
                                     for j in full.jobs if j.id != "rest"))
    base.sync(after)
    assert taken == ["old"] and list(base.active) == ["old"]
    assert fingerprint(base) == fingerprint(Base.of(after))


def test_sync_refuses_a_snapshot_of_other_nodes():
    full = _busy_cluster()
    base = Base.of(full)
    with pytest.raises(InvalidSpec) as err:
        base.sync(replace(full, nodes=full.nodes[:1]))
    assert err.value.field == "snapshot"


def test_the_property_sees_binds_preemptions_and_reservations():
    # the random mixes do exercise what must be undone: over a few seeds, many binds,
    # some preemptions and some reservations are compared
    seen = sum(both_ways(seed, "default", steps=6) for seed in range(30))
    assert seen > 50


# -- a cycle gives its base back ---------------------------------------------------------------

def _busy_cluster():
    # n1 holds 8 GPUs, 6 held by low-priority "old"; "big" (4 GPUs, priority 10) preempts it,
    # "small" (1 GPU) binds on the 2 free, "huge" (8 GPUs) waits with a reservation
    return (cluster().nodes(node("n1").gpus(8), node("n2").gpus(8))
            .jobs(job("old").gpus(6).priority(0).walltime(100).running_on(("n1", [0, 1, 2, 3, 4, 5])),
                  job("rest").gpus(8).priority(5).walltime(50).running_on(("n2", list(range(8)))),
                  job("big").gpus(4).priority(10).submitted(1),
                  job("small").gpus(1).walltime(10).submitted(2),
                  job("huge").gpus(8).priority(1).submitted(3))
            .build())


def test_a_cycle_leaves_its_base_as_it_found_it():
    full = _busy_cluster()
    base = Base.of(full)
    before = fingerprint(base)
    pending = replace(full, jobs=full.pending)
    d = run_cycle(pending, build_policy("default"), 5.0, base=base)
    assert d.preemptions and d.binds and d.reservations  # the cycle changed all three
    assert fingerprint(base) == before
    assert d == run_cycle(full, build_policy("default"), 5.0)


@pytest.mark.parametrize("call, field", [
    (lambda b, s: b.hold(s.pending[0]), "job.state"),
    (lambda b, s: b.release("nobody"), "job_id"),
    (lambda b, s: run_cycle(s, build_policy("fifo"), 0.0, base=b), "snapshot.jobs"),
    (lambda b, s: run_cycle(replace(s, jobs=s.pending, nodes=s.nodes[:1]), build_policy("fifo"),
                            0.0, base=b), "snapshot.nodes"),
    (lambda b, s: run_cycle(replace(s, jobs=s.pending, queues={}), build_policy("fifo"),
                            0.0, base=b), "snapshot.queues"),
], ids=["hold-pending", "release-unknown", "active-in-snapshot", "other-nodes", "other-queues"])
def test_bad_use_of_a_base_names_the_field(call, field):
    full = _busy_cluster()
    base = Base.of(full)
    with pytest.raises(InvalidSpec) as err:
        call(base, full)
    assert err.value.field == field


def test_no_delta_while_a_cycle_runs_on_the_base():
    full = _busy_cluster()
    base = Base.of(full)
    cycle = Cycle(replace(full, jobs=full.pending), build_policy("fifo"), 0.0, base)
    with pytest.raises(RuntimeError, match="while a cycle runs"):
        base.release("old")
    with pytest.raises(RuntimeError, match="already runs"):
        Cycle(replace(full, jobs=full.pending), build_policy("fifo"), 0.0, base)
    cycle.close()
    base.release("old")  # free again once the cycle is closed
    assert "old" not in base.active


def test_hold_replaces_a_job_that_changed_while_holding():
    # "old" starts its grace period: still holding the same GPUs, now PREEMPTING
    full = _busy_cluster()
    base = Base.of(full)
    old = next(j for j in full.jobs if j.id == "old")
    preempting = old.move_to(old.state.PREEMPTING)
    base.hold(preempting)
    after = replace(full, jobs=tuple(preempting if j.id == "old" else j for j in full.jobs))
    assert fingerprint(base) == fingerprint(Base.of(after))


@pytest.mark.parametrize("placement", ["bestfit", "gpuclustering", "binpack"])
def test_placement_plugins_see_the_deltas_between_cycles(placement):
    # one 3-GPU job per cycle on four 8-GPU nodes: each cycle must see the jobs the base was
    # told about since the last one (a plugin that follows the journal rebuilds from a view)
    policy, fresh_policy = (build_policy({"preset": "fifo", "placement": placement})
                            for _ in range(2))
    full = cluster().nodes(*(node(f"n{i}").gpus(8) for i in range(4))).build()
    base = Base.of(full)
    for k in range(8):
        full = replace(full, jobs=full.jobs + (job(f"j{k}").gpus(3).build(),))
        kept = run_cycle(replace(full, jobs=full.pending), policy, float(k), base=base)
        assert kept == run_cycle(full, fresh_policy, float(k))
        before, full = full, apply_decisions(full, kept, float(k))
        feed(base, before, full)
    assert len(holders(full)) == 8  # two per node
