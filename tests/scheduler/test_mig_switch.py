"""Placing around a planned MIG switch: a job that may not be evicted and would still run when
a switch takes an instance away is not placed on it; it gets an instance that stays, or
waits with the reason ``mig-switch``. Jobs that end before the switch, and jobs that may be
evicted with their checkpoint grace, take such instances as before.

Node ``box`` below: an A100-40GB cut as 4g.20gb at 0 (device 1000, it stays) and 3g.20gb at
4 (device 1004, the switch at t=1000 removes it); a second one as 1g.5gb at 0 (device 2000,
removed) and 1g.5gb at 1 (device 2001, stays); and a whole GPU 2 that the switch cuts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import bound, cluster, decide, devices_of, job, node, waiting
from rota.core.wording import hint, sentence
from rota.scheduler import ReasonCode

SWITCH = 1000.0
PACK = {"preset": "besteffort"}


def switching(built, at: float, *indices: int):
    """``built`` with a switch planned at ``at`` that takes devices ``indices`` away."""
    devices = tuple(replace(d, switch_at=at) if d.index in indices else d for d in built.devices)
    return replace(built, devices=devices)


def box(*doomed: int):
    built = (node("box").mig(("4g.20gb", 0), ("3g.20gb", 4)).mig(("1g.5gb", 0), ("1g.5gb", 1))
             .gpus(1, "A100-40GB", 40).build())
    return switching(built, SWITCH, *doomed)


DOOMED = (1004, 2000, 2)


@pytest.mark.parametrize("spec, device", [
    (job("ends-before").mig("3g.20gb").preemptible(False).walltime(SWITCH - 100), 1004),
    (job("ends-at").mig("3g.20gb").preemptible(False).walltime(SWITCH), 1004),
    (job("checkpointable").mig("3g.20gb"), 1004),          # preemptible, no walltime
    (job("stays").mig("4g.20gb").preemptible(False), 1000),
    # two 1g.5gb are free; the one the switch removes has the lower index, which a job that
    # could be evicted would take; a job that may not be takes the one that stays
    (job("small-safe").mig("1g.5gb"), 2000),
    (job("small-long").mig("1g.5gb").preemptible(False).walltime(5000), 2001),
], ids=lambda x: x if isinstance(x, int) else x._f["id"])
def test_who_may_take_an_instance_a_switch_removes(spec, device) -> None:
    snap = cluster().nodes(box(*DOOMED)).jobs(spec).build()
    b = bound(decide(snap, PACK, now=0.0))[spec._f["id"]]
    assert devices_of(b) == [("box", (device,))]


@pytest.mark.parametrize("spec", [
    job("long").mig("3g.20gb").preemptible(False).walltime(SWITCH + 1),
    job("endless").mig("3g.20gb").preemptible(False),
    job("whole").gpus(1).preemptible(False).walltime(2 * SWITCH),
], ids=["long", "no-walltime", "whole-gpu-cut"])
def test_a_job_that_may_not_be_evicted_waits_for_instances_that_stay(spec) -> None:
    name = spec._f["id"]
    snap = cluster().nodes(box(*DOOMED)).jobs(spec).build()
    d = decide(snap, PACK, now=0.0)
    assert name not in bound(d)
    (reason,) = waiting(d)[name].reasons
    assert (reason.code, reason.capacity, reason.detail) == (ReasonCode.MIG_SWITCH, SWITCH, "box")
    assert reason.requested == spec._f.get("walltime_s")
    assert sentence(reason, now=400.0) == (
        "It fits now only on MIG instances of box that a planned geometry switch removes in "
        "10m, before it would end; it waits for instances that stay.")
    assert "walltime that ends before the switch" in hint(reason)
    # without the switch it runs there at once
    assert name in bound(decide(cluster().nodes(box()).jobs(spec).build(), PACK, now=0.0))


def test_a_switch_planned_with_eviction_marks_nothing() -> None:
    """A plan that may evict (``evict: true``) marks no device: every job may take every
    instance, and the switch evicts it with its grace. Here: no switch_at at all."""
    spec = job("long").mig("3g.20gb").preemptible(False).walltime(SWITCH + 1)
    snap = cluster().nodes(box()).jobs(spec).build()
    assert devices_of(bound(decide(snap, PACK))["long"]) == [("box", (1004,))]


def test_a_job_bound_earlier_in_the_cycle_leaves_the_staying_instance_taken() -> None:
    """Two long jobs for one 1g.5gb that stays: the first takes it, the second waits for the
    switch's reason (the removed one is free, but not for it)."""
    snap = cluster().nodes(box(*DOOMED)).jobs(
        job("a").mig("1g.5gb").preemptible(False).walltime(5000).submitted(0),
        job("b").mig("1g.5gb").preemptible(False).walltime(5000).submitted(1)).build()
    d = decide(snap, PACK, now=0.0)
    assert devices_of(bound(d)["a"]) == [("box", (2001,))]
    assert [r.code for r in waiting(d)["b"].reasons] == [ReasonCode.MIG_SWITCH]
