"""GPU-memory shares are enforced: a replica whose processes use more device memory than its
share (as NVML reports it; here a fake NVML reports it for real processes) is stopped."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from backend_support import a_job, placement, poll_one, run, wait_ended, wait_for, wait_started
from fake_nvml import FakeGpu, NVMLError, initialised
from rota.backends import cgroups
from rota.backends.base import Handle, ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import read_json, session_of
from rota.backends.nvml import Nvml
from rota.backends.watcher import MemoryWatcher
from rota.core import GPU_MEMORY_ENFORCEMENT, Node

# The job leads its session; a background process it starts stays in that session.
SLEEPER = "sleep 30 & echo $! > helper.pid; wait"


@pytest.fixture
def gpus() -> list[FakeGpu]:
    return [FakeGpu(bus=0x17), FakeGpu(bus=0x2A)]


@pytest.fixture
def watched(data_dir: Path, n1: Node, gpus: list[FakeGpu]) -> tuple[LocalBackend, MemoryWatcher]:
    nvml = Nvml(initialised(gpus))
    backend = LocalBackend(data_dir, node=n1, nvml=nvml)
    return backend, MemoryWatcher(backend, nvml, grace_s=1.0, period_s=0.05)


def start_quarter_gpu(backend: LocalBackend, workdir: Path) -> tuple[Handle, int, int]:
    """A job with 0.25 of GPU 0 and 20480 MiB of its memory; returns its two pids."""
    handle = backend.launch(a_job("small"), placement((0, 250, 20480)), run(SLEEPER, str(workdir)))
    (main,) = wait_started(handle)
    helper = wait_for(lambda: (workdir / "helper.pid").exists() and
                      (workdir / "helper.pid").read_text().strip(), "the helper to start")
    return handle, main, int(helper)  # type: ignore[arg-type]


@pytest.mark.parametrize("usage,stopped", [
    # (GPU, process, MiB); the limit is 20480 MiB on GPU 0
    ([(0, "main", 21000)], "used 21000 MiB > limit 20480 MiB on GPU 0"),
    ([(0, "main", 10000), (0, "helper", 11000)], "used 21000 MiB > limit 20480 MiB on GPU 0"),
    ([(0, "main", 20480)], None),                     # at the limit is allowed
    ([(1, "main", 30000)], None),                     # GPU 1 is not part of its share
    ([(0, "other", 50000)], None),                    # another process's memory is not its own
], ids=["over", "over-summed-over-the-session", "at-limit", "other-gpu", "other-process"])
def test_over_limit_replica_is_stopped(watched, gpus: list[FakeGpu], workdir: Path, usage,
                                       stopped: str | None) -> None:
    backend, watcher = watched
    handle, main, helper = start_quarter_gpu(backend, workdir)
    pids = {"main": main, "helper": helper, "other": 1}
    for index, who, mib in usage:
        gpus[index].processes[pids[who]] = mib

    found = watcher.check_once()

    if stopped is None:
        assert found == []
        assert poll_one(backend, handle).state is ReplicaState.RUNNING
        backend.cancel(handle, grace_s=0)
        return
    assert [v.reason for v in found] == [f"gpu-memory-exceeded: {stopped}"]
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.reason == f"gpu-memory-exceeded: {stopped}"
    assert (replica.exit_code, replica.signal) == (143, signal.SIGTERM)
    assert watcher.check_once() == []  # not reported twice


def test_watcher_escalates_to_sigkill(watched, gpus: list[FakeGpu], workdir: Path) -> None:
    backend, watcher = watched
    code = "trap '' TERM; while :; do sleep 0.05; done"
    handle = backend.launch(a_job(), placement((1, 500, 40960)), run(code, str(workdir)))
    (main,) = wait_started(handle)
    gpus[1].processes[main] = 50000
    assert len(watcher.check_once()) == 1
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.signal == signal.SIGKILL
    assert replica.reason.startswith("gpu-memory-exceeded: used 50000 MiB > limit 40960 MiB on GPU 1")


def test_background_watcher_stops_an_adopted_job(data_dir: Path, n1: Node, gpus: list[FakeGpu],
                                                 workdir: Path) -> None:
    launcher = LocalBackend(data_dir, node=n1)
    handle, main, _ = start_quarter_gpu(launcher, workdir)
    nvml = Nvml(initialised(gpus))
    backend = LocalBackend(data_dir, node=n1, nvml=nvml)
    backend.adopt(Handle.from_json(handle.to_json()))
    watcher = MemoryWatcher(backend, nvml, grace_s=1.0, period_s=0.05)
    watcher.start()
    try:
        gpus[0].processes[main] = 30000
        (replica,) = wait_ended(backend, handle).replicas
    finally:
        watcher.stop()
    assert replica.reason == "gpu-memory-exceeded: used 30000 MiB > limit 20480 MiB on GPU 0"
    assert watcher.last_error is None


def test_a_watcher_that_cannot_check_says_so_in_the_log(data_dir, n1, gpus, caplog):
    lib = initialised(gpus)
    backend = LocalBackend(data_dir, node=n1, nvml=Nvml(lib))
    watcher = MemoryWatcher(backend, Nvml(lib), period_s=0.02)
    lib.nvmlShutdown()  # NVML stops answering: nothing can be enforced
    with caplog.at_level("WARNING", logger="rota.backends.watcher"):
        watcher.start()
        try:
            wait_for(lambda: not watcher.enforcing, "the watcher to notice")
            wait_for(lambda: any("not enforced" in r.message for r in caplog.records),
                     "the error to be logged")
            lib.nvmlInit()
            wait_for(lambda: watcher.enforcing, "enforcement to resume")
        finally:
            watcher.stop()
    messages = [r.message for r in caplog.records]
    assert sum("not enforced" in m for m in messages) == 1  # once, not every period
    assert any("enforced again" in m for m in messages)


def test_a_watcher_that_cannot_check_turns_the_capability_off_and_labels_the_node(
        data_dir, n1, gpus, monkeypatch):
    """What ``rota nodes`` shows (a warning from the node's label) and what the backend
    claims follow the watcher: off while NVML cannot list the processes on the GPUs (as in a
    container whose driver does not support it), on again once it can."""
    lib = initialised(gpus)
    backend = LocalBackend(data_dir, node=n1, nvml=Nvml(lib))
    watcher = MemoryWatcher(backend, Nvml(lib), period_s=0.02)
    assert backend.capabilities.memory_enforcement
    assert GPU_MEMORY_ENFORCEMENT not in backend.inventory()[0].labels

    def not_supported(handle):
        raise NVMLError(3)
    monkeypatch.setattr(lib, "nvmlDeviceGetComputeRunningProcesses", not_supported)
    watcher.start()
    try:
        wait_for(lambda: not watcher.enforcing, "the watcher to notice")
        assert not backend.capabilities.memory_enforcement
        label = backend.inventory()[0].labels[GPU_MEMORY_ENFORCEMENT]
        assert label.startswith("not enforced: the memory watcher's NVML check fails")
        monkeypatch.undo()
        wait_for(lambda: watcher.enforcing, "enforcement to resume")
        assert backend.capabilities.memory_enforcement
        assert GPU_MEMORY_ENFORCEMENT not in backend.inventory()[0].labels
    finally:
        watcher.stop()


def test_a_process_that_left_the_session_is_still_the_replicas(watched, gpus: list[FakeGpu],
                                                               workdir: Path) -> None:
    """What a replica runs is its own by its cgroup, not only by its session: a process that
    starts a session of its own (as a container's processes run under their runtime's monitor)
    stays in the replica's cgroup and its memory counts against the replica's share."""
    backend, watcher = watched
    spec = read_json(Path(proc(backend.launch(
        a_job("probe"), placement((1, 250, 1024)), run("true", str(workdir))).replicas[0]).dir)
        / "spec.json")
    if not (spec or {}).get("cgroup"):
        pytest.skip("replicas get no cgroup on this machine: the session decides")
    code = "setsid sleep 30 & echo $! > helper.pid; wait"
    handle = backend.launch(a_job("left"), placement((0, 250, 20480)), run(code, str(workdir)))
    (main,) = wait_started(handle)
    helper = int(wait_for(lambda: (workdir / "helper.pid").exists() and
                          (workdir / "helper.pid").read_text().strip(), "the helper to start"))
    assert session_of(helper) != main  # it has left the replica's session
    gpus[0].processes[helper] = 30000

    (found,) = watcher.check_once()

    assert found.reason == "gpu-memory-exceeded: used 30000 MiB > limit 20480 MiB on GPU 0"
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.reason == found.reason
    wait_for(lambda: not Path(f"/proc/{helper}").exists(), "the cgroup to end the helper too")


@pytest.mark.parametrize("where,inside", [
    ("", True), ("parent", True), ("below", False), ("sibling-prefix", False)])
def test_a_cgroup_holds_what_is_in_it_or_below_it(where: str, inside: bool) -> None:
    """``cgroups.holds`` reads a process's cgroup from /proc: this process is held by its own
    cgroup and the ones above it, not by one below it or one whose name only starts alike."""
    own = cgroups._own_cgroups()
    controller = "memory" if "memory" in own else ""
    path = own.get(controller)
    if path is None:
        pytest.skip("no memory cgroup for this process")
    base = path.rstrip("/")
    leaf = {"": base or "/", "parent": base.rpartition("/")[0] or "/",
            "below": base + "/below", "sibling-prefix": base + "x"}[where]
    plan = {"version": 2 if controller == "" else 1, "mounts": {controller: "/mnt"},
            "dirs": {controller: "/mnt" + leaf}}
    assert cgroups.holds(plan, os.getpid()) is inside
    assert not cgroups.holds(plan, 2 ** 22 + 7)  # no such process
