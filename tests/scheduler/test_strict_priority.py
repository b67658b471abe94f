"""Strict priority without walltimes, a queue option: while a higher-priority job of the
queue waits for room and no reservation says when it starts, lower-priority jobs of the queue
do not take the nodes it could use (Slurm without backfill, Backend.AI behave so). With
walltimes known, EASY backfill reserves for it and the others backfill around it, as without
the option."""

from __future__ import annotations

import pytest

from builders import bound, cluster, codes, decide, job, node, queue

POLICIES = ["besteffort", {"preset": "default", "backfill": "none"}, "default"]


def _lab(strict: bool, walltimes: bool = False, other_group: bool = False):
    q = queue("q").strict_priority(strict)
    # n1: 8 GPUs, 4 held by a job that never says when it ends (or ends at t=100)
    running = job("run").gpus(4).priority(50).running_on(("n1", [0, 1, 2, 3]), since=0)
    if walltimes:
        running = running.walltime(100)
    small = job("small").gpus(2).priority(1).submitted(1)
    if walltimes:
        small = small.walltime(50)
    if other_group:
        small = small.resource_group("other")
    return cluster().nodes(node("n1").gpus(8), node("n2").gpus(2).group("other")).queue(q).jobs(
        running, job("big").gpus(8).priority(5).submitted(2), small)


@pytest.mark.parametrize("policy", POLICIES, ids=["besteffort", "priority", "default"])
def test_a_lower_priority_job_does_not_take_the_room_a_waiting_one_needs(policy):
    d = decide(_lab(strict=True).build(), policy, 10.0)
    assert d.binds == []
    assert codes(d, "big") == ["resources"] and codes(d, "small") == ["blocked"]


@pytest.mark.parametrize("policy", POLICIES, ids=["besteffort", "priority", "default"])
def test_without_the_option_the_lower_priority_job_goes_ahead(policy):
    assert "small" in bound(decide(_lab(strict=False).build(), policy, 10.0))


def test_jobs_that_cannot_use_its_nodes_are_not_held():
    d = decide(_lab(strict=True, other_group=True).build(), "besteffort", 10.0)
    assert "small" in bound(d)


def test_with_walltimes_known_backfill_stays_as_it_is():
    # big is reserved at t=100, when run ends; small (50 s) ends before: it backfills
    d = decide(_lab(strict=True, walltimes=True).build(), "default", 10.0)
    assert [r.job for r in d.reservations] == ["big"]
    assert bound(d)["small"].backfilled
