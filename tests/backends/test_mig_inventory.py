"""MIG inventory through (a fake) NVML: a MIG-enabled GPU is its instances, each a device."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from backend_support import NODE, a_job, python, run, wait_ended, wait_for
from builders import node
from fake_nvml import (
    A100_40GB, H100_80GB, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED,
    FakeGpu, FakeNvml, NVMLError, c_nvmlGpuInstancePlacement_t, initialised,
)
from rota.backends.gpus import load_node_file, local_node
from rota.backends.health import GpuHealth
from rota.backends.local import LocalBackend
from rota.backends.nvml import Nvml
from rota.core import DeviceShare, InvalidSpec, Placement, ReplicaPlacement
from rota.core.mig import table_for

A100 = "NVIDIA A100-SXM4-40GB"
CI_PROFILE = {"1": 0, "2": 1, "3": 2, "4": 3, "7": 4}  # compute slices -> NVML's CI profile
PROFILE_ID = {"1g.5gb": 19, "1g.10gb": 15, "2g.10gb": 14, "3g.20gb": 9, "4g.20gb": 5,
              "7g.40gb": 0, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5}


def partition(fake: FakeNvml, index: int, *instances: tuple[str, int]) -> None:
    """What ``nvidia-smi -i INDEX -mig 1`` and ``nvidia-smi mig -cgi ... -C`` do."""
    handle = fake.nvmlDeviceGetHandleByIndex(index)
    fake.nvmlDeviceSetMigMode(handle, NVML_DEVICE_MIG_ENABLE)
    for profile, start in instances:
        span = {"1g.5gb": 1, "1g.10gb": 2, "2g.10gb": 2, "3g.20gb": 4, "4g.20gb": 4,
                "7g.40gb": 8}[profile]
        gi = fake.nvmlDeviceCreateGpuInstanceWithPlacement(
            handle, PROFILE_ID[profile], c_nvmlGpuInstancePlacement_t(start, span))
        fake.nvmlGpuInstanceCreateComputeInstance(gi, CI_PROFILE[profile.split("g.")[0]])


def box() -> FakeNvml:
    """GPU 0 whole; GPU 1 in MIG mode as 4g.20gb + 2g.10gb + 1g.5gb; GPU 2 an H100 with no MIG
    mode on; all A100s joined by NVLink."""
    fake = initialised([FakeGpu(name=A100, memory_mib=40960, bus=0x10, nvlink_to=[0x20],
                                mig=A100_40GB),
                        FakeGpu(name=A100, memory_mib=40960, bus=0x20, nvlink_to=[0x10], numa=1,
                                mig=A100_40GB),
                        FakeGpu(bus=0x30, mig=H100_80GB)])
    partition(fake, 1, ("4g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6))
    return fake


def test_a_mig_gpu_is_its_instances() -> None:
    node = local_node("box", nvml=Nvml(box()))
    whole = [d for d in node.devices if not d.mig]
    assert [(d.index, d.model) for d in whole] == [(0, "A100-40GB"), (2, "H100-80GB")]
    instances = [d for d in node.devices if d.mig]
    assert [(d.index, d.profile, d.parent, d.start, d.compute) for d in instances] == [
        (2000, "4g.20gb", 1, 0, 4), (2004, "2g.10gb", 1, 4, 2), (2006, "1g.5gb", 1, 6, 1)]
    assert [d.memory_mib for d in instances] == [19968, 9856, 4864]  # NVML's, per instance
    assert [d.uuid for d in instances] == ["MIG-fake-01-01", "MIG-fake-01-02", "MIG-fake-01-03"]
    assert {(d.model, d.numa, d.nvlink) for d in instances} == {("A100-40GB", 1, "nvl0")}
    assert [d.milli for d in instances] == [571, 286, 143]  # 4/7, 2/7, 1/7 of a GPU


def test_possible_placements_are_the_tables() -> None:
    nvml = Nvml(box())
    table = table_for("A100-40GB", 40960)
    offered = {(p.compute, p.placements) for p in nvml.mig_profiles(1)}
    assert offered == {(p.compute, tuple((s, p.memory) for s in p.starts))
                       for p in table.profiles}
    assert nvml.mig_profiles(0) == []  # MIG mode off: no profiles to place
    assert nvml.mig_profiles(2) == []


def test_the_fake_refuses_as_the_driver_does() -> None:
    fake = box()
    gpu1 = fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(NVMLError) as err:  # a 3g where the 4g is
        fake.nvmlDeviceCreateGpuInstanceWithPlacement(gpu1, 9, c_nvmlGpuInstancePlacement_t(0, 4))
    assert err.value.value == NVML_ERROR_INSUFFICIENT_RESOURCES
    with pytest.raises(NVMLError) as err:  # no 1g.5gb left: slice 7 is no 1g's
        fake.nvmlDeviceCreateGpuInstance(gpu1, 19)
    assert err.value.value == NVML_ERROR_INSUFFICIENT_RESOURCES
    with pytest.raises(NVMLError) as err:
        fake.nvmlDeviceCreateGpuInstanceWithPlacement(gpu1, 9, c_nvmlGpuInstancePlacement_t(2, 4))
    assert err.value.value == NVML_ERROR_INVALID_ARGUMENT
    with pytest.raises(NVMLError) as err:  # a GPU without MIG
        fake.nvmlDeviceGetMigMode(_no_mig(fake))
    assert err.value.value == NVML_ERROR_NOT_SUPPORTED
    busy = fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu1, 0)
    fake.gpus[1].instances[0].processes[4242] = 100
    with pytest.raises(NVMLError) as err:
        fake.nvmlGpuInstanceDestroy(fake.nvmlDeviceGetGpuInstanceById(
            gpu1, fake.nvmlDeviceGetGpuInstanceId(busy)))
    assert err.value.value == NVML_ERROR_IN_USE


def _no_mig(fake: FakeNvml):
    fake.gpus.append(FakeGpu(name="Tesla T4", memory_mib=15360, bus=0x40))
    return fake.nvmlDeviceGetHandleByIndex(len(fake.gpus) - 1)


def test_an_instance_destroyed_leaves_the_inventory() -> None:
    fake = box()
    gpu1 = fake.nvmlDeviceGetHandleByIndex(1)
    last = fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu1, 2)
    gi = fake.nvmlDeviceGetGpuInstanceById(gpu1, fake.nvmlDeviceGetGpuInstanceId(last))
    with pytest.raises(NVMLError) as err:  # its compute instance first, as nvidia-smi -dci
        fake.nvmlGpuInstanceDestroy(gi)
    assert err.value.value == NVML_ERROR_IN_USE
    fake.nvmlComputeInstanceDestroy(SimpleNamespace(index=1, gi=gi.gi, ci=0))
    fake.nvmlGpuInstanceDestroy(gi)
    node = local_node("box", nvml=Nvml(fake))
    assert [d.profile for d in node.devices if d.mig] == ["4g.20gb", "2g.10gb"]


def test_a_node_file_declares_mig_instances(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("name: n\ncpu: 8\nmemory: 64Gi\ngpus:\n"
                    "  - {model: A100-40GB, memory: 40Gi}\n"
                    "  - model: A100-40GB\n    memory: 40Gi\n"
                    "    mig: [{profile: 3g.20gb, start: 4}, {profile: 4g.20gb, start: 0}]\n")
    node = load_node_file(path)
    assert [(d.index, d.profile) for d in node.devices] == [
        (0, ""), (2000, "4g.20gb"), (2004, "3g.20gb")]
    assert [d.memory_mib for d in node.devices] == [40960, 20480, 20480]


@pytest.mark.parametrize("mig, field, message", [
    ("[{profile: 3g.20gb, start: 0}, {profile: 4g.20gb, start: 0}]", "node.gpus[0].mig",
     "overlaps 3g.20gb at 0"),
    ("[{profile: 3g.20gb, start: 2}]", "node.gpus[0].mig", "cannot start at memory slice 2"),
    ("[{profile: 1g.10gb+me, start: 0}]", "node.gpus[0].mig[0].profile", "MIG profile"),
    ("[{profile: 1g.5gb}]", "node.gpus[0].mig[0].start", "memory slice"),
], ids=["overlap", "bad-start", "unknown-profile", "no-start"])
def test_a_bad_node_file_geometry_names_the_field(tmp_path: Path, mig: str, field: str,
                                                  message: str) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(f"cpu: 8\nmemory: 64Gi\ngpus:\n  - model: A100-40GB\n    memory: 40Gi\n"
                    f"    mig: {mig}\n")
    with pytest.raises(InvalidSpec, match=message) as err:
        load_node_file(path)
    assert err.value.field == field


# -- launching on instances ----------------------------------------------------------------------

DUMP_ENV = ("import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))")


@pytest.mark.parametrize("device_ids", ["index", "uuid"])
def test_a_job_on_an_instance_sees_its_mig_uuid(data_dir: Path, workdir: Path,
                                                device_ids: str) -> None:
    """As NVIDIA's container toolkit does: CUDA names a MIG instance only by its UUID; and an
    instance is no fraction, though its share is 1/7 of its GPU."""
    box = node(NODE).gpus(1, "A100-40GB", 40).mig(("4g.20gb", 0), ("1g.5gb", 4)).build()
    backend = LocalBackend(data_dir, node=box, device_ids=device_ids)
    placement = Placement((ReplicaPlacement(NODE, (DeviceShare(2004, 143, 5120),
                                                   DeviceShare(0, 1000, 40960))),))
    handle = backend.launch(a_job(), placement, run(python(DUMP_ENV) + ["seen.json"],
                                                    str(workdir)))
    assert wait_ended(backend, handle).succeeded
    wait_for((workdir / "seen.json").exists, "the job's environment")
    env = json.loads((workdir / "seen.json").read_text())
    whole = "0" if device_ids == "index" else f"GPU-{NODE}-0"
    assert env["CUDA_VISIBLE_DEVICES"] == f"MIG-{NODE}-1-4,{whole}"
    assert "ROTA_GPU_SHARE" not in env and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env


def test_a_sick_gpu_makes_its_instances_unhealthy(data_dir: Path) -> None:
    """NVML knows a MIG-enabled GPU's health by the GPU's index: its uncorrected ECC errors
    mark every instance cut from it, and nothing else."""
    fake = box()
    fake.gpus[1].ecc_uncorrected = 3
    nvml = Nvml(fake)
    backend = LocalBackend(data_dir, nvml=nvml, health=GpuHealth(nvml))
    (inventory,) = backend.inventory()
    assert [(d.index, d.healthy) for d in inventory.devices] == [
        (0, True), (2, True), (2000, False), (2004, False), (2006, False)]
    assert inventory.devices[2].problem == "3 uncorrected ECC errors since the driver loaded"
