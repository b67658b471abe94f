"""``rota up --mig-plan FILE`` on the local backend: the file is checked whole (each mistake
names its field), refused beside virtual GPUs, and once the control plane is built its loop
carries out the plan through NVML."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from controlkit import FakeClock
from fake_nvml import H100_80GB, NVML_DEVICE_MIG_ENABLE, FakeGpu, FakeNvml
from rota.backends.local import LocalBackend
from rota.backends.migapply import geometry_of
from rota.backends.nvml import Nvml
from rota.control import ControlLoop
from rota.control.migswitch import SwitchingInventory
from rota.core import InvalidSpec
from rota.core.mig import table_for
from rota.scheduler import build_policy
from rota.server.factories.local import LocalFactory
from rota.store import Store

PLAN = """\
geometries:
  day: [4g.40gb, 3x1g.10gb]
  night: whole
calendar:
  - {at: "08:00", zone: Europe/Paris, nodes: "*", geometry: day}
  - {at: "20:00", zone: Europe/Paris, geometry: night}
"""


def plan_file(tmp_path: Path, text: str = PLAN) -> Path:
    path = tmp_path / "mig.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    (PLAN.replace('"08:00"', '"8h"'), "--mig-plan: mig.calendar[0].at: must be a time of day"),
    (PLAN.replace("Europe/Paris, geometry", "Mars/Olympus, geometry"),
     "--mig-plan: mig.calendar[1].zone: 'Mars/Olympus' is not a time zone"),
    (PLAN.replace("3x1g.10gb", "4x1g.10gb"), "--mig-plan: mig.geometries.day: is valid on no GPU"),
    ("geometries: [", "--mig-plan: mig: "),
], ids=["time", "zone", "geometry", "yaml"])
def test_a_bad_plan_file_names_its_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        LocalFactory().options({"--mig-plan": plan_file(tmp_path, text)})
    assert f"{err.value.field}: {err.value.reason}".startswith(message)


def test_a_plan_needs_gpus_from_nvml(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(InvalidSpec, match="neither --gpus nor --node-file") as err:
        LocalFactory().inventory({"--mig-plan": plan_file(tmp_path), "--gpus": "1xH100-80GB"})
    assert err.value.field == "--mig-plan"
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVIDIA library here
    with pytest.raises(InvalidSpec, match="no NVIDIA GPU found"):
        LocalFactory().inventory({"--mig-plan": plan_file(tmp_path)})


def test_the_built_loop_carries_out_the_plan(tmp_path: Path, monkeypatch) -> None:
    fake = FakeNvml([FakeGpu(mig=H100_80GB)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    factory = LocalFactory()
    options = factory.options({"--mig-plan": plan_file(tmp_path)})
    inventory = factory.inventory({"--mig-plan": plan_file(tmp_path)})
    assert fake.gpus[0].mig_mode != NVML_DEVICE_MIG_ENABLE  # a whole GPU to start with
    data = tmp_path / "data"
    backend = LocalBackend(data, node=inventory.node, nvml=inventory.nvml)
    clock = FakeClock(10 * 86400.0 + 10 * 3600)  # 10:00 UTC: 11:00 in Paris, by day
    with Store.open(data, clock=clock.now) as store:
        store.upsert_nodes(backend.inventory(), backend="local")
        loop = ControlLoop(store, backend, build_policy("default"), data, clock=clock)
        try:
            factory.attach(loop, SimpleNamespace(backend_options=options, inventory=inventory))
            assert isinstance(loop.inventory, SwitchingInventory)
            loop.step()
            assert geometry_of(Nvml(fake), 0, table_for("H100-80GB", 81559)) == (
                ("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6))
            (node, _, _), = store.list_nodes()
            assert [d.profile for d in node.devices] == ["4g.40gb"] + ["1g.10gb"] * 3
        finally:
            loop.stop()
