"""A GPU brought to a target MIG geometry through (a fake) NVML: only the instances that
change are destroyed and made, an instance in use stops the switch before it is touched, and a
stop at any NVML step (as kill -9 would leave it) followed by a new call converges on the
target, with an inventory that is consistent at every point."""

from __future__ import annotations

import pytest

from fake_nvml import (
    H100_80GB, NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_IN_USE, FakeGpu,
    NVMLError, initialised,
)
from rota.backends.gpus import local_node
from rota.backends.migapply import apply_geometry, geometry_of, in_use
from rota.backends.nvml import Nvml
from rota.core.mig import geometry_problem, table_for

H100 = table_for("H100-80GB", 81559)
HALVES = (("4g.40gb", 0), ("3g.40gb", 4))
DAY = (("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6))
SEVEN = tuple(("1g.10gb", s) for s in range(7))
# the NVML calls that change a GPU: where a crash can fall between two of them
CHANGING = ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstanceWithPlacement",
            "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceDestroy",
            "nvmlGpuInstanceDestroy")


def h100_box(*instances):
    fake = initialised([FakeGpu(mig=H100_80GB)])
    if instances:
        partition_h100(fake, *instances)
    return fake


def partition_h100(fake, *instances):
    ids = {"1g.10gb": (19, 1), "3g.40gb": (9, 4), "4g.40gb": (5, 4), "7g.80gb": (0, 8)}
    fake.nvmlDeviceSetMigMode(fake.nvmlDeviceGetHandleByIndex(0), NVML_DEVICE_MIG_ENABLE)
    for name, start in instances:
        Nvml(fake).create_instance(0, ids[name][0], start, ids[name][1])


def mig_devices(fake):
    return [(d.profile, d.start, d.uuid) for d in local_node("box", nvml=Nvml(fake)).devices
            if d.mig]


def test_only_the_instances_that_change_are_destroyed_and_made() -> None:
    fake = h100_box(*HALVES)
    kept = [u for p, s, u in mig_devices(fake) if p == "4g.40gb"]
    change = apply_geometry(Nvml(fake), 0, H100, DAY)
    assert (change.stay, change.destroy) == ((("4g.40gb", 0),), (("3g.40gb", 4),))
    assert [(p, s) for p, s, _ in mig_devices(fake)] == list(DAY)
    assert [u for p, s, u in mig_devices(fake) if p == "4g.40gb"] == kept  # the same instance
    assert apply_geometry(Nvml(fake), 0, H100, DAY).empty  # done: nothing left to do


def test_a_whole_gpu_is_cut_and_made_whole_again() -> None:
    fake = h100_box()
    assert geometry_of(Nvml(fake), 0, H100) is None
    apply_geometry(Nvml(fake), 0, H100, SEVEN)
    assert [(p, s) for p, s, _ in mig_devices(fake)] == list(SEVEN)
    apply_geometry(Nvml(fake), 0, H100, None)
    assert fake.gpus[0].mig_mode == NVML_DEVICE_MIG_DISABLE
    assert [d.profile for d in local_node("box", nvml=Nvml(fake)).devices] == [""]


def test_an_instance_in_use_stops_the_switch_before_it_is_touched() -> None:
    fake = h100_box(*HALVES)
    three = next(i for i in fake.gpus[0].instances if i.start == 4)
    three.processes[4242] = 1000
    with pytest.raises(NVMLError) as err:
        apply_geometry(Nvml(fake), 0, H100, DAY)
    assert err.value.value == NVML_ERROR_IN_USE and in_use(err.value)
    assert [(p, s) for p, s, _ in mig_devices(fake)] == list(HALVES)  # nothing changed


class Killed(Exception):
    """The control plane stopped here (kill -9): the call never returned."""


def killing(fake, at: int):
    """``fake`` whose ``at``-th changing call (1-based) happens and then never returns."""
    seen = [0]
    for name in CHANGING:
        real = getattr(fake, name)

        def call(*args, _real=real):
            out = _real(*args)
            seen[0] += 1
            if seen[0] == at:
                raise Killed
            return out
        setattr(fake, name, call)
    return seen


def changes(start, target) -> int:
    fake = h100_box(*start) if start else h100_box()
    seen = killing(fake, at=10 ** 6)
    apply_geometry(Nvml(fake), 0, H100, target)
    return seen[0]


@pytest.mark.parametrize("start, target", [(HALVES, DAY), ((), SEVEN), (SEVEN, None),
                                           (SEVEN, HALVES)],
                         ids=["day", "cut", "made-whole", "seven-to-halves"])
def test_a_stop_at_any_step_and_a_new_call_converge(start, target) -> None:
    steps = changes(start, target)
    assert steps >= 2
    for at in range(1, steps + 1):
        fake = h100_box(*start) if start else h100_box()
        killing(fake, at)
        with pytest.raises(Killed):
            apply_geometry(Nvml(fake), 0, H100, target)
        # what the inventory reads now is consistent: valid, and only usable instances
        devices = mig_devices(fake)
        assert geometry_problem(H100, [(p, s) for p, s, _ in devices]) is None
        assert len({u for _, _, u in devices}) == len(devices)
        fresh = Nvml(fake)  # the restarted control plane (the fake's calls no longer stop)
        for name in CHANGING:
            delattr(fake, name)
        apply_geometry(fresh, 0, H100, target)
        assert geometry_of(fresh, 0, H100) == target, f"stopped after step {at}"
        assert all(g.usable for g in fresh.gpu_instances(0) or [])
