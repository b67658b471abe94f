"""Fair sharing's quota bound (``fairshare.reclaim_bound``): a victim search that could not
pass its queue's quota even with every reachable candidate given back is skipped before any
candidate list is built; one that could goes on and finds the same victims. And the quota
book's what-ifs: ``admits`` answers as ``check``, and charges a caller charged back leave the
book's log (``UndoableBook.mark``/``restore``)."""

from __future__ import annotations

import pytest

from builders import cluster, decide, job, node, queue, waiting
from rota.core import ANY_FLAVOR
from rota.scheduler import build_policy
from rota.scheduler.candidates import Variant, index_of
from rota.scheduler.context import Cycle
from rota.scheduler.plugins.fairshare import FairSearch, fair_candidates, reclaim_bound

POLICY = "fair-sharing"


def snapshot(*pending):
    """One node of 8 GPUs; cohort co: a (nominal 3), b (nominal 1), c (nominal 4). b runs 4
    GPUs (b1, b2: 2 each; it borrows 3, share 375 per mille of the 8 lent), c runs 4 (its
    nominal quota): the cohort's 8 GPUs of quota are in use. Queue a, using nothing, asks
    for ``pending``."""
    return cluster().nodes(node("n1").gpus(8).cpu(64).memory(512)).queue(
        queue("a").cohort("co").quota(gpu=3), queue("b").cohort("co").quota(gpu=1),
        queue("c").cohort("co").quota(gpu=4),
    ).jobs(
        job("b1").queue("b").gpus(2).running_on(("n1", [0, 1])),
        job("b2").queue("b").gpus(2).running_on(("n1", [2, 3])),
        job("c1").queue("c").gpus(4).running_on(("n1", [4, 5, 6, 7])),
        *pending,
    ).build()


def cycle_for(*pending) -> Cycle:
    return Cycle(snapshot(*pending), build_policy(POLICY), 10.0)


@pytest.mark.parametrize("gpus, victims, listed", [
    # within a's nominal quota (3): it takes back what b borrows, first in order, as needed
    (1, {"b1"}, True),
    (3, {"b1", "b2"}, True),
    # 4 GPUs: a would borrow 1 (share 125); b's 4 back would leave room (c 4 + a 4 = 8), so
    # the search runs, but no victim qualifies: b1 leaves b at 125, then b2 would take it
    # to 0, below a's 125, and b's 125 is not above a's (the second strategy)
    (4, None, True),
    # 5 GPUs: c does not borrow, so at most b's 4 could come back: c 4 + a 5 > 8
    (5, None, False),
], ids=["entitled-one", "entitled-both", "strategies-refuse", "quota-never-enough"])
def test_search_goes_on_only_where_the_candidates_could_free_enough_quota(gpus, victims,
                                                                          listed):
    cycle = cycle_for(job("x").queue("a").gpus(gpus))
    x = cycle.snapshot.jobs[-1]
    plan = cycle.find_victims(x)
    assert (None if plan is None else {v.id for v in plan.victims}) == victims
    # no candidate list was made for the search the bound ruled out
    assert bool(index_of(cycle).memo) == listed


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 5, 6, 7, 8])
def test_the_bound_only_rules_out_searches_whose_quota_check_fails(gpus):
    """A False from the bound is a False from ``quota_allows`` over the reachable candidates
    (what the search checks before trying any victim)."""
    cycle = cycle_for(job("x").queue("a").gpus(gpus))
    x = cycle.snapshot.jobs[-1]
    found = fair_candidates(cycle, x, ANY_FLAVOR)
    search = FairSearch(cycle, x, found, cycle.shape(x, ()), False)
    real = [c for c in search.reachable() if c.variant is not Variant.FREE]
    if not reclaim_bound(cycle, x, ANY_FLAVOR):
        assert not search.quota_allows(real)
    assert reclaim_bound(cycle, x, ANY_FLAVOR) == (gpus <= 4)


def test_the_bound_changes_no_decision():
    """The cycle's decisions: the 5-GPU job waits and nobody is evicted for it; the 3-GPU
    job evicts b's borrowers."""
    d = decide(snapshot(job("x").queue("a").gpus(5)), POLICY, now=10.0)
    assert not d.preemptions and "x" in waiting(d)
    d = decide(snapshot(job("x").queue("a").gpus(3)), POLICY, now=10.0)
    assert {p.job for p in d.preemptions} == {"b1", "b2"}


@pytest.mark.parametrize("q, gpus", [("a", 0), ("a", 1), ("a", 2), ("c", 4), ("b", 1),
                                     ("c", 1)])
def test_admits_answers_as_check(q, gpus):
    cycle = cycle_for()
    demand = {"gpu": gpus * 1000}
    expected = cycle.book.check(q, ANY_FLAVOR, demand) is None
    assert cycle.book.admits(q, ANY_FLAVOR, demand) is expected
    assert cycle.policy.admission.admits(cycle.book, q, ANY_FLAVOR, demand) is expected


def test_charges_charged_back_leave_the_log_and_the_book_rolls_back_as_it_was():
    cycle = cycle_for()
    book = cycle.book
    usage = {k: v for k, v in book.usage.items() if v}
    book.charge("a", ANY_FLAVOR, {"gpu": 1000}, 1)  # the cycle's own charge, kept
    kept = len(book.log)
    mark = book.mark()
    for _ in range(3):  # a what-if
        book.charge("b", ANY_FLAVOR, {"gpu": 2000}, -1)
        book.charge("b", ANY_FLAVOR, {"gpu": 2000}, 1)
    book.restore(mark)
    assert len(book.log) == kept and book.version == mark[0]
    cycle.close()
    assert {k: v for k, v in book.usage.items() if v} == usage
