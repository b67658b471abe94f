"""``Job.total``: the quota vector of the whole gang, kept on the job after the first call.
What it keeps must never outlive the request and gang size it was worked out from: a copy
made with ``replace`` works out its own, and the kept answer takes no part in equality,
hashing, pickling or ``repr``."""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import pytest

from builders import job
from rota.core.resources import GpuRequest, ReplicaRequest


def _gang():
    return job("g").gpus(2).cpu(4).memory(1).replicas(3).build()


def test_total_is_the_gang_times_one_replica_and_the_same_value_every_call():
    j = _gang()
    # 3 replicas of (2 GPUs = 2,000 milli, 4,000 milli CPU, 1,024 MiB)
    assert j.total() == {"gpu": 6000, "cpu": 12000, "memory": 3072}
    assert j.total() is j.total()


@pytest.mark.parametrize("change, expected", [
    ({"replicas": 1}, {"gpu": 2000, "cpu": 4000, "memory": 1024}),
    ({"request": ReplicaRequest(1000, 512, GpuRequest(count=1))},
     {"gpu": 3000, "cpu": 3000, "memory": 1536}),
], ids=["fewer-replicas", "other-request"])
def test_a_copy_with_another_request_or_gang_size_works_out_its_own(change, expected):
    j = _gang()
    j.total()  # kept on the original
    assert replace(j, **change).total() == expected
    assert j.total() == {"gpu": 6000, "cpu": 12000, "memory": 3072}


def test_the_kept_answer_takes_no_part_in_equality_hashing_pickling_or_repr():
    asked, fresh = _gang(), _gang()
    asked.total()
    assert asked == fresh and hash(asked) == hash(fresh) and repr(asked) == repr(fresh)
    for copied in (pickle.loads(pickle.dumps(asked)), copy.deepcopy(asked)):
        assert copied == asked and copied.total() == asked.total()
    with pytest.raises(AttributeError):
        asked.request = fresh.request  # still frozen
