"""Group commit: concurrent submits share transactions, and each is acknowledged only once its
own transaction has committed.

Checked on both databases: every acknowledged id is stored once, after a reopen; ids are
unique; a submit that starts after another was acknowledged gets a larger id; a bad submission
fails alone while the rest of its batch commits; a batch the database refuses is retried item
by item; a closed store refuses submits.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from rota.core import InvalidSpec
from rota.store import JobFilter, Store
from rota.store.group import GroupCommit, StoreClosed
from storekit import seed, submission

THREADS, PER_THREAD = 8, 25


def hold_writer(group: GroupCommit) -> tuple[threading.Event, object]:
    """Park the writer inside an item until the returned event is set, so that whatever is
    queued meanwhile becomes the next batch."""
    inside, gate = threading.Event(), threading.Event()

    def park(conn, memo) -> bool:
        inside.set()
        return gate.wait(10)

    blocker = group.start(park)
    assert inside.wait(10)
    return gate, blocker


def test_concurrent_submits_are_all_stored_once_in_order_of_acknowledgement(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    acked: list[tuple[int, int]] = []  # (acknowledgement number, id), in acknowledgement order
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def worker(_: int) -> None:
        barrier.wait()
        for _ in range(PER_THREAD):
            job_id = int(store.submit(submission(1)))
            with lock:
                acked.append((len(acked), job_id))

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(worker, range(THREADS)))
    batches, items = store.group.batches, store.group.items
    store.close()

    ids = [job_id for _, job_id in acked]
    assert len(ids) == len(set(ids)) == THREADS * PER_THREAD
    assert items == THREADS * PER_THREAD and 1 <= batches <= items
    with Store.open(db_url, clock=clock) as again:
        stored = [int(r.id) for r in again.list_jobs(JobFilter(), limit=1000).items]
        assert sorted(stored) == sorted(ids)
        assert all(len(again.events(str(i))) == again.get_job(str(i)).version == 1 for i in ids)


def test_a_submit_started_after_an_acknowledgement_gets_a_larger_id(db_url, clock):
    # every worker checks: the id it gets is above every id acknowledged before it asked
    store = seed(Store.open(db_url, clock=clock))
    highest = [0]
    lock = threading.Lock()
    violations: list[tuple[int, int]] = []

    def worker(_: int) -> None:
        for _ in range(PER_THREAD):
            with lock:
                floor = highest[0]
            job_id = int(store.submit(submission(1)))
            with lock:
                if job_id <= floor:
                    violations.append((floor, job_id))
                highest[0] = max(highest[0], job_id)

    try:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(worker, range(THREADS)))
    finally:
        store.close()
    assert violations == []


def test_a_bad_submission_fails_alone_and_its_batch_commits(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    gate, blocker = hold_writer(store.group)
    good = [store.submit_future(submission(1)) for _ in range(3)]
    bad = store.submit_future(submission(1, project="nope"))
    stranger = store.submit_future(submission(1, user="bob"), member=True)  # bob is not in p
    more = store.submit_future(submission(1))
    gate.set()
    blocker.result(10)  # type: ignore[attr-defined]
    try:
        with pytest.raises(InvalidSpec) as err:
            bad.result(10)
        assert err.value.field == "project"
        with pytest.raises(InvalidSpec) as err:
            stranger.result(10)
        assert err.value.field == "project" and "not a member" in err.value.reason
        stored = [f.result(10) for f in (*good, more)]
        assert [int(r.id) for r in stored] == sorted(int(r.id) for r in stored)
        assert [store.get_job(r.id) for r in stored] == stored  # the returned record is the row
        assert store.group.batches == 2  # the blocker's, then everything queued behind it
    finally:
        store.close()


def test_a_batch_the_database_refuses_is_retried_item_by_item(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    gate, blocker = hold_writer(store.group)
    good = store.submit_future(submission(1))
    broken = store.group.start(lambda conn, memo: conn.execute(text("SELECT * FROM no_table")))
    after = store.submit_future(submission(1))
    gate.set()
    try:
        blocker.result(10)  # type: ignore[attr-defined]
        with pytest.raises(Exception) as err:
            broken.result(10)
        assert "no_table" in str(err.value)
        assert [store.get_job(f.result(10).id).id for f in (good, after)] == [
            good.result().id, after.result().id]
    finally:
        store.close()


def test_a_closed_store_refuses_submits_after_finishing_queued_ones(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    queued = store.submit_future(submission(1))
    store.close()
    assert queued.result(10).id
    with pytest.raises(StoreClosed):
        store.submit(submission(1))
    store.close()  # idempotent


def test_a_batch_holds_at_most_max_batch_items():
    calls: list[int] = []

    class Conn:
        pass

    def begin():
        from contextlib import contextmanager

        @contextmanager
        def tx():
            calls.append(0)
            yield Conn()
        return tx()

    group = GroupCommit(begin, max_batch=2)
    gate, first = hold_writer(group)
    rest = [group.start(lambda conn, memo, i=i: i) for i in range(5)]
    gate.set()
    assert [f.result(10) for f in rest] == list(range(5))
    assert first.result(10) is True  # type: ignore[attr-defined]
    group.close()
    # 1 (the gate) + 5 queued items in batches of at most 2 = 1 + 3 transactions
    assert (len(calls), group.batches, group.items) == (4, 4, 6)
    with pytest.raises(ValueError):
        GroupCommit(begin, max_batch=0)
