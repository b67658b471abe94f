"""GPU health on the local backend, through a fake NVML faithful to nvidia-ml-py: a device with
an XID critical error (not the application's own), uncorrected ECC errors or lost is reported
unhealthy with the reason, nothing new goes there, and a replica running on it is lost to it
(requeued by the control loop without spending its restart budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend_support import a_job, placement, poll_one, python, run, wait_for, wait_started
from fake_nvml import FakeGpu, initialised
from rota.backends.base import ReplicaState
from rota.backends.health import APPLICATION_XIDS
from rota.backends.local import LocalBackend
from rota.backends.nvml import Nvml
from rota.core import End, Node

FOREVER = "import time\nwhile True: time.sleep(0.05)"


@pytest.fixture
def gpus() -> list[FakeGpu]:
    return [FakeGpu(bus=0x17 + k) for k in range(4)]


@pytest.fixture
def fake(gpus):
    return initialised(gpus)


@pytest.fixture
def backend(data_dir: Path, n1: Node, fake) -> LocalBackend:
    b = LocalBackend(data_dir, node=n1, nvml=Nvml(fake))
    b.watch(lambda: None)  # starts the XID watcher
    yield b
    b.unwatch()


def devices(backend: LocalBackend) -> dict[int, tuple[bool, str]]:
    (node,) = backend.inventory()
    return {d.index: (d.healthy, d.problem) for d in node.devices}


def test_a_critical_xid_makes_a_device_unhealthy_and_loses_the_replica_on_it(
        backend, fake, workdir):
    handle = backend.launch(a_job(), placement([1]), run(python(FOREVER), str(workdir)))
    wait_started(handle)
    assert poll_one(backend, handle).state is ReplicaState.RUNNING
    fake.inject_xid(1, 79)  # fell off the bus
    wait_for(lambda: not devices(backend)[1][0], "GPU 1 to be marked unhealthy")
    assert devices(backend)[1] == (False, "XID 79 reported by the driver")
    assert all(devices(backend)[i][0] for i in (0, 2, 3))
    (replica,) = poll_one(backend, handle).replicas
    assert (replica.state, replica.cause) == (ReplicaState.LOST, End.GPU_UNHEALTHY)
    assert replica.reason == "GPU 1 is unhealthy: XID 79 reported by the driver"


@pytest.mark.parametrize("xid", sorted(APPLICATION_XIDS))
def test_an_applications_own_xid_leaves_the_device_healthy(backend, fake, xid):
    fake.inject_xid(2, xid)
    fake.inject_xid(3, 48)  # a double-bit ECC error: the device is bad
    wait_for(lambda: not devices(backend)[3][0], "GPU 3 to be marked unhealthy")
    assert devices(backend)[2] == (True, "")


def test_ecc_errors_and_a_lost_gpu_are_polled(backend, gpus):
    gpus[0].ecc_uncorrected = 2
    gpus[3].lost = True
    assert devices(backend) == {
        0: (False, "2 uncorrected ECC errors since the driver loaded"), 1: (True, ""),
        2: (True, ""), 3: (False, "the GPU is lost (it fell off the bus or stopped answering)")}
    gpus[0].ecc_uncorrected = 0  # the GPU was reset: healthy again
    assert devices(backend)[0] == (True, "")


def test_a_device_without_event_support_still_reports_ecc(data_dir, n1):
    gpus = [FakeGpu(bus=0x17, events=False, ecc_uncorrected=1)]
    backend = LocalBackend(data_dir, node=n1, nvml=Nvml(initialised(gpus)))
    backend.watch(lambda: None)
    try:
        (node,) = backend.inventory()
        assert node.devices[0].problem.startswith("1 uncorrected ECC error")
    finally:
        backend.unwatch()
