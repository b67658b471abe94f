"""Launches written in bulk (``transition_many`` with every move SCHEDULED -> RUNNING) leave the
store exactly as the same moves made one by one do: rows, events, attempt history and the
records returned; a batch that cannot be written in bulk (a job not scheduled, another kind of
move among them) is made one move at a time, each its own outcome, as before. On SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from rota.core import DeviceShare, IllegalTransition, JobState as S, Placement, ReplicaPlacement
from rota.scheduler import Bind, Decisions
from rota.store import Move, Store
from rota.store import moves as store_moves
from rota.store.moves import BULK_MIN
from rota.store.schema import attempts, job_events, jobs
from storekit import seed, submission

N = BULK_MIN + 4


def scheduled(store: Store, n: int) -> list[str]:
    ids = [store.submit(submission(1)) for _ in range(n)]
    binds = [Bind(j, Placement((ReplicaPlacement("n1", (DeviceShare(i % 8, 1000, 1024),)),)),
                  "any") for i, j in enumerate(ids)]
    assert store.apply(Decisions(binds=binds), 5.0).bound == tuple(ids)
    return ids


def state_of(store: Store) -> dict[str, Any]:
    """Everything the moves wrote, without the ids and times that differ between stores."""
    with store._engine.connect() as conn:  # read behind the store's back, as a check
        rows = [dict(r._mapping) for r in conn.execute(select(jobs).order_by(jobs.c.id))]
        events = [(r.job, r.kind, r.message, r.data) for r in conn.execute(
            select(job_events).order_by(job_events.c.id))]
        history = [dict(r._mapping) for r in conn.execute(
            select(attempts).order_by(attempts.c.job, attempts.c.attempt))]
    for r in rows:
        r.pop("updated_at", None)
    return {"jobs": rows, "events": events, "attempts": history}


def launches(ids: list[str], reason: str | None = None) -> list[Move]:
    return [Move(j, S.RUNNING, reason=reason, backend_handle={"pid": 1000 + int(j)})
            for j in ids]


def test_bulk_launches_write_what_one_by_one_launches_write(db_url, clock, tmp_path,
                                                           monkeypatch):
    made = []
    bulk_path = store_moves._launched
    monkeypatch.setattr(store_moves, "_launched",
                        lambda *a: made.append(bulk_path(*a)) or made[-1])
    with Store.open(db_url, clock=clock) as bulk:
        seed(bulk, gpus=8)
        ids = scheduled(bulk, N)
        out = bulk.transition_many(launches(ids, reason="started"))
        assert made and made[-1] is not None  # written in bulk
        assert [r.id for r in out] == ids and all(r.state is S.RUNNING for r in out)
        assert [r.backend_handle for r in out] == [{"pid": 1000 + int(j)} for j in ids]
        written = state_of(bulk)
    with Store.open(tmp_path / "one-by-one", clock=clock) as single:
        seed(single, gpus=8)
        ids = scheduled(single, N)
        for move in launches(ids, reason="started"):
            single.transition_many([move])  # fewer than BULK_MIN: one at a time
        assert state_of(single) == written


def test_a_batch_with_a_job_not_scheduled_is_made_one_move_at_a_time(store):
    seed(store, gpus=8)
    ids = scheduled(store, N)
    store.transition(ids[5], S.PENDING, reason="requeued")  # no longer scheduled
    out = store.transition_many(launches(ids))
    assert isinstance(out[5], IllegalTransition), out[5]
    assert [r.backend_handle for i, r in enumerate(out) if i != 5] == [
        {"pid": 1000 + int(j)} for i, j in enumerate(ids) if i != 5]
    assert store.get_job(ids[5]).state is S.PENDING


def test_a_batch_with_another_kind_of_move_is_made_one_move_at_a_time(store):
    seed(store, gpus=8)
    ids = scheduled(store, N)
    moves = launches(ids)
    moves[2] = Move(ids[2], S.FAILED, exit_code=1, reason="launch failed")
    out = store.transition_many(moves)
    assert out[2].state is S.FAILED and out[2].exit_code == 1
    assert all(r.state is S.RUNNING for i, r in enumerate(out) if i != 2)


def test_bulk_binds_write_what_one_by_one_binds_write(db_url, clock, tmp_path, monkeypatch):
    from rota.store import cycle as store_cycle
    made = []
    bulk_path = store_cycle._bound
    monkeypatch.setattr(store_cycle, "_bound", lambda *a: made.append(bulk_path(*a)) or made[-1])
    with Store.open(db_url, clock=clock) as bulk:
        seed(bulk, gpus=8)
        ids = scheduled(bulk, N)
        assert made and made[-1] is True  # written in bulk
        written = state_of(bulk)
    with Store.open(tmp_path / "one-by-one", clock=clock) as single:
        seed(single, gpus=8)
        ids = [single.submit(submission(1)) for _ in range(N)]
        for i, j in enumerate(ids):  # fewer than BULK_MIN at a time: one by one
            one = Bind(j, Placement((ReplicaPlacement("n1", (DeviceShare(i % 8, 1000, 1024),)),)),
                       "any")
            assert single.apply(Decisions(binds=[one]), 5.0).bound == (j,)
        assert made[-1] is False
        assert state_of(single) == written


def test_binds_with_a_job_no_longer_pending_are_made_one_at_a_time(store):
    seed(store, gpus=8)
    ids = [store.submit(submission(1)) for _ in range(N)]
    store.request_cancel(ids[4], "alice")  # cancelled while the cycle decided
    binds = [Bind(j, Placement((ReplicaPlacement("n1", (DeviceShare(i % 8, 1000, 1024),)),)),
                  "any") for i, j in enumerate(ids)]
    result = store.apply(Decisions(binds=binds), 5.0)
    assert result.bound == tuple(j for i, j in enumerate(ids) if i != 4)
    assert ids[4] in result.stale
    assert store.get_job(ids[4]).state is S.CANCELLED
