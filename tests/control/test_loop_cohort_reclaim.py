"""Cohort reclaim through the live control plane, with real processes: a queue takes back the
two GPUs it lent with two evictions, in one round, and nothing moves after that.

One node of 8 (virtual) GPUs; queues a and b of cohort c, 4 GPUs of nominal quota each. b runs
six 1-GPU jobs (two borrowed from a); a, which reclaims from any borrower, submits four. The
victims get their grace period (the clock is moved past it), exit and are requeued; a's jobs
start on what they gave back, and later passes change nothing.
"""

from __future__ import annotations

from collections import Counter

import pytest

from builders import job
from controlkit import drive, python
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.core import FlavorQuota, JobState, Node, Queue, ReclaimWithinCohort
from rota.store import Store, Submission

S = JobState
SLEEPER = python("import time\nwhile True: time.sleep(0.05)\n")
GRACE_S = 10.0


@pytest.fixture
def backend(data_dir) -> LocalBackend:
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("8xH100-80GB"))
    return LocalBackend(data_dir, node=node)


def _submit(store: Store, queue: str, k: int) -> str:
    built = job(f"{queue}{k}").gpus(1).user("alice").project("p").queue(queue).grace_s(GRACE_S)
    return store.submit(Submission.from_job(built.build(), f"{queue}{k}",
                                            {"command": SLEEPER}))


def _running(store: Store, ids: list[str]) -> list[str]:
    return [i for i in ids if store.get_job(i).state is S.RUNNING]


def _preemptions(store: Store, ids: list[str]) -> Counter:
    """How often each job was moved to PREEMPTING, from its recorded history."""
    return Counter(i for i in ids for e in store.events(i)
                   if e.kind == "state" and e.message.startswith("preempted"))


def test_a_reclaiming_queue_evicts_two_borrowed_jobs_and_the_plane_settles(store, loop, clock):
    quota = {"any": FlavorQuota({"gpu": 4000})}
    store.put_queue(Queue("a", quota, "c", reclaim_within_cohort=ReclaimWithinCohort.ANY))
    store.put_queue(Queue("b", quota, "c"))
    b = []
    for k in range(6):
        b.append(_submit(store, "b", k))
        clock.advance(1)  # b0 .. b5 start one after the other
        drive(loop, lambda: len(_running(store, b)) == len(b), f"b{k} to run")
    a = [_submit(store, "a", k) for k in range(4)]
    loop.step()
    assert _preemptions(store, b) == {b[4]: 1, b[5]: 1}  # the two most recent borrowers
    assert len(_running(store, a)) == 2  # two on the free GPUs at once, two wait for b4, b5

    def settled() -> bool:
        clock.advance(GRACE_S + 1)  # past every grace period
        return len(_running(store, a)) == 4

    drive(loop, settled, "a's four jobs to run")
    for _ in range(5):  # later passes change nothing
        clock.advance(GRACE_S + 1)
        loop.step()
    assert sorted(_running(store, a)) == sorted(a)
    assert sorted(_running(store, b)) == sorted(b[:4])
    assert [store.get_job(i).state for i in b[4:]] == [S.PENDING, S.PENDING]
    assert _preemptions(store, a + b) == {b[4]: 1, b[5]: 1}
