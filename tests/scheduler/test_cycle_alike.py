"""What a cycle keeps for jobs alike: ``Cycle.alike`` numbers the jobs alike in what a start
reads of them (queue, request, gang size, resource group, selector, container image or not),
and the answers kept per number (a failed start, "could it start", "could it ever be
admitted", the tournament's share keys of ``queue-share``) are those worked out afresh."""

from __future__ import annotations

import pytest

from builders import cluster, job, node, queue
from rota.core import ANY_FLAVOR
from rota.scheduler import build_policy
from rota.scheduler.context import Cycle
from rota.scheduler.plugins.fairshare import _kept_share_part, _share_part

POLICY = "fair-sharing"


def cycle_of(*pending) -> Cycle:
    """One node of 8 GPUs; cohort co: a (nominal 3), b (nominal 5). b runs 4 GPUs."""
    snapshot = cluster().nodes(node("n1").gpus(8).cpu(64).memory(512)).queue(
        queue("a").cohort("co").quota(gpu=3), queue("b").cohort("co").quota(gpu=5),
    ).jobs(
        job("b1").queue("b").gpus(4).running_on(("n1", [0, 1, 2, 3])),
        *pending,
    ).build()
    return Cycle(snapshot, build_policy(POLICY), 10.0)


BASE = dict(queue="a", gpus=2)


def _job(name, **change):
    f = {**BASE, **change}
    b = job(name).queue(f["queue"]).gpus(f["gpus"])
    for field in ("replicas", "resource_group", "selector", "image", "priority", "preemptible"):
        if field in f:
            getattr(b, field)(f[field])
    if "submitted" in f:
        b.submitted(f["submitted"])
    return b.build()


@pytest.mark.parametrize("change", [
    {"priority": 5}, {"submitted": 99.0}, {"preemptible": False},
], ids=["priority", "submission", "not-preemptible"])
def test_jobs_differing_only_in_what_a_start_does_not_read_are_alike(change):
    cycle = cycle_of()
    assert cycle.alike(_job("x")) == cycle.alike(_job("y", **change))


@pytest.mark.parametrize("change", [
    {"queue": "b"}, {"gpus": 1}, {"replicas": 2}, {"resource_group": "rg"},
    {"selector": (("zone", "z1"),)}, {"image": "img:1"},
], ids=["queue", "request", "gang", "resource-group", "selector", "image"])
def test_a_job_differing_in_what_a_start_reads_is_not_alike(change):
    cycle = cycle_of()
    assert cycle.alike(_job("x")) != cycle.alike(_job("y", **change))


def test_alike_numbers_never_meet_kinds():
    cycle = cycle_of()
    x = _job("x")
    kinds = {cycle.kind_of(x), cycle.kind_of(_job("y", gpus=1))}
    assert cycle.alike(x) not in kinds


@pytest.mark.parametrize("gpus, replicas", [(2, 1), (8, 1), (4, 3)])
def test_admissible_answers_as_the_book(gpus, replicas):
    cycle = cycle_of()
    x = _job("x", gpus=gpus, replicas=replicas)
    assert cycle.admissible(x) is cycle.book.admissible_ever(
        "a", x.total(), [f for f, _ in cycle.flavors(x)])
    assert cycle.admissible(x) is (gpus * replicas <= 8)


def test_failed_starts_and_could_start_are_answered_for_jobs_alike_as_afresh():
    cycle = cycle_of()
    x, y = _job("x", gpus=6), _job("y", gpus=6, priority=3)
    assert not cycle.could_start(x) and not cycle.could_start(y)
    assert cycle.try_start(x, False).reasons == cycle.try_start(y, False).reasons
    # a job not alike (2 GPUs: within a's quota and the free room) is not answered with them
    assert cycle.could_start(_job("z"))


def test_the_tournament_keeps_share_keys_only_while_the_book_keeps_its_version():
    cycle = cycle_of()
    shares: dict = {}
    x, y = _job("x", gpus=4), _job("y", gpus=4, priority=2)
    first = _kept_share_part(x, cycle, shares)
    assert first == _share_part(x, cycle) and _kept_share_part(y, cycle, shares) is first
    # a charges 3 GPUs: x's 4 more now make it borrow 4 of the cohort's lendable 8
    cycle.book.charge("a", ANY_FLAVOR, {"gpu": 3000}, 1)
    after = _kept_share_part(y, cycle, shares)
    assert after == _share_part(y, cycle) and after != first
    assert after[0] == 1  # it would borrow
