"""The jobs holding resources, which the control loop reads every pass, come from a cache of
records by row version (``Store.held_jobs``); it may not hide a change: after every kind of
write, from this store or another, it equals reading every such row afresh."""

from __future__ import annotations

from rota.core import JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import JobFilter, Store
from storekit import seed, submission

S = JobState
POLICY = build_policy("default")
HOLDING = frozenset({S.SCHEDULED, S.RUNNING, S.PREEMPTING})


def read_afresh(db_url: str, clock):
    with Store.open(db_url, clock=clock) as fresh:
        return list(fresh.list_jobs(JobFilter(states=HOLDING), limit=1000).items)


def test_the_held_jobs_equal_a_fresh_read_after_every_write(db_url, clock):
    store = seed(Store.open(db_url, clock=clock), gpus=4)
    other = Store.open(db_url, clock=clock)
    try:
        ids = [store.submit(submission(1)) for _ in range(3)]
        handle = {"backend": "local", "job_id": ids[0], "launch_id": "x", "attempt": 0,
                  "replicas": []}
        steps = [
            lambda: None,
            lambda: store.apply(run_cycle(store.snapshot(1.0), POLICY, 1.0), 1.0),  # 3 bound
            lambda: store.transition(ids[0], S.RUNNING, backend_handle=handle),
            lambda: store.bill({"p": 10.0}, {ids[0]: 5.0}, 5.0),  # billed_until moves alone
            lambda: other.bill({"p": 10.0}, {ids[0]: 7.0}, 7.0),
            lambda: other.record_handle(ids[1], {**handle, "job_id": ids[1]}),
            lambda: other.request_cancel(ids[1], by="alice"),
            lambda: store.transition(ids[1], S.CANCELLED),       # no longer held
            lambda: other.transition(ids[2], S.PENDING, reason="requeued"),
            lambda: store.apply(run_cycle(store.snapshot(9.0), POLICY, 9.0), 9.0),  # bound again
        ]
        for n, step in enumerate(steps):
            step()
            assert store.held_jobs() == read_afresh(db_url, clock), f"after step {n}"
        held = store.held_jobs()
        assert [r.id for r in held] == [ids[0], ids[2]]
        assert held[0].billed_until == 7.0 and held[0].backend_handle == handle
    finally:
        other.close()
        store.close()
