"""Inventory: virtual GPU specs, node files, and real GPUs seen through (a fake) NVML."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fake_nvml import NVML_ERROR_DRIVER_NOT_LOADED, FakeGpu, FakeNvml, initialised
from rota.backends.gpus import load_node_file, local_node, parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.backends.nvml import Nvml
from rota.core import InvalidSpec

GiB = 1024


@pytest.mark.parametrize("spec,models,memory", [
    ("4xH100-80GB", ["H100-80GB"] * 4, [80 * GiB] * 4),
    ("4xH100:80Gi", ["H100"] * 4, [80 * GiB] * 4),
    ("2xA100-40GB,1xT4:16Gi", ["A100-40GB", "A100-40GB", "T4"], [40 * GiB, 40 * GiB, 16 * GiB]),
    ("1 x L40S-48G", ["L40S-48G"], [48 * GiB]),
], ids=["suffix", "explicit", "mixed", "spaces-and-G"])
def test_virtual_gpus(spec: str, models: list[str], memory: list[int]) -> None:
    devices = parse_virtual_gpus(spec)
    assert [d.model for d in devices] == models
    assert [d.memory_mib for d in devices] == memory
    assert [d.index for d in devices] == list(range(len(models)))
    assert len({d.uuid for d in devices}) == len(devices)


@pytest.mark.parametrize("spec,field,message", [
    ("H100", "gpus", "COUNTxMODEL"),
    ("0xH100-80GB", "gpus", "at least 1"),
    ("4xH100", "gpus", "cannot tell the memory"),
    ("4xH100:lots", "gpus", "memory size"),
    ("2xA100-40GB,oops", "gpus[1]", "COUNTxMODEL"),
], ids=["no-count", "zero", "no-memory", "bad-memory", "second-group"])
def test_bad_virtual_spec_names_the_field(spec: str, field: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as err:
        parse_virtual_gpus(spec)
    assert err.value.field == field


def four_gpu_box() -> FakeNvml:
    """Four H100s: 0-1 and 2-3 joined by NVLink; GPU 3 has uncorrected ECC errors; the NUMA
    query is unsupported on GPU 1 (its NUMA node then comes from sysfs, absent here: 0)."""
    return initialised([
        FakeGpu(bus=0x17, numa=0, nvlink_to=[0x2A, 0x2A]),
        FakeGpu(bus=0x2A, numa=None, nvlink_to=[0x17]),
        FakeGpu(bus=0x9B, numa=1, nvlink_to=[0xC1]),
        FakeGpu(bus=0xC1, numa=1, nvlink_to=[0x9B], ecc_uncorrected=2),
    ])


def test_inventory_from_nvml() -> None:
    node = local_node("gpu-box", nvml=Nvml(four_gpu_box()))
    devices = node.devices
    assert [d.index for d in devices] == [0, 1, 2, 3]
    assert {d.model for d in devices} == {"H100-80GB"}  # the name the docs and --gpus use
    assert node.labels == {"nvidia.com/gpu.product": "NVIDIA H100 80GB HBM3"}  # NVML's own
    assert {d.memory_mib for d in devices} == {81559}
    assert [d.uuid for d in devices] == [f"GPU-fake-000{i}" for i in range(4)]
    assert [d.nvlink for d in devices] == ["nvl0", "nvl0", "nvl2", "nvl2"]
    assert [d.numa for d in devices] == [0, 0, 1, 1]
    assert [d.healthy for d in devices] == [True, True, True, False]
    assert node.name == "gpu-box" and node.cpu_milli > 0


@pytest.mark.parametrize("nvml_name, model", [
    ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA A100 80GB PCIe", "A100-80GB"), ("Tesla T4", "T4"), ("NVIDIA L4", "L4"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("NVIDIA H100 PCIe", "H100"),
])
def test_nvml_names_become_the_models_the_docs_use(nvml_name: str, model: str) -> None:
    node = local_node("n", nvml=Nvml(initialised([FakeGpu(name=nvml_name)])))
    assert node.devices[0].model == model
    assert node.labels["nvidia.com/gpu.product"] == nvml_name


def test_a_docs_pattern_matches_a_real_h100() -> None:
    """``gpu_model: H100-80GB`` from the docs, and the docs' flavour ``*H100*``, match what NVML
    reports on a real H100; NVML's 81559 MiB prints as 79.6 GiB."""
    from fnmatch import fnmatchcase

    from rota.cli.units import amount
    from rota.spec import parse_job
    model = local_node("n", nvml=Nvml(four_gpu_box())).devices[0].model
    spec = parse_job({"name": "x", "project": "p", "queue": "q", "entrypoint": "true",
                      "resources": {"gpu": 1, "gpu_model": "H100-80GB"}})
    assert any(fnmatchcase(model, p) for p in spec.resources.gpu_model)
    assert fnmatchcase(model, "*H100*")
    assert amount("memory", 81559) == "79.6 GiB"


def test_gpus_without_nvlink_or_ecc_have_no_domain_and_are_healthy() -> None:
    fake = initialised([FakeGpu(bus=0x01, ecc_uncorrected=None), FakeGpu(bus=0x02)])
    devices = local_node("pcie-box", nvml=Nvml(fake)).devices
    assert [(d.nvlink, d.healthy) for d in devices] == [(None, True), (None, True)]


def test_process_memory_in_mib() -> None:
    fake = initialised([FakeGpu(processes={101: 1000, 102: None}), FakeGpu(processes={103: 1})])
    found = Nvml(fake).process_memory()
    assert [(p.index, p.pid, p.used_mib) for p in found] == [(0, 101, 1000), (1, 103, 1)]


def test_nvml_errors_are_nvml_errors() -> None:
    fake = FakeNvml([FakeGpu()])
    with pytest.raises(fake.NVMLError):
        fake.nvmlDeviceGetCount()  # before nvmlInit
    fake.nvmlInit()
    with pytest.raises(fake.NVMLError) as err:
        fake.nvmlDeviceGetHandleByIndex(1)
    assert err.value.value == 2  # NVML_ERROR_INVALID_ARGUMENT


@pytest.mark.parametrize("module", [None, FakeNvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED)],
                         ids=["package-missing", "driver-missing"])
def test_load_gives_none_without_nvidia(monkeypatch: pytest.MonkeyPatch, module) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", module)
    assert Nvml.load() is None


def test_load_initialises_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([FakeGpu()])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml = Nvml.load()
    assert nvml is not None and len(nvml.devices()) == 1
    nvml.close()
    assert not fake.initialised


def test_virtual_spec_wins_over_nvml() -> None:
    node = local_node("n", gpus="2xA100-40GB", nvml=Nvml(four_gpu_box()))
    assert [d.model for d in node.devices] == ["A100-40GB", "A100-40GB"]


def test_node_file(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("""
name: box
cpu: 32
memory: 256Gi
resource_group: lab
labels: {rack: r1}
gpus:
  - {model: A100-80GB, memory: 80Gi, nvlink: a, numa: 0}
  - {model: A100-80GB, memory: 80Gi, nvlink: a, numa: 1, healthy: false}
""")
    node = load_node_file(path)
    assert (node.name, node.cpu_milli, node.memory_mib, node.resource_group) == \
        ("box", 32000, 256 * GiB, "lab")
    assert [(d.index, d.nvlink, d.numa, d.healthy) for d in node.devices] == \
        [(0, "a", 0, True), (1, "a", 1, False)]
    assert node.labels == {"rack": "r1"}


@pytest.mark.parametrize("text,field", [
    ("gpus: [{model: A100}]", "node.gpus[0].memory"),
    ("gpus: [{model: A100, memory: 80Gi}, {model: A100, memory: big}]", "node.gpus[1].memory"),
    ("gpus: [{model: A100, memory: 80Gi, colour: red}]", "node.gpus[0].colour"),
    ("gpus: 4xH100", "node.gpus"),
    ("cpu: many", "node.cpu"),
    ("gpu: 4xH100-80GB", "node.gpu"),
    ("- just a list", "node"),
], ids=["no-memory", "bad-memory", "unknown-gpu-key", "spec-without-memory", "bad-cpu",
        "unknown-key", "not-a-mapping"])
def test_bad_node_file_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSpec) as err:
        load_node_file(path)
    assert err.value.field == field


def test_backend_inventory_and_capabilities(tmp_path: Path) -> None:
    with_nvml = LocalBackend(tmp_path / "a", nvml=Nvml(four_gpu_box()))
    assert len(with_nvml.inventory()[0].devices) == 4
    assert with_nvml.capabilities.memory_enforcement
    without = LocalBackend(tmp_path / "b", node=local_node("n", gpus="4xH100-80GB"))
    assert without.inventory()[0].devices[3].model == "H100-80GB"
    caps = without.capabilities
    assert caps.fractional_gpu and caps.gang and caps.signals and not caps.memory_enforcement


def test_the_local_node_has_the_features_of_its_backends_capabilities(tmp_path: Path) -> None:
    """On a machine without podman (``containers`` where it works: test_local_image.py)."""
    no_podman = ("rota-test-no-such-podman",)
    with_nvml = LocalBackend(tmp_path / "a", nvml=Nvml(four_gpu_box()), podman=no_podman)
    assert with_nvml.inventory()[0].features == frozenset({
        "gpu-sharing", "gpu-memory-limit", "signals"})
    without = LocalBackend(tmp_path / "b", node=local_node("n", gpus="4xH100-80GB"),
                           podman=no_podman)
    assert without.inventory()[0].features == frozenset({"gpu-sharing", "signals"})
