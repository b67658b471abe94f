"""A MIG calendar carried out by the real control loop on the local backend, with real
processes and NVML faked at its boundary: a switch touches only the instances that change;
it waits while a job that may not be evicted runs on one of them, requeues a job that may
be; the new instances are placed on in the next pass; a job that may not be evicted is not
placed on an instance the next switch removes; and a control plane killed at any NVML step of
a switch converges, on restart, on the target with an inventory that matches the GPUs.

The GPU: an H100 cut as 4g.40gb at 0 (device 1000) and 3g.40gb at 4 (device 1004), the
night geometry; by day (from 08:00 UTC) the 3g becomes three 1g.10gb (devices 1004-1006).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import job
from controlkit import FakeClock, drive, python, seeded_store, state_is
from fake_nvml import H100_80GB, NVML_DEVICE_MIG_ENABLE, FakeGpu, initialised
from rota.backends.gpus import local_node
from rota.backends.local import LocalBackend
from rota.backends.migapply import geometry_of
from rota.backends.nvml import Nvml
from rota.control import ControlLoop
from rota.control.migswitch import MigSwitcher, install
from rota.core import JobState as S
from rota.core.mig import table_for
from rota.core.migplan import parse_plan
from rota.scheduler import ReasonCode, build_policy
from rota.store import Store, Submission

H100 = table_for("H100-80GB", 81559)
DAY0 = 10 * 86400.0  # a midnight, UTC
NIGHT = (("4g.40gb", 0), ("3g.40gb", 4))
DAY = (("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6))
PLAN = {"geometries": {"day": ["4g.40gb", "3x1g.10gb"], "night": ["4g.40gb", "3g.40gb"]},
        "calendar": [{"at": "08:00", "zone": "UTC", "nodes": "n1", "geometry": "day"},
                     {"at": "20:00", "zone": "UTC", "nodes": ["n*"], "geometry": "night"}]}
SLEEP = "import time\nwhile True: time.sleep(0.05)"
CHANGING = ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstanceWithPlacement",
            "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceDestroy",
            "nvmlGpuInstanceDestroy")


@pytest.fixture
def fake():
    fake = initialised([FakeGpu(mig=H100_80GB)])
    fake.nvmlDeviceSetMigMode(fake.nvmlDeviceGetHandleByIndex(0), NVML_DEVICE_MIG_ENABLE)
    for profile, start, size in ((5, 0, 4), (9, 4, 4)):
        Nvml(fake).create_instance(0, profile, start, size)
    return fake


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(DAY0 + 21 * 3600)  # 21:00: night


@pytest.fixture
def backend(data_dir: Path, fake) -> LocalBackend:
    return LocalBackend(data_dir, node=local_node("n1", nvml=Nvml(fake)), nvml=Nvml(fake))


@pytest.fixture
def loop(store: Store, backend: LocalBackend, data_dir: Path, clock: FakeClock):
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    yield loop
    loop.stop()


def switching(loop, store, backend, fake, evict: bool = False) -> MigSwitcher:
    switcher = MigSwitcher(parse_plan({**PLAN, "evict": evict}), Nvml(fake), backend, store)
    install(loop, switcher)
    return switcher


def submit_mig(store: Store, profile: str, preemptible: bool = True,
               walltime_s: float | None = None) -> str:
    built = job("x").mig(profile).user("alice").project("p").queue("q").preemptible(preemptible)
    built = (built.walltime(walltime_s) if walltime_s else built).build()
    return store.submit(Submission.from_job(built, run={"command": python(SLEEP)}))


def devices_of(store: Store, job_id: str) -> list[int]:
    return [d.index for r in store.get_job(job_id).job.placement.replicas for d in r.devices]


def stored_instances(store: Store) -> list[tuple[str, int, str]]:
    (node, _, _), = store.list_nodes()
    return [(d.profile, d.start, d.uuid) for d in node.devices if d.mig]


def test_a_day_switch_changes_only_the_3g_and_places_on_the_new_instances(
        store, loop, backend, fake, clock) -> None:
    switching(loop, store, backend, fake)
    keeps = submit_mig(store, "4g.40gb", preemptible=False)
    drive(loop, state_is(store, keeps, S.RUNNING), "the 4g job to run")
    uuid_4g = stored_instances(store)[0][2]
    clock.t = DAY0 + 86400 + 9 * 3600  # 09:00 the next day
    small = submit_mig(store, "1g.10gb")
    drive(loop, state_is(store, small, S.RUNNING), "a job on a new 1g to run")
    assert geometry_of(Nvml(fake), 0, H100) == DAY
    assert [(p, s) for p, s, _ in stored_instances(store)] == list(DAY)
    assert stored_instances(store)[0][2] == uuid_4g  # the 4g instance was never touched
    assert store.get_job(keeps).state is S.RUNNING and devices_of(store, keeps) == [1000]
    assert devices_of(store, small)[0] in (1004, 1005, 1006)


def test_a_switch_waits_for_a_job_that_may_not_be_evicted(store, loop, backend, fake,
                                                          clock) -> None:
    stuck = submit_mig(store, "3g.40gb", preemptible=False)   # placed before any plan
    drive(loop, state_is(store, stuck, S.RUNNING), "the 3g job to run")
    switching(loop, store, backend, fake)
    clock.t = DAY0 + 86400 + 9 * 3600
    loop.step()
    assert loop.inventory.last.deferred == {0: f"waiting for {stuck}, which may not be evicted"}
    assert geometry_of(Nvml(fake), 0, H100) == NIGHT
    assert store.get_job(stuck).state is S.RUNNING
    # another job that may not be evicted never takes the 3g while the switch waits for it,
    # nor in the pass where the first one ends
    other = submit_mig(store, "3g.40gb", preemptible=False, walltime_s=60)
    store.request_cancel(stuck, by="alice")
    drive(loop, lambda: geometry_of(Nvml(fake), 0, H100) == DAY, "the switch, once it ended")
    assert store.attempts(other) == []


def test_a_switch_requeues_a_job_that_may_be_evicted(store, loop, backend, fake,
                                                     clock) -> None:
    movable = submit_mig(store, "3g.40gb")                     # preemptible: checkpoint grace
    drive(loop, state_is(store, movable, S.RUNNING), "the 3g job to run")
    switching(loop, store, backend, fake)
    clock.t = DAY0 + 86400 + 9 * 3600
    drive(loop, lambda: geometry_of(Nvml(fake), 0, H100) == DAY, "the switch")
    assert "requeued: requeued by MIG switch to day" in [
        str(e.data.get("reason", "")) for e in store.events(movable) if e.kind == "state"]


def test_a_job_that_may_not_be_evicted_keeps_off_the_instance_the_next_switch_removes(
        store, loop, backend, fake, clock) -> None:
    switching(loop, store, backend, fake)               # 21:00: the next switch is at 08:00
    long = submit_mig(store, "3g.40gb", preemptible=False, walltime_s=12 * 3600)
    short = submit_mig(store, "4g.40gb", preemptible=False, walltime_s=3600)
    drive(loop, state_is(store, short, S.RUNNING), "the 4g job, whose instance stays")
    rec = store.get_job(long)
    assert rec.state is S.PENDING
    (reason,) = rec.wait_reasons
    assert (reason.code, reason.capacity) == (ReasonCode.MIG_SWITCH, DAY0 + 86400 + 8 * 3600)
    (node, _, _), = store.list_nodes()
    assert {d.index: d.switch_at for d in node.devices if d.switch_at} == {
        1004: DAY0 + 86400 + 8 * 3600}


@pytest.mark.parametrize("at", range(1, 9))
def test_a_control_plane_killed_at_any_step_of_a_switch_converges(
        store, loop, backend, fake, clock, data_dir, at) -> None:
    switching(loop, store, backend, fake)
    loop.step()
    clock.t = DAY0 + 86400 + 9 * 3600
    seen = [0]

    class Killed(Exception):
        pass

    for name in CHANGING:
        def call(*args, _real=getattr(fake, name)):
            out = _real(*args)
            seen[0] += 1
            if seen[0] == at:
                raise Killed
            return out
        setattr(fake, name, call)
    report = loop.step()                               # dies inside the switch
    assert any("Killed" in e for e in report.errors)
    for name in CHANGING:
        delattr(fake, name)
    loop.stop()
    # the restarted control plane: a new backend, switcher and loop over the same store
    again = LocalBackend(data_dir, node=local_node("n1", nvml=Nvml(fake)), nvml=Nvml(fake))
    restarted = ControlLoop(store, again, build_policy("default"), data_dir, clock=clock)
    try:
        switching(restarted, store, again, fake)
        restarted.step()
        assert geometry_of(Nvml(fake), 0, H100) == DAY
        assert [(p, s) for p, s, _ in stored_instances(store)] == list(DAY)
        assert all(g.usable for g in Nvml(fake).gpu_instances(0))
    finally:
        restarted.stop()


def test_an_instance_a_process_outside_rota_uses_defers_the_switch(store, loop, backend, fake,
                                                                  clock) -> None:
    switching(loop, store, backend, fake)
    next(i for i in fake.gpus[0].instances if i.start == 4).processes[4242] = 1000
    clock.t = DAY0 + 86400 + 9 * 3600
    report = loop.step()
    assert not report.errors
    assert loop.inventory.last.deferred == {
        0: "a process outside rota uses an instance it removes"}
    assert geometry_of(Nvml(fake), 0, H100) == NIGHT
    next(i for i in fake.gpus[0].instances if i.start == 4).processes.clear()
    loop.step()
    assert geometry_of(Nvml(fake), 0, H100) == DAY
