"""Restart safety: close the store, open it again from the same file or URL, nothing is lost."""

from __future__ import annotations

from rota.core import Flavor, JobState
from rota.scheduler import build_policy, run_cycle
from rota.store import JobFilter, Store
from storekit import seed, submission


def test_everything_survives_a_restart(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    store.put_flavor(Flavor("h100", ("*H100*",)))
    token = store.issue_token("alice", "cli").token
    ids = [store.submit(submission(4)) for _ in range(3)]
    decisions = run_cycle(store.snapshot(10.0), build_policy("default"), 10.0)
    store.apply(decisions, 10.0)
    store.transition(ids[0], JobState.RUNNING)
    store.request_cancel(ids[1], by="alice")
    store.add_usage("p", 1234.0, now=10.0)
    before = (store.snapshot(20.0), store.list_jobs(JobFilter()), [store.events(i) for i in ids],
              store.list_tokens(), store.list_users(), store.list_projects())
    store.close()

    with Store.open(db_url, clock=clock) as again:
        after = (again.snapshot(20.0), again.list_jobs(JobFilter()),
                 [again.events(i) for i in ids], again.list_tokens(), again.list_users(),
                 again.list_projects())
        assert after == before
        assert again.authenticate(token).user == "alice"
        assert again.get_job(ids[1]).cancel_requested
        # ids keep growing after a restart: a new job never takes an old id
        assert int(again.submit(submission(1))) == int(ids[-1]) + 1
