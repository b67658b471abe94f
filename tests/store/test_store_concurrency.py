"""Two writers at once (the API and the control loop, each with its own ``Store`` and
connections, as two processes would have) neither corrupt the store nor lose an update.

Invariants checked after the race: every submitted job exists; each job's ``version`` equals
the number of its events (no write went unrecorded, no write overwrote another); the state
events of a job replay through the state table; no GPU was ever handed out twice.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from rota.core import IllegalTransition, JobState, check_transition
from rota.scheduler import build_policy, run_cycle
from rota.store import JobFilter, Store
from storekit import seed, submission

S = JobState


def assert_history_consistent(store: Store, job_id: str) -> None:
    rec, events = store.get_job(job_id), store.events(job_id)
    assert rec.version == len(events), job_id
    state = S.PENDING
    for event in events:
        if event.kind == "state":
            assert event.data["from"] == state, (job_id, event)
            check_transition(state, S(event.data["to"]))
            state = S(event.data["to"])
    assert state is rec.state


def test_a_backend_report_and_a_cancel_racing_on_one_job_both_count(db_url, clock):
    api, loop = seed(Store.open(db_url, clock=clock)), Store.open(db_url, clock=clock)
    try:
        ids = [api.submit(submission(0)) for _ in range(12)]
        loop.apply(run_cycle(loop.snapshot(1.0), build_policy("default"), 1.0), 1.0)
        for job_id in ids:
            loop.transition(job_id, S.RUNNING)

        def race(job_id: str) -> bool:
            """True when the cancel was accepted (it came first)."""
            barrier = threading.Barrier(2)

            def cancel():
                barrier.wait()
                try:
                    api.request_cancel(job_id, by="alice")
                    return True
                except IllegalTransition:
                    return False

            def finish():
                barrier.wait()
                loop.transition(job_id, S.SUCCEEDED, exit_code=0)

            with ThreadPoolExecutor(2) as pool:
                accepted, done = pool.submit(cancel), pool.submit(finish)
                done.result()
                return accepted.result()

        for job_id in ids:
            accepted = race(job_id)
            rec = api.get_job(job_id)
            assert rec.state is S.SUCCEEDED and rec.exit_code == 0
            assert rec.cancel_requested is accepted  # the cancel is neither lost nor invented
            assert_history_consistent(api, job_id)
    finally:
        api.close()
        loop.close()


def test_the_api_and_the_control_loop_writing_at_once(db_url, clock):
    api, loop = seed(Store.open(db_url, clock=clock), gpus=4), Store.open(db_url, clock=clock)
    policy, submitted, errors = build_policy("default"), [], []
    done = threading.Event()

    def users():
        try:
            for k in range(30):
                job_id = api.submit(submission(1))
                submitted.append(job_id)
                if k % 3 == 0:
                    try:
                        api.request_cancel(job_id, by="alice")
                    except IllegalTransition:
                        pass  # the loop finished it first
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            done.set()

    def control_loop():
        now = 10.0
        for _ in range(400):
            now += 1
            snap = loop.snapshot(now)
            held = Counter((r.node, d.index) for j in snap.active for r in j.placement.replicas
                           for d in r.devices)
            assert all(count == 1 for count in held.values()), held
            loop.apply(run_cycle(snap, policy, now), now)
            for job in loop.snapshot(now).active:
                rec = loop.get_job(job.id)
                if rec.cancel_requested:
                    loop.transition(job.id, S.CANCELLED)
                elif job.state is S.SCHEDULED:
                    loop.transition(job.id, S.RUNNING)
                else:
                    loop.transition(job.id, S.SUCCEEDED, exit_code=0)
            if done.is_set() and not loop.snapshot(now).jobs:
                return

    thread = threading.Thread(target=users)
    thread.start()
    try:
        control_loop()
    finally:
        thread.join()
    try:
        assert errors == []
        jobs = api.list_jobs(JobFilter(), limit=1000).items
        assert sorted(r.id for r in jobs) == sorted(submitted) and len(submitted) == 30
        assert all(r.state in (S.SUCCEEDED, S.CANCELLED) for r in jobs)
        for job_id in submitted:
            assert_history_consistent(api, job_id)
    finally:
        api.close()
        loop.close()
