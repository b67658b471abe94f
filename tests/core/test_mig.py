"""MIG profiles and geometries, table by table, as NVIDIA's MIG user guide documents them."""

from __future__ import annotations

import pytest

from rota.core import GpuDevice, GpuRequest, InvalidSpec, ReplicaRequest, parse_gpu_request
from rota.core.mig import (
    TABLES, check_geometry, geometry_problem, instance_index, profile_milli, table_for,
)

# NVIDIA's tables: name -> (compute slices, memory slices, most instances, possible starts)
DOCUMENTED = {
    "A100-40GB": {"1g.5gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)), "1g.10gb": (1, 2, 4, (0, 2, 4, 6)),
                  "2g.10gb": (2, 2, 3, (0, 2, 4)), "3g.20gb": (3, 4, 2, (0, 4)),
                  "4g.20gb": (4, 4, 1, (0,)), "7g.40gb": (7, 8, 1, (0,))},
    "A100-80GB": {"1g.10gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)), "1g.20gb": (1, 2, 4, (0, 2, 4, 6)),
                  "2g.20gb": (2, 2, 3, (0, 2, 4)), "3g.40gb": (3, 4, 2, (0, 4)),
                  "4g.40gb": (4, 4, 1, (0,)), "7g.80gb": (7, 8, 1, (0,))},
    "H100-80GB": {"1g.10gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)), "1g.20gb": (1, 2, 4, (0, 2, 4, 6)),
                  "2g.20gb": (2, 2, 3, (0, 2, 4)), "3g.40gb": (3, 4, 2, (0, 4)),
                  "4g.40gb": (4, 4, 1, (0,)), "7g.80gb": (7, 8, 1, (0,))},
    "H200-141GB": {"1g.18gb": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)), "1g.35gb": (1, 2, 4, (0, 2, 4, 6)),
                   "2g.35gb": (2, 2, 3, (0, 2, 4)), "3g.71gb": (3, 4, 2, (0, 4)),
                   "4g.71gb": (4, 4, 1, (0,)), "7g.141gb": (7, 8, 1, (0,))},
}


@pytest.mark.parametrize("gpu", sorted(DOCUMENTED))
def test_tables_are_nvidias(gpu: str) -> None:
    (table,) = [t for t in TABLES if t.gpu == gpu]
    assert {p.name: (p.compute, p.memory, p.instances, p.starts)
            for p in table.profiles} == DOCUMENTED[gpu]


@pytest.mark.parametrize("model, memory_mib, gpu", [
    ("A100-40GB", 40960, "A100-40GB"), ("A100-80GB", 81920, "A100-80GB"),
    ("H100-80GB", 81559, "H100-80GB"),   # NVML's memory of an H100 SXM
    ("H100", 81559, "H100-80GB"),        # an H100 PCIe: no memory in its name
    ("H200", 143771, "H200-141GB"), ("T4", 15360, None), ("A100", 24576, None),
])
def test_a_gpu_finds_its_table_by_family_and_memory(model: str, memory_mib: int,
                                                    gpu: str | None) -> None:
    table = table_for(model, memory_mib)
    assert (table.gpu if table else None) == gpu


A100_40 = table_for("A100-40GB", 40960)
H100 = table_for("H100-80GB", 81559)
H200 = table_for("H200", 143771)


@pytest.mark.parametrize("table, geometry", [
    (A100_40, [("4g.20gb", 0), ("3g.20gb", 4)]),
    (A100_40, [("1g.5gb", s) for s in range(7)]),
    (A100_40, [("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4), ("1g.5gb", 6)]),
    (A100_40, [("3g.20gb", 0), ("3g.20gb", 4)]),
    (A100_40, [("7g.40gb", 0)]),
    (H100, [("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]),
    (H100, [("1g.20gb", 0), ("1g.20gb", 2), ("1g.20gb", 4), ("1g.20gb", 6)]),
    (H200, [("4g.71gb", 0), ("1g.18gb", 4), ("1g.18gb", 5), ("1g.18gb", 6)]),
], ids=["4g+3g", "7x1g", "3x2g+1g", "2x3g", "7g", "h100-3g+2g+1g", "h100-4x1g.20gb",
        "h200-4g+3x1g"])
def test_valid_geometries(table, geometry) -> None:
    assert geometry_problem(table, geometry) is None


@pytest.mark.parametrize("table, geometry, problem", [
    (A100_40, [("4g.20gb", 0), ("3g.20gb", 0)], "overlaps 4g.20gb at 0"),
    (H100, [("4g.40gb", 0), ("3g.40gb", 0)], "overlaps 4g.40gb at 0"),
    (H200, [("4g.71gb", 0), ("3g.71gb", 0)], "overlaps 4g.71gb at 0"),
    (A100_40, [("3g.20gb", 2)], "cannot start at memory slice 2"),
    (A100_40, [("4g.20gb", 4)], "cannot start at memory slice 4"),
    (A100_40, [("2g.10gb", 6)], "cannot start at memory slice 6"),
    (A100_40, [("1g.5gb", 7)], "cannot start at memory slice 7"),
    (A100_40, [("1g.10gb", 1)], "cannot start at memory slice 1"),
    (A100_40, [("7g.40gb", 0), ("1g.5gb", 3)], "overlaps 7g.40gb at 0"),
    (A100_40, [("2g.10gb", 0), ("1g.5gb", 1)], "overlaps 2g.10gb at 0"),
    (A100_40, [("1g.10gb", 0)] * 2, "overlaps 1g.10gb at 0"),
    (H100, [("1g.5gb", 0)], "not a MIG profile of H100-80GB"),
], ids=["3g-where-4g-is", "h100-3g-where-4g-is", "h200-3g-where-4g-is", "3g-at-2", "4g-at-4",
        "2g-at-6", "1g-at-7", "wide-1g-at-1", "1g-inside-7g", "1g-inside-2g", "same-place-twice",
        "other-gpus-profile"])
def test_invalid_geometries(table, geometry, problem: str) -> None:
    assert problem in geometry_problem(table, geometry)
    with pytest.raises(InvalidSpec, match=problem) as err:
        check_geometry(table, geometry, "mig")
    assert err.value.field == "mig"


@pytest.mark.parametrize("profile, milli", [
    ("1g.10gb", 143), ("2g.20gb", 286), ("3g.40gb", 429), ("4g.40gb", 571), ("7g.80gb", 1000),
])
def test_an_instance_is_charged_its_compute_slices(profile: str, milli: int) -> None:
    # 1/7 of a GPU = 142.857 milli-GPU, rounded
    assert profile_milli(profile) == milli
    request = ReplicaRequest(gpu=GpuRequest(2, profile=profile))
    assert request.vector() == {"gpu": 2 * milli, "cpu": 0, "memory": 0,
                                f"mig-{profile}": 2}


@pytest.mark.parametrize("value, parsed", [
    ("1g.10gb", (1, 1000, "1g.10gb")), ("2x1g.10gb", (2, 1000, "1g.10gb")),
    ("3 x 3g.40gb", (3, 1000, "3g.40gb")), (2, (2, 1000, "")), (0.5, (1, 500, "")),
])
def test_gpu_requests(value: object, parsed: tuple[int, int, str]) -> None:
    assert parse_gpu_request(value, "gpu") == parsed


@pytest.mark.parametrize("value, message", [
    ("1g.11gb", "not a MIG profile of any GPU rota knows"),
    ("0x1g.10gb", "at least one"),
    ("1g.10gb+me", "expected a MIG profile such as 1g.10gb"),
    ("2", "write the number without quotes"),
])
def test_bad_gpu_requests_name_the_field(value: str, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as err:
        parse_gpu_request(value, "resources.gpu")
    assert err.value.field == "resources.gpu"


def test_a_profile_request_is_for_whole_instances() -> None:
    with pytest.raises(InvalidSpec, match="whole instances"):
        GpuRequest(1, 500, profile="1g.10gb")
    with pytest.raises(InvalidSpec, match="drop gpu_memory") as err:
        GpuRequest(1, memory_mib=1024, profile="1g.10gb")
    assert err.value.field == "gpu_memory"


def test_an_instance_device() -> None:
    device = GpuDevice(instance_index(2, 4), "A100-40GB", 20 * 1024, "MIG-x", profile="3g.20gb",
                       parent=2, start=4, compute=3)
    assert device.index == 3004 and device.mig and device.milli == 429
    assert not GpuDevice(0, "A100-40GB", 40960).mig
    with pytest.raises(InvalidSpec, match="needs its GPU's index"):
        GpuDevice(1004, "A100-40GB", 20480, profile="3g.20gb", compute=3)
