"""EASY backfill, as Slurm's sched/backfill does it.

The top job that cannot start gets a reservation at the earliest time running jobs' walltimes
free enough room (``started_at + walltime``). Jobs behind it start now only if they cannot
delay it: they end before the reservation starts, or they fit in what the reservation leaves.
Policy: priority order, binpack, no preemption (so that waiting is the only way).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import (
    apply_all, bound, cluster, codes, decide, devices_of, job, node, queue, waiting,
)
from rota.core import (
    DeviceShare, GpuDevice, GpuRequest, Job, JobState, Node, Placement, Queue, ReplicaPlacement,
    ReplicaRequest,
)
from rota.scheduler import Snapshot, apply_decisions

from .invariants import check_capacity

EASY = {"preset": "default", "preemption": "none", "placement": "binpack"}


def _busy(*extra, big_gpus: int = 8, n2: bool = False):
    """n1: 8 GPUs; r1 holds 0-3 until t=100, r2 holds 4-5 until t=300; 6-7 are free.
    The top job ("big", priority 10) wants ``big_gpus`` on one node."""
    nodes = [node("n1").gpus(8)] + ([node("n2").gpus(2)] if n2 else [])
    return cluster().nodes(*nodes).jobs(
        job("r1").gpus(4).walltime(100).running_on(("n1", [0, 1, 2, 3]), since=0),
        job("r2").gpus(2).walltime(300).running_on(("n1", [4, 5]), since=0),
        job("big").gpus(big_gpus).priority(10).submitted(0),
        *extra).build()


@pytest.mark.parametrize("big_gpus,start", [
    (6, 100.0),   # at 100 r1 ends: 2 free + 4 = 6 GPUs
    (8, 300.0),   # 6 are not enough; at 300 r2 ends too: 8
], ids=["after-r1", "after-r2"])
def test_the_top_blocked_job_is_reserved_at_the_earliest_time(big_gpus, start):
    d = decide(_busy(big_gpus=big_gpus), EASY)
    (r,) = d.reservations
    assert (r.job, r.start_at) == ("big", start)
    assert r.placement.nodes == ("n1",)
    assert waiting(d)["big"].estimated_start == start


def test_no_reservation_when_a_blocking_job_has_no_walltime():
    # r2 runs forever (no walltime): 8 GPUs on n1 never come free; the start is unknown.
    snap = cluster().nodes(node("n1").gpus(8)).jobs(
        job("r2").gpus(2).running_on(("n1", [4, 5])),
        job("big").gpus(8).priority(10)).build()
    d = decide(snap, EASY)
    assert d.reservations == [] and waiting(d)["big"].estimated_start is None


@pytest.mark.parametrize("candidate,starts,reason", [
    # ends at 0 + 50 <= 300: done before big starts -> backfills on GPUs 6-7
    (job("short").gpus(2).walltime(50), True, None),
    # ends exactly at 300: still in time
    (job("short").gpus(2).walltime(300), True, None),
    # ends at 500 > 300, and GPUs 6-7 are reserved for big: it would delay big
    (job("long").gpus(2).walltime(500), False, "reserved"),
    # no walltime: it might run forever
    (job("forever").gpus(2), False, "reserved"),
], ids=["short", "ends-at-start", "long", "no-walltime"])
def test_a_job_behind_the_reservation_starts_only_if_it_cannot_delay_it(candidate, starts, reason):
    d = decide(_busy(candidate.submitted(1)), EASY)
    name = candidate.build().id
    if starts:
        b = bound(d)[name]
        assert b.backfilled is True and devices_of(b) == [("n1", (6, 7))]
    else:
        assert codes(d, name) == [reason]
        assert "big" in waiting(d)[name].reasons[0].detail


def test_a_long_job_on_nodes_the_reservation_does_not_use_starts():
    d = decide(_busy(job("long").gpus(2).walltime(5000).submitted(1), n2=True), EASY)
    assert devices_of(bound(d)["long"]) == [("n2", (0, 1))]


def test_a_long_job_may_use_what_the_reservation_leaves_on_its_nodes():
    # big wants 5: at t=100 GPUs 0-3, 6, 7 are free; it is promised 0, 1, 2, 3, 6. GPU 7 is
    # left over at the reservation's start, so a 1-GPU job without walltime may take it now;
    # a second one (wanting GPU 6) may not.
    d = decide(_busy(job("long1").gpus(1).submitted(1), job("long2").gpus(1).submitted(2),
                     big_gpus=5), EASY)
    (r,) = d.reservations
    assert devices_of(r) == [("n1", (0, 1, 2, 3, 6))]
    assert devices_of(bound(d)["long1"]) == [("n1", (7,))]
    assert codes(d, "long2") == ["reserved"]


def test_the_reserved_job_starts_at_its_time_after_backfill():
    # Replay: short backfills now (ends at 50); at t=300 r1, r2 and short have ended, and big
    # finds its 8 GPUs.
    snap = _busy(job("short").gpus(2).walltime(50).submitted(1))
    d = decide(snap, EASY)
    later = _advance(apply_all(snap, d, now=0.0).snapshot, 300.0)
    assert set(bound(decide(later, EASY, now=300.0))) == {"big"}


def _advance(snapshot: Snapshot, t: float) -> Snapshot:
    """Jobs whose walltime has run out by ``t`` are gone (they ended at their walltime)."""
    keep = tuple(j for j in snapshot.jobs
                 if not (j.state.holds_resources and j.expected_end is not None
                         and j.expected_end <= t))
    return replace(snapshot, jobs=keep)


# -- property: EASY never delays the reserved job -----------------------------------------------

@st.composite
def backfill_scenarios(draw):
    nodes, running = [], []
    for n in range(draw(st.integers(1, 3))):
        gpus = draw(st.integers(2, 8))
        name = f"n{n}"
        nodes.append(Node(name, draw(st.integers(8, 32)) * 1000, 256 * 1024, tuple(
            GpuDevice(k, "H100", 80 * 1024) for k in range(gpus))))
        k = 0
        while k < gpus:  # running jobs over a prefix of random sizes; some GPUs left free
            size = draw(st.integers(1, gpus - k))
            if draw(st.booleans()):
                wall = draw(st.one_of(st.none(), st.integers(1, 1000).map(float)))
                running.append(Job(
                    f"r{n}-{k}", "p", "q", ReplicaRequest(draw(st.integers(0, 4)) * 1000, 1024,
                                                          GpuRequest(size)),
                    walltime_s=wall, state=JobState.RUNNING, started_at=0.0, flavor="any",
                    placement=Placement((ReplicaPlacement(name, tuple(
                        DeviceShare(i, 1000, 80 * 1024) for i in range(k, k + size))),))))
            k += size
    top_gpus = draw(st.integers(1, max(len(n.devices) for n in nodes)))
    pending = [Job("top", "p", "q", ReplicaRequest(1000, 1024, GpuRequest(top_gpus)),
                   replicas=draw(st.integers(1, 2)), priority=100)]
    for k in range(draw(st.integers(0, 6))):
        fraction = draw(st.booleans())
        gpu = GpuRequest(1, draw(st.sampled_from([250, 500]))) if fraction \
            else GpuRequest(draw(st.integers(1, 4)))
        pending.append(Job(
            f"b{k}", "p", "q", ReplicaRequest(draw(st.integers(0, 8)) * 1000, 1024, gpu),
            walltime_s=draw(st.one_of(st.none(), st.integers(1, 1500).map(float))),
            submit_time=float(k)))
    return Snapshot(tuple(nodes), {"q": Queue("q")}, tuple(running + pending))


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(backfill_scenarios())
def test_easy_never_delays_the_reserved_job(snap):
    d = decide(snap, EASY)
    if not d.reservations:
        return
    (r,) = d.reservations
    reserved = next(j for j in snap.jobs if j.id == r.job)
    # replay: decisions applied at 0, then time runs to the reservation's start
    later = _advance(apply_decisions(snap, d, 0.0), r.start_at)
    # the promised placement is free then: holding it alongside everyone still running
    # breaks no capacity
    check_capacity(later, [j for j in later.jobs if j.state.holds_resources]
                   + [replace(reserved, state=JobState.RUNNING, placement=r.placement)])
    # and the cycle at that time starts it (only it is pending: nothing ahead of it)
    only = replace(later, jobs=tuple(j for j in later.jobs if j.state.holds_resources or j.id == r.job))
    assert r.job in bound(decide(only, EASY, now=r.start_at))


def test_a_job_held_by_the_cohort_is_reserved_from_when_borrowed_quota_comes_back():
    # cohort c on two 8-GPU nodes: a (nominal 2) and b (nominal 14). a runs 6 GPUs borrowed
    # from b until t=100 and 2 until t=300; b's "wide" (12 GPUs, on two nodes) is held by
    # quota: b may take 16 - 8 = 8 now. At 100 the borrowed 6 come back (and their room):
    # wide is reserved then, and a's next job, which would borrow again, waits instead of
    # taking that quota.
    snap = cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).queue(
        queue("a").quota(gpu=2).cohort("c"), queue("b").quota(gpu=14).cohort("c"),
    ).jobs(
        job("a-long").queue("a").gpus(2).walltime(300).running_on(("n1", [0, 1]), since=0),
        job("a-wide").queue("a").gpus(6).walltime(100).running_on(("n2", list(range(6))), since=0),
        job("wide").queue("b").gpus(6).replicas(2).priority(10).submitted(1),
        job("a-more").queue("a").gpus(2).walltime(1000).submitted(2),
    ).build()
    d = decide(snap, EASY, 10.0)
    (r,) = d.reservations
    assert (r.job, r.start_at) == ("wide", 100.0)
    assert codes(d, "a-more") == ["quota"] and d.binds == []


def _big_borrower(*more):
    # cohort c: a (nominal 16) runs 8 GPUs on n1 until t=100 and 4 on n2 until t=1000; e
    # (nominal 1) submitted big first, a gang of 2 x 6 GPUs that must borrow 11 and cannot
    # start now
    return cluster().nodes(node("n1").gpus(8), node("n2").gpus(8)).queue(
        queue("a").quota(gpu=16).cohort("c"), queue("e").quota(gpu=1).cohort("c"),
        queue("f").quota(gpu=1).cohort("c"),
    ).jobs(
        job("a1").queue("a").gpus(8).walltime(100).running_on(("n1", list(range(8))), since=0),
        job("a2").queue("a").gpus(4).walltime(1000).running_on(("n2", [0, 1, 2, 3]), since=0),
        job("big").queue("e").gpus(6).replicas(2).submitted(1), *more).build()


def test_a_job_that_must_borrow_and_cannot_start_is_reserved_for_at_its_turn():
    # big keeps its turn (it would take nothing now), so EASY reserves for it, at 1000 when
    # both nodes can hold a replica, and holds the room and quota it will borrow against the
    # jobs that would borrow too: f's job (nominal 1, 4 GPUs) would still run then, and waits
    snap = _big_borrower(job("other").queue("f").gpus(4).submitted(2))
    d = decide(snap, {"preset": "besteffort", "backfill": "easy"}, 10.0)
    (r,) = d.reservations
    assert (r.job, r.start_at) == ("big", 1000.0)
    assert d.binds == [] and codes(d, "other") == ["quota"]


def test_a_borrowers_reservation_does_not_hold_what_a_lender_is_owed():
    # a's late job (4 GPUs) keeps a within its nominal 16 (12 + 4): a is entitled to it, so
    # the reservation of big, which would borrow 11 of a's quota, holds neither the quota nor
    # the room against it: late starts now on n2's free GPUs, and big waits for a to give back
    snap = _big_borrower(job("late").queue("a").gpus(4).submitted(2))
    d = decide(snap, {"preset": "besteffort", "backfill": "easy"}, 10.0)
    (r,) = d.reservations
    assert (r.job, r.start_at) == ("big", 1000.0)
    assert [b.job for b in d.binds] == ["late"]
