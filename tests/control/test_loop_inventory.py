"""The control loop keeps the store's nodes as the backend reports them: what work outside rota
holds is never given to a job, a node the backend cannot use takes nothing new, a node that
disappears from the report is marked, and nothing is written while nothing changes."""

from __future__ import annotations

from dataclasses import replace

from builders import job
from controlkit import FakeClock, drive, state_is
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import DeviceShare, Foreign, JobState as S, Node
from rota.scheduler import build_policy
from rota.store import Store, Submission


class Reporting(LocalBackend):
    """The local backend, with an inventory the test changes (as Slurm's or a cluster's would)."""

    def __init__(self, data_dir, node: Node) -> None:
        super().__init__(data_dir, node=node)
        self.report = LocalBackend.inventory(self)  # what the store was given at first

    def inventory(self) -> list[Node]:
        return list(self.report)


def submit(store: Store, gpus: int) -> str:
    built = job("x").gpus(gpus).user("alice").project("p").queue("q").build()
    return store.submit(Submission.from_job(built, run={"command": ["sleep", "30"]}))


def loop_over(store, backend, data_dir, clock) -> ControlLoop:
    return ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       inventory_s=5.0)


def test_gpus_held_outside_rota_are_never_given_to_a_job(store, backend, data_dir, clock):
    n1 = backend.node
    reporting = Reporting(data_dir, n1)
    held = Foreign(devices=(DeviceShare(0, 1000, n1.devices[0].memory_mib),
                            DeviceShare(1, 1000, n1.devices[1].memory_mib)),
                   holder="slurm job 7 (omar)")
    reporting.report = [replace(n1, foreign=(held,))]
    loop = loop_over(store, reporting, data_dir, clock)
    two = submit(store, 2)
    drive(loop, state_is(store, two, S.RUNNING), "the 2-GPU job to run")
    devices = {d.index for r in store.get_job(two).job.placement.replicas for d in r.devices}
    assert devices == {2, 3}
    blocked = submit(store, 1)
    loop.step()
    assert store.get_job(blocked).state is S.PENDING
    loop.stop()


def test_a_node_the_backend_cannot_use_takes_nothing_new_and_a_vanished_one_is_marked(
        store, backend, data_dir, clock: FakeClock):
    n1 = backend.node
    reporting = Reporting(data_dir, n1)
    reporting.report = [replace(n1, problem="drained in Slurm: bad fan")]
    loop = loop_over(store, reporting, data_dir, clock)
    waiting = submit(store, 1)
    loop.step()
    assert store.get_job(waiting).state is S.PENDING
    (record,) = store.node_records()
    assert record.node.problem == "drained in Slurm: bad fan" and not record.cordoned
    reporting.report = [n1]
    clock.advance(5)
    drive(loop, state_is(store, waiting, S.RUNNING), "the job to run once the node is back")
    reporting.report = []
    clock.advance(5)
    loop.step()
    (record,) = store.node_records()
    assert record.node.problem == "no longer reported by local"
    loop.stop()


def test_an_unchanged_inventory_writes_nothing(store, backend, data_dir, clock: FakeClock):
    reporting = Reporting(data_dir, backend.node)
    loop = loop_over(store, reporting, data_dir, clock)
    assert loop.inventory.sync(clock.now()) == []  # as the store has it already
    reporting.report = [replace(backend.node, labels={"rack": "r7"})]
    clock.advance(1)
    assert loop.inventory.sync(clock.now()) == []  # not due yet: at most every 5 s
    clock.advance(4)
    assert loop.inventory.sync(clock.now()) == [backend.node.name]
    for _ in range(3):
        clock.advance(5)
        assert loop.inventory.sync(clock.now()) == []
    assert store.node_records()[0].node.labels == {"rack": "r7"}
    loop.stop()
