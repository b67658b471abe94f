"""Group commit: concurrent submits share transactions, and each is acknowledged only once its
own transaction has committed.

Checked on both databases: every acknowledged id is stored once, after a reopen; ids are
unique; a submit that starts after another was acknowledged gets a larger id; a bad submission
fails alone while the rest of its batch commits; a batch the database refuses is retried one
submission at a time; a closed store refuses submits.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from rota.core import InvalidSpec
from rota.store import JobFilter, Store, StoreClosed
from rota.store.group import GroupCommit
from storekit import seed, submission

THREADS, PER_THREAD = 8, 25


class GateClock:
    """A store clock that, once armed, parks the first caller (the writer, inside its
    transaction) until released, so that whatever is submitted meanwhile becomes one batch."""

    def __init__(self) -> None:
        self.armed = False
        self.inside, self.gate = threading.Event(), threading.Event()

    def __call__(self) -> float:
        if self.armed:
            self.armed = False
            self.inside.set()
            assert self.gate.wait(10)
        return 1_000.0

    def hold(self, store: Store) -> Future:
        """Submit one job and park the writer inside its batch; the future of that job."""
        self.armed = True
        first = store.submit_future(submission(1))
        assert self.inside.wait(10)
        return first


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


def test_a_bad_submission_fails_alone_and_its_batch_commits(db_url):
    clock = GateClock()
    store = seed(Store.open(db_url, clock=clock))
    first = clock.hold(store)
    good = [store.submit_future(submission(1)) for _ in range(3)]
    bad = store.submit_future(submission(1, project="nope"))
    stranger = store.submit_future(submission(1, user="bob"), member=True)  # bob is not in p
    more = store.submit_future(submission(1))
    clock.gate.set()
    try:
        first.result(10)
        with pytest.raises(InvalidSpec) as err:
            bad.result(10)
        assert err.value.field == "project"
        with pytest.raises(InvalidSpec) as err:
            stranger.result(10)
        assert err.value.field == "project" and "not a member" in err.value.reason
        stored = [f.result(10) for f in (*good, more)]
        assert [int(r.id) for r in stored] == sorted(int(r.id) for r in stored)
        assert [store.get_job(r.id) for r in stored] == stored  # the returned record is the row
        assert store.group.batches == 2  # the held one, then everything queued behind it
    finally:
        store.close()


def test_a_batch_the_database_refuses_is_retried_item_by_item(db_url):
    # a priority beyond a 64-bit integer passes the store's checks, and the database refuses it
    clock = GateClock()
    store = seed(Store.open(db_url, clock=clock))
    first = clock.hold(store)
    good = store.submit_future(submission(1))
    broken = store.submit_future(submission(1, priority=2 ** 70))
    after = store.submit_future(submission(1))
    clock.gate.set()
    try:
        first.result(10)
        with pytest.raises(Exception) as err:
            broken.result(10)
        assert not isinstance(err.value, InvalidSpec)
        assert [store.get_job(f.result(10).id) for f in (good, after)] == [
            good.result(), after.result()]
        assert store.group.batches == 3  # the held one, then good and after alone
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
    batches: list[list[int]] = []
    inside, gate = threading.Event(), threading.Event()

    @contextmanager
    def begin():
        yield None

    def write(conn, payloads: list[int]) -> list[int]:
        if payloads == [-1]:  # the first: park the writer so the rest queue up
            inside.set()
            gate.wait(10)
        batches.append(payloads)
        return [p * 10 for p in payloads]

    group: GroupCommit[int, int] = GroupCommit(begin, write, max_batch=2)
    first = group.start(-1)
    assert inside.wait(10)
    rest = [group.start(i) for i in range(5)]
    gate.set()
    assert [f.result(10) for f in rest] == [0, 10, 20, 30, 40] and first.result(10) == -10
    group.close()
    # the parked one, then 5 queued payloads in batches of at most 2
    assert batches == [[-1], [0, 1], [2, 3], [4]]
    assert (group.batches, group.items) == (4, 6)
    with pytest.raises(ValueError):
        GroupCommit(begin, write, max_batch=0)
