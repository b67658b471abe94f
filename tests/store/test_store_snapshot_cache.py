"""Snapshots reuse the core jobs of the previous one when a row's version did not change, and
``apply`` does not rewrite a wait it already stored. Neither may hide a change: a snapshot
through a cached store equals a snapshot through a fresh one after every kind of write, from
this store or from another (another process)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import event

from rota.core import DeviceShare, Foreign, JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import Store
from storekit import seed, submission

S = JobState
POLICY = build_policy("default")


def fresh_snapshot(db_url: str, clock, now: float):
    with Store.open(db_url, clock=clock) as fresh:
        return fresh.snapshot(now)


def test_a_cached_snapshot_equals_a_fresh_one_after_every_write(db_url, clock):
    store = seed(Store.open(db_url, clock=clock), gpus=4)
    other = Store.open(db_url, clock=clock)
    try:
        ids = [store.submit(submission(2)) for _ in range(3)]
        steps = [
            lambda: None,
            lambda: store.apply(run_cycle(store.snapshot(1.0), POLICY, 1.0), 1.0),  # 2 bound
            lambda: store.transition(ids[0], S.RUNNING),
            lambda: other.transition(ids[1], S.RUNNING),         # written by another store
            lambda: other.request_cancel(ids[1], by="alice"),
            lambda: store.transition(ids[1], S.CANCELLED),       # leaves the live set
            lambda: other.submit(submission(1)),
            lambda: store.request_cancel(ids[2], by="alice"),    # a pending job: gone at once
        ]
        for n, step in enumerate(steps):
            step()
            assert store.snapshot(2.0) == fresh_snapshot(db_url, clock, 2.0), f"after step {n}"
        assert {j.id for j in store.snapshot(2.0).jobs} == {ids[0], str(int(ids[2]) + 1)}
    finally:
        other.close()
        store.close()


def test_the_holding_jobs_are_the_snapshots_and_keep_its_cache_whole(db_url, clock):
    """``holding_jobs`` (what ``rota nodes`` reads, without the waiting jobs) gives the jobs of
    the snapshot that hold resources, after every write, and reading it never drops a pending
    job from the cache the next snapshot reads."""
    store = seed(Store.open(db_url, clock=clock), gpus=4)
    other = Store.open(db_url, clock=clock)
    try:
        ids = [store.submit(submission(2)) for _ in range(4)]
        steps = [
            lambda: None,
            lambda: store.apply(run_cycle(store.snapshot(1.0), POLICY, 1.0), 1.0),  # 2 bound
            lambda: other.transition(ids[0], S.RUNNING),         # written by another store
            lambda: store.transition(ids[0], S.SUCCEEDED),       # frees its GPUs
            lambda: store.apply(run_cycle(store.snapshot(2.0), POLICY, 2.0), 2.0),
        ]
        for n, step in enumerate(steps):
            step()
            holding = store.holding_jobs()
            assert holding == tuple(j for j in fresh_snapshot(db_url, clock, 2.0).jobs
                                    if j.state.holds_resources), f"after step {n}"
            assert store.snapshot(2.0) == fresh_snapshot(db_url, clock, 2.0), f"after step {n}"
        assert len(store.holding_jobs()) == 2
    finally:
        other.close()
        store.close()


def test_the_queues_view_from_the_overview_is_the_snapshots(db_url, clock):
    """``queue_overview`` (the holding jobs, and each queue's pending jobs counted in the
    database) gives the queues' view that the whole snapshot gives, after every write."""
    from rota.control.queueview import queues_view
    store = seed(Store.open(db_url, clock=clock), gpus=4)
    try:
        ids = [store.submit(submission(2)) for _ in range(4)]
        steps = [
            lambda: None,
            lambda: store.apply(run_cycle(store.snapshot(1.0), POLICY, 1.0), 1.0),  # 2 bound
            lambda: store.transition(ids[0], S.RUNNING),
            lambda: store.transition(ids[0], S.SUCCEEDED),       # frees its GPUs
            lambda: store.request_cancel(ids[3], by="alice"),    # a pending job: gone at once
        ]
        for n, step in enumerate(steps):
            step()
            holding, pending = store.queue_overview()
            assert queues_view(holding, store.bindings(), pending=pending) == queues_view(
                store.snapshot(2.0), store.bindings()), f"after step {n}"
        assert sum(store.queue_overview()[1].values()) == 1
    finally:
        store.close()


def test_nodes_are_parsed_again_only_when_a_row_changed_from_this_store_or_another(
        db_url, clock):
    store = seed(Store.open(db_url, clock=clock), gpus=4)
    other = Store.open(db_url, clock=clock)
    try:
        first = store.snapshot(1.0).nodes
        assert store.snapshot(2.0).nodes is first  # nothing changed: the same nodes
        (n1,) = first
        foreign = Foreign(0, 0, (DeviceShare(3, 1000, n1.devices[3].memory_mib),), "pod x/y")
        steps = [
            lambda: other.set_node("n1", schedulable=False, reason="maintenance"),
            lambda: store.set_node("n1", schedulable=True),
            lambda: other.upsert_nodes([replace(n1, foreign=(foreign,))], backend="local"),
            lambda: store.upsert_nodes([n1, replace(n1, name="n2")], backend="local"),
        ]
        for n, step in enumerate(steps):
            before = store.snapshot(2.0).nodes
            step()
            after = store.snapshot(2.0)
            assert after.nodes is not before, f"step {n} not seen"
            assert after == fresh_snapshot(db_url, clock, 2.0), f"after step {n}"
    finally:
        other.close()
        store.close()


def test_an_unchanged_wait_is_not_written_again(db_url, clock):
    store = seed(Store.open(db_url, clock=clock), gpus=2)
    updates: list[str] = []
    event.listen(store._engine, "before_cursor_execute",
                 lambda conn, cursor, sql, *a: updates.append(sql)
                 if sql.lstrip().upper().startswith("UPDATE") else None)
    try:
        store.submit(submission(2))
        waiting = store.submit(submission(2))  # the GPUs are taken by the first: it waits
        for now in (1.0, 2.0):
            updates.clear()
            decisions = run_cycle(store.snapshot(now), POLICY, now)
            assert [w.job for w in decisions.waits] == [waiting]
            result = store.apply(decisions, now)
            assert result.waiting == (waiting,) and result.stale == {}
            assert store.get_job(waiting).wait_reasons == decisions.waits[0].reasons
        # the first apply wrote the bind and the wait; the second found the wait stored
        assert updates == [], updates
    finally:
        store.close()


def test_a_queued_job_costs_the_snapshot_cache_under_a_kibibyte(tmp_path, clock):
    """Every queued job stays in the store's cache of core jobs for as long as it waits: its
    share of what the cache holds must stay small (equal requests and names are shared)."""
    import gc
    import tracemalloc

    store = seed(Store.open(f"sqlite:///{tmp_path / 'rota.db'}", clock=clock), gpus=1)
    try:
        store.submit_array([submission(1) for _ in range(500)])
        store.snapshot(1.0)                                  # warm: code paths, caches
        store.submit_array([submission(1) for _ in range(2000)])
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            jobs = store.snapshot(2.0).jobs
            del jobs
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
        assert len(store.snapshot(3.0).jobs) == 2500
        assert grown / 2000 < 1024, f"{grown / 2000:.0f} bytes per queued job"
    finally:
        store.close()
