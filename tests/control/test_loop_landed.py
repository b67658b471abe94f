"""A backend that chooses devices itself (Slurm picks the GPUs on a node, or the nodes too)
reports where each job landed; the control loop records it as the job's placement, so that
the next cycle counts the GPUs really taken and the job shows where it runs."""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import Sequence

from controlkit import drive, state_is, submit
from rota.backends.base import Handle, LaunchSpec, Status
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import DeviceShare, JobState as S, Placement, ReplicaPlacement
from rota.scheduler import build_policy


class Choosing(LocalBackend):
    """The local backend, reporting that every job landed on the last GPUs of the node instead
    of the ones it was placed on (as Slurm reports the devices it chose)."""

    def _landed(self, handle: Handle) -> Placement:
        count = len(self.node.devices)
        return Placement(tuple(
            ReplicaPlacement(r.node, tuple(DeviceShare(count - 1 - k, d.milli, d.memory_mib)
                                           for k, d in enumerate(r.devices)))
            for r in handle.replicas))

    def poll(self, handles: Sequence[Handle]) -> list[Status]:
        return [replace(s, placement=self._landed(h))
                for h, s in zip(handles, super().poll(handles), strict=True)]

    def adopt(self, handle: Handle) -> Status:
        return replace(super().adopt(handle), placement=self._landed(handle))


def test_the_placement_the_backend_reports_is_recorded_and_counted(store, data_dir, clock):
    backend = Choosing(data_dir, node=store.node_records()[0].node)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    try:
        first = submit(store, ["sleep", "30"], gpus=1)
        drive(loop, state_is(store, first, S.RUNNING), "the first job to run")
        assert [d.index for d in store.get_job(first).job.placement.replicas[0].devices] == [0]
        landed = drive(loop, lambda: (p := store.get_job(first).job.placement).replicas[0]
                       .devices[0].index == 3 and p, "the landed placement to be recorded")
        assert landed.replicas[0].node == "n1"
        assert [e.kind for e in store.events(first)][-1] == "placed"
        # the next job gets GPUs 0-2: GPU 3 is where the first one really is
        second = submit(store, ["sleep", "30"], gpus=3)
        drive(loop, state_is(store, second, S.RUNNING), "the second job to run")
        placed = {d.index for d in store.get_job(second).job.placement.replicas[0].devices}
        assert placed == {0, 1, 2}
        versions = store.get_job(first).version
        loop.step()
        assert store.get_job(first).version == versions  # recorded once, not every pass
    finally:
        loop.stop()


class Recording(LocalBackend):
    """The local backend, keeping every launch request it is given."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.specs: list[LaunchSpec] = []

    def launch(self, job, placement, spec: LaunchSpec, attempt: int) -> Handle:
        self.specs.append(spec)
        return super().launch(job, placement, spec, attempt)


def test_a_launch_carries_the_checkpoint_signal_and_grace_for_a_backend_that_enforces_walltime(
        store, data_dir, clock):
    # Slurm stops a job at its --time and warns it first with --signal=SIG@grace
    backend = Recording(data_dir, node=store.node_records()[0].node)
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    try:
        job = submit(store, ["sleep", "30"], gpus=1,
                     checkpoint={"signal": "SIGUSR1", "grace_s": 45})
        drive(loop, state_is(store, job, S.RUNNING), "the job to run")
        [spec] = backend.specs
        assert (spec.checkpoint_signal, spec.grace_s) == (int(signal.SIGUSR1), 45.0)
    finally:
        loop.stop()
