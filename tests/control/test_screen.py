"""The screening at submit keeps its view of the inventory for a few seconds, but never
refuses on it: a node or queue added a moment ago is seen before a job is refused."""

from __future__ import annotations

import pytest

from builders import job
from rota.control.screen import REUSE_S, Screen
from rota.core import GpuDevice, InvalidSpec, Node, Queue
from rota.store import Store, Submission


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "db", clock=lambda: 100.0)
    s.create_project("p")
    s.create_user("alice", ["p"])
    s.put_queue(Queue("q"))
    s.upsert_nodes([Node("n1", 64_000, 512 * 1024,
                         tuple(GpuDevice(i, "H100", 81920) for i in range(2)))], "local")
    yield s
    s.close()


def submission(gpus: int) -> Submission:
    return Submission.from_job(job("x").gpus(gpus).user("alice").project("p").queue("q").build())


def counting(store: Store) -> list[int]:
    calls = [0]
    listed = store.list_nodes

    def list_nodes():
        calls[0] += 1
        return listed()
    store.list_nodes = list_nodes  # type: ignore[method-assign]
    return calls


def test_a_burst_of_submits_reads_the_inventory_once(store):
    calls, ticks = counting(store), Ticks()
    screen = Screen(store, clock=ticks)
    for _ in range(50):
        screen.refuse_if_never_runs(submission(1))
    assert calls[0] == 1
    ticks.t = REUSE_S + 1
    screen.refuse_if_never_runs(submission(1))
    assert calls[0] == 2


def test_a_job_is_refused_with_the_field_and_the_reason(store):
    with pytest.raises(InvalidSpec) as refused:
        Screen(store, clock=Ticks()).refuse_if_never_runs(submission(4))
    assert refused.value.field == "resources.gpu"


def test_a_node_added_a_moment_ago_is_seen_before_a_refusal(store):
    screen = Screen(store, clock=Ticks())
    screen.refuse_if_never_runs(submission(1))          # the view now: one node of 2 GPUs
    devices = tuple(GpuDevice(i, "H100", 81920) for i in range(4))
    store.upsert_nodes([Node("n2", 64_000, 512 * 1024, devices)], "local")
    screen.refuse_if_never_runs(submission(4))          # fits n2: accepted at once
