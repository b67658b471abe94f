"""``Store.bill``: usage and each job's ``billed_until`` in one transaction; ``billed_until``
never moves back and is a note that neither bumps the job's version nor adds an event."""

from __future__ import annotations

import pytest

from storekit import seed, submission


def test_bill_adds_usage_and_records_billed_until_without_a_new_version(store, clock) -> None:
    seed(store)
    job = store.submit(submission(2))
    before = store.get_job(job)
    store.bill({"p": 20.0}, {job: 1010.0}, now=1010.0)
    store.bill({"p": 5.0}, {job: 1005.0}, now=1012.0)  # an older time does not win
    rec = store.get_job(job)
    assert rec.billed_until == 1010.0
    assert (rec.version, len(store.events(job))) == (before.version, len(store.events(before.id)))
    assert store.usage(1012.0)["p"] == pytest.approx(25.0, rel=1e-3)  # decays a little in 2 s
